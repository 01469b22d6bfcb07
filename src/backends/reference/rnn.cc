// Reference kernels of the rnn family: RNN, GRU, LSTM. Computes in double, one batch row
// and one direction at a time.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

namespace {

enum class CellKind { kRnn, kGru, kLstm };

struct Activation {
  std::string name;  // lower case
  double alpha = 0;
  double beta = 0;

  double operator()(double x) const {
    if (name == "sigmoid") return 1 / (1 + std::exp(-x));
    if (name == "tanh") return std::tanh(x);
    if (name == "relu") return std::max(x, 0.0);
    if (name == "affine") return alpha * x + beta;
    if (name == "leakyrelu") return x >= 0 ? x : alpha * x;
    if (name == "thresholdedrelu") return x > alpha ? x : 0;
    if (name == "scaledtanh") return alpha * std::tanh(beta * x);
    if (name == "hardsigmoid") return std::clamp(alpha * x + beta, 0.0, 1.0);
    if (name == "elu") return x >= 0 ? x : alpha * (std::exp(x) - 1);
    if (name == "softsign") return x / (1 + std::fabs(x));
    return std::log1p(std::exp(x));  // softplus
  }
};

// Default (alpha, beta) of the activations that take them; false for unknown names.
bool activation_defaults(const std::string& name, bool* uses_alpha, bool* uses_beta,
                         double* alpha, double* beta) {
  *uses_alpha = *uses_beta = false;
  *alpha = *beta = 0;
  if (name == "sigmoid" || name == "tanh" || name == "relu" || name == "softsign" ||
      name == "softplus")
    return true;
  *uses_alpha = true;
  if (name == "leakyrelu") { *alpha = 0.01; return true; }
  if (name == "thresholdedrelu" || name == "elu") { *alpha = 1.0; return true; }
  *uses_beta = true;
  if (name == "affine" || name == "scaledtanh") {
    *alpha = 1.0;
    *beta = name == "affine" ? 0 : 1;
    return true;
  }
  if (name == "hardsigmoid") { *alpha = 0.2; *beta = 0.5; return true; }
  return false;
}

// Reads `activations` with their alpha/beta, which are consumed in order by the
// activations that take them. Returns per_direction * dirs entries.
Status read_activations(KernelContext& ctx, CellKind kind, int64_t dirs,
                        std::vector<Activation>* out) {
  std::vector<std::string> defaults;
  if (kind == CellKind::kRnn) defaults = {"Tanh"};
  else if (kind == CellKind::kGru) defaults = {"Sigmoid", "Tanh"};
  else defaults = {"Sigmoid", "Tanh", "Tanh"};
  const size_t per_dir = defaults.size();
  PG_ASSIGN_OR_RETURN(std::vector<std::string> names, ctx.attrs().get_strings("activations"));
  PG_ASSIGN_OR_RETURN(std::vector<float> alphas, ctx.attrs().get_floats("activation_alpha"));
  PG_ASSIGN_OR_RETURN(std::vector<float> betas, ctx.attrs().get_floats("activation_beta"));
  if (names.empty()) {
    for (int64_t d = 0; d < dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  } else if (names.size() == per_dir && dirs == 2) {
    std::vector<std::string> twice = names;
    names.insert(names.end(), twice.begin(), twice.end());
  }
  if (names.size() != per_dir * static_cast<size_t>(dirs))
    return ctx.error("'activations' has " + std::to_string(names.size()) + " names, expected " +
                     std::to_string(per_dir * static_cast<size_t>(dirs)));
  size_t next_alpha = 0, next_beta = 0;
  out->clear();
  for (std::string name : names) {
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    Activation a{name};
    bool uses_alpha, uses_beta;
    if (!activation_defaults(name, &uses_alpha, &uses_beta, &a.alpha, &a.beta))
      return ctx.error("activation '" + name + "' is not supported");
    if (uses_alpha && next_alpha < alphas.size()) a.alpha = alphas[next_alpha++];
    if (uses_beta && next_beta < betas.size()) a.beta = betas[next_beta++];
    out->push_back(a);
  }
  return Status::ok();
}

// Checks that an optional input has exactly the given shape.
Status check_shape(KernelContext& ctx, size_t i, const Shape& expected) {
  if (ctx.input(i).shape() != expected)
    return ctx.error("input '" + ctx.node().inputs[i] + "' has shape " +
                     shape_to_string(ctx.input(i).shape()) + ", expected " +
                     shape_to_string(expected));
  return Status::ok();
}

// The attributes of an RNN / GRU / LSTM node.
struct RecurrentAttributes {
  std::string direction;
  int64_t dirs = 1;
  int64_t layout = 0;
  std::vector<Activation> acts;  // per direction, in order
  bool has_clip = false;
  double clip = 0;
  bool linear_before_reset = false;  // GRU
  bool input_forget = false;         // LSTM
};

Status read_recurrent_attributes(KernelContext& ctx, CellKind kind, RecurrentAttributes* out) {
  const auto& attrs = ctx.attrs();
  PG_ASSIGN_OR_RETURN(out->direction, attrs.get_string("direction", "forward"));
  out->dirs = out->direction == "bidirectional" ? 2 : 1;
  if (ctx.opset() >= 14) {
    PG_ASSIGN_OR_RETURN(out->layout, attrs.get_int("layout", 0));
  }
  PG_RETURN_IF_ERROR(read_activations(ctx, kind, out->dirs, &out->acts));
  out->has_clip = attrs.has("clip");
  PG_ASSIGN_OR_RETURN(float clip, attrs.get_float("clip", 0.0f));
  out->clip = clip;
  if (out->has_clip && !(out->clip > 0)) return ctx.error("clip must be positive");
  if (kind == CellKind::kGru) {
    PG_ASSIGN_OR_RETURN(int64_t v, attrs.get_int("linear_before_reset", 0));
    out->linear_before_reset = v != 0;
  }
  if (kind == CellKind::kLstm) {
    PG_ASSIGN_OR_RETURN(int64_t v, attrs.get_int("input_forget", 0));
    out->input_forget = v != 0;
  }
  return Status::ok();
}

// One direction's cell: its activations, recurrent weights and bias, peepholes (LSTM).
struct Cell {
  CellKind kind;
  const RecurrentAttributes* attrs;
  const Activation* act;
  int64_t hidden;
  const double* rd;  // R of this direction (gates * hidden, hidden)
  const double* rb;  // R's bias
  const double* pd;  // peepholes i, o, f, or nullptr
};

// One step: the new h (and c for LSTM) from gx = W x + Wb and gh = R h + Rb.
void cell_step(const Cell& cell, const std::vector<double>& gx, const std::vector<double>& gh,
               std::vector<double>& h, std::vector<double>& c) {
  const size_t hs = static_cast<size_t>(cell.hidden);
  const Activation* act = cell.act;
  const RecurrentAttributes& a = *cell.attrs;
  auto clipped = [&](double v) { return a.has_clip ? std::clamp(v, -a.clip, a.clip) : v; };
  std::vector<double> next_h(hs);
  if (cell.kind == CellKind::kRnn) {
    for (size_t j = 0; j < hs; ++j) next_h[j] = act[0](clipped(gx[j] + gh[j]));
  } else if (cell.kind == CellKind::kGru) {
    // Gate rows: z, r, h.
    std::vector<double> reset(hs);
    for (size_t j = 0; j < hs; ++j) reset[j] = act[0](clipped(gx[hs + j] + gh[hs + j]));
    for (size_t j = 0; j < hs; ++j) {
      double z = act[0](clipped(gx[j] + gh[j]));
      double pre;
      if (a.linear_before_reset) {
        pre = gx[2 * hs + j] + reset[j] * gh[2 * hs + j];
      } else {
        // (r ⊙ h) R_h + Rb_h
        const double* rh = cell.rd + static_cast<int64_t>(2 * hs + j) * cell.hidden;
        double acc = cell.rb[2 * hs + j];
        for (size_t k = 0; k < hs; ++k) acc += rh[k] * reset[k] * h[k];
        pre = gx[2 * hs + j] + acc;
      }
      double candidate = act[1](clipped(pre));
      next_h[j] = (1 - z) * candidate + z * h[j];
    }
  } else {
    // Gate rows: i, o, f, c; peepholes: i, o, f.
    const double* pd = cell.pd;
    for (size_t j = 0; j < hs; ++j) {
      double pi = pd ? pd[j] : 0, po = pd ? pd[hs + j] : 0, pf = pd ? pd[2 * hs + j] : 0;
      double i_gate = act[0](clipped(gx[j] + gh[j] + pi * c[j]));
      double f_gate = act[0](clipped(gx[2 * hs + j] + gh[2 * hs + j] + pf * c[j]));
      if (a.input_forget) f_gate = 1 - i_gate;
      double cand = act[1](clipped(gx[3 * hs + j] + gh[3 * hs + j]));
      double new_c = f_gate * c[j] + i_gate * cand;
      double o_gate = act[0](clipped(gx[hs + j] + gh[hs + j] + po * new_c));
      c[j] = new_c;
      next_h[j] = o_gate * act[2](new_c);
    }
  }
  h = std::move(next_h);
}

Status recurrent_kernel(KernelContext& ctx, CellKind kind) {
  const int64_t gates = kind == CellKind::kRnn ? 1 : kind == CellKind::kGru ? 3 : 4;
  const auto& attrs = ctx.attrs();
  RecurrentAttributes ra;
  PG_RETURN_IF_ERROR(read_recurrent_attributes(ctx, kind, &ra));
  const int64_t dirs = ra.dirs, layout = ra.layout;
  const size_t acts_per_dir = ra.acts.size() / static_cast<size_t>(dirs);

  const Tensor& x_t = ctx.input(0);
  const Tensor& w_t = ctx.input(1);
  const Tensor& r_t = ctx.input(2);
  if (x_t.rank() != 3 || w_t.rank() != 3 || r_t.rank() != 3)
    return ctx.error("'X', 'W' and 'R' must be 3-D");
  const int64_t seq = x_t.dim(layout == 0 ? 0 : 1);
  const int64_t batch = x_t.dim(layout == 0 ? 1 : 0);
  const int64_t input = x_t.dim(2);
  const int64_t hidden = r_t.dim(2);
  PG_RETURN_IF_ERROR(check_shape(ctx, 1, {dirs, gates * hidden, input}));
  PG_RETURN_IF_ERROR(check_shape(ctx, 2, {dirs, gates * hidden, hidden}));
  if (attrs.has("hidden_size")) {
    PG_ASSIGN_OR_RETURN(int64_t hidden_attr, attrs.get_int("hidden_size"));
    if (hidden_attr != hidden) return ctx.error("hidden_size differs from the shape of 'R'");
  }
  const Shape state_shape = layout == 0 ? Shape{dirs, batch, hidden} : Shape{batch, dirs, hidden};
  const bool has_bias = ctx.has_input(3);
  const bool has_lens = ctx.has_input(4);
  const bool has_init_h = ctx.has_input(5);
  const bool has_init_c = kind == CellKind::kLstm && ctx.has_input(6);
  const bool has_peep = kind == CellKind::kLstm && ctx.has_input(7);
  if (has_bias) PG_RETURN_IF_ERROR(check_shape(ctx, 3, {dirs, 2 * gates * hidden}));
  if (has_lens) PG_RETURN_IF_ERROR(check_shape(ctx, 4, {batch}));
  if (has_init_h) PG_RETURN_IF_ERROR(check_shape(ctx, 5, state_shape));
  if (has_init_c) PG_RETURN_IF_ERROR(check_shape(ctx, 6, state_shape));
  if (has_peep) PG_RETURN_IF_ERROR(check_shape(ctx, 7, {dirs, 3 * hidden}));
  std::vector<int64_t> lens(static_cast<size_t>(batch), seq);
  if (has_lens) {
    lens = ctx.input(4).to_int64_vector();
    for (int64_t l : lens)
      if (l < 0 || l > seq) return ctx.error("sequence_lens value " + std::to_string(l) +
                                             " is outside [0, " + std::to_string(seq) + "]");
  }

  const std::vector<double> x = to_doubles(x_t), w = to_doubles(w_t), r = to_doubles(r_t);
  const std::vector<double> bias =
      has_bias ? to_doubles(ctx.input(3))
               : std::vector<double>(static_cast<size_t>(dirs * 2 * gates * hidden), 0.0);
  const std::vector<double> init_h = has_init_h ? to_doubles(ctx.input(5)) : std::vector<double>();
  const std::vector<double> init_c = has_init_c ? to_doubles(ctx.input(6)) : std::vector<double>();
  const std::vector<double> peep = has_peep ? to_doubles(ctx.input(7)) : std::vector<double>();

  // Flat offsets in the layout-dependent tensors.
  auto x_at = [&](int64_t t, int64_t b) {
    return static_cast<size_t>((layout == 0 ? t * batch + b : b * seq + t) * input);
  };
  auto y_at = [&](int64_t t, int64_t d, int64_t b) {
    return static_cast<size_t>(
        (layout == 0 ? (t * dirs + d) * batch + b : (b * seq + t) * dirs + d) * hidden);
  };
  auto state_at = [&](int64_t d, int64_t b) {
    return static_cast<size_t>((layout == 0 ? d * batch + b : b * dirs + d) * hidden);
  };

  std::vector<double> y(static_cast<size_t>(seq * dirs * batch * hidden), 0.0);
  std::vector<double> y_h(static_cast<size_t>(dirs * batch * hidden), 0.0);
  std::vector<double> y_c(y_h.size(), 0.0);
  const size_t hs = static_cast<size_t>(hidden);
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = ra.direction == "reverse" || d == 1;
    const double* wd = &w[static_cast<size_t>(d * gates * hidden * input)];
    const double* wb = &bias[static_cast<size_t>(d * 2 * gates * hidden)];
    const Cell cell{kind,
                    &ra,
                    &ra.acts[static_cast<size_t>(d) * acts_per_dir],
                    hidden,
                    &r[static_cast<size_t>(d * gates * hidden * hidden)],
                    wb + gates * hidden,
                    has_peep ? &peep[static_cast<size_t>(d * 3 * hidden)] : nullptr};
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<double> h(hs, 0.0), c(hs, 0.0);
      if (has_init_h) std::copy_n(&init_h[state_at(d, b)], hs, h.begin());
      if (has_init_c) std::copy_n(&init_c[state_at(d, b)], hs, c.begin());
      const int64_t len = lens[static_cast<size_t>(b)];
      std::vector<double> gx(static_cast<size_t>(gates * hidden)), gh(gx.size());
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = reverse ? len - 1 - step : step;
        const double* xt = &x[x_at(t, b)];
        // gx = W x + Wb, gh = R h + Rb, per gate row.
        for (int64_t row = 0; row < gates * hidden; ++row) {
          double ax = wb[row], ah = cell.rb[row];
          for (int64_t k = 0; k < input; ++k) ax += wd[row * input + k] * xt[k];
          for (int64_t k = 0; k < hidden; ++k)
            ah += cell.rd[row * hidden + k] * h[static_cast<size_t>(k)];
          gx[static_cast<size_t>(row)] = ax;
          gh[static_cast<size_t>(row)] = ah;
        }
        cell_step(cell, gx, gh, h, c);
        std::copy(h.begin(), h.end(), &y[y_at(t, d, b)]);
      }
      std::copy(h.begin(), h.end(), &y_h[state_at(d, b)]);
      std::copy(c.begin(), c.end(), &y_c[state_at(d, b)]);
    }
  }

  if (ctx.wants_output(0)) PG_RETURN_IF_ERROR(store_doubles(y, ctx.output(0)));
  if (ctx.num_outputs() > 1 && ctx.wants_output(1))
    PG_RETURN_IF_ERROR(store_doubles(y_h, ctx.output(1)));
  if (kind == CellKind::kLstm && ctx.num_outputs() > 2 && ctx.wants_output(2))
    PG_RETURN_IF_ERROR(store_doubles(y_c, ctx.output(2)));
  return Status::ok();
}

}  // namespace

void register_rnn_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "RNN", [](KernelContext& c) { return recurrent_kernel(c, CellKind::kRnn); });
  r.add(kOnnxDomain, "GRU", [](KernelContext& c) { return recurrent_kernel(c, CellKind::kGru); });
  r.add(kOnnxDomain, "LSTM", [](KernelContext& c) { return recurrent_kernel(c, CellKind::kLstm); });
}

}  // namespace peregrine
