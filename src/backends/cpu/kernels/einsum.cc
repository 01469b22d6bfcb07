// CPU kernel of two-operand float32 Einsum, lowered to batched GEMM. The equation's letters
// split into batch (both operands and the output), contracted (both operands, not the output)
// and free ones (one operand and the output). A is viewed as (batch, M, K) and B as
// (batch, K, N), with M / N the free letters of A / B in output order and K the contracted ones
// in A's order; an operand already in that order (or its (K, M) / (N, K) transpose) is read in
// place, any other is permuted into a scratch copy first. The product (batch, M, N) lands in the
// output directly when the output's letters are in that order, else it is permuted there.
// Ellipses, repeated letters in one operand, a letter summed within one operand, broadcast
// dims, more or fewer than two operands and other dtypes run the reference.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/thread_pool.h"

namespace peregrine::cpu {

namespace {

struct Equation {
  std::string a, b, out;  // letters, spaces removed
};

// Parses "ab,bc->ac"; false for anything this kernel does not take.
bool parse_equation(const std::string& eq, Equation* e) {
  std::string s;
  for (char c : eq)
    if (c != ' ') s += c;
  const size_t arrow = s.find("->"), comma = s.find(',');
  if (arrow == std::string::npos || comma == std::string::npos || comma > arrow) return false;
  e->a = s.substr(0, comma);
  e->b = s.substr(comma + 1, arrow - comma - 1);
  e->out = s.substr(arrow + 2);
  for (const std::string* t : {&e->a, &e->b, &e->out}) {
    for (size_t i = 0; i < t->size(); ++i) {
      const char c = (*t)[i];
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return false;  // '...' too
      if (t->find(c, i + 1) != std::string::npos) return false;                // repeated
    }
  }
  return true;
}

// dst = src permuted: dst dim i is src dim perm[i].
void permute(const float* src, const Shape& shape, const std::vector<size_t>& perm, float* dst) {
  const size_t r = shape.size();
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  std::vector<int64_t> stride(r, 1), dims(r), dstride(r);
  for (size_t d = r; d-- > 1;) stride[d - 1] = stride[d] * shape[d];
  for (size_t i = 0; i < r; ++i) {
    dims[i] = shape[perm[i]];
    dstride[i] = stride[perm[i]];
  }
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  if (n == 0) return;
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  const int64_t inner = dims[r - 1], istride = dstride[r - 1];
  for (int64_t i = 0; i < n; i += inner) {
    for (int64_t j = 0; j < inner; ++j) dst[i + j] = src[off + j * istride];
    for (size_t d = r - 1; d-- > 0;) {
      off += dstride[d];
      if (++idx[d] < dims[d]) break;
      off -= dstride[d] * idx[d];
      idx[d] = 0;
    }
  }
}

class EinsumKernel : public PreparedKernel {
 public:
  EinsumKernel(Equation e, const GemmKernelInfo& gemm) : e_(std::move(e)), gemm_(gemm) {}
  std::string name() const override { return std::string("cpu/einsum-") + gemm_.name; }

  Status run(KernelContext& ctx) override {
    if (ctx.num_inputs() != 2) return run_reference(ctx);
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.dtype() != DType::kFloat32 || b.dtype() != DType::kFloat32 ||
        a.rank() != static_cast<int64_t>(e_.a.size()) ||
        b.rank() != static_cast<int64_t>(e_.b.size()))
      return run_reference(ctx);
    // Each letter's size; batch / contracted / free classes.
    int64_t size[128] = {};
    auto note = [&](const std::string& letters, const Tensor& t) {
      for (size_t i = 0; i < letters.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(letters[i]);
        if (size[c] && size[c] != t.dim(static_cast<int64_t>(i))) return false;
        size[c] = t.dim(static_cast<int64_t>(i));
      }
      return true;
    };
    if (!note(e_.a, a) || !note(e_.b, b)) return run_reference(ctx);
    std::string batch, afree, bfree, contr;
    for (char c : e_.out) {
      const bool in_a = e_.a.find(c) != std::string::npos, in_b = e_.b.find(c) != std::string::npos;
      if (!in_a && !in_b) return run_reference(ctx);
      (in_a && in_b ? batch : in_a ? afree : bfree) += c;
    }
    for (char c : e_.a) {
      if (e_.out.find(c) != std::string::npos) continue;
      if (e_.b.find(c) == std::string::npos) return run_reference(ctx);  // summed within A
      contr += c;
    }
    for (char c : e_.b)
      if (e_.out.find(c) == std::string::npos && e_.a.find(c) == std::string::npos)
        return run_reference(ctx);  // summed within B
    auto product = [&](const std::string& s) {
      int64_t p = 1;
      for (char c : s) p *= size[static_cast<unsigned char>(c)];
      return p;
    };
    const int64_t nb = product(batch), m = product(afree), n = product(bfree), k = product(contr);
    Tensor& y = ctx.output_for_overwrite(0);
    if (y.numel() == 0) return Status::ok();

    // Operand views: in place (plain or transposed), or a permuted copy.
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    int64_t a_rs = k, a_cs = 1, b_rs = n, b_cs = 1;
    if (e_.a == batch + afree + contr) {
    } else if (e_.a == batch + contr + afree) {
      a_rs = 1;
      a_cs = m;
    } else {
      a_copy_.resize(static_cast<size_t>(a.numel()));
      permute(pa, a.shape(), perm_of(e_.a, batch + afree + contr), a_copy_.data());
      pa = a_copy_.data();
    }
    if (e_.b == batch + contr + bfree) {
    } else if (e_.b == batch + bfree + contr) {
      b_rs = 1;
      b_cs = k;
    } else {
      b_copy_.resize(static_cast<size_t>(b.numel()));
      permute(pb, b.shape(), perm_of(e_.b, batch + contr + bfree), b_copy_.data());
      pb = b_copy_.data();
    }
    const std::string canonical = batch + afree + bfree;
    float* pc = y.data<float>();
    if (e_.out != canonical) {
      c_copy_.resize(static_cast<size_t>(y.numel()));
      pc = c_copy_.data();
    }
    const int threads = ctx.num_threads();
    auto one = [&](int64_t i, int gemm_threads) {
      f32_gemm(gemm_, m, n, k, GemmOperand::of(pa + i * m * k, a_rs, a_cs),
               GemmOperand::of(pb + i * k * n, b_rs, b_cs), pc + i * m * n, n, 1.0f, 0.0f,
               GemmEpilogue{}, gemm_threads);
    };
    if (nb >= threads) {
      cpu_thread_pool().parallel_for(nb, threads, [&](int64_t i, int) { one(i, 1); });
    } else {
      for (int64_t i = 0; i < nb; ++i) one(i, threads);
    }
    if (e_.out != canonical) {
      Shape cshape;
      for (char c : canonical) cshape.push_back(size[static_cast<unsigned char>(c)]);
      permute(pc, cshape, perm_of(canonical, e_.out), y.data<float>());
    }
    return Status::ok();
  }

 private:
  // perm with target[i] = from[perm[i]].
  static std::vector<size_t> perm_of(const std::string& from, const std::string& target) {
    std::vector<size_t> p;
    for (char c : target) p.push_back(from.find(c));
    return p;
  }

  Equation e_;
  const GemmKernelInfo& gemm_;
  std::vector<float> a_copy_, b_copy_, c_copy_;
};

}  // namespace

bool claims_einsum(const ir::Node& node) {
  if (!(node.domain.empty() || node.domain == "ai.onnx") || node.op_type != "Einsum" ||
      node.inputs.size() != 2)
    return false;
  ir::AttrView attrs(node);
  auto eq = attrs.get_string("equation", "");
  Equation e;
  return eq.is_ok() && parse_equation(eq.value(), &e);
}

Expected<std::unique_ptr<PreparedKernel>> prepare_einsum(const ir::Node& node) {
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(std::string eq, attrs.get_string("equation", ""));
  Equation e;
  if (!parse_equation(eq, &e)) return unsupported(node.describe() + ": equation not lowered");
  return std::unique_ptr<PreparedKernel>(new EinsumKernel(std::move(e), f32_gemm_kernel()));
}

}  // namespace peregrine::cpu
