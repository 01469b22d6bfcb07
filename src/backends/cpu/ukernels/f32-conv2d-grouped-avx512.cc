// Grouped 2-D conv, direct, AVX-512 (contract and algorithm: ukernels/f32_conv2d_grouped_ukernels.h).
// Register tile: up to kChannels output channels x kRows output rows x 16 output columns.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "backends/cpu/ukernels/f32_conv2d_grouped_ukernels.h"

namespace peregrine::cpu::avx512 {

namespace {

constexpr int64_t kLanes = kGroupedConvLanes;
constexpr int kRows = 6;      // output rows per tile
constexpr int kChannels = 4;  // output channels per tile: 24 accumulators, 4 broadcasts, 1 load
constexpr int64_t kMaxTaps = 256;

inline __mmask16 lanes_between(int64_t lo, int64_t hi) {  // lanes [lo, hi) of 16, clamped
  lo = std::max<int64_t>(lo, 0);
  hi = std::min<int64_t>(hi, kLanes);
  if (hi <= lo) return 0;
  const uint32_t upto = hi >= 16 ? 0xFFFFu : (1u << hi) - 1u;
  return static_cast<__mmask16>(upto & ~((1u << lo) - 1u));
}

// Where chunk j (16 padded columns of each phase) of a padded row comes from: the input
// columns from iw0 on, and which of the 16 (stride 1) or 32 (stride 2, two loads) it reads.
struct ChunkSource {
  int64_t iw0;
  __mmask16 lo, hi;
};

// The band's padded, phase-split input rows of every channel of the group into scratch:
// (in_c_g, rows, stride_w phases, phase floats). The chunks' sources are the same for every
// row, so they are worked out once; stride 2 splits each 32-column window into both phases.
void fill(const GroupedConv2dGeometry &g, const GroupedConv2dBand &b, int64_t rows,
          int64_t phase, float *scratch) {
  const int64_t row_floats = g.stride_w * phase, chunks = phase / kLanes;
  constexpr int64_t kMaxChunks = 512;
  std::array<ChunkSource, kMaxChunks> src_of;
  const bool vector = (g.stride_w == 1 || g.stride_w == 2) && chunks <= kMaxChunks;
  if (vector)
    for (int64_t j = 0; j < chunks; ++j) {
      const int64_t iw0 = j * kLanes * g.stride_w - g.pad_l;
      src_of[static_cast<size_t>(j)] = {iw0, lanes_between(-iw0, g.in_w - iw0),
                                        lanes_between(-iw0 - kLanes, g.in_w - iw0 - kLanes)};
    }
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (int64_t c = 0; c < g.in_c_g; ++c) {
    const float *plane = b.input + c * g.in_h * g.in_w;
    for (int64_t r = 0; r < rows; ++r) {
      float *dst = scratch + (c * rows + r) * row_floats;
      const int64_t ih = b.oh_begin * g.stride_h + r - g.pad_t;
      if (ih < 0 || ih >= g.in_h) {
        for (int64_t j = 0; j < row_floats; j += kLanes) _mm512_store_ps(dst + j, _mm512_setzero_ps());
        continue;
      }
      const float *row = plane + ih * g.in_w;
      if (!vector) {
        for (int64_t p = 0; p < g.stride_w; ++p)
          for (int64_t j = 0; j < phase; ++j) {
            const int64_t iw = p + j * g.stride_w - g.pad_l;
            dst[p * phase + j] = iw >= 0 && iw < g.in_w ? row[iw] : 0.0f;
          }
        continue;
      }
      for (int64_t j = 0; j < chunks; ++j) {
        const ChunkSource &cs = src_of[static_cast<size_t>(j)];
        const __m512 lo = _mm512_maskz_loadu_ps(cs.lo, row + cs.iw0);
        if (g.stride_w == 1) {
          _mm512_store_ps(dst + j * kLanes, lo);
          continue;
        }
        const __m512 hi = _mm512_maskz_loadu_ps(cs.hi, row + cs.iw0 + kLanes);
        _mm512_store_ps(dst + j * kLanes, _mm512_permutex2var_ps(lo, evens, hi));
        _mm512_store_ps(dst + phase + j * kLanes, _mm512_permutex2var_ps(lo, odds, hi));
      }
    }
  }
}

// The row-pair layout (grouped_conv_pair_pitch): each channel's phase planes, rows `pitch`
// apart, zeros outside the plane, then zero slack. A plane row is one or two masked loads (the
// even and odd columns of a stride-2 row split with two permutes) and a 16-lane store; the lanes
// past the pitch are overwritten by the next row.
void fill_pairs(const GroupedConv2dGeometry &g, const GroupedConv2dBand &b, int64_t pitch,
                int64_t plane_floats, int64_t plane_rows, float *scratch) {
  const __mmask16 lo = lanes_between(g.pad_l, g.pad_l + g.in_w);
  const __mmask16 hi = lanes_between(g.pad_l - kLanes, g.pad_l + g.in_w - kLanes);
  const __m512i evens =
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  float *dst = scratch;
  for (int64_t c = 0; c < g.in_c_g; ++c) {
    const float *plane = b.input + c * g.in_h * g.in_w;
    for (int64_t a = 0; a < g.stride_h; ++a, dst += g.stride_w * plane_floats) {
      for (int64_t t = 0; t < plane_rows; ++t) {
        const int64_t ih = (b.oh_begin + t) * g.stride_h + a - g.pad_t;
        const bool in = ih >= 0 && ih < g.in_h;
        const float *row = plane + ih * g.in_w - g.pad_l;  // padded column 0
        const __m512 v0 = in ? _mm512_maskz_loadu_ps(lo, row) : _mm512_setzero_ps();
        if (g.stride_w == 1) {
          _mm512_storeu_ps(dst + t * pitch, v0);
          continue;
        }
        const __m512 v1 = in ? _mm512_maskz_loadu_ps(hi, row + kLanes) : _mm512_setzero_ps();
        _mm512_storeu_ps(dst + t * pitch, _mm512_permutex2var_ps(v0, evens, v1));
        _mm512_storeu_ps(dst + plane_floats + t * pitch, _mm512_permutex2var_ps(v0, odds, v1));
      }
      // The slack in whole vectors, the last one ending at the plane's end (it may overlap the
      // one before, never a row: plane_floats >= rows + a vector).
      for (int64_t p = 0; p < g.stride_w; ++p)
        for (int64_t i = plane_rows * pitch; i < plane_floats; i += kLanes)
          _mm512_storeu_ps(dst + p * plane_floats + std::min(i, plane_floats - kLanes),
                           _mm512_setzero_ps());
    }
  }
}

struct TileArgs {
  const float *in;       // scratch at channel 0, the tile's first padded row, its first column
  int64_t channel_floats;  // scratch floats per input channel
  int64_t row_step;      // scratch floats between the padded rows of consecutive output rows
  const int64_t *taps;   // scratch offset of each tap (ki, kj), ki-major
  int64_t num_taps, in_c_g;
  const float *w;        // weights of the tile's first output channel: (in_c_g, taps)
  int64_t w_channel;     // floats between consecutive output channels' weights
  float *y;              // output of the tile's first channel, first row, first column
  int64_t out_plane, out_w;  // out_w: floats between the outputs of consecutive tile rows
  __mmask16 store_mask;
  // Row pairs: each tile row's lanes [pitch, pitch + OW) are the next output row's pixels,
  // stored `second_shift` floats from the first row's; the last tile row's may be none.
  int64_t second_shift = 0;
  __mmask16 second_mask = 0, last_second_mask = 0;
};

// (C channels, R rows, 16 columns) of output: sum over input channels and taps.
template <int C, int R>
void tile(const TileArgs &a) {
  __m512 acc[C][R];
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) acc[c][r] = _mm512_setzero_ps();
  for (int64_t ic = 0; ic < a.in_c_g; ++ic) {
    const float *src = a.in + ic * a.channel_floats;
    const float *wk = a.w + ic * a.num_taps;
    for (int64_t t = 0; t < a.num_taps; ++t) {
      const float *s = src + a.taps[t];
      __m512 wv[C];
      for (int c = 0; c < C; ++c) wv[c] = _mm512_set1_ps(wk[c * a.w_channel + t]);
      for (int r = 0; r < R; ++r) {
        const __m512 x = _mm512_loadu_ps(s + r * a.row_step);
        for (int c = 0; c < C; ++c) acc[c][r] = _mm512_fmadd_ps(wv[c], x, acc[c][r]);
      }
    }
  }
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) {
      float *y = a.y + c * a.out_plane + r * a.out_w;
      _mm512_mask_storeu_ps(y, a.store_mask, acc[c][r]);
      const __mmask16 second = r == R - 1 ? a.last_second_mask : a.second_mask;
      if (second) _mm512_mask_storeu_ps(y + a.second_shift, second, acc[c][r]);
    }
}

using TileFn = void (*)(const TileArgs &);

template <int C, size_t... R>
constexpr std::array<TileFn, kRows> tiles_of(std::index_sequence<R...>) {
  return {&tile<C, static_cast<int>(R) + 1>...};
}

const std::array<std::array<TileFn, kRows>, kChannels> kTiles = {
    tiles_of<1>(std::make_index_sequence<kRows>{}), tiles_of<2>(std::make_index_sequence<kRows>{}),
    tiles_of<3>(std::make_index_sequence<kRows>{}), tiles_of<4>(std::make_index_sequence<kRows>{})};

}  // namespace

void f32_conv2d_grouped__avx512(const GroupedConv2dGeometry &g, const GroupedConv2dBand &b,
                                float *scratch) {
  const int64_t band = b.oh_end - b.oh_begin;
  if (band <= 0 || g.out_w <= 0) return;
  const int64_t pitch = grouped_conv_pair_pitch(g);  // 0: the phase-split layout
  const int64_t per_vector = pitch ? 2 : 1;          // output rows per tile row
  const int64_t phase = grouped_conv_phase_floats(g);
  const int64_t row_floats = g.stride_w * phase;  // of the phase-split layout
  const int64_t rows = grouped_conv_band_in_rows(g, band);
  TileArgs a;
  const int64_t plane_floats = pitch ? grouped_conv_pair_plane_floats(g, band) : 0;
  if (pitch) {
    a.channel_floats = grouped_conv_pair_channel_floats(g, band);
    fill_pairs(g, b, pitch, plane_floats, grouped_conv_pair_plane_rows(g, band), scratch);
  } else {
    a.channel_floats = rows * row_floats;
    fill(g, b, rows, phase, scratch);
  }

  std::array<int64_t, kMaxTaps> taps;
  const int64_t num_taps = g.kh * g.kw;
  for (int64_t ki = 0; ki < g.kh; ++ki)
    for (int64_t kj = 0; kj < g.kw; ++kj)
      taps[static_cast<size_t>(ki * g.kw + kj)] =
          pitch ? ((ki * g.dil_h) % g.stride_h * g.stride_w + (kj * g.dil_w) % g.stride_w) *
                          plane_floats +
                      ki * g.dil_h / g.stride_h * pitch + kj * g.dil_w / g.stride_w
                : ki * g.dil_h * row_floats + (kj * g.dil_w) % g.stride_w * phase +
                      kj * g.dil_w / g.stride_w;
  const int64_t out_plane = g.out_h * g.out_w;
  a.row_step = pitch ? 2 * pitch : g.stride_h * row_floats;  // per tile row
  a.taps = taps.data();
  a.num_taps = num_taps;
  a.in_c_g = g.in_c_g;
  a.w_channel = g.in_c_g * num_taps;
  a.out_plane = out_plane;
  a.out_w = per_vector * g.out_w;
  a.second_shift = g.out_w - pitch;
  for (int64_t c0 = 0; c0 < g.out_c_g; c0 += kChannels) {
    const int64_t nc = std::min<int64_t>(kChannels, g.out_c_g - c0);
    // Row tiles of even height (7 rows: 4 + 3, not 6 + 1): a short tile feeds few FMAs per
    // weight broadcast.
    const int64_t vector_rows = (band + per_vector - 1) / per_vector;
    const int64_t row_tiles = (vector_rows + kRows - 1) / kRows;
    for (int64_t vr = 0, tiles_left = row_tiles; vr < vector_rows; --tiles_left) {
      const int64_t nvr = (vector_rows - vr + tiles_left - 1) / tiles_left;
      const int64_t oh = b.oh_begin + vr * per_vector;
      const int64_t nr = std::min(nvr * per_vector, b.oh_end - oh);  // output rows
      const TileFn fn = kTiles[static_cast<size_t>(nc - 1)][static_cast<size_t>(nvr - 1)];
      if (pitch) {
        a.second_mask = lanes_between(pitch, pitch + g.out_w);
        a.last_second_mask = nr == nvr * 2 ? a.second_mask : 0;
      }
      for (int64_t ow = 0; ow < g.out_w; ow += kLanes) {
        a.in = scratch + vr * a.row_step + ow;
        a.w = b.weights + c0 * a.w_channel;
        a.y = b.output + c0 * out_plane + oh * g.out_w + ow;
        a.store_mask = lanes_between(0, g.out_w - ow);
        fn(a);
      }
      if (b.epilogue)
        for (int64_t c = c0; c < c0 + nc; ++c)
          b.epilogue(b.output + c * out_plane + oh * g.out_w, static_cast<size_t>(out_plane), 1,
                     static_cast<size_t>(nr * g.out_w), static_cast<size_t>(c),
                     static_cast<size_t>(oh * g.out_w), *b.epilogue_params);
      vr += nvr;
    }
  }
}

}  // namespace peregrine::cpu::avx512
