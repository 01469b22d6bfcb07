// CPU kernels of QuantizeLinear (float32 -> uint8 / int8) and DequantizeLinear (uint8 / int8 ->
// float32) with a per-tensor or per-axis scale and zero point, on the vector maps of
// ukernels/q8_ukernels.h: the Q / DQ nodes a QDQ model keeps where no int8 kernel took them
// (the model's input, around float-only ops). Blocked quantization and other types run the
// reference kernel. Also peregrine.QLinearAdd (same-shape 8-bit operands, scalar parameters) and
// peregrine.TableLookup (a byte table, whatever function fuse_qdq_lookup_table put in it) and
// peregrine.QuantizeDequantize (a Q / DQ pair in one pass over float32).
#include <algorithm>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/ukernels/q8_ukernels.h"

namespace peregrine::cpu {

namespace {

bool is_8bit(DType t) { return t == DType::kUInt8 || t == DType::kInt8; }

// fn(begin, count) over [0, n) in pieces of at most kElementsPerTask, across the threads: the
// one-pass maps of 8-bit values below.
template <class Fn>
void for_each_piece(int64_t n, int num_threads, Fn&& fn) {
  const int64_t tasks = std::max<int64_t>(1, (n + kElementsPerTask - 1) / kElementsPerTask);
  cpu_thread_pool().parallel_for(tasks, num_threads, [&](int64_t t, int) {
    const int64_t i0 = t * kElementsPerTask, len = std::min(kElementsPerTask, n - i0);
    if (len > 0) fn(i0, static_cast<size_t>(len));
  });
}

// The layout of a (de)quantization: `outer` runs of `axis_dim` channels of `inner` elements,
// channel c with scale[c] and zero point zp[c] (per tensor: one channel of everything).
struct ChannelLayout {
  int64_t outer = 1, axis_dim = 1, inner = 1;
};

class QuantizeLinearKernel : public PreparedKernel {
 public:
  QuantizeLinearKernel(bool quantize, int64_t axis)
      : quantize_(quantize), axis_(axis),
        avx512_(selected_isa().is_ok() && selected_isa().value() >= Isa::kAvx512) {}
  std::string name() const override {
    return std::string(quantize_ ? "cpu/quantize-" : "cpu/dequantize-") +
           (avx512_ ? "avx512" : "scalar");
  }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    const DType q_type = quantize_ ? (zp ? zp->dtype() : ctx.output_type(0).dtype) : x.dtype();
    const DType f_type = quantize_ ? x.dtype() : scale.dtype();
    if (f_type != DType::kFloat32 || scale.dtype() != DType::kFloat32 || !is_8bit(q_type) ||
        (zp && zp->dtype() != q_type) || (zp && zp->numel() != scale.numel()))
      return run_reference(ctx);
    ChannelLayout layout;
    if (scale.numel() != 1 || scale.rank() == 1) {
      const int64_t rank = x.rank();
      const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
      if (axis < 0 || axis >= rank || scale.rank() != 1 || scale.numel() != x.dim(axis))
        return run_reference(ctx);  // blocked, or an error the reference reports
      layout.axis_dim = x.dim(axis);
      for (int64_t d = 0; d < axis; ++d) layout.outer *= x.dim(d);
      for (int64_t d = axis + 1; d < rank; ++d) layout.inner *= x.dim(d);
    } else {
      layout.inner = x.numel();
    }
    Tensor& y =
        ctx.allocate_output_for_overwrite(0, quantize_ ? q_type : DType::kFloat32, x.shape());
    const bool is_signed = q_type == DType::kInt8;
    const float* scales = scale.data<float>();
    auto zero_point = [&](int64_t c) -> int32_t {
      if (!zp) return 0;
      return is_signed ? zp->data<int8_t>()[c] : zp->data<uint8_t>()[c];
    };
    // Tasks: channel runs cut into pieces of at most kElementsPerTask.
    const int64_t pieces = std::max<int64_t>(1, (layout.inner + kElementsPerTask - 1) /
                                                    kElementsPerTask);
    const int64_t per_piece = (layout.inner + pieces - 1) / pieces;
    const int64_t runs = layout.outer * layout.axis_dim;
    auto task = [&](int64_t t, int) {
      const int64_t run = t / pieces, c = run % layout.axis_dim;
      const int64_t begin = (t % pieces) * per_piece;
      const int64_t len = std::min(per_piece, layout.inner - begin);
      if (len <= 0) return;
      const int64_t offset = run * layout.inner + begin;
      const size_t n = static_cast<size_t>(len);
      if (quantize_) {
        const float* src = x.data<float>() + offset;
        uint8_t* dst = static_cast<uint8_t*>(y.raw()) + offset;
        (avx512_ ? avx512::q8_quantize__avx512 : q8_quantize__scalar)(
            src, n, scales[c], zero_point(c), is_signed, dst);
      } else {
        const uint8_t* src = static_cast<const uint8_t*>(x.raw()) + offset;
        float* dst = y.data<float>() + offset;
        (avx512_ ? avx512::q8_dequantize__avx512 : q8_dequantize__scalar)(
            src, n, scales[c], zero_point(c), is_signed, dst);
      }
    };
    cpu_thread_pool().parallel_for(runs * pieces, x.numel() < kElementsPerTask ? 1 : ctx.num_threads(),
                                   task);
    return Status::ok();
  }

 private:
  bool quantize_;
  int64_t axis_;
  bool avx512_;
};

class QLinearAddKernel : public PreparedKernel {
 public:
  QLinearAddKernel()
      : avx512_(selected_isa().is_ok() && selected_isa().value() >= Isa::kAvx512) {}
  std::string name() const override {
    return std::string("cpu/qlinear-add-") + (avx512_ ? "avx512" : "scalar");
  }

  Status run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(3);
    const DType c_type = ctx.has_input(7) ? ctx.input(7).dtype() : DType::kUInt8;
    if (!is_8bit(a.dtype()) || !is_8bit(b.dtype()) || !is_8bit(c_type) || a.shape() != b.shape())
      return run_reference(ctx);
    for (size_t i : {1, 2, 4, 5, 6, 7})
      if (ctx.has_input(i) && ctx.input(i).numel() != 1) return run_reference(ctx);
    auto param = [&](size_t i) {
      return ctx.has_input(i) ? static_cast<float>(ctx.input(i).get_as_double(0)) : 0.0f;
    };
    const bool c_signed = c_type == DType::kInt8;
    const Q8AddParams p{param(1), param(2), param(4), param(5), param(6),
                        static_cast<int32_t>(param(7)), c_signed ? -128 : 0, c_signed ? 127 : 255,
                        a.dtype() == DType::kInt8, b.dtype() == DType::kInt8};
    Tensor& c = ctx.allocate_output_for_overwrite(0, c_type, a.shape());
    const uint8_t* pa = static_cast<const uint8_t*>(a.raw());
    const uint8_t* pb = static_cast<const uint8_t*>(b.raw());
    uint8_t* pc = static_cast<uint8_t*>(c.raw());
    const auto add = avx512_ ? avx512::q8_add__avx512 : q8_add__scalar;
    for_each_piece(a.numel(), ctx.num_threads(),
                   [&](int64_t i0, size_t len) { add(pa + i0, pb + i0, len, p, pc + i0); });
    return Status::ok();
  }

 private:
  bool avx512_;
};

// peregrine.QuantizeDequantize: float32 in and out, one scale and zero point.
class QuantizeDequantizeKernel : public PreparedKernel {
 public:
  QuantizeDequantizeKernel()
      : avx512_(selected_isa().is_ok() && selected_isa().value() >= Isa::kAvx512) {}
  std::string name() const override {
    return std::string("cpu/quantize-dequantize-") + (avx512_ ? "avx512" : "scalar");
  }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor* zero = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (x.dtype() != DType::kFloat32 || scale.dtype() != DType::kFloat32 || scale.numel() != 1 ||
        (zero && (!is_8bit(zero->dtype()) || zero->numel() != 1)))
      return run_reference(ctx);
    const float s = scale.data<float>()[0];
    const int32_t zp = zero ? static_cast<int32_t>(zero->get_as_double(0)) : 0;
    const bool is_signed = zero && zero->dtype() == DType::kInt8;
    Tensor& y = ctx.allocate_output_for_overwrite(0, DType::kFloat32, x.shape());
    const float* px = x.data<float>();
    float* py = y.data<float>();
    const Q8FakeQuantizeFn fn =
        avx512_ ? avx512::q8_fake_quantize__avx512 : q8_fake_quantize__scalar;
    for_each_piece(x.numel(), ctx.num_threads(),
                   [&](int64_t i0, size_t len) { fn(px + i0, len, s, zp, is_signed, py + i0); });
    return Status::ok();
  }

 private:
  bool avx512_;
};

class TableLookupKernel : public PreparedKernel {
 public:
  TableLookupKernel()
      : vbmi_(selected_isa().is_ok() && selected_isa().value() >= Isa::kAvx512 &&
              cpu_features().avx512_vbmi) {}
  std::string name() const override {
    return std::string("cpu/table-lookup-") + (vbmi_ ? "avx512vbmi" : "scalar");
  }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& table = ctx.input(1);
    if (!is_8bit(x.dtype()) || !is_8bit(table.dtype()) || table.numel() != 256)
      return run_reference(ctx);
    Tensor& y = ctx.allocate_output_for_overwrite(0, table.dtype(), x.shape());
    const uint8_t* px = static_cast<const uint8_t*>(x.raw());
    const uint8_t* pt = static_cast<const uint8_t*>(table.raw());
    uint8_t* py = static_cast<uint8_t*>(y.raw());
    const U8LookupFn lookup = vbmi_ ? avx512vbmi::u8_lookup__avx512vbmi : u8_lookup__scalar;
    for_each_piece(x.numel(), ctx.num_threads(),
                   [&](int64_t i0, size_t len) { lookup(px + i0, len, pt, py + i0); });
    return Status::ok();
  }

 private:
  bool vbmi_;
};

}  // namespace

Expected<std::unique_ptr<PreparedKernel>> prepare_quantize_dequantize(const ir::Node&) {
  return std::unique_ptr<PreparedKernel>(new QuantizeDequantizeKernel());
}

Expected<std::unique_ptr<PreparedKernel>> prepare_table_lookup(const ir::Node&) {
  return std::unique_ptr<PreparedKernel>(new TableLookupKernel());
}

Expected<std::unique_ptr<PreparedKernel>> prepare_qlinear_add(const ir::Node&) {
  return std::unique_ptr<PreparedKernel>(new QLinearAddKernel());
}

bool claims_quantize_linear(const ir::Node& node) {
  ir::AttrView attrs(node);
  auto block = attrs.get_int("block_size", 0);
  return block.is_ok() && block.value() == 0;
}

Expected<std::unique_ptr<PreparedKernel>> prepare_quantize_linear(const ir::Node& node) {
  ir::AttrView attrs(node);
  PG_ASSIGN_OR_RETURN(int64_t axis, attrs.get_int("axis", 1));
  return std::unique_ptr<PreparedKernel>(
      new QuantizeLinearKernel(node.op_type == "QuantizeLinear", axis));
}

}  // namespace peregrine::cpu
