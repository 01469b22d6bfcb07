// Reference kernels of the loss family: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"

namespace peregrine {

namespace {

// Negative log-likelihood over log-probabilities `log_prob` laid out [N, C, D] (D the product
// of the spatial dims), written to `out` as [N, D] or a scalar.
Status nll_loss(KernelContext& ctx, const std::vector<double>& log_prob, int64_t n, int64_t c,
                int64_t d, const Tensor& target, Tensor& out) {
  PG_ASSIGN_OR_RETURN(std::string reduction, ctx.attrs().get_string("reduction", "mean"));
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return ctx.error("attribute 'reduction' is '" + reduction + "', expected none, sum or mean");
  std::optional<int64_t> ignore_index;
  if (ctx.attrs().has("ignore_index")) {
    PG_ASSIGN_OR_RETURN(int64_t ii, ctx.attrs().get_int("ignore_index"));
    ignore_index = ii;
  }
  std::vector<double> weight;
  if (ctx.has_input(2)) {
    const Tensor& w = ctx.input(2);
    if (w.numel() != c)
      return ctx.error("input 'weight' has " + std::to_string(w.numel()) + " elements, expected " +
                       std::to_string(c));
    for (int64_t i = 0; i < c; ++i) weight.push_back(w.get_as_double(i));
  }
  std::vector<double> losses(static_cast<size_t>(n * d));
  double loss_sum = 0, weight_sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      int64_t cls = target.get_as_int64(i * d + j);
      double loss = 0;
      if (!ignore_index.has_value() || cls != *ignore_index) {
        if (cls < 0 || cls >= c)
          return ctx.error("target " + std::to_string(cls) + " is outside [0, " +
                           std::to_string(c) + ") and is not ignore_index");
        double w = weight.empty() ? 1.0 : weight[static_cast<size_t>(cls)];
        loss = -log_prob[static_cast<size_t>((i * c + cls) * d + j)] * w;
        weight_sum += w;
      }
      losses[static_cast<size_t>(i * d + j)] = loss;
      loss_sum += loss;
    }
  }
  return visit_float(out.dtype(), [&]<typename T>() {
    T* y = out.data<T>();
    if (reduction == "none") {
      for (size_t k = 0; k < losses.size(); ++k) y[k] = static_cast<T>(losses[k]);
    } else if (reduction == "sum") {
      y[0] = static_cast<T>(loss_sum);
    } else {
      y[0] = static_cast<T>(loss_sum / weight_sum);  // all ignored: 0/0 = NaN, like onnx
    }
  });
}

// Dims of scores [N, C, d1..dk] as N, C and D = d1*...*dk; checks the target's shape.
Status loss_dims(KernelContext& ctx, int64_t& n, int64_t& c, int64_t& d) {
  const Tensor& scores = ctx.input(0);
  const Tensor& target = ctx.input(1);
  if (scores.rank() < 2) return ctx.error("input 0 must have rank >= 2 ([N, C, ...])");
  n = scores.dim(0);
  c = scores.dim(1);
  d = 1;
  for (int64_t k = 2; k < scores.rank(); ++k) d *= scores.dim(k);
  bool match = target.rank() + 1 == scores.rank();
  for (int64_t k = 0; match && k < target.rank(); ++k)
    match = target.dim(k) == scores.dim(k == 0 ? 0 : k + 1);
  if (!match)
    return ctx.error("target shape " + shape_to_string(target.shape()) +
                     " does not match scores shape " + shape_to_string(scores.shape()));
  return Status::ok();
}

Status nll_kernel(KernelContext& ctx) {
  int64_t n, c, d;
  PG_RETURN_IF_ERROR(loss_dims(ctx, n, c, d));
  const Tensor& scores = ctx.input(0);
  std::vector<double> log_prob(static_cast<size_t>(scores.numel()));
  for (int64_t k = 0; k < scores.numel(); ++k)
    log_prob[static_cast<size_t>(k)] = scores.get_as_double(k);
  return nll_loss(ctx, log_prob, n, c, d, ctx.input(1), ctx.output(0));
}

Status sce_kernel(KernelContext& ctx) {
  int64_t n, c, d;
  PG_RETURN_IF_ERROR(loss_dims(ctx, n, c, d));
  const Tensor& scores = ctx.input(0);
  // log_softmax over the class axis, kept in double.
  std::vector<double> log_prob(static_cast<size_t>(scores.numel()));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      auto at = [&](int64_t cls) { return (i * c + cls) * d + j; };
      double peak = -std::numeric_limits<double>::infinity();
      for (int64_t cls = 0; cls < c; ++cls) peak = std::max(peak, scores.get_as_double(at(cls)));
      double sum = 0;
      for (int64_t cls = 0; cls < c; ++cls) sum += std::exp(scores.get_as_double(at(cls)) - peak);
      double log_sum = std::log(sum);
      for (int64_t cls = 0; cls < c; ++cls)
        log_prob[static_cast<size_t>(at(cls))] = scores.get_as_double(at(cls)) - peak - log_sum;
    }
  }
  PG_RETURN_IF_ERROR(nll_loss(ctx, log_prob, n, c, d, ctx.input(1), ctx.output(0)));
  if (ctx.wants_output(1)) {
    Tensor& out = ctx.output(1);
    return visit_float(out.dtype(), [&]<typename T>() {
      T* y = out.data<T>();
      for (size_t k = 0; k < log_prob.size(); ++k) y[k] = static_cast<T>(log_prob[k]);
    });
  }
  return Status::ok();
}

}  // namespace

void register_loss_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "NegativeLogLikelihoodLoss", nll_kernel);
  r.add(kOnnxDomain, "SoftmaxCrossEntropyLoss", sce_kernel);
}

}  // namespace peregrine
