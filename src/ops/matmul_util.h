// Shape rules shared by the matmul family's schemas and kernels: numpy MatMul
// shapes and Einsum equation parsing.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include "peregrine/status.h"
#include "peregrine/tensor.h"

namespace peregrine {

// Combines two dims of one label or one broadcast axis: equal, or one of them 1;
// -1 (unknown) yields the other unless that is 1 (then still unknown).
inline Expected<int64_t> combine_dims(int64_t a, int64_t b, const std::string& what) {
  if (a == b) return a;
  if (a == 1) return b;
  if (b == 1) return a;
  if (a < 0) return b;
  if (b < 0) return a;
  return invalid_model(what + ": sizes " + std::to_string(a) + " and " + std::to_string(b) +
                       " do not match");
}

// MatMul's output shape (numpy rules): 1-D operands are promoted and the added dim is
// dropped again; leading (batch) dims broadcast. Unknown dims are -1.
inline Expected<Shape> matmul_output_shape(const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) return invalid_model("MatMul operands must have rank >= 1");
  Shape a2 = a.size() == 1 ? Shape{1, a[0]} : a;
  Shape b2 = b.size() == 1 ? Shape{b[0], 1} : b;
  int64_t k_a = a2.back(), k_b = b2[b2.size() - 2];
  if (k_a >= 0 && k_b >= 0 && k_a != k_b)
    return invalid_model("inner dims do not match: " + shape_to_string(a) + " x " +
                         shape_to_string(b));
  Shape batch_a(a2.begin(), a2.end() - 2), batch_b(b2.begin(), b2.end() - 2);
  size_t rank = std::max(batch_a.size(), batch_b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - batch_a.size() ? 1 : batch_a[i - (rank - batch_a.size())];
    int64_t db = i < rank - batch_b.size() ? 1 : batch_b[i - (rank - batch_b.size())];
    auto d = combine_dims(da, db, "batch dim " + std::to_string(i) + " of " +
                                      shape_to_string(a) + " x " + shape_to_string(b));
    if (!d.is_ok()) return d.status();
    out[i] = *d;
  }
  if (a.size() >= 2) out.push_back(a2[a2.size() - 2]);
  if (b.size() >= 2) out.push_back(b2.back());
  return out;
}

// A parsed Einsum equation bound to input ranks. Labels are small integers: letters
// first, then one label per broadcast ("...") axis.
struct EinsumSpec {
  std::vector<std::vector<int>> input_labels;  // per input, one label per dim
  std::vector<int> output_labels;
  std::vector<int64_t> label_sizes;  // -1 where unknown
};

namespace einsum_detail {

inline constexpr int kLetterLabels = 52;

inline int letter_label(char c) {
  return c >= 'a' && c <= 'z' ? c - 'a' : c - 'A' + 26;
}

// Splits a term into letters and the position of "..." (-1 if none).
inline Status parse_term(const std::string& term, std::vector<char>* letters, int* ellipsis_at) {
  *ellipsis_at = -1;
  for (size_t i = 0; i < term.size();) {
    if (term.compare(i, 3, "...") == 0) {
      if (*ellipsis_at >= 0) return invalid_model("term '" + term + "' has two ellipses");
      *ellipsis_at = static_cast<int>(letters->size());
      i += 3;
    } else if (std::isalpha(static_cast<unsigned char>(term[i]))) {
      letters->push_back(term[i++]);
    } else {
      return invalid_model("term '" + term + "' has an invalid character '" + term[i] + "'");
    }
  }
  return Status::ok();
}

}  // namespace einsum_detail

// Parses `equation` for inputs of the given shapes (-1 dims allowed, ranks known).
inline Expected<EinsumSpec> parse_einsum(const std::string& equation,
                                         const std::vector<Shape>& shapes) {
  using namespace einsum_detail;
  std::string eq;
  for (char c : equation)
    if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
  size_t arrow = eq.find("->");
  bool explicit_output = arrow != std::string::npos;
  std::string lhs = explicit_output ? eq.substr(0, arrow) : eq;
  std::string rhs = explicit_output ? eq.substr(arrow + 2) : "";

  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos
                                                                  : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != shapes.size())
    return invalid_model("equation '" + equation + "' has " + std::to_string(terms.size()) +
                         " input terms but the node has " + std::to_string(shapes.size()) +
                         " inputs");

  // Letters and ellipsis positions per input; the broadcast rank is the largest ellipsis.
  std::vector<std::vector<char>> letters(terms.size());
  std::vector<int> ellipsis_at(terms.size());
  std::vector<int64_t> ellipsis_rank(terms.size(), 0);
  int64_t broadcast_rank = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    PG_RETURN_IF_ERROR(parse_term(terms[i], &letters[i], &ellipsis_at[i]));
    int64_t rank = static_cast<int64_t>(shapes[i].size());
    int64_t n = static_cast<int64_t>(letters[i].size());
    if (ellipsis_at[i] < 0 ? rank != n : rank < n)
      return invalid_model("term '" + terms[i] + "' does not fit input " + std::to_string(i) +
                           " of rank " + std::to_string(rank));
    ellipsis_rank[i] = rank - n;
    broadcast_rank = std::max(broadcast_rank, ellipsis_rank[i]);
  }

  EinsumSpec spec;
  spec.label_sizes.assign(static_cast<size_t>(kLetterLabels + broadcast_rank), -2);  // -2 unused
  std::vector<int> letter_count(kLetterLabels, 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    std::vector<int>& labels = spec.input_labels.emplace_back();
    for (size_t p = 0; p <= letters[i].size(); ++p) {
      if (static_cast<int>(p) == ellipsis_at[i])
        for (int64_t e = 0; e < ellipsis_rank[i]; ++e)
          labels.push_back(kLetterLabels + static_cast<int>(broadcast_rank - ellipsis_rank[i] + e));
      if (p < letters[i].size()) {
        labels.push_back(letter_label(letters[i][p]));
        ++letter_count[letter_label(letters[i][p])];
      }
    }
    for (size_t d = 0; d < labels.size(); ++d) {
      int64_t& size = spec.label_sizes[static_cast<size_t>(labels[d])];
      int64_t dim = shapes[i][d];
      if (size == -2) {
        size = dim;
      } else {
        auto s = combine_dims(size, dim, "equation '" + equation + "'");
        if (!s.is_ok()) return s.status();
        size = *s;
      }
    }
  }

  if (explicit_output) {
    std::vector<char> out_letters;
    int out_ellipsis = -1;
    PG_RETURN_IF_ERROR(parse_term(rhs, &out_letters, &out_ellipsis));
    std::vector<bool> seen(kLetterLabels, false);
    for (size_t p = 0; p <= out_letters.size(); ++p) {
      if (static_cast<int>(p) == out_ellipsis)
        for (int64_t e = 0; e < broadcast_rank; ++e)
          spec.output_labels.push_back(kLetterLabels + static_cast<int>(e));
      if (p == out_letters.size()) break;
      int l = letter_label(out_letters[p]);
      if (letter_count[l] == 0)
        return invalid_model("output label '" + std::string(1, out_letters[p]) +
                             "' of equation '" + equation + "' is not in any input");
      if (seen[l])
        return invalid_model("output label '" + std::string(1, out_letters[p]) +
                             "' of equation '" + equation + "' repeats");
      seen[l] = true;
      spec.output_labels.push_back(l);
    }
  } else {
    // numpy's implicit form: broadcast axes, then letters used once, in ASCII order.
    for (int64_t e = 0; e < broadcast_rank; ++e)
      spec.output_labels.push_back(kLetterLabels + static_cast<int>(e));
    for (char c = 'A'; c <= 'Z'; ++c)
      if (letter_count[letter_label(c)] == 1) spec.output_labels.push_back(letter_label(c));
    for (char c = 'a'; c <= 'z'; ++c)
      if (letter_count[letter_label(c)] == 1) spec.output_labels.push_back(letter_label(c));
  }
  return spec;
}

}  // namespace peregrine
