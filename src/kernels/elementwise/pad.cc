// Pad on the CPU, any element size (1, 2, 4 or 8 bytes: it only moves data): modes constant,
// edge, reflect and wrap, negative pads (cropping first, as the reference does), axes (opset 18),
// the attribute form (opsets 1 to 10). pads and axes must be constants; constant_value may be a
// run-time input. Tactic "copy" (reference: pad_kernel in reference/ops_shape.cc).
//
// The innermost axis q with pads splits the output into rows (the output coordinates of the axes
// before q), each out[q] * inner elements. A row is a fixed list of segments, worked out at
// prepare: the interior as one memcpy from its input row, the borders as fills (constant), block
// repeats (edge) or block copies (reflect, wrap). A row that reads the same input row as the row
// before it (edge and reflect along the outer axes) is one memcpy of that row; a row wholly in the
// padding of an outer axis is a fill.
#include <algorithm>
#include <array>
#include <cstring>

#include "kernels/elementwise/common.h"

namespace tac::kernels {

namespace {

using ir::OpKind;

constexpr size_t kMaxRank = 16;
enum PadMode { kConstant = 0, kEdge = 1, kReflect = 2, kWrap = 3 };

// Source coordinate for output coordinate o along an axis of (cropped) size n with `before`
// padding; -1 where the pad constant goes (the reference's pad_source).
int64_t pad_source(int64_t o, int64_t before, int64_t n, int mode) {
  const int64_t s = o - before;
  if (s >= 0 && s < n) return s;
  switch (mode) {
    case kConstant: return -1;
    case kEdge: return s < 0 ? 0 : n - 1;
    case kReflect: {  // numpy's reflect: period 2(n-1)
      if (n == 1) return 0;
      const int64_t p = 2 * (n - 1);
      const int64_t k = ((s % p) + p) % p;
      return k < n ? k : p - k;
    }
    default: return ((s % n) + n) % n;  // wrap
  }
}


// A run of one output row: `len` blocks of `inner` elements from `dst` on.
struct Segment {
  enum Kind : uint8_t { fill, copy, repeat } kind;
  int64_t dst, len, src;  // copy: blocks src, src+1, ...; repeat: block src `len` times
};

struct PadGeom {
  size_t esize = 0;
  Shape out;
  int64_t total = 0;
  int q = -1;            // innermost axis with pads; -1: the step is a copy
  int64_t inner = 1;     // elements after q (none of those axes is padded)
  int64_t rows = 1, row_len = 1, in_row_len = 1;
  std::vector<std::vector<int64_t>> row_src;  // per axis d < q: input coordinate * input rows per step, or -1
  std::vector<Segment> segments;              // of every row, in blocks of `inner` elements
  std::array<unsigned char, 8> fill{};        // the constant, when it is known at build
  bool runtime_fill = false;                  // constant_value is a run-time input
};

Result<PadGeom> pad_geom(const StepDesc& s) {
  if (!s.has_input(0) || s.out_dtypes.size() != 1 || s.out_dtypes[0] != s.in_dtypes[0] || s.out_shapes.size() != 1)
    return not_applicable("one input and an output of its type");
  const DType t = s.in_dtypes[0];
  PadGeom g;
  g.esize = dtype_size(t);
  if (g.esize != 1 && g.esize != 2 && g.esize != 4 && g.esize != 8) return not_applicable("element size other than 1, 2, 4, 8");
  const Shape& x = s.in_shapes[0];
  const int64_t r = static_cast<int64_t>(x.size());
  if (x.size() > kMaxRank) return not_applicable("rank above 16");
  for (int64_t d : x)
    if (d < 0) return not_applicable("unknown dims");
  const std::string mode_s = ew::attr_s(s, "mode", "constant");
  int mode;
  if (mode_s == "constant") mode = kConstant;
  else if (mode_s == "edge") mode = kEdge;
  else if (mode_s == "reflect") mode = kReflect;
  else if (mode_s == "wrap") mode = kWrap;
  else return not_applicable("mode " + mode_s);
  std::vector<int64_t> pads, axes;
  TAC_ASSIGN_OR_RETURN(Tensor fill, Tensor::create(t, {}));
  std::memset(fill.raw(), 0, g.esize);
  if (s.node->opset < 11) {
    const ir::Attribute* p = s.node->attr("pads");
    if (!p) p = s.node->attr("paddings");
    if (!p) return not_applicable("no pads");
    pads = p->ints;
    fill.set_f64(0, ew::attr_f(s, "value", 0.0f));
  } else {
    if (!s.has_input(1)) return not_applicable("no pads");
    TAC_ASSIGN_OR_RETURN(pads, ew::const_ints(s, 1, "pads"));
    if (s.has_input(2)) {
      if (s.in_dtypes[2] != t) return not_applicable("constant_value of another type");
      const int64_t n = shape_numel(s.in_shapes[2]);
      if (n > 1 || n < 0) return not_applicable("constant_value of more than one element");
      if (!s.constants[2]) g.runtime_fill = n == 1;
      else if (n == 1) std::memcpy(fill.raw(), s.constants[2]->raw(), g.esize);
    }
    if (s.node->opset >= 18 && s.has_input(3)) {
      TAC_ASSIGN_OR_RETURN(axes, ew::const_ints(s, 3, "axes"));
    }
  }
  std::memcpy(g.fill.data(), fill.raw(), g.esize);
  std::vector<int64_t> before, after;
  TAC_RETURN_IF_ERROR(ew::pads_per_dim(pads, axes, r, before, after));
  // Negative pads crop first; the remaining (non-negative) pads then pad the cropped tensor.
  const size_t ru = static_cast<size_t>(r);
  std::vector<int64_t> crop0(ru), n(ru), pb(ru);
  g.out.resize(ru);
  for (size_t d = 0; d < ru; ++d) {
    crop0[d] = std::max<int64_t>(0, -before[d]);
    n[d] = x[d] - crop0[d] - std::max<int64_t>(0, -after[d]);
    if (n[d] < 0) return not_applicable("negative pads remove more than the axis");
    pb[d] = std::max<int64_t>(0, before[d]);
    g.out[d] = n[d] + pb[d] + std::max<int64_t>(0, after[d]);
    if (n[d] == 0 && g.out[d] > 0 && mode != kConstant) return not_applicable("an empty axis padded in mode " + mode_s);
    if (before[d] != 0 || after[d] != 0) g.q = static_cast<int>(d);
  }
  if (g.out != s.out_shapes[0]) return not_applicable("output shape disagrees with pads");
  g.total = shape_numel(g.out);
  if (g.q < 0) return g;
  const size_t q = static_cast<size_t>(g.q);
  for (size_t d = q + 1; d < ru; ++d) g.inner *= x[d];
  g.row_len = g.out[q] * g.inner;
  g.in_row_len = x[q] * g.inner;
  std::vector<int64_t> stride(q, 1);  // input rows per step of coordinate d
  for (size_t d = q; d-- > 0;) stride[d] = d + 1 < q ? stride[d + 1] * x[d + 1] : 1;
  for (size_t d = 0; d < q; ++d) {
    g.rows *= g.out[d];
    std::vector<int64_t> v(static_cast<size_t>(g.out[d]));
    for (int64_t o = 0; o < g.out[d]; ++o) {
      const int64_t c = pad_source(o, pb[d], n[d], mode);
      v[static_cast<size_t>(o)] = c < 0 ? -1 : (c + crop0[d]) * stride[d];
    }
    g.row_src.push_back(std::move(v));
  }
  std::vector<int64_t> col(static_cast<size_t>(g.out[q]));
  for (int64_t o = 0; o < g.out[q]; ++o) {
    const int64_t c = pad_source(o, pb[q], n[q], mode);
    col[static_cast<size_t>(o)] = c < 0 ? -1 : c + crop0[q];
  }
  for (int64_t j = 0; j < g.out[q];) {
    const int64_t c = col[static_cast<size_t>(j)];
    int64_t k = j + 1;
    Segment seg{Segment::fill, j, 1, c};
    if (c < 0) {
      while (k < g.out[q] && col[static_cast<size_t>(k)] < 0) ++k;
    } else if (k < g.out[q] && col[static_cast<size_t>(k)] == c) {
      seg.kind = Segment::repeat;
      while (k < g.out[q] && col[static_cast<size_t>(k)] == c) ++k;
    } else {
      seg.kind = Segment::copy;
      while (k < g.out[q] && col[static_cast<size_t>(k)] == c + (k - j)) ++k;
    }
    seg.len = k - j;
    g.segments.push_back(seg);
    j = k;
  }
  return g;
}

template <size_t E> struct Word;
template <> struct Word<1> { using type = uint8_t; };
template <> struct Word<2> { using type = uint16_t; };
template <> struct Word<4> { using type = uint32_t; };
template <> struct Word<8> { using type = uint64_t; };

template <size_t E>
Status run_pad(const PadGeom& g, int threads, const void* xv, void* yv, const void* fill_ptr) {
  using U = typename Word<E>::type;
  const U* x = static_cast<const U*>(xv);
  U* y = static_cast<U*>(yv);
  U fill;
  std::memcpy(&fill, fill_ptr, E);
  if (g.total == 0) return Status::ok();
  if (g.q < 0) {
    ew::parallel_for(g.total, 1, g.total * static_cast<int64_t>(E) >= (int64_t{1} << 20) ? threads : 1,
                     [&](int64_t b, int64_t e) { std::memcpy(y + b, x + b, static_cast<size_t>(e - b) * E); }, 16);
    return Status::ok();
  }
  const size_t q = static_cast<size_t>(g.q);
  const int64_t L = g.row_len, inner = g.inner;
  auto build_row = [&](const U* xr, U* yr) {
    for (const Segment& s : g.segments) {
      U* d = yr + s.dst * inner;
      switch (s.kind) {
        case Segment::fill: std::fill_n(d, s.len * inner, fill); break;
        case Segment::copy: std::memcpy(d, xr + s.src * inner, static_cast<size_t>(s.len * inner) * E); break;
        case Segment::repeat:
          if (inner == 1) {
            std::fill_n(d, s.len, xr[s.src]);
          } else {
            for (int64_t k = 0; k < s.len; ++k) std::memcpy(d + k * inner, xr + s.src * inner, static_cast<size_t>(inner) * E);
          }
          break;
      }
    }
  };
  // Work per row: its elements written and (about) as many read; pad_cost counts the same.
  ew::parallel_for(g.rows, 2 * L, threads, [&](int64_t b, int64_t e) {
    std::array<int64_t, kMaxRank> c{};
    int64_t rem = b;
    for (size_t d = q; d-- > 0;) {
      c[d] = rem % g.out[d];
      rem /= g.out[d];
    }
    int64_t prev = -2;  // input row of the row before in this chunk (-1: a fill row)
    for (int64_t r = b; r < e; ++r) {
      int64_t src = 0;
      for (size_t d = 0; d < q; ++d) {
        const int64_t v = g.row_src[d][static_cast<size_t>(c[d])];
        if (v < 0) {
          src = -1;
          break;
        }
        src += v;
      }
      U* yr = y + r * L;
      if (src == prev) std::memcpy(yr, yr - L, static_cast<size_t>(L) * E);
      else if (src < 0) std::fill_n(yr, L, fill);
      else build_row(x + src * g.in_row_len, yr);
      prev = src;
      for (size_t d = q; d-- > 0;) {
        if (++c[d] < g.out[d]) break;
        c[d] = 0;
      }
    }
  });
  return Status::ok();
}

Status pad_applies(const StepDesc& s) { return pad_geom(s).status(); }

Result<std::unique_ptr<Kernel>> pad_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(PadGeom g, pad_geom(s));
  auto gp = std::make_shared<const PadGeom>(std::move(g));
  const int threads = s.threads;
  return ew::make_kernel([gp, threads](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
    const PadGeom& g = *gp;
    const void* fill = g.fill.data();
    if (g.runtime_fill && in.size() > 2 && in[2].data && in[2].numel() == 1) fill = in[2].data;
    switch (g.esize) {
      case 1: return run_pad<1>(g, threads, in[0].data, out[0].data, fill);
      case 2: return run_pad<2>(g, threads, in[0].data, out[0].data, fill);
      case 4: return run_pad<4>(g, threads, in[0].data, out[0].data, fill);
      default: return run_pad<8>(g, threads, in[0].data, out[0].data, fill);
    }
  });
}

// Memory-bound: the output written once, the input elements it keeps read once; a few ns per row.
double pad_cost(const StepDesc& s) {
  const double e = static_cast<double>(std::max<size_t>(1, dtype_size(s.in_dtypes[0])));
  const int64_t n_in = std::max<int64_t>(0, shape_numel(s.in_shapes[0])), n_out = std::max<int64_t>(0, shape_numel(s.out_shapes[0]));
  const Shape& o = s.out_shapes[0];
  const double rows = o.empty() ? 1.0 : static_cast<double>(n_out) / static_cast<double>(std::max<int64_t>(1, o.back()));
  return ew::stream_cost_ns(e * static_cast<double>(std::min(n_in, n_out) + n_out), 5.0 * rows, s.threads, 2 * n_out);
}

}  // namespace

std::span<const Tactic> pad_tactics() {
  static const std::vector<Tactic> table = {
      Tactic{"copy", OpKind::Pad, "row-wise memcpy of the interior, fills / block copies for the borders (any mode, any element size)",
             pad_applies, pad_cost, pad_prepare},
  };
  return table;
}

}  // namespace tac::kernels
