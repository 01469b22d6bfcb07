// Reference kernels of the normalization family. Statistics are computed in double
// (two passes: mean, then squared deviations) and results rounded once on store.
#include <cmath>
#include <string>
#include <vector>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

namespace {

struct Moments {
  double mean = 0;
  double var = 0;  // population variance
};

// Mean and variance of x[start + i * stride] for i in [0, count).
Moments moments(const std::vector<double>& x, int64_t start, int64_t count, int64_t stride) {
  Moments m;
  if (count == 0) return m;
  for (int64_t i = 0; i < count; ++i) m.mean += x[start + i * stride];
  m.mean /= static_cast<double>(count);
  for (int64_t i = 0; i < count; ++i) {
    double d = x[start + i * stride] - m.mean;
    m.var += d * d;
  }
  m.var /= static_cast<double>(count);
  return m;
}

// Reads input i as doubles, requiring `count` elements.
Expected<std::vector<double>> param(KernelContext& ctx, size_t i, int64_t count,
                                    const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != count)
    return ctx.error(std::string(what) + " has " + std::to_string(t.numel()) +
                     " elements, expected " + std::to_string(count));
  return to_doubles(t);
}

Status batch_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.error("input X must have rank >= 2");
  PG_ASSIGN_OR_RETURN(float epsilon, ctx.attrs().get_float("epsilon", 1e-5f));
  PG_ASSIGN_OR_RETURN(float momentum, ctx.attrs().get_float("momentum", 0.9f));
  PG_ASSIGN_OR_RETURN(int64_t spatial, ctx.attrs().get_int("spatial", 1));
  bool training;
  if (ctx.opset() >= 14) {
    PG_ASSIGN_OR_RETURN(int64_t mode, ctx.attrs().get_int("training_mode", 0));
    training = mode != 0;
  } else {
    // Older opsets: the statistics outputs are only produced in training.
    training = ctx.wants_output(1) || ctx.wants_output(2);
  }
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / std::max<int64_t>(1, n * c);
  // Per-channel statistics, or (opset < 9, spatial = 0) one per channel and position.
  bool per_channel = ctx.opset() >= 9 || spatial != 0;
  int64_t groups = per_channel ? c : c * inner;
  int64_t stat_inner = per_channel ? inner : 1;  // elements of one group per sample
  std::vector<double> xs = to_doubles(x);
  PG_ASSIGN_OR_RETURN(std::vector<double> scale, param(ctx, 1, groups, "scale"));
  PG_ASSIGN_OR_RETURN(std::vector<double> bias, param(ctx, 2, groups, "B"));
  PG_ASSIGN_OR_RETURN(std::vector<double> mean, param(ctx, 3, groups, "mean"));
  PG_ASSIGN_OR_RETURN(std::vector<double> var, param(ctx, 4, groups, "var"));

  // Element (b, g, s) of X, where g is the statistic's group and s its position in it.
  auto offset = [&](int64_t b, int64_t g, int64_t s) {
    return per_channel ? (b * c + g) * inner + s : b * c * inner + g;
  };
  std::vector<double> batch_mean = mean, batch_var = var;
  if (training) {
    for (int64_t g = 0; g < groups; ++g) {
      double sum = 0, count = static_cast<double>(n * stat_inner);
      for (int64_t b = 0; b < n; ++b)
        for (int64_t s = 0; s < stat_inner; ++s) sum += xs[offset(b, g, s)];
      double mu = count > 0 ? sum / count : 0, sq = 0;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t s = 0; s < stat_inner; ++s) {
          double d = xs[offset(b, g, s)] - mu;
          sq += d * d;
        }
      batch_mean[g] = mu;
      batch_var[g] = count > 0 ? sq / count : 0;
    }
  }
  std::vector<double> y(xs.size());
  for (int64_t g = 0; g < groups; ++g) {
    double inv_std = 1.0 / std::sqrt(batch_var[g] + static_cast<double>(epsilon));
    for (int64_t b = 0; b < n; ++b)
      for (int64_t s = 0; s < stat_inner; ++s) {
        int64_t o = offset(b, g, s);
        y[o] = (xs[o] - batch_mean[g]) * inv_std * scale[g] + bias[g];
      }
  }
  PG_RETURN_IF_ERROR(store_doubles(y, ctx.output(0)));

  // Running statistics blend the given ones with this batch's.
  std::vector<double> running_mean = mean, running_var = var;
  if (training)
    for (int64_t g = 0; g < groups; ++g) {
      running_mean[g] = mean[g] * momentum + batch_mean[g] * (1 - momentum);
      running_var[g] = var[g] * momentum + batch_var[g] * (1 - momentum);
    }
  const std::vector<double>* stats[] = {&running_mean, &running_var, &batch_mean, &batch_var};
  for (size_t i = 1; i < ctx.num_outputs() && i <= 4; ++i)
    if (ctx.wants_output(i)) PG_RETURN_IF_ERROR(store_doubles(*stats[i - 1], ctx.output(i)));
  return Status::ok();
}

Status instance_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3) return ctx.error("input must have rank >= 3");
  PG_ASSIGN_OR_RETURN(float epsilon, ctx.attrs().get_float("epsilon", 1e-5f));
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / std::max<int64_t>(1, n * c);
  std::vector<double> xs = to_doubles(x);
  PG_ASSIGN_OR_RETURN(std::vector<double> scale, param(ctx, 1, c, "scale"));
  PG_ASSIGN_OR_RETURN(std::vector<double> bias, param(ctx, 2, c, "B"));
  std::vector<double> y(xs.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      int64_t start = (b * c + ch) * inner;
      Moments m = moments(xs, start, inner, 1);
      double inv_std = 1.0 / std::sqrt(m.var + static_cast<double>(epsilon));
      for (int64_t s = 0; s < inner; ++s)
        y[start + s] = (xs[start + s] - m.mean) * inv_std * scale[ch] + bias[ch];
    }
  return store_doubles(y, ctx.output(0));
}

Status layer_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
  PG_ASSIGN_OR_RETURN(float epsilon, ctx.attrs().get_float("epsilon", 1e-5f));
  if (axis < -x.rank() || axis >= x.rank())
    return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(x.rank()));
  if (axis < 0) axis += x.rank();
  Shape normalized(x.shape().begin() + axis, x.shape().end());
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < x.rank(); ++d) (d < axis ? rows : cols) *= x.dim(d);

  // Scale and B broadcast (one way) to the normalized shape.
  auto broadcastable = [&](const Tensor& t) {
    if (t.rank() > static_cast<int64_t>(normalized.size())) return false;
    for (int64_t i = 0; i < t.rank(); ++i) {
      int64_t td = t.dim(t.rank() - 1 - i);
      if (td != 1 && td != normalized[normalized.size() - 1 - static_cast<size_t>(i)]) return false;
    }
    return true;
  };
  const Tensor& scale_t = ctx.input(1);
  if (!broadcastable(scale_t))
    return ctx.error("Scale of shape " + shape_to_string(scale_t.shape()) +
                     " does not broadcast to the normalized shape " + shape_to_string(normalized));
  bool has_bias = ctx.has_input(2);
  if (has_bias && !broadcastable(ctx.input(2)))
    return ctx.error("B of shape " + shape_to_string(ctx.input(2).shape()) +
                     " does not broadcast to the normalized shape " + shape_to_string(normalized));
  std::vector<double> xs = to_doubles(x);
  std::vector<double> scale = to_doubles(scale_t);
  std::vector<double> bias;
  if (has_bias) {
    bias = to_doubles(ctx.input(2));
  }
  BroadcastIndexer scale_index(scale_t.shape(), normalized);
  BroadcastIndexer bias_index(has_bias ? ctx.input(2).shape() : normalized, normalized);

  std::vector<double> y(xs.size()), means(static_cast<size_t>(rows)), inv_stds(means.size());
  for (int64_t r = 0; r < rows; ++r) {
    Moments m = moments(xs, r * cols, cols, 1);
    double inv_std = 1.0 / std::sqrt(m.var + static_cast<double>(epsilon));
    means[r] = m.mean;
    inv_stds[r] = inv_std;
    for (int64_t j = 0; j < cols; ++j) {
      double v = (xs[r * cols + j] - m.mean) * inv_std * scale[scale_index(j)];
      if (has_bias) v += bias[bias_index(j)];
      y[r * cols + j] = v;
    }
  }
  PG_RETURN_IF_ERROR(store_doubles(y, ctx.output(0)));
  if (ctx.wants_output(1)) PG_RETURN_IF_ERROR(store_doubles(means, ctx.output(1)));
  if (ctx.wants_output(2)) PG_RETURN_IF_ERROR(store_doubles(inv_stds, ctx.output(2)));
  return Status::ok();
}

Status group_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.error("input must have rank >= 2");
  PG_ASSIGN_OR_RETURN(float epsilon, ctx.attrs().get_float("epsilon", 1e-5f));
  PG_ASSIGN_OR_RETURN(int64_t groups, ctx.attrs().get_int("num_groups"));
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / std::max<int64_t>(1, n * c);
  if (groups <= 0 || c % groups != 0)
    return ctx.error("num_groups " + std::to_string(groups) + " does not divide channel count " +
                     std::to_string(c));
  int64_t per_group = c / groups;
  // Opset 18: one scale/bias per group; opset 21: one per channel.
  bool per_channel_params = ctx.opset() >= 21;
  int64_t params = per_channel_params ? c : groups;
  std::vector<double> xs = to_doubles(x);
  PG_ASSIGN_OR_RETURN(std::vector<double> scale, param(ctx, 1, params, "scale"));
  PG_ASSIGN_OR_RETURN(std::vector<double> bias, param(ctx, 2, params, "bias"));
  std::vector<double> y(xs.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t g = 0; g < groups; ++g) {
      int64_t start = (b * c + g * per_group) * inner, count = per_group * inner;
      Moments m = moments(xs, start, count, 1);
      double inv_std = 1.0 / std::sqrt(m.var + static_cast<double>(epsilon));
      for (int64_t e = 0; e < count; ++e) {
        int64_t p = per_channel_params ? g * per_group + e / inner : g;
        y[start + e] = (xs[start + e] - m.mean) * inv_std * scale[p] + bias[p];
      }
    }
  return store_doubles(y, ctx.output(0));
}

Status lp_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  PG_ASSIGN_OR_RETURN(int64_t p, ctx.attrs().get_int("p", 2));
  PG_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
  if (axis < 0) axis += x.rank();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const int64_t len = x.dim(axis);
  std::vector<double> v = to_doubles(x);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * len * inner + i;
      double sum = 0;
      for (int64_t k = 0; k < len; ++k) {
        const double e = v[static_cast<size_t>(base + k * inner)];
        sum += p == 1 ? std::fabs(e) : e * e;
      }
      const double norm = p == 1 ? sum : std::sqrt(sum);
      for (int64_t k = 0; k < len; ++k) {
        double& e = v[static_cast<size_t>(base + k * inner)];
        e = norm == 0 ? 0.0 : e / norm;
      }
    }
  return store_doubles(v, ctx.output(0));
}

Status lrn_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3) return ctx.error("input must have rank >= 3");
  PG_ASSIGN_OR_RETURN(int64_t size, ctx.attrs().get_int("size"));
  PG_ASSIGN_OR_RETURN(float alpha, ctx.attrs().get_float("alpha", 1e-4f));
  PG_ASSIGN_OR_RETURN(float beta, ctx.attrs().get_float("beta", 0.75f));
  PG_ASSIGN_OR_RETURN(float bias, ctx.attrs().get_float("bias", 1.0f));
  if (size <= 0) return ctx.error("attribute 'size' must be positive");
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / std::max<int64_t>(1, n * c);
  // The window over channels: floor((size-1)/2) before, ceil((size-1)/2) after.
  int64_t before = (size - 1) / 2, after = size - 1 - before;
  std::vector<double> xs = to_doubles(x);
  std::vector<double> y(xs.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t s = 0; s < inner; ++s) {
        double square_sum = 0;
        for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after); ++k) {
          double v = xs[(b * c + k) * inner + s];
          square_sum += v * v;
        }
        int64_t o = (b * c + ch) * inner + s;
        double denom = std::pow(static_cast<double>(bias) +
                                    static_cast<double>(alpha) / static_cast<double>(size) *
                                        square_sum,
                                static_cast<double>(beta));
        y[o] = xs[o] / denom;
      }
  return store_doubles(y, ctx.output(0));
}

Status mvn_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  PG_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.attrs().get_ints("axes", {0, 2, 3}));
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), false);
  for (int64_t a : axes) {
    if (a < -x.rank() || a >= x.rank())
      return ctx.error("axes entry " + std::to_string(a) + " is out of range for rank " +
                       std::to_string(x.rank()));
    reduced[static_cast<size_t>(a < 0 ? a + x.rank() : a)] = true;
  }
  // Each element's group: its coordinates on the axes that are kept.
  Shape kept_shape;
  for (int64_t d = 0; d < x.rank(); ++d)
    kept_shape.push_back(reduced[static_cast<size_t>(d)] ? 1 : x.dim(d));
  int64_t groups = 1;
  for (int64_t d : kept_shape) groups *= d;
  BroadcastIndexer group_of(kept_shape, x.shape());
  std::vector<double> xs = to_doubles(x);
  std::vector<double> sum(static_cast<size_t>(groups), 0), sq(sum.size(), 0), count(sum.size(), 0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    sum[group_of(i)] += xs[i];
    count[group_of(i)] += 1;
  }
  for (int64_t g = 0; g < groups; ++g) sum[g] = count[g] > 0 ? sum[g] / count[g] : 0;  // mean
  for (int64_t i = 0; i < x.numel(); ++i) {
    double d = xs[i] - sum[group_of(i)];
    sq[group_of(i)] += d * d;
  }
  std::vector<double> y(xs.size());
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t g = group_of(i);
    double std_dev = std::sqrt(count[g] > 0 ? sq[g] / count[g] : 0);
    y[i] = (xs[i] - sum[g]) / (std_dev + 1e-9);  // ONNX's function body adds 1e-9
  }
  return store_doubles(y, ctx.output(0));
}

}  // namespace

void register_normalization_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "BatchNormalization", batch_norm_kernel);
  r.add(kOnnxDomain, "InstanceNormalization", instance_norm_kernel);
  r.add(kOnnxDomain, "LayerNormalization", layer_norm_kernel);
  r.add(kOnnxDomain, "GroupNormalization", group_norm_kernel);
  r.add(kOnnxDomain, "LRN", lrn_kernel);
  r.add(kOnnxDomain, "LpNormalization", lp_norm_kernel);
  r.add(kOnnxDomain, "MeanVarianceNormalization", mvn_kernel);
}

}  // namespace peregrine
