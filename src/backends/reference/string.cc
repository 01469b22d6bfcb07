// Reference kernels of the string family. Case changes and whitespace are ASCII only
// (the "C" locale), whatever the `locale` attribute says.
#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"
#include "core/checked_math.h"

namespace peregrine {

namespace {

Status require_string(const KernelContext& ctx, size_t i) {
  if (ctx.input(i).dtype() != DType::kString)
    return ctx.error("input " + std::to_string(i) + " must be a string tensor");
  return Status::ok();
}

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// Allocates output i of a size computed from model data: an error, not an abort, when
// the size overflows or exceeds the tensor size limit.
Expected<Tensor*> allocate_checked(KernelContext& ctx, size_t i, DType dtype, const Shape& shape) {
  auto t = Tensor::make(dtype, shape);
  if (!t.is_ok()) return ctx.error("output " + std::to_string(i) + ": " + t.status().message());
  ctx.set_output(i, std::move(t).value());
  return &ctx.outputs()[i].tensor;
}

Status string_concat(KernelContext& ctx) {
  PG_RETURN_IF_ERROR(require_string(ctx, 0));
  PG_RETURN_IF_ERROR(require_string(ctx, 1));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& out = ctx.output(0);
  BroadcastIndexer ia(a.shape(), out.shape()), ib(b.shape(), out.shape());
  for (int64_t i = 0; i < out.numel(); ++i)
    out.strings()[i] = a.strings()[ia(i)] + b.strings()[ib(i)];
  return Status::ok();
}

// Python's str.split(None, maxsplit): runs of whitespace separate, ends are trimmed,
// and the unsplit rest keeps its trailing whitespace.
std::vector<std::string> split_on_whitespace(const std::string& s, int64_t maxsplit) {
  std::vector<std::string> parts;
  size_t i = 0, n = s.size();
  while (true) {
    while (i < n && is_space(s[i])) ++i;
    if (i == n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.push_back(s.substr(i));
      break;
    }
    size_t j = i;
    while (j < n && !is_space(s[j])) ++j;
    parts.push_back(s.substr(i, j - i));
    i = j;
  }
  return parts;
}

// Python's str.split(sep, maxsplit): every occurrence separates, empty parts stay.
std::vector<std::string> split_on_delimiter(const std::string& s, const std::string& delimiter,
                                            int64_t maxsplit) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    size_t pos = s.find(delimiter, start);
    if (pos == std::string::npos) break;
    parts.push_back(s.substr(start, pos - start));
    start = pos + delimiter.size();
  }
  parts.push_back(s.substr(start));
  return parts;
}

Status string_split(KernelContext& ctx) {
  PG_RETURN_IF_ERROR(require_string(ctx, 0));
  PG_ASSIGN_OR_RETURN(std::string delimiter, ctx.attrs().get_string("delimiter", ""));
  PG_ASSIGN_OR_RETURN(int64_t maxsplit, ctx.attrs().get_int("maxsplit", -1));
  const Tensor& in = ctx.input(0);
  std::vector<std::vector<std::string>> parts(static_cast<size_t>(in.numel()));
  int64_t widest = 0;
  for (int64_t i = 0; i < in.numel(); ++i) {
    const std::string& s = in.strings()[i];
    parts[i] = delimiter.empty() ? split_on_whitespace(s, maxsplit)
                                 : split_on_delimiter(s, delimiter, maxsplit);
    widest = std::max(widest, static_cast<int64_t>(parts[i].size()));
  }
  Shape out_shape = in.shape();
  out_shape.push_back(widest);
  Tensor& out = ctx.allocate_output(0, DType::kString, out_shape);
  Tensor& counts = ctx.allocate_output(1, DType::kInt64, in.shape());
  for (int64_t i = 0; i < in.numel(); ++i) {
    counts.data<int64_t>()[i] = static_cast<int64_t>(parts[i].size());
    for (size_t k = 0; k < parts[i].size(); ++k)
      out.strings()[i * widest + static_cast<int64_t>(k)] = parts[i][k];
  }
  return Status::ok();
}

Status string_normalizer(KernelContext& ctx) {
  PG_RETURN_IF_ERROR(require_string(ctx, 0));
  PG_ASSIGN_OR_RETURN(std::string action, ctx.attrs().get_string("case_change_action", "NONE"));
  PG_ASSIGN_OR_RETURN(int64_t case_sensitive, ctx.attrs().get_int("is_case_sensitive", 0));
  PG_ASSIGN_OR_RETURN(std::vector<std::string> stopwords, ctx.attrs().get_strings("stopwords"));
  const Tensor& in = ctx.input(0);
  if (in.rank() < 1 || in.rank() > 2 || (in.rank() == 2 && in.dim(0) != 1))
    return ctx.error("input must have shape [C] or [1, C], got " + shape_to_string(in.shape()));
  std::set<std::string> stops;
  for (const auto& w : stopwords) stops.insert(case_sensitive ? w : ascii_lower(w));
  std::vector<std::string> kept;
  for (const std::string& s : in.strings()) {
    if (stops.count(case_sensitive ? s : ascii_lower(s))) continue;
    if (action == "LOWER") kept.push_back(ascii_lower(s));
    else if (action == "UPPER") kept.push_back(ascii_upper(s));
    else kept.push_back(s);
  }
  // Everything removed: one empty string, as the spec says.
  if (kept.empty()) kept.push_back("");
  Shape out_shape = in.shape();
  out_shape.back() = static_cast<int64_t>(kept.size());
  Tensor& out = ctx.allocate_output(0, DType::kString, out_shape);
  out.strings() = kept;
  return Status::ok();
}

Status regex_full_match(KernelContext& ctx) {
  PG_RETURN_IF_ERROR(require_string(ctx, 0));
  PG_ASSIGN_OR_RETURN(std::string pattern, ctx.attrs().get_string("pattern"));
  std::regex re;
  try {
    re = std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return ctx.error("pattern '" + pattern + "' is not a valid regular expression: " + e.what());
  }
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  try {
    for (int64_t i = 0; i < in.numel(); ++i)
      out.data<bool>()[i] = std::regex_match(in.strings()[i], re);
  } catch (const std::regex_error& e) {
    return ctx.error(std::string("regular expression failed: ") + e.what());
  }
  return Status::ok();
}

// TfIdfVectorizer: counts the n-grams of the pool in each row (skipping up to
// max_skip_count items between the words of an n-gram) and weights the counts.
// Keys are the input's elements as strings (string input) or int64 (integer input).
template <typename Key>
Status tfidf_count(const KernelContext& ctx, const std::vector<Key>& pool,
                   const std::vector<Key>& items, int64_t rows, int64_t row_size,
                   std::vector<int64_t>& counts, int64_t output_size) {
  PG_ASSIGN_OR_RETURN(int64_t min_n, ctx.attrs().get_int("min_gram_length"));
  PG_ASSIGN_OR_RETURN(int64_t max_n, ctx.attrs().get_int("max_gram_length"));
  PG_ASSIGN_OR_RETURN(int64_t max_skip, ctx.attrs().get_int("max_skip_count"));
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> ngram_counts, ctx.attrs().get_ints("ngram_counts"));
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> ngram_indexes, ctx.attrs().get_ints("ngram_indexes"));
  if (min_n < 1 || max_n < min_n)
    return ctx.error("min_gram_length " + std::to_string(min_n) + " and max_gram_length " +
                     std::to_string(max_n) + " must satisfy 1 <= min <= max");
  if (max_skip < 0) return ctx.error("max_skip_count must not be negative");
  const int64_t pool_size = static_cast<int64_t>(pool.size());
  // The pool holds the 1-grams from ngram_counts[0], the 2-grams from ngram_counts[1]...
  // n-grams are numbered in pool order; number k maps to output column ngram_indexes[k].
  std::map<std::vector<Key>, int64_t> column_of;
  int64_t ngram_number = 0;
  for (size_t level = 0; level < ngram_counts.size(); ++level) {
    const int64_t n = static_cast<int64_t>(level) + 1;
    const int64_t begin = ngram_counts[level];
    const int64_t end = level + 1 < ngram_counts.size() ? ngram_counts[level + 1] : pool_size;
    if (begin < 0 || end < begin || end > pool_size)
      return ctx.error("ngram_counts does not describe ranges of the pool");
    for (int64_t start = begin; start + n <= end; start += n, ++ngram_number) {
      if (ngram_number >= static_cast<int64_t>(ngram_indexes.size()))
        return ctx.error("ngram_indexes has fewer entries than the pool has n-grams");
      if (n < min_n || n > max_n) continue;
      std::vector<Key> gram(pool.begin() + start, pool.begin() + start + n);
      column_of.emplace(std::move(gram), ngram_indexes[static_cast<size_t>(ngram_number)]);
    }
  }
  // No n-gram is longer than the pool's longest or than a row, and no gap wider than lets an
  // n-gram fit in a row: the loops stop there whatever the attributes say (they bound the
  // work, and (n - 1) * step below stays far from overflowing).
  const int64_t longest = std::min({max_n, static_cast<int64_t>(ngram_counts.size()), row_size});
  for (int64_t row = 0; row < rows; ++row) {
    const Key* x = items.data() + row * row_size;
    for (int64_t n = min_n; n <= longest; ++n) {
      // A 1-gram has no gaps, so every skip count finds the same ones: count them once.
      const int64_t skips = n == 1 ? 0 : std::min(max_skip, (row_size - 1) / (n - 1) - 1);
      for (int64_t skip = 0; skip <= skips; ++skip) {
        const int64_t step = skip + 1;
        for (int64_t start = 0; start + (n - 1) * step < row_size; ++start) {
          std::vector<Key> gram;
          for (int64_t k = 0; k < n; ++k) gram.push_back(x[start + k * step]);
          auto it = column_of.find(gram);
          if (it != column_of.end()) ++counts[static_cast<size_t>(row * output_size + it->second)];
        }
      }
    }
  }
  return Status::ok();
}

Status tfidf_vectorizer(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  PG_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("mode"));
  PG_ASSIGN_OR_RETURN(std::vector<float> weights, ctx.attrs().get_floats("weights"));
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> pool_ints, ctx.attrs().get_ints("pool_int64s"));
  PG_ASSIGN_OR_RETURN(std::vector<std::string> pool_strings,
                      ctx.attrs().get_strings("pool_strings"));
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> indexes, ctx.attrs().get_ints("ngram_indexes"));
  if (indexes.empty()) return ctx.error("attribute 'ngram_indexes' must not be empty");
  const int64_t output_size = *std::max_element(indexes.begin(), indexes.end()) + 1;
  const int64_t rows = in.rank() == 2 ? in.dim(0) : 1;
  Shape out_shape = in.rank() == 2 ? Shape{rows, output_size} : Shape{output_size};
  PG_ASSIGN_OR_RETURN(Tensor* y_tensor, allocate_checked(ctx, 0, DType::kFloat32, out_shape));
  const int64_t row_size = in.rank() == 0 ? 1 : in.shape().back();
  if (!weights.empty() && static_cast<int64_t>(weights.size()) < output_size)
    return ctx.error("weights has " + std::to_string(weights.size()) + " entries, expected " +
                     std::to_string(output_size));
  std::vector<int64_t> counts(static_cast<size_t>(y_tensor->numel()), 0);
  if (in.dtype() == DType::kString) {
    if (pool_strings.empty()) return ctx.error("string input needs the pool_strings attribute");
    PG_RETURN_IF_ERROR(tfidf_count(ctx, pool_strings, in.strings(), rows, row_size, counts,
                                   output_size));
  } else if (in.dtype() == DType::kInt32 || in.dtype() == DType::kInt64) {
    if (pool_ints.empty()) return ctx.error("integer input needs the pool_int64s attribute");
    std::vector<int64_t> items = in.to_int64_vector();
    PG_RETURN_IF_ERROR(tfidf_count(ctx, pool_ints, items, rows, row_size, counts, output_size));
  } else {
    return ctx.error("input must be string, int32 or int64");
  }
  float* y = y_tensor->data<float>();
  for (size_t i = 0; i < counts.size(); ++i) {
    const float count = static_cast<float>(counts[i]);
    const float w = weights.empty() ? 1.0f : weights[i % static_cast<size_t>(output_size)];
    if (mode == "TF") y[i] = count;
    else if (mode == "IDF") y[i] = counts[i] > 0 ? w : 0.0f;
    else y[i] = w * count;  // TFIDF
  }
  return Status::ok();
}

}  // namespace

void register_string_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "StringConcat", string_concat);
  r.add(kOnnxDomain, "StringSplit", string_split);
  r.add(kOnnxDomain, "StringNormalizer", string_normalizer);
  r.add(kOnnxDomain, "RegexFullMatch", regex_full_match);
  r.add(kOnnxDomain, "TfIdfVectorizer", tfidf_vectorizer);
}

}  // namespace peregrine
