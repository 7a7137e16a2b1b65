// CPU tactics of Resize (opsets 10 to 19+) and Upsample: every mode (nearest with each
// nearest_mode, linear, cubic, antialias, exclude_outside), every coordinate_transformation_mode,
// axes and keep_aspect_ratio_policy, as the reference (reference/ops_shape_resize.cc) computes
// them. The filter is the reference's own (reference/resize_filter.h): at prepare, the taps of
// every output coordinate of every axis (input indices and weights, weights of 0 dropped as the
// reference skips them) are tabulated once. scales / sizes (and roi for tf_crop_and_resize) must
// be constants.
//
// Axes whose taps are the identity (not resized, or resized onto themselves) are copied; the
// innermost resized axis q splits the output into rows (the output coordinates of the axes
// before q), each row out[q] * inner elements (inner: the elements of the axes after q).
//
// "copy": every tap is a single input index of weight 1 (nearest; linear / cubic landing on
//   input points; tf_crop_and_resize's extrapolation as a fill). The output is a gather of the
//   input: a row repeated from the row before is one memcpy of it, inner blocks are memcpy'd,
//   integer upsampling of the last axis replicates each element. Any type that survives the
//   reference's float64 round trip unchanged (floats, integers up to 32 bits).
// "separable": float32 / float64, any taps. Each input row needed is filtered along q once into a
//   float64 row (a small per-thread cache keeps it for the next output rows: 2-D bilinear reads
//   each input row for about two output rows), then the resized axes before q combine such rows
//   with their weights, outermost axis outermost (2-D bilinear: two rows straight into the output
//   row, with AVX2 where present). The arithmetic is the reference's, in float64,
//   term by term in its order, so the results are the reference's bit for bit (up to the sign of
//   a zero). That needs a * b + c rounded twice, as the reference does: the library's baseline
//   x86-64 flags have no FMA to contract it into (a build with -mfma would need -ffp-contract=off
//   here); tests/unit/resize_tactics_test.cc checks equality.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>

#include "kernels/elementwise/common.h"  // attr_*, parallel_for, threads_for, stream_cost_ns, make_kernel
#include "kernels/resize/resize_plan.h"
#include "reference/resize_filter.h"

namespace tac::kernels {

namespace {

using ir::OpKind;
using namespace ref::resize;  // Params, Tap, make_tap

constexpr size_t kMaxRank = 16;

// ---------------------------------------------------------------- the tap tables

// One axis: for output coordinate o, the taps idx[off[o] .. off[o+1]) with weights w (nonzero, in
// the reference's order), or, when extrap[o], the extrapolation value.
struct AxisTaps {
  int64_t in = 0, out = 0;
  std::vector<int64_t> off, idx;
  std::vector<double> w;
  std::vector<uint8_t> extrap;
  bool identity = true;  // out == in and output o is input o, weight 1
  bool single = true;    // every coordinate: one tap of weight 1, or extrapolated
  int64_t max_width = 0;
};

AxisTaps axis_taps(const ResizePlan& pl, size_t d, int64_t in) {
  AxisTaps a;
  a.in = in;
  a.out = pl.out[d];
  a.off.push_back(0);
  for (int64_t o = 0; o < a.out; ++o) {
    bool ex = false;
    if (!pl.resized[d]) {
      a.idx.push_back(o);
      a.w.push_back(1.0);
    } else {
      const Tap t = make_tap(pl.p, o, in, a.out, pl.scale[d], pl.roi_start[d], pl.roi_end[d]);
      ex = t.extrapolate;
      if (!ex)
        for (size_t k = 0; k < t.w.size(); ++k)
          if (t.w[k] != 0) {
            a.idx.push_back(t.idx[k]);
            a.w.push_back(t.w[k]);
          }
    }
    const int64_t n = static_cast<int64_t>(a.idx.size()) - a.off.back();
    a.off.push_back(static_cast<int64_t>(a.idx.size()));
    a.extrap.push_back(ex ? 1 : 0);
    a.max_width = std::max(a.max_width, n);
    if (ex) {
      a.identity = false;
      continue;
    }
    const bool one = n == 1 && a.w.back() == 1.0;
    if (!one) a.single = false;
    if (!one || a.idx.back() != o) a.identity = false;
  }
  if (a.out != a.in) a.identity = false;
  return a;
}

// The whole step: taps per axis and the row split (see the file comment).
struct Geom {
  Shape in, out;
  std::vector<AxisTaps> axes;
  int q = -1;                  // the innermost non-identity axis; -1: the step is a copy
  int64_t inner = 1;           // elements per block: the product of the dims after q
  int64_t rows = 1;            // output rows: the product of out[0 .. q)
  int64_t in_row_len = 1, out_row_len = 1;  // in[q] * inner, out[q] * inner (elements)
  std::vector<int64_t> in_row_stride;        // per axis d < q: input rows per step of coordinate d
  std::vector<int> outer_active;             // non-identity axes before q, outermost first
  double extrapolation = 0;
};

Result<Geom> make_geom(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(ResizePlan pl, resize_plan(s, kMaxRank));
  Geom g;
  g.in = s.in_shapes[0];
  g.out = pl.out;
  g.extrapolation = pl.p.extrapolation;
  const size_t r = g.in.size();
  for (size_t d = 0; d < r; ++d) g.axes.push_back(axis_taps(pl, d, g.in[d]));
  for (size_t d = 0; d < r; ++d)
    if (!g.axes[d].identity) g.q = static_cast<int>(d);
  if (g.q < 0) return g;
  const size_t q = static_cast<size_t>(g.q);
  for (size_t d = q + 1; d < r; ++d) g.inner *= g.in[d];
  g.in_row_len = g.in[q] * g.inner;
  g.out_row_len = g.out[q] * g.inner;
  g.in_row_stride.assign(q, 1);
  for (size_t d = q; d-- > 0;) {
    g.in_row_stride[d] = d + 1 < q ? g.in_row_stride[d + 1] * g.in[d + 1] : 1;
  }
  for (size_t d = 0; d < q; ++d) {
    g.rows *= g.out[d];
    if (!g.axes[d].identity) g.outer_active.push_back(static_cast<int>(d));
  }
  return g;
}

// Odometer over the output coordinates of the axes before q, starting at row `b`.
struct RowCursor {
  std::array<int64_t, kMaxRank> c{};
  const Geom* g;
  RowCursor(const Geom& geom, int64_t b) : g(&geom) {
    for (size_t d = static_cast<size_t>(g->q); d-- > 0;) {
      c[d] = b % g->out[d];
      b /= g->out[d];
    }
  }
  void next() {
    for (size_t d = static_cast<size_t>(g->q); d-- > 0;) {
      if (++c[d] < g->out[d]) return;
      c[d] = 0;
    }
  }
};

// Data types whose values the reference's float64 round trip leaves as they are.
bool exact_in_double(DType t) {
  switch (t) {
    case DType::float32: case DType::float64: case DType::float16: case DType::bfloat16:
    case DType::int8: case DType::uint8: case DType::int16: case DType::uint16: case DType::int32: case DType::uint32:
      return true;
    default:
      return false;
  }
}

// ---------------------------------------------------------------- "copy"

// y[2i] = y[2i+1] = x[i], n elements of x, elements of E bytes (SSE2).
template <size_t E>
void replicate2(const char* x, char* y, int64_t n) {
  int64_t i = 0;
  constexpr int64_t per = static_cast<int64_t>(16 / E);
  for (; i + per <= n; i += per) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i * E));
    __m128i lo, hi;
    if constexpr (E == 1) lo = _mm_unpacklo_epi8(v, v), hi = _mm_unpackhi_epi8(v, v);
    else if constexpr (E == 2) lo = _mm_unpacklo_epi16(v, v), hi = _mm_unpackhi_epi16(v, v);
    else if constexpr (E == 4) lo = _mm_unpacklo_epi32(v, v), hi = _mm_unpackhi_epi32(v, v);
    else lo = _mm_unpacklo_epi64(v, v), hi = _mm_unpackhi_epi64(v, v);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 2 * i * E), lo);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 2 * i * E + 16), hi);
  }
  for (; i < n; ++i) {
    std::memcpy(y + 2 * i * E, x + i * E, E);
    std::memcpy(y + (2 * i + 1) * E, x + i * E, E);
  }
}

template <size_t E> struct Word;
template <> struct Word<1> { using type = uint8_t; };
template <> struct Word<2> { using type = uint16_t; };
template <> struct Word<4> { using type = uint32_t; };
template <> struct Word<8> { using type = uint64_t; };

// The copy kernel for elements of E bytes.
template <size_t E>
struct CopyResize {
  using U = typename Word<E>::type;
  Geom g;
  U fill{};                                  // the extrapolation value in the output type
  std::vector<std::vector<int64_t>> row_src;  // per axis d < q: input coordinate * in_row_stride[d], or -1
  std::vector<int64_t> col_src;              // per output coordinate of q: input coordinate, or -1
  int64_t rep = 0;                           // q is the last axis, out[q] = rep * in[q], col_src[j] = j / rep
  int threads = 1;
  int64_t total = 0;

  void fill_n(U* y, int64_t n) const { std::fill_n(y, n, fill); }

  void gather_row(const U* x, U* y) const {
    const int64_t inner = g.inner, n = g.out[static_cast<size_t>(g.q)];
    if (inner == 1) {
      if (rep == 2) return replicate2<E>(reinterpret_cast<const char*>(x), reinterpret_cast<char*>(y), g.in_row_len);
      if (rep > 2) {
        for (int64_t i = 0; i < g.in_row_len; ++i) std::fill_n(y + i * rep, rep, x[i]);
        return;
      }
      for (int64_t j = 0; j < n; ++j) {
        const int64_t c = col_src[static_cast<size_t>(j)];
        y[j] = c < 0 ? fill : x[c];
      }
      return;
    }
    // Blocks of `inner` elements; consecutive source blocks as one memcpy.
    int64_t j = 0;
    while (j < n) {
      const int64_t c = col_src[static_cast<size_t>(j)];
      int64_t k = j + 1;
      if (c < 0) {
        while (k < n && col_src[static_cast<size_t>(k)] < 0) ++k;
        fill_n(y + j * inner, (k - j) * inner);
      } else {
        while (k < n && col_src[static_cast<size_t>(k)] == c + (k - j)) ++k;
        std::memcpy(y + j * inner, x + c * inner, static_cast<size_t>((k - j) * inner) * E);
      }
      j = k;
    }
  }

  Status run(const TensorView& in, const TensorView& out) const {
    const U* x = static_cast<const U*>(in.data);
    U* y = static_cast<U*>(out.data);
    if (total == 0) return Status::ok();
    if (g.q < 0) {
      ew::parallel_for(total, 1, total * static_cast<int64_t>(E) >= (int64_t{1} << 20) ? threads : 1, [&](int64_t b, int64_t e) {
        std::memcpy(y + b, x + b, static_cast<size_t>(e - b) * E);
      }, 16);
      return Status::ok();
    }
    const size_t q = static_cast<size_t>(g.q);
    const int64_t L = g.out_row_len;
    // Work per row: its elements written and (about) as many read; copy_cost counts the same.
    ew::parallel_for(g.rows, 2 * L, threads, [&](int64_t b, int64_t e) {
      RowCursor cur(g, b);
      int64_t prev = -2;  // source row of the row before (-1: filled), when in this chunk
      for (int64_t r = b; r < e; ++r, cur.next()) {
        int64_t src = 0;
        for (size_t d = 0; d < q; ++d) {
          const int64_t v = row_src[d][static_cast<size_t>(cur.c[d])];
          if (v < 0) {
            src = -1;
            break;
          }
          src += v;
        }
        U* yr = y + r * L;
        if (src == prev) std::memcpy(yr, yr - L, static_cast<size_t>(L) * E);
        else if (src < 0) fill_n(yr, L);
        else gather_row(x + src * g.in_row_len, yr);
        prev = src;
      }
    });
    return Status::ok();
  }
};

Status copy_applies(const StepDesc& s) {
  if (s.has_input(0) && !exact_in_double(s.in_dtypes[0])) return not_applicable("floats and integers up to 32 bits");
  TAC_ASSIGN_OR_RETURN(Geom g, make_geom(s));
  for (const AxisTaps& a : g.axes)
    if (!a.single) return not_applicable("an output element mixes input elements (not a gather)");
  return Status::ok();
}

template <size_t E>
Result<std::unique_ptr<Kernel>> copy_prepare_e(const StepDesc& s, Geom g) {
  auto k = std::make_shared<CopyResize<E>>();
  Tensor f = Tensor::create(s.in_dtypes[0], {}).value();
  std::memset(f.raw(), 0, f.bytes());
  f.set_f64(0, g.extrapolation);
  std::memcpy(&k->fill, f.raw(), E);
  k->threads = s.threads;
  k->total = shape_numel(g.out);
  if (g.q >= 0) {
    const size_t q = static_cast<size_t>(g.q);
    for (size_t d = 0; d < q; ++d) {
      const AxisTaps& a = g.axes[d];
      std::vector<int64_t> v(static_cast<size_t>(a.out));
      for (int64_t o = 0; o < a.out; ++o)
        v[static_cast<size_t>(o)] = a.extrap[static_cast<size_t>(o)] ? -1 : a.idx[static_cast<size_t>(a.off[static_cast<size_t>(o)])] * g.in_row_stride[d];
      k->row_src.push_back(std::move(v));
    }
    const AxisTaps& a = g.axes[q];
    for (int64_t o = 0; o < a.out; ++o)
      k->col_src.push_back(a.extrap[static_cast<size_t>(o)] ? -1 : a.idx[static_cast<size_t>(a.off[static_cast<size_t>(o)])]);
    if (g.inner == 1 && a.in > 0 && a.out % a.in == 0 && a.out > a.in) {
      const int64_t rep = a.out / a.in;
      bool ok = true;
      for (int64_t o = 0; o < a.out && ok; ++o) ok = k->col_src[static_cast<size_t>(o)] == o / rep;
      if (ok) k->rep = rep;
    }
  }
  k->g = std::move(g);
  return ew::make_kernel([k](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
    return k->run(in[0], out[0]);
  });
}

Result<std::unique_ptr<Kernel>> copy_prepare(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(copy_applies(s));
  TAC_ASSIGN_OR_RETURN(Geom g, make_geom(s));
  switch (dtype_size(s.in_dtypes[0])) {
    case 1: return copy_prepare_e<1>(s, std::move(g));
    case 2: return copy_prepare_e<2>(s, std::move(g));
    case 4: return copy_prepare_e<4>(s, std::move(g));
    default: return copy_prepare_e<8>(s, std::move(g));
  }
}

// Memory-bound: each output element written once, each input element read about once (a row
// repeated from the one before is read from cache); a small cost per output row.
double copy_cost(const StepDesc& s) {
  const double e = static_cast<double>(std::max<size_t>(1, dtype_size(s.in_dtypes[0])));
  const int64_t n_in = std::max<int64_t>(0, shape_numel(s.in_shapes[0])), n_out = std::max<int64_t>(0, shape_numel(s.out_shapes[0]));
  const double bytes = e * static_cast<double>(std::min(n_in, n_out) + n_out);
  const Shape& o = s.out_shapes[0];
  const double rows = o.empty() ? 1.0 : static_cast<double>(n_out) / static_cast<double>(std::max<int64_t>(1, o.back()));
  return ew::stream_cost_ns(bytes, 5.0 * rows + 0.25 * static_cast<double>(n_out), s.threads, 2 * n_out);
}

// ---------------------------------------------------------------- "separable"

// y[i] = T(w0 v0[i] + w1 v1[i]): two products rounded, then their sum, then the conversion, as the
// reference computes it. AVX2 without FMA: nothing to contract the product and sum into.
template <class T>
void combine2_plain(const double* v0, const double* v1, double w0, double w1, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(w0 * v0[i] + w1 * v1[i]);
}
__attribute__((target("avx2"))) void combine2_avx2(const double* v0, const double* v1, double w0, double w1, float* y, int64_t n) {
  const __m256d a = _mm256_set1_pd(w0), b = _mm256_set1_pd(w1);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d s = _mm256_add_pd(_mm256_mul_pd(a, _mm256_loadu_pd(v0 + i)), _mm256_mul_pd(b, _mm256_loadu_pd(v1 + i)));
    _mm_storeu_ps(y + i, _mm256_cvtpd_ps(s));
  }
  for (; i < n; ++i) y[i] = static_cast<float>(w0 * v0[i] + w1 * v1[i]);
}
template <class T>
void combine2(const double* v0, const double* v1, double w0, double w1, T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    static const bool avx2 = cpu_features().avx2_fma;
    if (avx2) return combine2_avx2(v0, v1, w0, w1, y, n);
  }
  combine2_plain(v0, v1, w0, w1, y, n);
}

template <class T>
struct SeparableResize {
  Geom g;
  int nt = 1;                   // threads the rows are split over (1: none launched)
  int64_t slots = 1;            // cached filtered rows per thread
  size_t per_thread = 0;        // doubles of workspace per thread
  std::vector<double> erow, zrow;  // a row of the extrapolation value, a row of zeros (out_row_len)
  std::vector<bool> active;        // per axis before q: resized (in g.outer_active)
  // Axis q as fixed-width taps when every coordinate has 1 to 4 (linear and cubic without
  // antialias): `width` per coordinate, the nonzero taps first, then taps of weight 0 whose terms
  // are left out (the reference skips them: no 0 * inf). Empty otherwise.
  int width = 0;
  std::vector<int64_t> fidx;
  std::vector<double> fw;

  void make_fixed() {
    const AxisTaps& a = g.axes[static_cast<size_t>(g.q)];
    if (a.max_width > 4 || a.max_width < 1) return;
    const int64_t W = a.max_width;
    for (int64_t j = 0; j < a.out; ++j) {
      const size_t o = static_cast<size_t>(j);
      const int64_t k0 = a.off[o], n = a.off[o + 1] - k0;
      if (a.extrap[o] || n == 0) {
        fidx.clear(), fw.clear();
        return;
      }
      for (int64_t k = 0; k < W; ++k) {
        fidx.push_back(a.idx[static_cast<size_t>(k0 + std::min(k, n - 1))]);
        fw.push_back(k < n ? a.w[static_cast<size_t>(k0 + k)] : 0.0);
      }
    }
    width = static_cast<int>(W);
  }

  // (((0 + t0) + t1) + ...) over the nonzero taps, as the reference sums them; a term of weight 0
  // adds 0, which leaves the sum as it is.
  template <int W, class D>
  void filter_fixed(const T* xr, D* h, int64_t n) const {
    const int64_t* ix = fidx.data();
    const double* w = fw.data();
    for (int64_t j = 0; j < n; ++j, ix += W, w += W) {
      double sum = w[0] * static_cast<double>(xr[ix[0]]);
      for (int k = 1; k < W; ++k) {
        const double t = w[k] * static_cast<double>(xr[ix[k]]);
        sum += w[k] != 0 ? t : 0.0;
      }
      h[j] = static_cast<D>(sum);
    }
  }

  // Filters input row `xr` along q into `h` (out_row_len values, as D).
  template <class D>
  void filter_row(const T* xr, D* h) const {
    const AxisTaps& a = g.axes[static_cast<size_t>(g.q)];
    const int64_t inner = g.inner;
    if (inner == 1 && width > 0) {
      switch (width) {
        case 1: return filter_fixed<1>(xr, h, a.out);
        case 2: return filter_fixed<2>(xr, h, a.out);
        case 3: return filter_fixed<3>(xr, h, a.out);
        default: return filter_fixed<4>(xr, h, a.out);
      }
    }
    if (inner == 1) {
      for (int64_t j = 0; j < a.out; ++j) {
        if (a.extrap[static_cast<size_t>(j)]) {
          h[j] = static_cast<D>(g.extrapolation);
          continue;
        }
        double sum = 0;
        for (int64_t k = a.off[static_cast<size_t>(j)]; k < a.off[static_cast<size_t>(j) + 1]; ++k)
          sum += a.w[static_cast<size_t>(k)] * static_cast<double>(xr[a.idx[static_cast<size_t>(k)]]);
        h[j] = static_cast<D>(sum);
      }
      return;
    }
    for (int64_t j = 0; j < a.out; ++j) {
      D* hj = h + j * inner;
      const int64_t k0 = a.off[static_cast<size_t>(j)], k1 = a.off[static_cast<size_t>(j) + 1];
      if (a.extrap[static_cast<size_t>(j)] || k0 == k1) {
        std::fill_n(hj, inner, static_cast<D>(a.extrap[static_cast<size_t>(j)] ? g.extrapolation : 0.0));
        continue;
      }
      if constexpr (std::is_same_v<D, double>) {
        const T* x0 = xr + a.idx[static_cast<size_t>(k0)] * inner;
        const double w0 = a.w[static_cast<size_t>(k0)];
        for (int64_t i = 0; i < inner; ++i) hj[i] = w0 * static_cast<double>(x0[i]);
        for (int64_t k = k0 + 1; k < k1; ++k) {
          const T* xk = xr + a.idx[static_cast<size_t>(k)] * inner;
          const double wk = a.w[static_cast<size_t>(k)];
          for (int64_t i = 0; i < inner; ++i) hj[i] += wk * static_cast<double>(xk[i]);
        }
      } else {
        for (int64_t i = 0; i < inner; ++i) {
          double sum = 0;
          for (int64_t k = k0; k < k1; ++k) sum += a.w[static_cast<size_t>(k)] * static_cast<double>(xr[a.idx[static_cast<size_t>(k)] * inner + i]);
          hj[i] = static_cast<D>(sum);
        }
      }
    }
  }

  // One thread's scratch: `slots` filtered rows with their input row tags, and one accumulator
  // row per resized axis before q.
  struct Scratch {
    double* cache;
    double* acc;
    std::array<int64_t, 64> tag;
    std::array<uint64_t, 64> used;
    uint64_t clock = 0;
  };

  const double* filtered(const T* x, int64_t in_row, Scratch& sc) const {
    const int64_t L = g.out_row_len;
    int64_t victim = 0;
    for (int64_t k = 0; k < slots; ++k) {
      if (sc.tag[static_cast<size_t>(k)] == in_row) {
        sc.used[static_cast<size_t>(k)] = ++sc.clock;
        return sc.cache + k * L;
      }
      if (sc.used[static_cast<size_t>(k)] < sc.used[static_cast<size_t>(victim)]) victim = k;
    }
    double* h = sc.cache + victim * L;
    filter_row<double>(x + in_row * g.in_row_len, h);
    sc.tag[static_cast<size_t>(victim)] = in_row;
    sc.used[static_cast<size_t>(victim)] = ++sc.clock;
    return h;
  }

  // The value of the output row at cursor `c` below level j (axes outer_active[j..]), for the
  // input row `base` so far: the reference's nested sum, one level per resized axis.
  const double* level(const T* x, size_t j, int64_t base, const RowCursor& c, Scratch& sc) const {
    if (j == g.outer_active.size()) return filtered(x, base, sc);
    const size_t d = static_cast<size_t>(g.outer_active[j]);
    const AxisTaps& a = g.axes[d];
    const size_t o = static_cast<size_t>(c.c[d]);
    if (a.extrap[o]) return erow.data();
    const int64_t k0 = a.off[o], k1 = a.off[o + 1];
    if (k0 == k1) return zrow.data();
    const int64_t stride = g.in_row_stride[d];
    if (k1 - k0 == 1 && a.w[static_cast<size_t>(k0)] == 1.0) return level(x, j + 1, base + a.idx[static_cast<size_t>(k0)] * stride, c, sc);
    const int64_t L = g.out_row_len;
    double* acc = sc.acc + static_cast<int64_t>(j) * L;
    for (int64_t k = k0; k < k1; ++k) {
      const double* v = level(x, j + 1, base + a.idx[static_cast<size_t>(k)] * stride, c, sc);
      const double w = a.w[static_cast<size_t>(k)];
      if (k == k0)
        for (int64_t i = 0; i < L; ++i) acc[i] = w * v[i];
      else
        for (int64_t i = 0; i < L; ++i) acc[i] += w * v[i];
    }
    return acc;
  }

  void run_rows(const T* x, T* y, int64_t b, int64_t e, double* ws) const {
    const size_t q = static_cast<size_t>(g.q);
    const int64_t L = g.out_row_len;
    RowCursor cur(g, b);
    if (g.outer_active.empty()) {  // q alone is resized: each output row is its input row filtered
      for (int64_t r = b; r < e; ++r, cur.next()) {
        int64_t src = 0;
        for (size_t d = 0; d < q; ++d) src += cur.c[d] * g.in_row_stride[d];
        filter_row<T>(x + src * g.in_row_len, y + r * L);
      }
      return;
    }
    Scratch sc;
    sc.cache = ws;
    sc.acc = ws + slots * L;
    sc.tag.fill(-1);
    sc.used.fill(0);
    const size_t d0 = static_cast<size_t>(g.outer_active[0]);
    const AxisTaps& a = g.axes[d0];
    const int64_t st = g.in_row_stride[d0];
    // One resized axis before q (2-D resizing of the last two axes): two taps combine straight into
    // the output. Both rows are cache slots; the second's lookup evicts the least recently used
    // slot, never the first's (slots >= 2).
    const bool fuse2 = g.outer_active.size() == 1 && slots >= 2;
    for (int64_t r = b; r < e; ++r, cur.next()) {
      int64_t base = 0;  // the input row of the identity axes
      for (size_t d = 0; d < q; ++d)
        if (!active[d]) base += cur.c[d] * g.in_row_stride[d];
      T* yr = y + r * L;
      const size_t o = static_cast<size_t>(cur.c[d0]);
      const int64_t k0 = a.off[o];
      if (fuse2 && !a.extrap[o] && a.off[o + 1] - k0 == 2) {
        const double w0 = a.w[static_cast<size_t>(k0)], w1 = a.w[static_cast<size_t>(k0) + 1];
        const double* v0 = filtered(x, base + a.idx[static_cast<size_t>(k0)] * st, sc);
        const double* v1 = filtered(x, base + a.idx[static_cast<size_t>(k0) + 1] * st, sc);
        combine2(v0, v1, w0, w1, yr, L);
        continue;
      }
      const double* v = level(x, 0, base, cur, sc);
      for (int64_t i = 0; i < L; ++i) yr[i] = static_cast<T>(v[i]);
    }
  }

  Status run(const TensorView& in, const TensorView& out, void* ws) const {
    const T* x = static_cast<const T*>(in.data);
    T* y = static_cast<T*>(out.data);
    if (shape_numel(g.out) == 0) return Status::ok();
    if (g.q < 0) {  // every axis the identity: 0 + 1 * x is x
      std::memcpy(y, x, static_cast<size_t>(shape_numel(g.out)) * sizeof(T));
      return Status::ok();
    }
    double* w = static_cast<double*>(ws);
    if (nt <= 1) {
      run_rows(x, y, 0, g.rows, w);
      return Status::ok();
    }
#pragma omp parallel num_threads(nt)
    {
      const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
      const int64_t per = (g.rows + n - 1) / n;
      const int64_t b = std::min(g.rows, per * t), e = std::min(g.rows, per * (t + 1));
      if (b < e) run_rows(x, y, b, e, w + static_cast<size_t>(t) * per_thread);
    }
    return Status::ok();
  }
};

Status separable_applies(const StepDesc& s) {
  if (s.has_input(0) && s.in_dtypes[0] != DType::float32 && s.in_dtypes[0] != DType::float64)
    return not_applicable("float32 / float64 (the reference takes the others)");
  return make_geom(s).status();
}

// Work estimates of a geometry (multiply-adds): filtering the input rows along q, combining rows;
// with the output's elements, what splits the rows over threads (and what the cost counts).
struct SeparableWork {
  double filter = 0, combine = 0, out = 0;
  int64_t total() const { return static_cast<int64_t>(filter + combine + out); }
};
SeparableWork separable_work(const Geom& g) {
  SeparableWork w;
  if (g.q < 0) return w;
  const size_t q = static_cast<size_t>(g.q);
  double rows_filtered = 1, combine = 1;
  for (size_t d = 0; d < q; ++d) {
    const bool act = !g.axes[d].identity;
    rows_filtered *= static_cast<double>(act ? std::min(g.in[d], g.out[d]) : g.out[d]);
    if (act) combine *= static_cast<double>(std::max<int64_t>(1, g.axes[d].max_width));
  }
  w.filter = rows_filtered * static_cast<double>(g.out_row_len) * static_cast<double>(std::max<int64_t>(1, g.axes[q].max_width));
  w.combine = g.outer_active.empty() ? 0.0 : static_cast<double>(g.rows) * static_cast<double>(g.out_row_len) * combine;
  w.out = static_cast<double>(g.rows) * static_cast<double>(g.out_row_len);
  return w;
}

template <class T>
Result<std::unique_ptr<Kernel>> separable_prepare_t(const StepDesc& s, Geom g) {
  auto k = std::make_shared<SeparableResize<T>>();
  if (g.q >= 0) {
    const SeparableWork w = separable_work(g);
    k->nt = static_cast<int>(std::min<int64_t>(g.rows, ew::threads_for(w.total(), s.threads)));
    k->nt = std::max(1, k->nt);
    const int64_t L = g.out_row_len;
    const size_t m = g.outer_active.size();
    if (m > 0) {
      int64_t slots = 1;
      for (int d : g.outer_active) slots = std::min<int64_t>(64, slots * std::max<int64_t>(1, g.axes[static_cast<size_t>(d)].max_width));
      // At least two (the fused 2-D path keeps two rows); at most ~4 MB of rows per thread.
      slots = std::max<int64_t>(2, std::min<int64_t>(slots, (int64_t{4} << 20) / std::max<int64_t>(1, L * 8)));
      k->slots = std::min<int64_t>(slots, 64);
      k->per_thread = static_cast<size_t>(((k->slots + static_cast<int64_t>(m)) * L + 7) / 8 * 8);
      k->erow.assign(static_cast<size_t>(L), g.extrapolation);
      k->zrow.assign(static_cast<size_t>(L), 0.0);
      k->active.assign(static_cast<size_t>(g.q), false);
      for (int d : g.outer_active) k->active[static_cast<size_t>(d)] = true;
    }
  }
  const size_t ws = k->per_thread * sizeof(double) * static_cast<size_t>(k->nt);
  if (ws > s.workspace_limit) return workspace_over_limit(ws, s.workspace_limit);
  k->g = std::move(g);
  if (k->g.q >= 0) k->make_fixed();
  return ew::make_kernel([k](std::span<const TensorView> in, std::span<const TensorView> out, void* w) -> Status {
    return k->run(in[0], out[0], w);
  }, ws);
}

Result<std::unique_ptr<Kernel>> separable_prepare(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(separable_applies(s));
  TAC_ASSIGN_OR_RETURN(Geom g, make_geom(s));
  if (s.in_dtypes[0] == DType::float64) return separable_prepare_t<double>(s, std::move(g));
  return separable_prepare_t<float>(s, std::move(g));
}

// Streams the input and output once, and its float64 rows; the float64 multiply-adds (~0.25 ns
// each, measured on 2-D bilinear 2x of [1,64,80,80]) often dominate. Ranks behind "copy" where
// both apply.
double separable_cost(const StepDesc& s) {
  auto g = make_geom(s);
  if (!g) return 1e12;
  const SeparableWork w = separable_work(*g);
  const double e = static_cast<double>(dtype_size(s.in_dtypes[0]));
  // The input and output, and the float64 rows filtered along q, written once and read back.
  const double rows_bytes = g->outer_active.empty() ? 0.0 : 16.0 * w.filter / std::max<int64_t>(1, g->axes[static_cast<size_t>(g->q)].max_width);
  const double bytes = e * static_cast<double>(shape_numel(g->in) + shape_numel(g->out)) + rows_bytes;
  return ew::stream_cost_ns(bytes, 0.25 * (w.filter + w.combine) + 2.0 * static_cast<double>(g->rows), s.threads, w.total());
}

}  // namespace

std::span<const Tactic> resize_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t;
    for (OpKind op : {OpKind::Resize, OpKind::Upsample}) {
      t.push_back({"copy", op, "gather when every output element is one input element (nearest): row memcpy, replication",
                   copy_applies, copy_cost, copy_prepare});
      t.push_back({"separable", op, "float32/64, any mode: the reference's filter taps per axis, rows filtered once, in float64",
                   separable_applies, separable_cost, separable_prepare});
    }
    return t;
  }();
  return table;
}

}  // namespace tac::kernels
