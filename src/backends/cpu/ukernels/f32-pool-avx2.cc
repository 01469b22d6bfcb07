// Pooling rows, strided row copies and plane reductions, AVX2. A pooling row combines one
// kernel tap into a row of accumulators: acc[j] = max(acc[j], x[j * stride]) or acc[j] +=
// x[j * stride]; a copy row (im2col of a strided conv) sets acc[j] = x[j * stride].
//   stride 1: 8 contiguous floats per step.
//   stride 2: 16 contiguous floats per step, the even ones picked by shuffle + permute; the
//             vector loop stops while 16 reads stay within x[0 .. 2 (n - 1)] (no over-read).
//   other strides and tails: element by element.
// Contract: ukernels/f32_vector_ukernels.h.
#include <immintrin.h>

#include <algorithm>
#include <limits>

#include "backends/cpu/ukernels/f32_vector_ukernels.h"
#include "backends/cpu/ukernels/f32_vmask_avx2.h"
#include "backends/cpu/ukernels/f32_vreduce_avx2.h"

namespace peregrine::cpu::avx2 {

namespace {

// The even elements of the 16 floats lo, hi: lo[0], lo[2], ..., hi[6].
inline __m256 even_lanes(__m256 lo, __m256 hi) {
  // Per 128-bit lane: lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6; then 64-bit pairs 0 2 1 3.
  const __m256 t = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

// The odd elements of the 16 floats lo, hi: lo[1], lo[3], ..., hi[7].
inline __m256 odd_lanes(__m256 lo, __m256 hi) {
  const __m256 t = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

// x[0], x[2], ..., x[14] of 16 contiguous floats.
inline __m256 load_even(const float* x) {
  return even_lanes(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8));
}

// What a row does with each element it reads: pooling combines it into acc, an im2col row
// of a strided conv copies it.
enum class RowOp { kMax, kAdd, kCopy };

template <RowOp kOp>
inline void update(float* acc, __m256 v) {
  if constexpr (kOp == RowOp::kCopy)
    _mm256_storeu_ps(acc, v);
  else if constexpr (kOp == RowOp::kMax)
    _mm256_storeu_ps(acc, _mm256_max_ps(_mm256_loadu_ps(acc), v));
  else
    _mm256_storeu_ps(acc, _mm256_add_ps(_mm256_loadu_ps(acc), v));
}

template <RowOp kOp>
inline void update_masked(float* acc, __m256i m, __m256 v) {
  if constexpr (kOp == RowOp::kMax)
    _mm256_maskstore_ps(acc, m, _mm256_max_ps(_mm256_maskload_ps(acc, m), v));
  else
    _mm256_maskstore_ps(acc, m, _mm256_add_ps(_mm256_maskload_ps(acc, m), v));
}

template <RowOp kOp>
void pool_row(const float* x, size_t stride, float* acc, size_t n) {
  size_t j = 0;
  if (stride == 1) {
    for (; j + 8 <= n; j += 8) update<kOp>(acc + j, _mm256_loadu_ps(x + j));
  } else if (stride == 2) {
    for (; j + 9 <= n; j += 8)  // reads x[2j .. 2j + 15] <= x[2 (n - 1)]
      update<kOp>(acc + j, load_even(x + 2 * j));
    // A copy's tail goes element by element: a masked store is slow on AMD, and without a
    // read of acc a masked load buys nothing (the 3x3 / 2 convs of ResNet-50, 7-28 wide rows,
    // were slower with it).
    if (kOp != RowOp::kCopy && j < n) {
      // The last r <= 8 outputs need x[2j .. 2j + 2r - 2]: masked loads stop there (an
      // element-by-element tail was 1 in 7 outputs of a 56-wide pooling row).
      const int64_t r = static_cast<int64_t>(n - j), reads = 2 * r - 1;
      const __m256 even =
          even_lanes(_mm256_maskload_ps(x + 2 * j, tail_mask(std::min<int64_t>(reads, 8))),
                     _mm256_maskload_ps(x + 2 * j + 8, tail_mask(std::max<int64_t>(reads - 8, 0))));
      if (r == 8)
        update<kOp>(acc + j, even);
      else
        update_masked<kOp>(acc + j, tail_mask(r), even);
      return;
    }
  }
  for (; j < n; ++j) {
    const float v = x[j * stride];
    acc[j] = kOp == RowOp::kCopy ? v : kOp == RowOp::kMax ? std::max(acc[j], v) : acc[j] + v;
  }
}

}  // namespace

void f32_max_row__avx2(const float* x, size_t stride, float* acc, size_t n) {
  pool_row<RowOp::kMax>(x, stride, acc, n);
}
void f32_add_row__avx2(const float* x, size_t stride, float* acc, size_t n) {
  pool_row<RowOp::kAdd>(x, stride, acc, n);
}
void f32_copy_row__avx2(const float* x, size_t stride, float* y, size_t n) {
  pool_row<RowOp::kCopy>(x, stride, y, n);
}
constexpr size_t kPrefetchRowsMinWidth = 64;

void f32_max_pool_3x3s2__avx2(const float* x, size_t in_h, size_t in_w, size_t pad_t, size_t pad_l,
                              float* y, size_t out_h, size_t out_w, float* row) {
  // rows[r][i] = vertical max at input column i - pad_l of an output row's three input rows,
  // -inf outside the row: output column ow's window is its elements 2 ow .. 2 ow + 2 (the even,
  // odd and next even ones). Narrow planes take every vertical row first, then every
  // horizontal one: read right after its stores, a short row's unaligned loads spanning two of
  // them could not be forwarded and waited for the stores to commit (most of the time of the
  // 35x35 and 17x17 pools of Inception-v3, bench/compare.py); wide rows are read long after
  // and stay one at a time (the buffer then stays in L1: ResNet-50's 112x112 stem pool).
  constexpr size_t kAllRowsMaxWidth = 24;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const size_t len = max_pool_3x3s2_scratch_floats(in_w, 1);
  const size_t block = in_w <= kAllRowsMaxWidth ? out_h : 1;  // output rows per pass
  std::fill(row, row + len * block, kNegInf);
  for (size_t oh0 = 0; oh0 < out_h; oh0 += block) {
    const size_t oh1 = std::min(out_h, oh0 + block);
    for (size_t oh = oh0; oh < oh1; ++oh) {
      const float* rows[3];
      size_t count = 0;
      for (size_t ki = 0; ki < 3; ++ki) {
        const size_t ih = 2 * oh + ki;  // + pad_t offset: ih - pad_t is the input row
        if (ih >= pad_t && ih - pad_t < in_h) rows[count++] = x + (ih - pad_t) * in_w;
      }
      // The two input rows the next output row adds, requested now on wide planes: in a model
      // the plane was just written by the conv before it and comes from L3, and three row
      // streams per output row are more than the hardware prefetcher follows (Inception-v3's
      // and ResNet-50's stem pools in bench/compare.py; narrow planes, a few lines per row,
      // gained nothing).
      for (size_t ki = 3; ki < 5 && in_w >= kPrefetchRowsMinWidth; ++ki) {
        const size_t ih = 2 * oh + ki;
        if (ih < pad_t || ih - pad_t >= in_h) continue;
        const float* next = x + (ih - pad_t) * in_w;
        for (size_t c = 0; c < in_w; c += 16) __builtin_prefetch(next + c, 0, 3);
        __builtin_prefetch(next + in_w - 1, 0, 3);
      }
      float* v = row + (oh - oh0) * len + pad_l;
      size_t i = 0;
      for (; i + 8 <= in_w; i += 8) {
        __m256 m = _mm256_loadu_ps(rows[0] + i);
        for (size_t r = 1; r < count; ++r) m = _mm256_max_ps(m, _mm256_loadu_ps(rows[r] + i));
        _mm256_storeu_ps(v + i, m);
      }
      for (; i < in_w; ++i) {
        float m = rows[0][i];
        for (size_t r = 1; r < count; ++r) m = std::max(m, rows[r][i]);
        v[i] = m;
      }
    }
    for (size_t oh = oh0; oh < oh1; ++oh) {
      const float* h = row + (oh - oh0) * len;
      float* out = y + oh * out_w;
      size_t j = 0;
      // Reads h[2 j .. 2 j + 17]: within the row (len >= 2 out_w + 19 for out_w <= in_w / 2 + 1).
      for (; j + 8 <= out_w; j += 8) {
        const float* p = h + 2 * j;
        const __m256 m =
            _mm256_max_ps(_mm256_max_ps(load_even(p), load_even(p + 1)), load_even(p + 2));
        _mm256_storeu_ps(out + j, m);
      }
      for (; j < out_w; ++j) out[j] = std::max(std::max(h[2 * j], h[2 * j + 1]), h[2 * j + 2]);
    }
  }
}

void f32_pool_2x2s2__avx2(const float* x, size_t in_w, float* y, size_t out_h, size_t out_w,
                          bool max) {
  // Per output row: the two input rows combined, then each pair of columns; 8 outputs per step
  // from 16 columns of each row. The last outputs (fewer than 8) one by one: a masked store is
  // slow on AMD.
  const __m256 quarter = _mm256_set1_ps(0.25f);
  auto combine = [max](__m256 a, __m256 b) {
    return max ? _mm256_max_ps(a, b) : _mm256_add_ps(a, b);
  };
  for (size_t oh = 0; oh < out_h; ++oh) {
    const float* r0 = x + 2 * oh * in_w;
    const float* r1 = r0 + in_w;
    float* out = y + oh * out_w;
    size_t j = 0;
    for (; j + 8 <= out_w; j += 8) {
      const __m256 lo = combine(_mm256_loadu_ps(r0 + 2 * j), _mm256_loadu_ps(r1 + 2 * j));
      const __m256 hi = combine(_mm256_loadu_ps(r0 + 2 * j + 8), _mm256_loadu_ps(r1 + 2 * j + 8));
      __m256 v = combine(even_lanes(lo, hi), odd_lanes(lo, hi));
      if (!max) v = _mm256_mul_ps(v, quarter);
      _mm256_storeu_ps(out + j, v);
    }
    for (; j < out_w; ++j) {
      const float* a = r0 + 2 * j;
      const float* b = r1 + 2 * j;
      out[j] = max ? std::max(std::max(a[0], a[1]), std::max(b[0], b[1]))
                   : ((a[0] + a[1]) + (b[0] + b[1])) * 0.25f;
    }
  }
}

void f32_pool_s1__avx2(const float* x, size_t in_h, size_t in_w, size_t kh, size_t kw,
                       size_t pad_t, size_t pad_l, float* y, size_t out_h, size_t out_w, bool max,
                       float* row) {
  // row[c] = the rows' max / sum at input column c - pad_l, the identity outside the plane:
  // output column ow's window is row[ow .. ow + kw - 1].
  const float identity = max ? -std::numeric_limits<float>::infinity() : 0.0f;
  const size_t len = pool_s1_scratch_floats(out_w, kw);
  std::fill(row, row + len, identity);
  float* v = row + pad_l;
  auto combine = [max](__m256 a, __m256 b) {
    return max ? _mm256_max_ps(a, b) : _mm256_add_ps(a, b);
  };
  for (size_t oh = 0; oh < out_h; ++oh) {
    // Input rows [first, last) of this output row's window: oh - pad_t + ki, clipped.
    const size_t first = oh >= pad_t ? oh - pad_t : 0;
    const size_t last = std::min(in_h, oh + kh - pad_t);
    const float* top = x + first * in_w;
    size_t i = 0;
    for (; i + 8 <= in_w; i += 8) {
      __m256 m = _mm256_loadu_ps(top + i);
      for (size_t r = first + 1; r < last; ++r)
        m = combine(m, _mm256_loadu_ps(top + (r - first) * in_w + i));
      _mm256_storeu_ps(v + i, m);
    }
    if (i < in_w) {
      const __m256i mask = tail_mask(static_cast<int64_t>(in_w - i));
      __m256 m = _mm256_maskload_ps(top + i, mask);
      for (size_t r = first + 1; r < last; ++r)
        m = combine(m, _mm256_maskload_ps(top + (r - first) * in_w + i, mask));
      _mm256_maskstore_ps(v + i, mask, m);
    }
    float* out = y + oh * out_w;
    // Reads row[j .. j + 7 + kw - 1] < out_w + kw + 7 <= len.
    for (size_t j = 0; j < out_w; j += 8) {
      __m256 m = _mm256_loadu_ps(row + j);
      for (size_t kj = 1; kj < kw; ++kj) m = combine(m, _mm256_loadu_ps(row + j + kj));
      if (j + 8 <= out_w)
        _mm256_storeu_ps(out + j, m);
      else
        _mm256_maskstore_ps(out + j, tail_mask(static_cast<int64_t>(out_w - j)), m);
    }
  }
}

float f32_reduce_max__avx2(const float* x, size_t n) { return array_max(x, n); }
float f32_reduce_sum__avx2(const float* x, size_t n) { return array_sum(x, n); }

}  // namespace peregrine::cpu::avx2
