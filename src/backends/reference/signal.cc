// Reference kernels of the signal family. Transforms are the direct O(n^2) sums in
// double precision: slow but plainly correct.
#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

#include "backends/reference/kernel_helpers.h"
#include "backends/reference/kernel_list.h"
#include "core/checked_math.h"

namespace peregrine {

namespace {

using Complex = std::complex<double>;

// exp(sign * 2*pi*i * k / n), with k reduced mod n first so large products stay exact.
Complex twiddle(int64_t k, int64_t n, double sign) {
  const double angle = sign * 2.0 * std::numbers::pi * static_cast<double>(k % n) /
                       static_cast<double>(n);
  return {std::cos(angle), std::sin(angle)};
}

// out[f] = sum_k in[k] * exp(-+2*pi*i*f*k/n) for f < out.size(); `in` is zero-padded
// or truncated to n. The inverse also divides by n.
void dft_line(const std::vector<Complex>& in, int64_t n, bool inverse, std::vector<Complex>& out) {
  const double sign = inverse ? 1.0 : -1.0;
  const int64_t used = std::min<int64_t>(n, static_cast<int64_t>(in.size()));
  for (size_t f = 0; f < out.size(); ++f) {
    Complex sum = 0;
    for (int64_t k = 0; k < used; ++k)
      sum += in[k] * twiddle(static_cast<int64_t>(f) * k, n, sign);
    out[f] = inverse ? sum / static_cast<double>(n) : sum;
  }
}

// Allocates output i of a size computed from model data: an error, not an abort, when
// the size overflows or exceeds the tensor size limit.
Expected<Tensor*> allocate_checked(KernelContext& ctx, size_t i, DType dtype, const Shape& shape) {
  auto t = Tensor::make(dtype, shape);
  if (!t.is_ok()) return ctx.error("output " + std::to_string(i) + ": " + t.status().message());
  ctx.set_output(i, std::move(t).value());
  return &ctx.outputs()[i].tensor;
}

Expected<int64_t> scalar_int(const KernelContext& ctx, size_t i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1 || !dtype_is_integer(t.dtype()))
    return ctx.error(std::string(what) + " must be an integer scalar");
  return t.get_as_int64(0);
}

Status dft(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  PG_ASSIGN_OR_RETURN(int64_t inverse, ctx.attrs().get_int("inverse", 0));
  PG_ASSIGN_OR_RETURN(int64_t onesided, ctx.attrs().get_int("onesided", 0));
  int64_t axis;
  if (ctx.opset() >= 20) {
    axis = -2;
    if (ctx.has_input(2)) {
      PG_ASSIGN_OR_RETURN(axis, scalar_int(ctx, 2, "axis"));
    }
  } else {
    PG_ASSIGN_OR_RETURN(axis, ctx.attrs().get_int("axis", 1));
  }
  const int64_t rank = x.rank();
  if (rank < 2) return ctx.error("input must have rank >= 2");
  if (axis < -rank || axis >= rank)
    return ctx.error("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  if (axis == rank - 1) return ctx.error("axis must not be the last (complex) dim");
  const int64_t channels = x.shape().back();
  if (channels != 1 && channels != 2) return ctx.error("the last dim must be 1 or 2");
  const int64_t length = x.dim(axis);
  // inverse with onesided: an inverse real DFT (numpy's irfft). Bins 0 .. n / 2 of the input are
  // the spectrum's first half, the rest its conjugate mirror; the output is real (last dim 1).
  const bool real_inverse = inverse && onesided;
  int64_t n = real_inverse ? 2 * (length - 1) : length;
  if (ctx.has_input(1)) {
    PG_ASSIGN_OR_RETURN(n, scalar_int(ctx, 1, "dft_length"));
  }
  if (n < 1) return ctx.error("dft_length must be positive, got " + std::to_string(n));
  const int64_t out_len = onesided && !inverse ? n / 2 + 1 : n;
  const int64_t out_channels = real_inverse ? 1 : 2;
  Shape out_shape = x.shape();
  out_shape[axis] = out_len;
  out_shape.back() = out_channels;
  PG_ASSIGN_OR_RETURN(Tensor* out, allocate_checked(ctx, 0, x.dtype(), out_shape));
  Tensor& y = *out;
  // Lines along `axis`: outer dims before it, inner dims between it and the complex dim.
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int64_t i = axis + 1; i < rank - 1; ++i) inner *= x.dim(i);
  return visit_float(x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y.data<T>();
    std::vector<Complex> line(static_cast<size_t>(length));
    std::vector<Complex> result(static_cast<size_t>(out_len)), full;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t in = 0; in < inner; ++in) {
        for (int64_t k = 0; k < length; ++k) {
          const T* e = px + ((o * length + k) * inner + in) * channels;
          line[k] = {static_cast<double>(e[0]), channels == 2 ? static_cast<double>(e[1]) : 0.0};
        }
        if (real_inverse) {
          full.assign(static_cast<size_t>(n), Complex{});
          auto bin = [&](int64_t k) {
            return k < length ? line[static_cast<size_t>(k)] : Complex{};
          };
          for (int64_t k = 0; k <= n / 2; ++k) full[static_cast<size_t>(k)] = bin(k);
          for (int64_t k = n / 2 + 1; k < n; ++k)
            full[static_cast<size_t>(k)] = std::conj(bin(n - k));
          dft_line(full, n, true, result);
        } else {
          dft_line(line, n, inverse != 0, result);
        }
        for (int64_t f = 0; f < out_len; ++f) {
          T* e = py + ((o * out_len + f) * inner + in) * out_channels;
          e[0] = static_cast<T>(result[f].real());
          if (out_channels == 2) e[1] = static_cast<T>(result[f].imag());
        }
      }
    }
  });
}

Status stft(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  PG_ASSIGN_OR_RETURN(int64_t onesided, ctx.attrs().get_int("onesided", 1));
  if (x.rank() != 3) return ctx.error("signal must have rank 3 [batch, length, 1|2]");
  const int64_t batch = x.dim(0), length = x.dim(1), channels = x.dim(2);
  if (channels != 1 && channels != 2) return ctx.error("the last dim of the signal must be 1 or 2");
  PG_ASSIGN_OR_RETURN(int64_t step, scalar_int(ctx, 1, "frame_step"));
  if (step < 1) return ctx.error("frame_step must be positive");
  const bool has_window = ctx.has_input(2);
  int64_t frame_length = -1;
  if (ctx.has_input(3)) {
    PG_ASSIGN_OR_RETURN(frame_length, scalar_int(ctx, 3, "frame_length"));
  }
  if (has_window) {
    const Tensor& w = ctx.input(2);
    if (w.rank() != 1) return ctx.error("window must have rank 1");
    if (frame_length >= 0 && w.dim(0) != frame_length)
      return ctx.error("window length " + std::to_string(w.dim(0)) + " differs from frame_length " +
                       std::to_string(frame_length));
    frame_length = w.dim(0);
  }
  if (frame_length < 0) return ctx.error("needs a window or a frame_length");
  if (frame_length < 1 || frame_length > length)
    return ctx.error("frame_length " + std::to_string(frame_length) + " must be in [1, " +
                     std::to_string(length) + "]");
  const int64_t frames = 1 + (length - frame_length) / step;
  const int64_t bins = onesided ? frame_length / 2 + 1 : frame_length;
  PG_ASSIGN_OR_RETURN(Tensor* out, allocate_checked(ctx, 0, x.dtype(), {batch, frames, bins, 2}));
  Tensor& y = *out;
  std::vector<double> window(static_cast<size_t>(frame_length), 1.0);
  if (has_window) {
    const Tensor& w = ctx.input(2);
    for (int64_t k = 0; k < frame_length; ++k) window[k] = w.get_as_double(k);
  }
  return visit_float(x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y.data<T>();
    std::vector<Complex> frame(static_cast<size_t>(frame_length));
    std::vector<Complex> result(static_cast<size_t>(bins));
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t f = 0; f < frames; ++f) {
        for (int64_t k = 0; k < frame_length; ++k) {
          const T* e = px + (b * length + f * step + k) * channels;
          const double re = static_cast<double>(e[0]);
          const double im = channels == 2 ? static_cast<double>(e[1]) : 0.0;
          frame[k] = Complex(re, im) * window[k];
        }
        dft_line(frame, frame_length, false, result);
        for (int64_t k = 0; k < bins; ++k) {
          T* e = py + ((b * frames + f) * bins + k) * 2;
          e[0] = static_cast<T>(result[k].real());
          e[1] = static_cast<T>(result[k].imag());
        }
      }
    }
  });
}

enum class WindowKind { kHann, kHamming, kBlackman };

Status window(KernelContext& ctx, WindowKind kind) {
  PG_ASSIGN_OR_RETURN(int64_t size, scalar_int(ctx, 0, "size"));
  PG_ASSIGN_OR_RETURN(int64_t periodic, ctx.attrs().get_int("periodic", 1));
  if (size < 0) return ctx.error("size must not be negative");
  PG_ASSIGN_OR_RETURN(Tensor* out, allocate_checked(ctx, 0, ctx.output_type(0).dtype, {size}));
  Tensor& y = *out;
  // A periodic window is the first `size` points of a symmetric one of size + 1.
  const int64_t period = periodic ? size : size - 1;
  return visit_numeric(y.dtype(), [&]<typename T>() {
    T* py = y.data<T>();
    for (int64_t i = 0; i < size; ++i) {
      double v = 1.0;  // a symmetric window of one point
      if (period > 0) {
        const double phase = 2.0 * std::numbers::pi * static_cast<double>(i) /
                             static_cast<double>(period);
        switch (kind) {
          case WindowKind::kHann: v = 0.5 - 0.5 * std::cos(phase); break;
          case WindowKind::kHamming: {
            const double alpha = 25.0 / 46.0;
            v = alpha - (1.0 - alpha) * std::cos(phase);
            break;
          }
          case WindowKind::kBlackman:
            v = 0.42 - 0.5 * std::cos(phase) + 0.08 * std::cos(2.0 * phase);
            break;
        }
      }
      py[i] = static_cast<T>(v);
    }
  });
}

// Triangular filters evenly spaced on the mel scale, mapped to DFT bins.
Status mel_weight_matrix(KernelContext& ctx) {
  PG_ASSIGN_OR_RETURN(int64_t mel_bins, scalar_int(ctx, 0, "num_mel_bins"));
  PG_ASSIGN_OR_RETURN(int64_t dft_length, scalar_int(ctx, 1, "dft_length"));
  PG_ASSIGN_OR_RETURN(int64_t sample_rate, scalar_int(ctx, 2, "sample_rate"));
  if (ctx.input(3).numel() != 1 || ctx.input(4).numel() != 1)
    return ctx.error("lower_edge_hertz and upper_edge_hertz must be scalars");
  const double lower_hz = ctx.input(3).get_as_double(0);
  const double upper_hz = ctx.input(4).get_as_double(0);
  if (mel_bins < 1 || dft_length < 1 || sample_rate < 1)
    return ctx.error("num_mel_bins, dft_length and sample_rate must be positive");
  const int64_t spectrogram_bins = dft_length / 2 + 1;
  PG_ASSIGN_OR_RETURN(Tensor* out, allocate_checked(ctx, 0, ctx.output_type(0).dtype,
                                                    {spectrogram_bins, mel_bins}));
  Tensor& y = *out;
  auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double low_mel = to_mel(lower_hz);
  const double mel_step = (to_mel(upper_hz) - low_mel) / static_cast<double>(mel_bins + 2);
  // Edges of the filters as DFT bin numbers.
  std::vector<int64_t> edge(static_cast<size_t>(mel_bins + 2));
  for (int64_t i = 0; i < mel_bins + 2; ++i) {
    const double mel = static_cast<double>(i) * mel_step + low_mel;
    const double hz = 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
    edge[i] = static_cast<int64_t>(
        std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate)));
    if (edge[i] < 0 || edge[i] >= spectrogram_bins)
      return ctx.error("filter edge at bin " + std::to_string(edge[i]) + " is outside [0, " +
                       std::to_string(spectrogram_bins) + "); check the edge frequencies");
  }
  std::vector<double> w(static_cast<size_t>(spectrogram_bins * mel_bins), 0.0);
  for (int64_t i = 0; i < mel_bins; ++i) {
    const int64_t low = edge[i], center = edge[i + 1], high = edge[i + 2];
    if (center == low) {
      w[center * mel_bins + i] = 1.0;
    } else {
      for (int64_t j = low; j <= center; ++j)
        w[j * mel_bins + i] = static_cast<double>(j - low) / static_cast<double>(center - low);
    }
    for (int64_t j = center; j < high; ++j)
      w[j * mel_bins + i] = static_cast<double>(high - j) / static_cast<double>(high - center);
  }
  return visit_numeric(y.dtype(), [&]<typename T>() {
    T* py = y.data<T>();
    for (size_t i = 0; i < w.size(); ++i) py[i] = static_cast<T>(w[i]);
  });
}

}  // namespace

void register_signal_kernels(KernelRegistry& r) {
  r.add(kOnnxDomain, "DFT", dft);
  r.add(kOnnxDomain, "STFT", stft);
  r.add(kOnnxDomain, "HannWindow", [](KernelContext& c) { return window(c, WindowKind::kHann); });
  r.add(kOnnxDomain, "HammingWindow",
        [](KernelContext& c) { return window(c, WindowKind::kHamming); });
  r.add(kOnnxDomain, "BlackmanWindow",
        [](KernelContext& c) { return window(c, WindowKind::kBlackman); });
  r.add(kOnnxDomain, "MelWeightMatrix", mel_weight_matrix);
}

}  // namespace peregrine
