// CPU kernels of LSTM, GRU and RNN (float32, every direction, layout 0 and 1, initial states,
// LSTM peepholes and input_forget, GRU linear_before_reset 0 and 1), with the default
// activations (Sigmoid / Tanh), no clip and every sequence at full length (sequence_lens absent
// or all equal to seq); other cases run the reference kernel.
//
// Per direction:
//   1. the input projection of the whole sequence is one GEMM: gx (seq * batch, G * H) =
//      X (seq * batch, I) * W^T + bias, W^T packed once when W is constant; the bias folds Wb
//      and every Rb that is added outside a gate product (all but GRU's h gate under
//      linear_before_reset = 1);
//   2. each step multiplies the previous state by the packed R^T (batch, H) x (H, G * H) on the
//      small-M path (gemm/f32_gemv.h) or the GEMM, then applies the gates row by row with the
//      vector micro-kernels' sigmoid and tanh. GRU with linear_before_reset = 0 needs r before
//      its h-gate product: R's z / r rows and h rows are packed apart, the second product
//      taking (r * h) as its input.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm/f32_gemm.h"
#include "backends/cpu/gemm/f32_gemv.h"
#include "backends/cpu/kernels/vector_ops.h"
#include "backends/cpu/ukernels/f32_vector_ukernels.h"

namespace peregrine::cpu {

namespace {

enum class Cell { kRnn, kGru, kLstm };

int64_t gate_count(Cell c) { return c == Cell::kRnn ? 1 : c == Cell::kGru ? 3 : 4; }

// The product dst (m, n) = a (m, k) * b + ep on the small-M path when it applies.
void product(const GemmKernelInfo& g, int64_t m, int64_t n, int64_t k, const float* a,
             int64_t lda, const PackedMatrix& b, float* dst, const GemmEpilogue& ep,
             int threads) {
  if (k > 0 && f32_gemv_applies(g, m, b)) {
    f32_gemv(g, m, n, k, a, lda, b, dst, n, 1.0f, 0.0f, ep, threads);
    return;
  }
  f32_gemm(g, m, n, k, GemmOperand::of(a, lda, 1), GemmOperand::of(b), dst, n, 1.0f, 0.0f, ep,
           threads);
}

struct Direction {
  std::unique_ptr<PackedMatrix> w;       // W^T (I, G * H)
  std::unique_ptr<PackedMatrix> r;       // R^T (H, G * H); GRU lbr = 0: only z and r (H, 2H)
  std::unique_ptr<PackedMatrix> r_hgate; // GRU lbr = 0: R_h^T (H, H)
};

class RecurrentKernel : public PreparedKernel {
 public:
  RecurrentKernel(Cell cell, std::string direction, int64_t layout, bool lbr, bool input_forget,
                  const Tensor* w, const Tensor* r)
      : cell_(cell), direction_(std::move(direction)), layout_(layout), lbr_(lbr),
        input_forget_(input_forget), gemm_(f32_gemm_kernel()), uk_(vector_ukernels()) {
    if (w && r && w->rank() == 3 && r->rank() == 3) pack(*w, *r, &packed_);
  }
  std::string name() const override { return std::string("cpu/rnn-") + gemm_.name; }
  // W and R stay readable (the fallbacks run the reference on them): they are small.

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kFloat32 || x.rank() != 3) return fallback(ctx);
    const RunShape rs{
        direction_ == "bidirectional" ? 2 : 1, gate_count(cell_), x.dim(layout_ == 0 ? 0 : 1),
        x.dim(layout_ == 0 ? 1 : 0),           x.dim(2),          hidden_};
    if (packed_.empty()) {
      const Tensor& w = ctx.input(1);
      const Tensor& r = ctx.input(2);
      if (w.dtype() != DType::kFloat32 || r.dtype() != DType::kFloat32 || w.rank() != 3 ||
          r.rank() != 3)
        return run_reference(ctx);
      pack(w, r, &run_packed_);
    }
    const std::vector<Direction>& packs = packed_.empty() ? run_packed_ : packed_;
    if (!takes(ctx, rs, packs)) return fallback(ctx);
    const int64_t hidden = rs.hidden;
    const RunIo io{ctx.has_input(3) ? ctx.input(3).data<float>() : nullptr,
                   ctx.has_input(5) ? ctx.input(5).data<float>() : nullptr,
                   cell_ == Cell::kLstm && ctx.has_input(6) ? ctx.input(6).data<float>() : nullptr,
                   cell_ == Cell::kLstm && ctx.has_input(7) ? ctx.input(7).data<float>() : nullptr,
                   ctx.wants_output(0) ? ctx.output_for_overwrite(0).data<float>() : nullptr,
                   ctx.num_outputs() > 1 && ctx.wants_output(1)
                       ? ctx.output_for_overwrite(1).data<float>()
                       : nullptr,
                   cell_ == Cell::kLstm && ctx.num_outputs() > 2 && ctx.wants_output(2)
                       ? ctx.output_for_overwrite(2).data<float>()
                       : nullptr};
    const size_t gh_cols = static_cast<size_t>(rs.gates * hidden);
    gx_.resize(static_cast<size_t>(rs.seq * rs.batch) * gh_cols);
    gh_.resize(static_cast<size_t>(rs.batch) * gh_cols);
    h_.resize(static_cast<size_t>(rs.batch * hidden));
    c_.resize(h_.size());
    tmp_.resize(h_.size());
    bias_.resize(gh_cols);
    for (int64_t d = 0; d < rs.dirs; ++d)
      run_direction(rs, packs[static_cast<size_t>(d)], d, x.data<float>(), io, ctx.num_threads());
    return Status::ok();
  }

 private:
  struct RunShape {
    int64_t dirs, gates, seq, batch, input, hidden;
  };
  // The optional inputs (nullptr when absent) and the wanted outputs (nullptr when not).
  struct RunIo {
    const float* bias;  // (dirs, 2 * gates * hidden): Wb then Rb
    const float* init_h;
    const float* init_c;
    const float* peep;  // (dirs, 3 * hidden)
    float* y;
    float* y_h;
    float* y_c;
  };

  // Whether this kernel takes the node as given: float32 operands of the shapes it packed for,
  // full sequences, and outputs of the shapes it writes (a model whose hidden_size or direction
  // disagrees with W and R can infer others).
  bool takes(KernelContext& ctx, const RunShape& rs, const std::vector<Direction>& packs) const {
    const int64_t dirs = rs.dirs, hidden = rs.hidden;
    if (static_cast<int64_t>(packs.size()) != dirs) return false;
    if (packs[0].w->rows() != rs.input || hidden_gates_ != rs.gates * hidden) return false;
    for (size_t i = 3; i < ctx.num_inputs(); ++i)
      if (ctx.has_input(i) && ctx.input(i).dtype() != DType::kFloat32 && i != 4) return false;
    const Shape state_shape =
        layout_ == 0 ? Shape{dirs, rs.batch, hidden} : Shape{rs.batch, dirs, hidden};
    if (ctx.has_input(3) && ctx.input(3).shape() != Shape{dirs, 2 * rs.gates * hidden})
      return false;
    if (ctx.has_input(4)) {  // sequence_lens: only all-full sequences here
      const Tensor& lens = ctx.input(4);
      if (lens.numel() != rs.batch) return false;
      for (int64_t v : lens.to_int64_vector())
        if (v != rs.seq) return false;
    }
    const bool lstm = cell_ == Cell::kLstm;
    if ((ctx.has_input(5) && ctx.input(5).shape() != state_shape) ||
        (lstm && ctx.has_input(6) && ctx.input(6).shape() != state_shape) ||
        (lstm && ctx.has_input(7) && ctx.input(7).shape() != Shape{dirs, 3 * hidden}))
      return false;
    const Shape y_shape = layout_ == 0 ? Shape{rs.seq, dirs, rs.batch, hidden}
                                       : Shape{rs.batch, rs.seq, dirs, hidden};
    auto output_shape_is = [&](size_t i, const Shape& want) {
      if (i >= ctx.num_outputs() || !ctx.wants_output(i)) return true;
      const ir::ValueType& t = ctx.output_type(i);
      return t.has_shape && t.dims == want;
    };
    return output_shape_is(0, y_shape) && output_shape_is(1, state_shape) &&
           (!lstm || output_shape_is(2, state_shape));
  }

  // Direction d: the input projection of the whole sequence as one GEMM, then per step the
  // state product and the cell's gates.
  void run_direction(const RunShape& rs, const Direction& pk, int64_t d, const float* px,
                     const RunIo& io, int threads) {
    const int64_t dirs = rs.dirs, gates = rs.gates, seq = rs.seq, batch = rs.batch;
    const int64_t input = rs.input, hidden = rs.hidden;
    const size_t hs = static_cast<size_t>(hidden), gh_cols = static_cast<size_t>(gates * hidden);
    auto state_at = [&](int64_t b) {
      return static_cast<size_t>((layout_ == 0 ? d * batch + b : b * dirs + d) * hidden);
    };
    auto x_row = [&](int64_t t, int64_t b) { return layout_ == 0 ? t * batch + b : b * seq + t; };
    auto y_at = [&](int64_t t, int64_t b) {
      return static_cast<size_t>(
          (layout_ == 0 ? (t * dirs + d) * batch + b : (b * seq + t) * dirs + d) * hidden);
    };
    const bool reverse = direction_ == "reverse" || d == 1;
    const float* wb = io.bias ? io.bias + d * 2 * gates * hidden : nullptr;
    const float* rb = wb ? wb + gates * hidden : nullptr;
    // The input projection's bias: Wb + Rb, but GRU-lbr's h gate keeps its Rb for later.
    for (size_t j = 0; j < gh_cols; ++j) {
      const bool rb_inside = cell_ == Cell::kGru && lbr_ && j >= 2 * hs;
      bias_[j] = wb ? wb[j] + (rb_inside ? 0.0f : rb[j]) : 0.0f;
    }
    GemmEpilogue ep;
    ep.bias_kind = GemmEpilogue::Bias::kPerColumn;
    ep.bias = bias_.data();
    // gx rows follow X's rows (t * batch + b, or b * seq + t for layout 1).
    f32_gemm(gemm_, seq * batch, gates * hidden, input, GemmOperand::of(px, input, 1),
             GemmOperand::of(*pk.w), gx_.data(), gates * hidden, 1.0f, 0.0f, ep, threads);
    for (int64_t b = 0; b < batch; ++b) {
      float* h = h_.data() + b * hidden;
      float* c = c_.data() + b * hidden;
      if (io.init_h)
        std::memcpy(h, io.init_h + state_at(b), hs * sizeof(float));
      else
        std::fill(h, h + hs, 0.0f);
      if (io.init_c)
        std::memcpy(c, io.init_c + state_at(b), hs * sizeof(float));
      else
        std::fill(c, c + hs, 0.0f);
    }
    const float* pd = io.peep ? io.peep + d * 3 * hidden : nullptr;
    // GRU lbr = 1: the state product's h-gate columns carry Rb_h (z and r have theirs in gx).
    GemmEpilogue state_ep;
    if (cell_ == Cell::kGru && lbr_ && rb) {
      rb_h_.assign(gh_cols, 0.0f);
      std::copy(rb + 2 * hidden, rb + 3 * hidden, rb_h_.begin() + 2 * hidden);
      state_ep.bias_kind = GemmEpilogue::Bias::kPerColumn;
      state_ep.bias = rb_h_.data();
    }
    const int64_t rcols = cell_ == Cell::kGru && !lbr_ ? 2 * hidden : gates * hidden;
    for (int64_t step = 0; step < seq; ++step) {
      const int64_t t = reverse ? seq - 1 - step : step;
      product(gemm_, batch, rcols, hidden, h_.data(), hidden, *pk.r, gh_.data(), state_ep, threads);
      for (int64_t b = 0; b < batch; ++b) {
        float* g = gx_.data() + static_cast<size_t>(x_row(t, b)) * gh_cols;
        const float* r = gh_.data() + static_cast<size_t>(b) * static_cast<size_t>(rcols);
        float* h = h_.data() + b * hidden;
        float* c = c_.data() + b * hidden;
        if (cell_ == Cell::kRnn) {
          for (size_t j = 0; j < hs; ++j) g[j] += r[j];
          uk_.unary(UnaryOp::kTanh, g, h, hs);
        } else if (cell_ == Cell::kLstm) {
          step_lstm(g, r, pd, h, c, hs);
        } else {
          step_gru(pk, g, r, h, b, hs, threads);
        }
      }
      if (io.y)
        for (int64_t b = 0; b < batch; ++b)
          std::memcpy(io.y + y_at(t, b), h_.data() + b * hidden, hs * sizeof(float));
    }
    for (int64_t b = 0; b < batch; ++b) {
      if (io.y_h) std::memcpy(io.y_h + state_at(b), h_.data() + b * hidden, hs * sizeof(float));
      if (io.y_c) std::memcpy(io.y_c + state_at(b), c_.data() + b * hidden, hs * sizeof(float));
    }
  }

  // Gate rows i, o, f, c; g holds x W^T + bias, r the state product.
  void step_lstm(float* g, const float* r, const float* pd, float* h, float* c, size_t hs) {
    float* gi = g;
    float* go = g + hs;
    float* gf = g + 2 * hs;
    float* gc = g + 3 * hs;
    for (size_t j = 0; j < 4 * hs; ++j) g[j] += r[j];
    if (pd)
      for (size_t j = 0; j < hs; ++j) {
        gi[j] += pd[j] * c[j];
        gf[j] += pd[2 * hs + j] * c[j];
      }
    uk_.unary(UnaryOp::kSigmoid, gi, gi, hs);
    if (input_forget_)
      for (size_t j = 0; j < hs; ++j) gf[j] = 1.0f - gi[j];
    else
      uk_.unary(UnaryOp::kSigmoid, gf, gf, hs);
    uk_.unary(UnaryOp::kTanh, gc, gc, hs);
    for (size_t j = 0; j < hs; ++j) c[j] = gf[j] * c[j] + gi[j] * gc[j];
    if (pd)
      for (size_t j = 0; j < hs; ++j) go[j] += pd[hs + j] * c[j];
    uk_.unary(UnaryOp::kSigmoid, go, go, hs);
    float* tc = tmp_.data();
    uk_.unary(UnaryOp::kTanh, c, tc, hs);
    for (size_t j = 0; j < hs; ++j) h[j] = go[j] * tc[j];
  }

  // Gate rows z, r, h.
  void step_gru(const Direction& pk, float* g, const float* r, float* h, int64_t b, size_t hs,
                int threads) {
    float* gz = g;
    float* gr = g + hs;
    float* gn = g + 2 * hs;
    for (size_t j = 0; j < 2 * hs; ++j) g[j] += r[j];
    uk_.unary(UnaryOp::kSigmoid, g, g, 2 * hs);  // z and r
    if (lbr_) {
      for (size_t j = 0; j < hs; ++j) gn[j] += gr[j] * r[2 * hs + j];
    } else {
      // (r * h) R_h^T (+ Rb_h is in gx's bias): one more product for this row.
      float* rh = tmp_.data();
      for (size_t j = 0; j < hs; ++j) rh[j] = gr[j] * h[j];
      float* prod = gh_.data() + static_cast<size_t>(b) * 2 * hs;  // this row's z / r are used
      product(gemm_, 1, static_cast<int64_t>(hs), static_cast<int64_t>(hs), rh,
              static_cast<int64_t>(hs), *pk.r_hgate, prod, GemmEpilogue{}, threads);
      for (size_t j = 0; j < hs; ++j) gn[j] += prod[j];
    }
    uk_.unary(UnaryOp::kTanh, gn, gn, hs);
    for (size_t j = 0; j < hs; ++j) h[j] = (1.0f - gz[j]) * gn[j] + gz[j] * h[j];
  }

  Status fallback(KernelContext& ctx) { return run_reference(ctx); }

  void pack(const Tensor& w, const Tensor& r, std::vector<Direction>* out) {
    const int64_t dirs = w.dim(0), gh = w.dim(1), input = w.dim(2), hidden = r.dim(2);
    hidden_ = hidden;
    hidden_gates_ = gh;
    out->clear();
    if (r.dim(0) != dirs || r.dim(1) != gh || gh != gate_count(cell_) * hidden) return;
    for (int64_t d = 0; d < dirs; ++d) {
      Direction pk;
      const float* wd = w.data<float>() + d * gh * input;
      const float* rd = r.data<float>() + d * gh * hidden;
      // W^T: element (k, n) is W[n][k].
      pk.w = std::make_unique<PackedMatrix>(
          PackedMatrix::pack_b(gemm_, MatrixView{wd, 1, input}, input, gh));
      const int64_t rcols = cell_ == Cell::kGru && !lbr_ ? 2 * hidden : gh;
      pk.r = std::make_unique<PackedMatrix>(
          PackedMatrix::pack_b(gemm_, MatrixView{rd, 1, hidden}, hidden, rcols));
      if (cell_ == Cell::kGru && !lbr_)
        pk.r_hgate = std::make_unique<PackedMatrix>(PackedMatrix::pack_b(
            gemm_, MatrixView{rd + 2 * hidden * hidden, 1, hidden}, hidden, hidden));
      out->push_back(std::move(pk));
    }
  }

  Cell cell_;
  std::string direction_;
  int64_t layout_;
  bool lbr_, input_forget_;
  const GemmKernelInfo& gemm_;
  const VectorUkernels& uk_;
  std::vector<Direction> packed_, run_packed_;
  int64_t hidden_ = 0, hidden_gates_ = 0;
  std::vector<float> gx_, gh_, h_, c_, tmp_, bias_, rb_h_;
};

}  // namespace

bool claims_recurrent(const ir::Node& node) {
  if (!(node.domain.empty() || node.domain == "ai.onnx")) return false;
  if (node.op_type != "LSTM" && node.op_type != "GRU" && node.op_type != "RNN") return false;
  ir::AttrView attrs(node);
  auto acts = attrs.get_strings("activations");
  if (!acts.is_ok()) return false;
  // Default activations only (spelled out or not).
  const std::vector<std::string> defaults =
      node.op_type == "RNN" ? std::vector<std::string>{"Tanh"}
      : node.op_type == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                              : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  for (size_t i = 0; i < acts.value().size(); ++i)
    if (acts.value()[i] != defaults[i % defaults.size()]) return false;
  if (attrs.has("clip")) return false;
  return true;
}

Expected<std::unique_ptr<PreparedKernel>> prepare_recurrent(
    const ir::Node& node, const std::vector<const Tensor*>& constants) {
  ir::AttrView attrs(node);
  const Cell cell = node.op_type == "LSTM" ? Cell::kLstm : node.op_type == "GRU" ? Cell::kGru
                                                                                 : Cell::kRnn;
  PG_ASSIGN_OR_RETURN(std::string direction, attrs.get_string("direction", "forward"));
  int64_t layout = 0;
  if (node.opset >= 14) {
    PG_ASSIGN_OR_RETURN(layout, attrs.get_int("layout", 0));
  }
  PG_ASSIGN_OR_RETURN(int64_t lbr, attrs.get_int("linear_before_reset", 0));
  PG_ASSIGN_OR_RETURN(int64_t input_forget, attrs.get_int("input_forget", 0));
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return invalid_model(node.describe() + ": direction '" + direction +
                         "' is not forward, reverse or bidirectional");
  const Tensor* w = constants.size() > 1 ? constants[1] : nullptr;
  const Tensor* r = constants.size() > 2 ? constants[2] : nullptr;
  return std::unique_ptr<PreparedKernel>(new RecurrentKernel(
      cell, direction, layout, cell == Cell::kGru && lbr != 0,
      cell == Cell::kLstm && input_forget != 0, w && r ? w : nullptr, w && r ? r : nullptr));
}

}  // namespace peregrine::cpu
