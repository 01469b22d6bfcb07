// Reference kernels of the generator family. Values come from a 64-bit Mersenne
// Twister seeded by the 'seed' attribute when given (the same values every run) and
// from std::random_device otherwise. The distributions are computed here rather than
// with <random>'s, whose algorithms differ between standard libraries.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

namespace {

class RandomSource {
 public:
  explicit RandomSource(uint64_t seed) : engine_(seed) {}

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Standard normal by the Box-Muller transform.
  double normal() {
    double u1 = 1.0 - uniform();  // (0, 1]: log is finite
    double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }

 private:
  std::mt19937_64 engine_;
};

// The generator for this node: seeded from the 'seed' attribute or nondeterministically.
Expected<RandomSource> make_source(KernelContext& ctx) {
  if (ctx.attrs().has("seed")) {
    PG_ASSIGN_OR_RETURN(float seed, ctx.attrs().get_float("seed"));
    if (!std::isfinite(seed)) return ctx.error("attribute 'seed' is not finite");
    // The float's bits, so seeds like 1.5 and 1.0 differ.
    return RandomSource(static_cast<uint64_t>(float_bits(seed)));
  }
  std::random_device device;
  return RandomSource((static_cast<uint64_t>(device()) << 32) ^ device());
}

// Fills output 0 (a float tensor) with draw() for every element.
template <typename Draw>
Status fill_output(KernelContext& ctx, Draw draw) {
  Tensor& out = ctx.output(0);
  return visit_float(out.dtype(), [&]<typename T>() {
    T* p = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) p[i] = static_cast<T>(draw());
  });
}

Status random_normal_kernel(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(float mean, ctx.attrs().get_float("mean", 0.0f));
  PG_ASSIGN_OR_RETURN(float scale, ctx.attrs().get_float("scale", 1.0f));
  PG_ASSIGN_OR_RETURN(RandomSource source, make_source(ctx));
  return fill_output(ctx, [&] { return mean + scale * source.normal(); });
}

Status random_uniform_kernel(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(float low, ctx.attrs().get_float("low", 0.0f));
  PG_ASSIGN_OR_RETURN(float high, ctx.attrs().get_float("high", 1.0f));
  if (!(low <= high)) return ctx.error("attribute 'low' must not exceed 'high'");
  PG_ASSIGN_OR_RETURN(RandomSource source, make_source(ctx));
  return fill_output(ctx, [&] { return low + (high - low) * source.uniform(); });
}

Status multinomial_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) return ctx.error("input must be 2-D (batch, classes)");
  PG_ASSIGN_OR_RETURN(RandomSource source, make_source(ctx));
  int64_t batch = x.dim(0), classes = x.dim(1);
  Tensor& out = ctx.output(0);
  int64_t samples = out.dim(1);
  if (classes == 0 && samples > 0) return ctx.error("cannot sample from zero classes");
  std::vector<double> logits(static_cast<size_t>(x.numel()));
  PG_RETURN_IF_ERROR(visit_float(x.dtype(), [&]<typename T>() {
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) logits[i] = static_cast<double>(p[i]);
  }));
  std::vector<int64_t> drawn(static_cast<size_t>(out.numel()));
  std::vector<double> cumulative(static_cast<size_t>(classes));
  for (int64_t b = 0; b < batch; ++b) {
    // Unnormalized log-probabilities: softmax weights, shifted by the max for range.
    double max_logit = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < classes; ++c) max_logit = std::max(max_logit, logits[b * classes + c]);
    double total = 0;
    for (int64_t c = 0; c < classes; ++c) {
      double w = std::isfinite(max_logit) ? std::exp(logits[b * classes + c] - max_logit) : 1.0;
      total += std::isnan(w) ? 0 : w;
      cumulative[c] = total;
    }
    for (int64_t s = 0; s < samples; ++s) {
      double u = source.uniform() * total;
      int64_t pick = classes - 1;
      for (int64_t c = 0; c < classes; ++c)
        if (u < cumulative[c]) {
          pick = c;
          break;
        }
      drawn[b * samples + s] = pick;
    }
  }
  if (out.dtype() == DType::kInt32) {
    int32_t* o = out.data<int32_t>();
    for (int64_t i = 0; i < out.numel(); ++i) o[i] = static_cast<int32_t>(drawn[i]);
  } else {
    for (int64_t i = 0; i < out.numel(); ++i) out.data<int64_t>()[i] = drawn[i];
  }
  return Status::ok();
}

Status bernoulli_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  PG_ASSIGN_OR_RETURN(RandomSource source, make_source(ctx));
  std::vector<double> probs(static_cast<size_t>(x.numel()));
  PG_RETURN_IF_ERROR(visit_float(x.dtype(), [&]<typename T>() {
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) probs[i] = static_cast<double>(p[i]);
  }));
  for (double p : probs)
    if (!(p >= 0 && p <= 1))
      return ctx.error("probability " + std::to_string(p) + " is not in [0, 1]");
  Tensor& out = ctx.output(0);
  return visit_numeric_or_bool(out.dtype(), [&]<typename T>() {
    T* o = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i)
      o[i] = source.uniform() < probs[i] ? static_cast<T>(1.0f) : static_cast<T>(0.0f);
  });
}

}  // namespace

void register_generator_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "RandomNormal", random_normal_kernel);
  r.add(kOnnxDomain, "RandomUniform", random_uniform_kernel);
  r.add(kOnnxDomain, "RandomNormalLike", random_normal_kernel);
  r.add(kOnnxDomain, "RandomUniformLike", random_uniform_kernel);
  r.add(kOnnxDomain, "Multinomial", multinomial_kernel);
  r.add(kOnnxDomain, "Bernoulli", bernoulli_kernel);
}

}  // namespace peregrine
