// Reference kernels of the matmul family: MatMul, Gemm, Einsum, Det.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"
#include "ops/matmul_util.h"

namespace peregrine {

namespace {

// Accumulator per element type: float for the float types (double stays double);
// integers wrap modulo 2^64 like the narrow types would, without signed overflow.
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double,
                               std::conditional_t<std::is_integral_v<T>, uint64_t, float>>;

// Converts an accumulator back to T (integers wrap to T's width).
template <typename T>
T from_acc(Acc<T> v) {
  return static_cast<T>(v);
}

// out[M, N] = a[M, K] * b[K, N], i-k-j order so the inner loop streams rows of b and out.
// `row` is scratch of N accumulators.
template <typename T>
void matmul_2d(const T* a, const T* b, T* out, int64_t m, int64_t k, int64_t n,
               std::vector<Acc<T>>& row) {
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), Acc<T>(0));
    const T* a_row = a + i * k;
    for (int64_t p = 0; p < k; ++p) {
      Acc<T> av = static_cast<Acc<T>>(a_row[p]);
      const T* b_row = b + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += av * static_cast<Acc<T>>(b_row[j]);
    }
    T* out_row = out + i * n;
    for (int64_t j = 0; j < n; ++j) out_row[j] = from_acc<T>(row[j]);
  }
}

Status matmul_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& out = ctx.output(0);
  if (a.rank() == 0 || b.rank() == 0) return ctx.error("MatMul operands must have rank >= 1");
  if (a.dtype() != b.dtype()) return ctx.error("inputs have different types");
  // numpy promotion: a 1-D A is a row, a 1-D B a column.
  Shape a2 = a.rank() == 1 ? Shape{1, a.dim(0)} : a.shape();
  Shape b2 = b.rank() == 1 ? Shape{b.dim(0), 1} : b.shape();
  int64_t m = a2[a2.size() - 2], k = a2.back(), n = b2.back();
  if (b2[b2.size() - 2] != k)
    return ctx.error("inner dims do not match: " + shape_to_string(a.shape()) + " x " +
                     shape_to_string(b.shape()));
  Shape batch_a(a2.begin(), a2.end() - 2), batch_b(b2.begin(), b2.end() - 2);
  auto full = matmul_output_shape(a.shape(), b.shape());
  if (!full.is_ok()) return ctx.error(full.status().message());
  // Output batch dims: everything but the matrix dims (which 1-D inputs dropped).
  size_t batch_rank = std::max(batch_a.size(), batch_b.size());
  Shape batch_out(out.shape().begin(), out.shape().begin() + static_cast<int64_t>(batch_rank));
  int64_t batches = 1;
  for (int64_t d : batch_out) batches *= d;
  if (out.numel() == 0) return Status::ok();
  BroadcastIndexer index_a(batch_a, batch_out), index_b(batch_b, batch_out);
  return visit_numeric(a.dtype(), [&]<typename T>() {
    std::vector<Acc<T>> row(static_cast<size_t>(n));
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    for (int64_t batch = 0; batch < batches; ++batch)
      matmul_2d<T>(pa + index_a(batch) * m * k, pb + index_b(batch) * k * n,
                   po + batch * m * n, m, k, n, row);
  });
}

Status gemm_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& out = ctx.output(0);
  PG_ASSIGN_OR_RETURN(int64_t trans_a, ctx.attrs().get_int("transA", 0));
  PG_ASSIGN_OR_RETURN(int64_t trans_b, ctx.attrs().get_int("transB", 0));
  PG_ASSIGN_OR_RETURN(float alpha, ctx.attrs().get_float("alpha", 1.0f));
  PG_ASSIGN_OR_RETURN(float beta, ctx.attrs().get_float("beta", 1.0f));
  if (a.rank() != 2 || b.rank() != 2) return ctx.error("A and B must be 2-D");
  int64_t m = trans_a ? a.dim(1) : a.dim(0), k = trans_a ? a.dim(0) : a.dim(1);
  int64_t n = trans_b ? b.dim(0) : b.dim(1);
  if ((trans_b ? b.dim(1) : b.dim(0)) != k) return ctx.error("inner dims of A and B differ");
  bool has_c = ctx.has_input(2) && beta != 0.0f;
  Shape mn{m, n};
  if (has_c) {
    const Shape& cs = ctx.input(2).shape();
    if (cs.size() > 2) return ctx.error("C must have rank <= 2");
    for (size_t i = 0; i < cs.size(); ++i)
      if (cs[cs.size() - 1 - i] != 1 && cs[cs.size() - 1 - i] != mn[1 - i])
        return ctx.error("C of shape " + shape_to_string(cs) + " cannot be broadcast to " +
                         shape_to_string(mn));
  }
  // Element (i, p) of op(A) and (p, j) of op(B).
  int64_t a_row_stride = trans_a ? 1 : k, a_col_stride = trans_a ? m : 1;
  int64_t b_row_stride = trans_b ? 1 : n, b_col_stride = trans_b ? k : 1;
  return visit_numeric(a.dtype(), [&]<typename T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    std::vector<Acc<T>> row(static_cast<size_t>(n));
    const T* pc = has_c ? ctx.input(2).data<T>() : nullptr;
    BroadcastIndexer index_c(has_c ? ctx.input(2).shape() : mn, mn);
    for (int64_t i = 0; i < m; ++i) {
      std::fill(row.begin(), row.end(), Acc<T>(0));
      for (int64_t p = 0; p < k; ++p) {
        Acc<T> av = static_cast<Acc<T>>(pa[i * a_row_stride + p * a_col_stride]);
        const T* b_row = pb + p * b_row_stride;
        for (int64_t j = 0; j < n; ++j) row[j] += av * static_cast<Acc<T>>(b_row[j * b_col_stride]);
      }
      for (int64_t j = 0; j < n; ++j) {
        int64_t o = i * n + j;
        if constexpr (std::is_integral_v<T>) {
          T prod = from_acc<T>(row[j]);
          T c = pc ? pc[index_c(o)] : T(0);
          if (alpha == 1.0f && beta == 1.0f) {
            po[o] = static_cast<T>(static_cast<uint64_t>(prod) + static_cast<uint64_t>(c));
          } else {
            po[o] = static_cast<T>(alpha * static_cast<double>(prod) +
                                   beta * static_cast<double>(c));
          }
        } else {
          Acc<T> v = static_cast<Acc<T>>(alpha) * row[j];
          if (pc) v += static_cast<Acc<T>>(beta) * static_cast<Acc<T>>(pc[index_c(o)]);
          po[o] = static_cast<T>(v);
        }
      }
    }
  });
}

Status einsum_kernel(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(std::string equation, ctx.attrs().get_string("equation"));
  std::vector<Shape> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is missing");
    if (ctx.input(i).dtype() != ctx.input(0).dtype())
      return ctx.error("inputs have different types");
    shapes.push_back(ctx.input(i).shape());
  }
  auto parsed = parse_einsum(equation, shapes);
  if (!parsed.is_ok()) return ctx.error(parsed.status().message());
  const EinsumSpec& spec = *parsed;
  Tensor& out = ctx.output(0);

  // Loop over output labels (row-major, matching the output layout), then summed labels.
  std::vector<int> loop_labels = spec.output_labels;
  std::vector<bool> in_output(spec.label_sizes.size(), false);
  for (int l : spec.output_labels) in_output[static_cast<size_t>(l)] = true;
  for (size_t l = 0; l < spec.label_sizes.size(); ++l)
    if (spec.label_sizes[l] >= 0 && !in_output[l]) loop_labels.push_back(static_cast<int>(l));
  size_t num_loops = loop_labels.size(), num_inputs = shapes.size();
  std::vector<int64_t> sizes(num_loops);
  for (size_t d = 0; d < num_loops; ++d)
    sizes[d] = spec.label_sizes[static_cast<size_t>(loop_labels[d])];
  // strides[d][i]: how far input i moves when loop d steps. Repeated labels in one input
  // add their strides (a diagonal); size-1 dims broadcast (stride 0).
  std::vector<std::vector<int64_t>> strides(num_loops, std::vector<int64_t>(num_inputs, 0));
  for (size_t i = 0; i < num_inputs; ++i) {
    std::vector<int64_t> dim_strides = contiguous_strides(shapes[i]);
    for (size_t dim = 0; dim < shapes[i].size(); ++dim) {
      if (shapes[i][dim] == 1) continue;
      for (size_t d = 0; d < num_loops; ++d)
        if (loop_labels[d] == spec.input_labels[i][dim]) strides[d][i] += dim_strides[dim];
    }
  }
  int64_t out_count = out.numel(), sum_count = 1;
  for (size_t d = spec.output_labels.size(); d < num_loops; ++d) sum_count *= sizes[d];

  return visit_numeric(out.dtype(), [&]<typename T>() {
    std::vector<const T*> data(num_inputs);
    for (size_t i = 0; i < num_inputs; ++i) data[i] = ctx.input(i).data<T>();
    T* po = out.data<T>();
    std::vector<int64_t> index(num_loops, 0), offset(num_inputs, 0);
    for (int64_t o = 0; o < out_count; ++o) {
      Acc<T> sum = 0;
      for (int64_t s = 0; s < sum_count; ++s) {
        Acc<T> term = 1;
        for (size_t i = 0; i < num_inputs; ++i) term *= static_cast<Acc<T>>(data[i][offset[i]]);
        sum += term;
        // Odometer step over all loops; the innermost (summed) ones turn fastest.
        for (size_t d = num_loops; d-- > 0;) {
          for (size_t i = 0; i < num_inputs; ++i) offset[i] += strides[d][i];
          if (++index[d] < sizes[d]) break;
          for (size_t i = 0; i < num_inputs; ++i) offset[i] -= strides[d][i] * sizes[d];
          index[d] = 0;
        }
      }
      po[o] = from_acc<T>(sum);
      if (sum_count == 0) {  // empty sum: the odometer did not move; step the output loops
        for (size_t d = spec.output_labels.size(); d-- > 0;) {
          for (size_t i = 0; i < num_inputs; ++i) offset[i] += strides[d][i];
          if (++index[d] < sizes[d]) break;
          for (size_t i = 0; i < num_inputs; ++i) offset[i] -= strides[d][i] * sizes[d];
          index[d] = 0;
        }
      }
    }
  });
}

// Determinant by LU decomposition with partial pivoting, in double.
double determinant(std::vector<double>& a, int64_t n) {
  double det = 1;
  for (int64_t col = 0; col < n; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < n; ++r)
      if (std::fabs(a[r * n + col]) > std::fabs(a[pivot * n + col])) pivot = r;
    if (a[pivot * n + col] == 0) return 0;
    if (pivot != col) {
      for (int64_t c = 0; c < n; ++c) std::swap(a[col * n + c], a[pivot * n + c]);
      det = -det;
    }
    double p = a[col * n + col];
    det *= p;
    for (int64_t r = col + 1; r < n; ++r) {
      double f = a[r * n + col] / p;
      if (f == 0) continue;
      for (int64_t c = col + 1; c < n; ++c) a[r * n + c] -= f * a[col * n + c];
    }
  }
  return det;
}

Status det_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2))
    return ctx.error("input of shape " + shape_to_string(x.shape()) + " is not a square matrix");
  int64_t n = x.dim(x.rank() - 1);
  Tensor& out = ctx.output(0);
  return visit_float(x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    std::vector<double> matrix(static_cast<size_t>(n * n));
    for (int64_t b = 0; b < out.numel(); ++b) {
      for (int64_t e = 0; e < n * n; ++e) matrix[e] = static_cast<double>(px[b * n * n + e]);
      po[b] = static_cast<T>(determinant(matrix, n));
    }
  });
}

}  // namespace

void register_matmul_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "MatMul", matmul_kernel);
  r.add(kOnnxDomain, "Gemm", gemm_kernel);
  r.add(kOnnxDomain, "Einsum", einsum_kernel);
  r.add(kOnnxDomain, "Det", det_kernel);
}

}  // namespace peregrine
