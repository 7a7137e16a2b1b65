// Reference kernels: shape and data movement ops.
//
// Ops that only move elements copy them as raw bytes (dtype_size), so one code path serves
// every dtype. Most of them are written as "output element k comes from input element src(k)"
// through move_elements(); clarity over speed.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "reference/helpers.h"
#include "reference/ops_shape_internal.h"

namespace tac::ref {

namespace {

using ir::OpKind;

std::string str(int64_t v) { return std::to_string(v); }

void identity_kernel(KernelContext& ctx) { ctx.set_output_datum(0, ctx.input_datum(0)); }

void constant_kernel(KernelContext& ctx) {
  if (const Tensor* t = ctx.attr_tensor("value")) {
    ctx.set_output(0, *t);
    return;
  }
  if (ctx.has_attr("value_float")) {
    Tensor& out = ctx.make_output(0, DType::float32, {});
    out.data<float>()[0] = ctx.attr_float("value_float", 0);
  } else if (ctx.has_attr("value_floats")) {
    auto v = ctx.attr_floats("value_floats");
    Tensor& out = ctx.make_output(0, DType::float32, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), out.data<float>());
  } else if (ctx.has_attr("value_int")) {
    Tensor& out = ctx.make_output(0, DType::int64, {});
    out.data<int64_t>()[0] = ctx.attr_int("value_int", 0);
  } else if (ctx.has_attr("value_ints")) {
    auto v = ctx.attr_ints("value_ints");
    Tensor& out = ctx.make_output(0, DType::int64, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), out.data<int64_t>());
  } else if (ctx.has_attr("value_string") || ctx.has_attr("value_strings")) {
    ctx.fail_unsupported("string constants are not supported");
  } else if (ctx.has_attr("sparse_value")) {
    ctx.fail_unsupported("sparse constants are not supported");
  } else {
    ctx.fail_invalid("no value attribute");
  }
}

// ---------------------------------------------------------------------------------------------
// Shape-only ops: the output shares the input's storage under a new shape.

void reshape_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> spec =
      ctx.opset < 5 ? ctx.attr_ints("shape") : int_input(ctx, 1, "shape");
  const bool allowzero = ctx.opset >= 14 && ctx.attr_int("allowzero", 0) != 0;
  Shape out(spec.size());
  int infer = -1;
  bool has_zero = false;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t v = spec[i];
    if (v == -1) {
      if (infer >= 0) ctx.fail_invalid("shape has more than one -1");
      infer = static_cast<int>(i);
      out[i] = 1;
      continue;
    }
    if (v == 0 && !allowzero) {
      if (static_cast<int64_t>(i) >= x.rank())
        ctx.fail_invalid("shape[" + str(static_cast<int64_t>(i)) + "] = 0 copies a dim the input " +
                         shape_to_string(x.shape()) + " does not have");
      v = x.dim(static_cast<int64_t>(i));
    }
    if (v < 0) ctx.fail_invalid("shape has invalid dim " + str(spec[i]));
    if (v == 0) has_zero = true;
    out[i] = v;
  }
  int64_t known = shape_numel(out);
  if (known < 0) ctx.fail_invalid("shape " + shape_to_string(spec) + " is too large");
  if (infer >= 0) {
    if (allowzero && has_zero) ctx.fail_invalid("shape has both -1 and 0 with allowzero=1");
    if (known == 0) {
      if (x.numel() != 0) ctx.fail_invalid("cannot infer -1 in shape " + shape_to_string(spec));
      ctx.fail_invalid("-1 in shape " + shape_to_string(spec) + " is ambiguous for an empty input");
    }
    if (x.numel() % known != 0)
      ctx.fail_invalid("cannot reshape " + shape_to_string(x.shape()) + " to " + shape_to_string(spec));
    out[static_cast<size_t>(infer)] = x.numel() / known;
  }
  if (shape_numel(out) != x.numel())
    ctx.fail_invalid("cannot reshape " + shape_to_string(x.shape()) + " to " + shape_to_string(spec));
  ctx.set_output(0, x.reshaped(out));
}

void flatten_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t r = x.rank();
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < -r || axis > r) ctx.fail_invalid("axis " + str(axis) + " is out of range for rank " + str(r));
  if (axis < 0) axis += r;
  int64_t a = 1, b = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? a : b) *= x.dim(i);
  ctx.set_output(0, x.reshaped({a, b}));
}

void squeeze_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t r = x.rank();
  std::vector<int64_t> axes;
  bool given = false;
  if (ctx.opset < 13) {
    given = ctx.has_attr("axes");
    axes = ctx.attr_ints("axes");
  } else if (ctx.has_input(1)) {
    axes = int_input(ctx, 1, "axes");
    given = !axes.empty();  // an empty axes tensor squeezes every size-1 dim, as onnxruntime does
  }
  std::vector<bool> drop(static_cast<size_t>(r), false);
  if (given) {
    for (int64_t a : axes) {
      int64_t n = normalize_axis(ctx, a, r);
      if (drop[static_cast<size_t>(n)]) ctx.fail_invalid("axis " + str(a) + " is repeated");
      if (x.dim(n) != 1)
        ctx.fail_invalid("cannot squeeze axis " + str(a) + " of size " + str(x.dim(n)) + " in " +
                         shape_to_string(x.shape()));
      drop[static_cast<size_t>(n)] = true;
    }
  } else {
    for (int64_t i = 0; i < r; ++i) drop[static_cast<size_t>(i)] = x.dim(i) == 1;
  }
  Shape out;
  for (int64_t i = 0; i < r; ++i)
    if (!drop[static_cast<size_t>(i)]) out.push_back(x.dim(i));
  ctx.set_output(0, x.reshaped(out));
}

void unsqueeze_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> axes = ctx.opset < 13 ? ctx.attr_ints("axes") : int_input(ctx, 1, "axes");
  if (ctx.opset < 13 && !ctx.has_attr("axes")) ctx.fail_invalid("attribute 'axes' is required");
  const int64_t rout = x.rank() + static_cast<int64_t>(axes.size());
  std::vector<bool> ins(static_cast<size_t>(rout), false);
  for (int64_t a : axes) {
    int64_t n = normalize_axis(ctx, a, rout);
    if (ins[static_cast<size_t>(n)]) ctx.fail_invalid("axis " + str(a) + " is repeated");
    ins[static_cast<size_t>(n)] = true;
  }
  Shape out;
  int64_t k = 0;
  for (int64_t i = 0; i < rout; ++i) out.push_back(ins[static_cast<size_t>(i)] ? 1 : x.dim(k++));
  ctx.set_output(0, x.reshaped(out));
}

// ---------------------------------------------------------------------------------------------
// Shape queries and constants.

void shape_kernel(KernelContext& ctx) {
  const Datum& d = ctx.input_datum(0);
  if (!d.is_tensor()) ctx.fail_invalid("input 0 must be a tensor");
  const Shape& s = d.tensor.shape();
  const int64_t r = static_cast<int64_t>(s.size());
  int64_t start = 0, end = r;
  if (ctx.opset >= 15) {
    start = ctx.attr_int("start", 0);
    end = ctx.attr_int("end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, 0, r);
  }
  const int64_t n = std::max<int64_t>(0, end - start);
  Tensor& out = ctx.make_output(0, DType::int64, {n});
  for (int64_t i = 0; i < n; ++i) out.data<int64_t>()[i] = s[static_cast<size_t>(start + i)];
}

void size_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& out = ctx.make_output(0, DType::int64, {});
  out.data<int64_t>()[0] = x.numel();
}

void constant_of_shape_kernel(KernelContext& ctx) {
  std::vector<int64_t> shape = int_input(ctx, 0, "shape");
  for (int64_t d : shape)
    if (d < 0) ctx.fail_invalid("shape " + shape_to_string(shape) + " has a negative dim");
  const Tensor* v = ctx.attr_tensor("value");
  if (v && v->numel() != 1) ctx.fail_invalid("attribute 'value' must hold exactly one element");
  DType dt = v ? v->dtype() : DType::float32;
  Tensor& out = ctx.make_output(0, dt, shape);
  if (!v) return;  // zero-filled float
  const size_t es = dtype_size(dt);
  auto* po = static_cast<std::byte*>(out.raw());
  for (int64_t i = 0; i < out.numel(); ++i) std::memcpy(po + static_cast<size_t>(i) * es, v->raw(), es);
}

void eye_like_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) ctx.fail_invalid("input must be 2-D, got " + shape_to_string(x.shape()));
  DType dt = ctx.has_attr("dtype") ? static_cast<DType>(ctx.attr_int("dtype", 0)) : x.dtype();
  if (!dtype_supported(static_cast<int32_t>(dt)) || dtype_size(dt) == 0)
    ctx.fail_unsupported("dtype " + dtype_name(dt) + " is not supported");
  const int64_t k = ctx.attr_int("k", 0);
  Tensor& out = ctx.make_output(0, dt, x.shape());
  for (int64_t i = 0; i < x.dim(0); ++i) {
    // Compare in the wider sense so that huge k does not overflow.
    if (k > x.dim(1) || k < -x.dim(0)) break;
    int64_t j = i + k;
    if (j >= 0 && j < x.dim(1)) out.set_f64(i * x.dim(1) + j, 1.0);
  }
}

void range_kernel(KernelContext& ctx) {
  const Tensor& s = ctx.input(0);
  const Tensor& l = ctx.input(1);
  const Tensor& d = ctx.input(2);
  if (s.dtype() != l.dtype() || s.dtype() != d.dtype()) ctx.fail_invalid("start, limit and delta must have one type");
  DType dt = s.dtype();
  if (dtype_is_float(dt)) {
    double start = scalar_f64(ctx, s, "start"), limit = scalar_f64(ctx, l, "limit"), delta = scalar_f64(ctx, d, "delta");
    if (delta == 0 || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta))
      ctx.fail_invalid("start, limit and delta must be finite and delta non-zero");
    double nf = std::max(0.0, std::ceil((limit - start) / delta));
    if (nf > 1e12) ctx.fail_invalid("range is too long");
    int64_t n = static_cast<int64_t>(nf);
    Tensor& out = ctx.make_output(0, dt, {n});
    for (int64_t i = 0; i < n; ++i) out.set_f64(i, start + static_cast<double>(i) * delta);
  } else if (dt == DType::boolean) {
    ctx.fail_invalid("Range does not take bool");
  } else {
    int64_t start = scalar_i64(ctx, s, "start"), limit = scalar_i64(ctx, l, "limit"), delta = scalar_i64(ctx, d, "delta");
    if (delta == 0) ctx.fail_invalid("delta must be non-zero");
    // n = max(ceil((limit - start) / delta), 0) in exact 128-bit arithmetic.
    __int128 span = static_cast<__int128>(limit) - start;
    __int128 n128 = 0;
    if (delta > 0 && span > 0) n128 = (span + delta - 1) / delta;
    if (delta < 0 && span < 0) n128 = (-span + (-static_cast<__int128>(delta)) - 1) / (-static_cast<__int128>(delta));
    if (n128 > (__int128{1} << 40)) ctx.fail_invalid("range is too long");
    int64_t n = static_cast<int64_t>(n128);
    Tensor& out = ctx.make_output(0, dt, {n});
    for (int64_t i = 0; i < n; ++i) out.set_i64(i, start + i * delta);
  }
}

// ---------------------------------------------------------------------------------------------
// Element movement ops.

void transpose_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t r = x.rank();
  std::vector<int64_t> perm = ctx.attr_ints("perm");
  if (!ctx.has_attr("perm"))
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != r)
    ctx.fail_invalid("perm has " + str(static_cast<int64_t>(perm.size())) + " entries for rank " + str(r));
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (int64_t& p : perm) {
    p = normalize_axis(ctx, p, r);
    if (seen[static_cast<size_t>(p)]) ctx.fail_invalid("perm is not a permutation");
    seen[static_cast<size_t>(p)] = true;
  }
  Shape os(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) os[static_cast<size_t>(i)] = x.dim(perm[static_cast<size_t>(i)]);
  auto ist = strides_of(x.shape());
  Tensor& out = ctx.make_output(0, x.dtype(), os);
  move_elements(x, out, [&](const std::vector<int64_t>& idx) {
    int64_t s = 0;
    for (size_t i = 0; i < idx.size(); ++i) s += idx[i] * ist[static_cast<size_t>(perm[i])];
    return s;
  });
}

void concat_kernel(KernelContext& ctx) {
  if (ctx.num_inputs() == 0) ctx.fail_invalid("no inputs");
  const Tensor& x0 = ctx.input(0);
  const int64_t r = x0.rank();
  if (r == 0) ctx.fail_invalid("cannot concatenate scalars");
  // Concat-1 had an optional axis (default 1); it is required since opset 4.
  const int64_t axis = normalize_axis(ctx, ctx.opset < 4 ? ctx.attr_int("axis", 1) : ctx.require_int("axis"), r);
  Shape os = x0.shape();
  os[static_cast<size_t>(axis)] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& xi = ctx.input(i);
    if (xi.dtype() != x0.dtype()) ctx.fail_invalid("inputs have different types");
    if (xi.rank() != r) ctx.fail_invalid("inputs have different ranks");
    for (int64_t d = 0; d < r; ++d)
      if (d != axis && xi.dim(d) != x0.dim(d))
        ctx.fail_invalid("input shapes " + shape_to_string(x0.shape()) + " and " + shape_to_string(xi.shape()) +
                         " differ outside axis " + str(axis));
    os[static_cast<size_t>(axis)] += xi.dim(axis);
  }
  Tensor& out = ctx.make_output(0, x0.dtype(), os);
  const size_t es = dtype_size(x0.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= os[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < r; ++d) inner *= os[static_cast<size_t>(d)];
  const int64_t out_row = os[static_cast<size_t>(axis)] * inner;
  auto* po = static_cast<std::byte*>(out.raw());
  int64_t col = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& xi = ctx.input(i);
    const int64_t row = xi.dim(axis) * inner;
    const auto* pi = static_cast<const std::byte*>(xi.raw());
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(po + static_cast<size_t>(o * out_row + col) * es, pi + static_cast<size_t>(o * row) * es,
                  static_cast<size_t>(row) * es);
    col += row;
  }
}

void split_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  const int64_t dim = x.dim(axis);
  std::vector<int64_t> split;
  bool given = false;
  if (ctx.opset >= 13 || (ctx.opset < 2 && ctx.has_input(1))) {
    if (ctx.has_input(1)) {
      given = true;
      split = int_input(ctx, 1, "split");
    }
  } else if (ctx.has_attr("split")) {
    given = true;
    split = ctx.attr_ints("split");
  }
  const int64_t nout = static_cast<int64_t>(ctx.num_outputs());
  if (given) {
    if (static_cast<int64_t>(split.size()) != nout)
      ctx.fail_invalid("split has " + str(static_cast<int64_t>(split.size())) + " entries for " + str(nout) + " outputs");
    int64_t sum = 0;
    for (int64_t s : split) {
      if (s < 0) ctx.fail_invalid("split has a negative size");
      sum += s;
    }
    if (sum != dim) ctx.fail_invalid("split sizes sum to " + str(sum) + ", axis has size " + str(dim));
  } else {
    int64_t n = nout;
    if (ctx.opset >= 18 && ctx.has_attr("num_outputs")) {
      n = ctx.attr_int("num_outputs", 0);
      if (n != nout) ctx.fail_invalid("num_outputs is " + str(n) + " but the node has " + str(nout) + " outputs");
    }
    if (n <= 0) ctx.fail_invalid("no outputs");
    if (dim % n == 0) {
      split.assign(static_cast<size_t>(n), dim / n);
    } else {
      if (ctx.opset < 18) ctx.fail_invalid("axis of size " + str(dim) + " does not split evenly into " + str(n));
      const int64_t chunk = (dim + n - 1) / n;
      int64_t left = dim;
      for (int64_t i = 0; i < n; ++i) {
        split.push_back(std::min(chunk, left));
        left -= split.back();
      }
      if (split.back() <= 0) ctx.fail_invalid("axis of size " + str(dim) + " cannot be split into " + str(n));
    }
  }
  const size_t es = dtype_size(x.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const auto* pi = static_cast<const std::byte*>(x.raw());
  int64_t start = 0;
  for (int64_t i = 0; i < nout; ++i) {
    const int64_t s = split[static_cast<size_t>(i)];
    if (ctx.wants_output(static_cast<size_t>(i))) {
      Shape os = x.shape();
      os[static_cast<size_t>(axis)] = s;
      Tensor& out = ctx.make_output(static_cast<size_t>(i), x.dtype(), os);
      auto* po = static_cast<std::byte*>(out.raw());
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(po + static_cast<size_t>(o * s * inner) * es,
                    pi + static_cast<size_t>((o * dim + start) * inner) * es, static_cast<size_t>(s * inner) * es);
    }
    start += s;
  }
}

void slice_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t r = x.rank();
  std::vector<int64_t> starts, ends, axes, steps;
  bool has_axes = false, has_steps = false;
  if (ctx.opset < 10) {
    starts = ctx.attr_ints("starts");
    ends = ctx.attr_ints("ends");
    has_axes = ctx.has_attr("axes");
    axes = ctx.attr_ints("axes");
  } else {
    starts = int_input(ctx, 1, "starts");
    ends = int_input(ctx, 2, "ends");
    if (ctx.has_input(3)) { has_axes = true; axes = int_input(ctx, 3, "axes"); }
    if (ctx.has_input(4)) { has_steps = true; steps = int_input(ctx, 4, "steps"); }
  }
  const size_t n = starts.size();
  if (ends.size() != n) ctx.fail_invalid("starts and ends have different lengths");
  if (!has_axes)
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  if (!has_steps) steps.assign(n, 1);
  if (axes.size() != n || steps.size() != n) ctx.fail_invalid("starts, ends, axes and steps have different lengths");
  std::vector<int64_t> st(static_cast<size_t>(r), 0), step(static_cast<size_t>(r), 1);
  Shape os = x.shape();
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (size_t i = 0; i < n; ++i) {
    const int64_t a = normalize_axis(ctx, axes[i], r);
    if (seen[static_cast<size_t>(a)]) ctx.fail_invalid("axis " + str(axes[i]) + " is repeated");
    seen[static_cast<size_t>(a)] = true;
    const int64_t dim = x.dim(a);
    const int64_t sp = steps[i];
    if (sp == 0) ctx.fail_invalid("step must not be 0");
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t cnt;
    if (sp > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      cnt = e > s ? (e - s - 1) / sp + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      cnt = s > e ? static_cast<int64_t>((static_cast<__int128>(s) - e - 1) / -static_cast<__int128>(sp) + 1) : 0;
    }
    st[static_cast<size_t>(a)] = s;
    step[static_cast<size_t>(a)] = sp;
    os[static_cast<size_t>(a)] = cnt;
  }
  auto ist = strides_of(x.shape());
  Tensor& out = ctx.make_output(0, x.dtype(), os);
  move_elements(x, out, [&](const std::vector<int64_t>& idx) {
    int64_t s = 0;
    for (size_t d = 0; d < idx.size(); ++d) s += (st[d] + idx[d] * step[d]) * ist[d];
    return s;
  });
}

void expand_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> shape = int_input(ctx, 1, "shape");
  for (int64_t d : shape)
    if (d < 0) ctx.fail_invalid("shape " + shape_to_string(shape) + " has a negative dim");
  Shape os = broadcast_shapes(ctx, x.shape(), shape);
  Tensor& out = ctx.make_output(0, x.dtype(), os);
  auto bi = broadcast_index(x.shape(), os);
  copy_indexed(x, out, bi);
}

void tile_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> rep = int_input(ctx, 1, "repeats");
  if (static_cast<int64_t>(rep.size()) != x.rank())
    ctx.fail_invalid("repeats has " + str(static_cast<int64_t>(rep.size())) + " entries for rank " + str(x.rank()));
  Shape os = x.shape();
  for (size_t i = 0; i < rep.size(); ++i) {
    if (rep[i] < 0) ctx.fail_invalid("repeats must be non-negative");
    if (__builtin_mul_overflow(os[i], rep[i], &os[i])) ctx.fail_invalid("output is too large");
  }
  auto ist = strides_of(x.shape());
  Tensor& out = ctx.make_output(0, x.dtype(), os);
  move_elements(x, out, [&](const std::vector<int64_t>& idx) {
    int64_t s = 0;
    for (size_t d = 0; d < idx.size(); ++d) s += (idx[d] % x.shape()[d]) * ist[d];
    return s;
  });
}

// Source coordinate for output coordinate o along an axis of (cropped) size n with `before`
// padding; -1 when the pad constant is used.
int64_t pad_source(int64_t o, int64_t before, int64_t n, int mode) {
  int64_t s = o - before;
  if (s >= 0 && s < n) return s;
  switch (mode) {
    case 0: return -1;                              // constant
    case 1: return s < 0 ? 0 : n - 1;               // edge
    case 2: {                                       // reflect (numpy): period 2(n-1)
      if (n == 1) return 0;
      const int64_t p = 2 * (n - 1);
      int64_t k = ((s % p) + p) % p;
      return k < n ? k : p - k;
    }
    default: return ((s % n) + n) % n;              // wrap
  }
}

void pad_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t r = x.rank();
  const std::string mode_s = ctx.attr_string("mode", "constant");
  int mode;
  if (mode_s == "constant") mode = 0;
  else if (mode_s == "edge") mode = 1;
  else if (mode_s == "reflect") mode = 2;
  else if (mode_s == "wrap") mode = 3;
  else ctx.fail_invalid("unknown mode '" + mode_s + "'");
  std::vector<int64_t> pads;
  std::vector<int64_t> axes;
  Tensor fill = new_tensor(ctx, x.dtype(), {});
  if (ctx.opset < 11) {
    if (!ctx.has_attr("pads") && !ctx.has_attr("paddings")) ctx.fail_invalid("attribute 'pads' is required");
    pads = ctx.has_attr("pads") ? ctx.attr_ints("pads") : ctx.attr_ints("paddings");
    fill.set_f64(0, ctx.attr_float("value", 0.0f));
  } else {
    pads = int_input(ctx, 1, "pads");
    if (ctx.has_input(2)) {
      const Tensor& cv = ctx.input(2);
      if (cv.numel() == 1) {
        if (cv.dtype() != x.dtype()) ctx.fail_invalid("constant_value has a different type than data");
        std::memcpy(fill.raw(), cv.raw(), dtype_size(x.dtype()));
      } else if (cv.numel() != 0) {
        ctx.fail_invalid("constant_value must hold one element");
      }
    }
    if (ctx.opset >= 18 && ctx.has_input(3)) axes = int_input(ctx, 3, "axes");
  }
  if (axes.empty())
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  const size_t na = axes.size();
  if (pads.size() != 2 * na)
    ctx.fail_invalid("pads has " + str(static_cast<int64_t>(pads.size())) + " entries, expected " +
                     str(static_cast<int64_t>(2 * na)));
  std::vector<int64_t> before(static_cast<size_t>(r), 0), after(static_cast<size_t>(r), 0);
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (size_t i = 0; i < na; ++i) {
    int64_t a = normalize_axis(ctx, axes[i], r);
    if (seen[static_cast<size_t>(a)]) ctx.fail_invalid("axis " + str(axes[i]) + " is repeated");
    seen[static_cast<size_t>(a)] = true;
    before[static_cast<size_t>(a)] = pads[i];
    after[static_cast<size_t>(a)] = pads[i + na];
  }
  // Negative pads crop first; the remaining (non-negative) pads then pad the cropped tensor.
  std::vector<int64_t> crop0(static_cast<size_t>(r)), n(static_cast<size_t>(r)), pb(static_cast<size_t>(r));
  Shape os(static_cast<size_t>(r));
  for (size_t d = 0; d < static_cast<size_t>(r); ++d) {
    crop0[d] = std::max<int64_t>(0, -before[d]);
    n[d] = x.shape()[d] - crop0[d] - std::max<int64_t>(0, -after[d]);
    if (n[d] < 0) ctx.fail_invalid("negative pads remove more than the whole axis " + str(static_cast<int64_t>(d)));
    pb[d] = std::max<int64_t>(0, before[d]);
    os[d] = n[d] + pb[d] + std::max<int64_t>(0, after[d]);
    if (n[d] == 0 && os[d] > 0 && mode != 0)
      ctx.fail_invalid("cannot pad an empty axis in mode '" + mode_s + "'");
  }
  auto ist = strides_of(x.shape());
  Tensor& out = ctx.make_output(0, x.dtype(), os);
  move_elements(
      x, out,
      [&](const std::vector<int64_t>& idx) {
        int64_t s = 0;
        for (size_t d = 0; d < idx.size(); ++d) {
          int64_t c = pad_source(idx[d], pb[d], n[d], mode);
          if (c < 0) return int64_t{-1};
          s += (c + crop0[d]) * ist[d];
        }
        return s;
      },
      fill.raw());
}

void center_crop_pad_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t r = x.rank();
  std::vector<int64_t> shape = int_input(ctx, 1, "shape");
  std::vector<int64_t> axes = ctx.attr_ints("axes");
  if (!ctx.has_attr("axes"))
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  if (shape.size() != axes.size())
    ctx.fail_invalid("shape has " + str(static_cast<int64_t>(shape.size())) + " entries for " +
                     str(static_cast<int64_t>(axes.size())) + " axes");
  Shape os = x.shape();
  std::vector<int64_t> offset(static_cast<size_t>(r), 0);  // source = out + offset
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = normalize_axis(ctx, axes[i], r);
    if (seen[static_cast<size_t>(a)]) ctx.fail_invalid("axis " + str(axes[i]) + " is repeated");
    seen[static_cast<size_t>(a)] = true;
    const int64_t dim = x.dim(a), sh = shape[i];
    if (sh < 0) ctx.fail_invalid("shape has a negative dim");
    if (sh < dim) offset[static_cast<size_t>(a)] = (dim - sh) / 2;
    else offset[static_cast<size_t>(a)] = -((sh - dim) / 2);
    os[static_cast<size_t>(a)] = sh;
  }
  auto ist = strides_of(x.shape());
  Tensor& out = ctx.make_output(0, x.dtype(), os);
  move_elements(x, out, [&](const std::vector<int64_t>& idx) {
    int64_t s = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      int64_t c = idx[d] + offset[d];
      if (c < 0 || c >= x.shape()[d]) return int64_t{-1};
      s += c * ist[d];
    }
    return s;
  });
}

void depth_to_space_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 4) ctx.fail_invalid("input must be 4-D, got " + shape_to_string(x.shape()));
  const int64_t b = ctx.require_int("blocksize");
  const std::string mode = ctx.opset >= 11 ? ctx.attr_string("mode", "DCR") : "DCR";
  if (mode != "DCR" && mode != "CRD") ctx.fail_invalid("unknown mode '" + mode + "'");
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  if (b <= 0 || C % (b * b) != 0) ctx.fail_invalid("channels " + str(C) + " not divisible by blocksize^2");
  const int64_t oc = C / (b * b);
  Tensor& out = ctx.make_output(0, x.dtype(), {N, oc, H * b, W * b});
  const bool dcr = mode == "DCR";
  move_elements(x, out, [&](const std::vector<int64_t>& idx) {
    const int64_t n = idx[0], c = idx[1], h = idx[2] / b, i = idx[2] % b, w = idx[3] / b, j = idx[3] % b;
    const int64_t ic = dcr ? (i * b + j) * oc + c : c * b * b + i * b + j;
    return ((n * C + ic) * H + h) * W + w;
  });
}

void space_to_depth_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 4) ctx.fail_invalid("input must be 4-D, got " + shape_to_string(x.shape()));
  const int64_t b = ctx.require_int("blocksize");
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  if (b <= 0 || H % b != 0 || W % b != 0)
    ctx.fail_invalid("spatial dims of " + shape_to_string(x.shape()) + " not divisible by blocksize " + str(b));
  Tensor& out = ctx.make_output(0, x.dtype(), {N, C * b * b, H / b, W / b});
  move_elements(x, out, [&](const std::vector<int64_t>& idx) {
    const int64_t n = idx[0], oc = idx[1], h = idx[2], w = idx[3];
    const int64_t c = oc % C, blk = oc / C, i = blk / b, j = blk % b;
    return ((n * C + c) * H + h * b + i) * W + w * b + j;
  });
}

void trilu_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) ctx.fail_invalid("input must have rank >= 2");
  const bool upper = ctx.attr_int("upper", 1) != 0;
  const int64_t k = ctx.has_input(1) ? scalar_i64(ctx, ctx.input(1), "k") : 0;
  Tensor& out = ctx.make_output(0, x.dtype(), x.shape());
  move_elements(x, out, [&](const std::vector<int64_t>& idx) -> int64_t {
    const int64_t i = idx[idx.size() - 2], j = idx[idx.size() - 1];
    // keep j - i >= k (upper) or j - i <= k (lower); compare in 128 bits against huge k.
    const __int128 diff = static_cast<__int128>(j) - i;
    const bool keep = upper ? diff >= k : diff <= k;
    if (!keep) return -1;
    int64_t lin = 0;
    for (size_t d = 0; d < idx.size(); ++d) lin = lin * x.shape()[d] + idx[d];
    return lin;
  });
}

void reverse_sequence_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) ctx.fail_invalid("input must have rank >= 2");
  const int64_t ba = ctx.attr_int("batch_axis", 1), ta = ctx.attr_int("time_axis", 0);
  if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0))) ctx.fail_invalid("batch_axis and time_axis must be 0 and 1");
  std::vector<int64_t> lens = int_input(ctx, 1, "sequence_lens");
  if (static_cast<int64_t>(lens.size()) != x.dim(ba))
    ctx.fail_invalid("sequence_lens has " + str(static_cast<int64_t>(lens.size())) + " entries for batch " +
                     str(x.dim(ba)));
  for (int64_t l : lens)
    if (l < 0 || l > x.dim(ta)) ctx.fail_invalid("sequence length " + str(l) + " is out of range");
  auto ist = strides_of(x.shape());
  Tensor& out = ctx.make_output(0, x.dtype(), x.shape());
  move_elements(x, out, [&](const std::vector<int64_t>& idx) {
    const int64_t len = lens[static_cast<size_t>(idx[static_cast<size_t>(ba)])];
    int64_t s = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      int64_t c = idx[d];
      if (static_cast<int64_t>(d) == ta && c < len) c = len - 1 - c;
      s += c * ist[d];
    }
    return s;
  });
}

// ---------------------------------------------------------------------------------------------
// Gather family.

void gather_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  if (x.rank() == 0) ctx.fail_invalid("data must have rank >= 1");
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  std::vector<int64_t> iv = int_input(ctx, 1, "indices");
  const int64_t dim = x.dim(axis);
  for (int64_t& i : iv) i = check_index(ctx, i, dim);
  Shape os;
  for (int64_t d = 0; d < axis; ++d) os.push_back(x.dim(d));
  for (int64_t d : ind.shape()) os.push_back(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d) os.push_back(x.dim(d));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  Tensor& out = ctx.make_output(0, x.dtype(), os);
  const size_t es = dtype_size(x.dtype());
  const size_t blk = static_cast<size_t>(inner) * es;
  const auto* pi = static_cast<const std::byte*>(x.raw());
  auto* po = static_cast<std::byte*>(out.raw());
  const int64_t ni = static_cast<int64_t>(iv.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < ni; ++j)
      std::memcpy(po + static_cast<size_t>(o * ni + j) * blk,
                  pi + static_cast<size_t>(o * dim + iv[static_cast<size_t>(j)]) * blk, blk);
}

void gather_elements_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const int64_t r = x.rank();
  if (r == 0) ctx.fail_invalid("data must have rank >= 1");
  if (ind.rank() != r) ctx.fail_invalid("indices must have the rank of data");
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), r);
  for (int64_t d = 0; d < r; ++d)
    if (d != axis && ind.dim(d) > x.dim(d))
      ctx.fail_invalid("indices shape " + shape_to_string(ind.shape()) + " exceeds data shape " +
                       shape_to_string(x.shape()));
  std::vector<int64_t> iv = int_input(ctx, 1, "indices");
  for (int64_t& i : iv) i = check_index(ctx, i, x.dim(axis));
  auto ist = strides_of(x.shape());
  Tensor& out = ctx.make_output(0, x.dtype(), ind.shape());
  int64_t k = 0;
  move_elements(x, out, [&](const std::vector<int64_t>& idx) {
    int64_t s = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      s += (static_cast<int64_t>(d) == axis ? iv[static_cast<size_t>(k)] : idx[d]) * ist[d];
    ++k;
    return s;
  });
}

void gather_nd_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const int64_t r = x.rank(), q = ind.rank();
  const int64_t b = ctx.opset >= 12 ? ctx.attr_int("batch_dims", 0) : 0;
  if (r < 1 || q < 1) ctx.fail_invalid("data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) ctx.fail_invalid("batch_dims " + str(b) + " is out of range");
  const int64_t k = ind.dim(q - 1);
  if (k < 1 || k > r - b) ctx.fail_invalid("indices last dim " + str(k) + " is out of range");
  for (int64_t d = 0; d < b; ++d)
    if (ind.dim(d) != x.dim(d)) ctx.fail_invalid("batch dims of data and indices differ");
  std::vector<int64_t> iv = int_input(ctx, 1, "indices");
  Shape os;
  for (int64_t d = 0; d < q - 1; ++d) os.push_back(ind.dim(d));
  for (int64_t d = b + k; d < r; ++d) os.push_back(x.dim(d));
  int64_t nbatch = 1, per_batch = 1, inner = 1;
  for (int64_t d = 0; d < b; ++d) nbatch *= x.dim(d);
  for (int64_t d = b; d < q - 1; ++d) per_batch *= ind.dim(d);
  for (int64_t d = b + k; d < r; ++d) inner *= x.dim(d);
  int64_t batch_size = 1;
  for (int64_t d = b; d < r; ++d) batch_size *= x.dim(d);
  auto xst = strides_of(x.shape());
  Tensor& out = ctx.make_output(0, x.dtype(), os);
  const size_t es = dtype_size(x.dtype());
  const auto* pi = static_cast<const std::byte*>(x.raw());
  auto* po = static_cast<std::byte*>(out.raw());
  for (int64_t bi = 0; bi < nbatch; ++bi)
    for (int64_t j = 0; j < per_batch; ++j) {
      const int64_t t = bi * per_batch + j;
      int64_t off = bi * batch_size;
      for (int64_t c = 0; c < k; ++c) {
        int64_t v = check_index(ctx, iv[static_cast<size_t>(t * k + c)], x.dim(b + c));
        off += v * xst[static_cast<size_t>(b + c)];
      }
      std::memcpy(po + static_cast<size_t>(t * inner) * es, pi + static_cast<size_t>(off) * es,
                  static_cast<size_t>(inner) * es);
    }
}

// ---------------------------------------------------------------------------------------------
// Scatter family.

enum class Reduction { none, add, mul, max, min };

Reduction parse_reduction(KernelContext& ctx, int since) {
  if (ctx.opset < since) return Reduction::none;
  std::string r = ctx.attr_string("reduction", "none");
  if (r == "none") return Reduction::none;
  if (r == "add") return Reduction::add;
  if (r == "mul") return Reduction::mul;
  if (r == "max" && ctx.opset >= 18) return Reduction::max;
  if (r == "min" && ctx.opset >= 18) return Reduction::min;
  ctx.fail_invalid("unknown reduction '" + r + "'");
}

template <class T>
T reduce_pair(T a, T b, Reduction red) {
  if (red == Reduction::none) return b;
  if constexpr (is_float_v<T>) {
    const double x = to_f64(a), y = to_f64(b);
    double v;
    switch (red) {
      case Reduction::add: v = x + y; break;
      case Reduction::mul: v = x * y; break;
      case Reduction::max: v = (std::isnan(x) || std::isnan(y)) ? std::nan("") : std::max(x, y); break;
      default: v = (std::isnan(x) || std::isnan(y)) ? std::nan("") : std::min(x, y); break;
    }
    return from_f64<T>(v);
  } else {
    using A = acc_t<T>;
    const A x = static_cast<A>(a), y = static_cast<A>(b);
    switch (red) {
      case Reduction::add: return static_cast<T>(x + y);
      case Reduction::mul: return static_cast<T>(x * y);
      case Reduction::max: return std::max(a, b);
      default: return std::min(a, b);
    }
  }
}

// Applies out[dst[i]] = reduce(out[dst[i]], upd[i]) in order.
void scatter_apply(KernelContext& ctx, Tensor& out, const Tensor& upd, const std::vector<int64_t>& dst,
                   int64_t block, Reduction red) {
  const size_t es = dtype_size(out.dtype());
  if (red == Reduction::none) {
    auto* po = static_cast<std::byte*>(out.raw());
    const auto* pu = static_cast<const std::byte*>(upd.raw());
    for (size_t i = 0; i < dst.size(); ++i)
      std::memcpy(po + static_cast<size_t>(dst[i]) * es, pu + i * static_cast<size_t>(block) * es,
                  static_cast<size_t>(block) * es);
    return;
  }
  dispatch(ctx, out.dtype(), [&]<class T>() {
    T* po = out.data<T>();
    const T* pu = upd.data<T>();
    for (size_t i = 0; i < dst.size(); ++i)
      for (int64_t e = 0; e < block; ++e) {
        T& o = po[dst[i] + e];
        o = reduce_pair<T>(o, pu[static_cast<int64_t>(i) * block + e], red);
      }
  });
}

void scatter_elements_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  const int64_t r = x.rank();
  if (r == 0) ctx.fail_invalid("data must have rank >= 1");
  if (upd.dtype() != x.dtype()) ctx.fail_invalid("updates have a different type than data");
  if (ind.shape() != upd.shape()) ctx.fail_invalid("indices and updates have different shapes");
  if (ind.rank() != r) ctx.fail_invalid("indices must have the rank of data");
  const Reduction red = ctx.node.op == OpKind::Scatter ? Reduction::none : parse_reduction(ctx, 16);
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), r);
  for (int64_t d = 0; d < r; ++d)
    if (d != axis && ind.dim(d) > x.dim(d))
      ctx.fail_invalid("indices shape " + shape_to_string(ind.shape()) + " exceeds data shape " +
                       shape_to_string(x.shape()));
  std::vector<int64_t> iv = int_input(ctx, 1, "indices");
  auto xst = strides_of(x.shape());
  std::vector<int64_t> dst(iv.size());
  for_each_index(ind.shape(), [&](int64_t k, const std::vector<int64_t>& idx) {
    int64_t s = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      s += (static_cast<int64_t>(d) == axis ? check_index(ctx, iv[static_cast<size_t>(k)], x.dim(axis)) : idx[d]) *
           xst[d];
    dst[static_cast<size_t>(k)] = s;
  });
  Tensor out = x.clone();
  scatter_apply(ctx, out, upd, dst, 1, red);
  ctx.set_output(0, out);
}

void scatter_nd_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  const int64_t r = x.rank(), q = ind.rank();
  if (upd.dtype() != x.dtype()) ctx.fail_invalid("updates have a different type than data");
  if (r < 1 || q < 1) ctx.fail_invalid("data and indices must have rank >= 1");
  const int64_t k = ind.dim(q - 1);
  if (k > r) ctx.fail_invalid("indices last dim " + str(k) + " exceeds data rank " + str(r));
  Shape us;
  for (int64_t d = 0; d < q - 1; ++d) us.push_back(ind.dim(d));
  for (int64_t d = k; d < r; ++d) us.push_back(x.dim(d));
  if (upd.shape() != us)
    ctx.fail_invalid("updates shape " + shape_to_string(upd.shape()) + " should be " + shape_to_string(us));
  const Reduction red = parse_reduction(ctx, 16);
  std::vector<int64_t> iv = int_input(ctx, 1, "indices");
  int64_t inner = 1;
  for (int64_t d = k; d < r; ++d) inner *= x.dim(d);
  auto xst = strides_of(x.shape());
  const int64_t n = k == 0 ? shape_numel(us) / std::max<int64_t>(inner, 1) : static_cast<int64_t>(iv.size()) / k;
  std::vector<int64_t> dst(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    int64_t off = 0;
    for (int64_t c = 0; c < k; ++c)
      off += check_index(ctx, iv[static_cast<size_t>(t * k + c)], x.dim(c)) * xst[static_cast<size_t>(c)];
    dst[static_cast<size_t>(t)] = off;
  }
  Tensor out = x.clone();
  scatter_apply(ctx, out, upd, dst, inner, red);
  ctx.set_output(0, out);
}

void tensor_scatter_kernel(KernelContext& ctx) {
  const Tensor& cache = ctx.input(0);
  const Tensor& upd = ctx.input(1);
  const int64_t r = cache.rank();
  if (upd.dtype() != cache.dtype()) ctx.fail_invalid("update has a different type than past_cache");
  if (upd.rank() != r || r < 2) ctx.fail_invalid("past_cache and update must have one rank >= 2");
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -2), r);
  if (axis == 0) ctx.fail_invalid("axis must not be the batch axis 0");
  const std::string mode = ctx.attr_string("mode", "linear");
  if (mode != "linear" && mode != "circular") ctx.fail_invalid("unknown mode '" + mode + "'");
  for (int64_t d = 0; d < r; ++d) {
    if (d != axis && cache.dim(d) != upd.dim(d))
      ctx.fail_invalid("past_cache " + shape_to_string(cache.shape()) + " and update " +
                       shape_to_string(upd.shape()) + " differ in dim " + str(d));
    if (d == axis && upd.dim(d) > cache.dim(d)) ctx.fail_invalid("update is longer than past_cache along axis");
  }
  const int64_t batch = cache.dim(0), maxlen = cache.dim(axis), seqlen = upd.dim(axis);
  std::vector<int64_t> wi(static_cast<size_t>(batch), 0);
  if (ctx.has_input(2)) {
    wi = int_input(ctx, 2, "write_indices");
    if (static_cast<int64_t>(wi.size()) != batch) ctx.fail_invalid("write_indices must have one entry per batch");
  }
  int64_t prefix = 1, inner = 1;
  for (int64_t d = 1; d < axis; ++d) prefix *= cache.dim(d);
  for (int64_t d = axis + 1; d < r; ++d) inner *= cache.dim(d);
  Tensor out = cache.clone();
  const size_t es = dtype_size(cache.dtype());
  const size_t blk = static_cast<size_t>(inner) * es;
  const auto* pu = static_cast<const std::byte*>(upd.raw());
  auto* po = static_cast<std::byte*>(out.raw());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t p = 0; p < prefix; ++p)
      for (int64_t s = 0; s < seqlen; ++s) {
        int64_t c = wi[static_cast<size_t>(b)] + s;
        if (mode == "circular") c = maxlen > 0 ? ((c % maxlen) + maxlen) % maxlen : 0;
        else if (c < 0 || c >= maxlen)
          ctx.fail_invalid("write index " + str(c) + " is out of range for length " + str(maxlen));
        const int64_t row = b * prefix + p;
        std::memcpy(po + static_cast<size_t>(row * maxlen + c) * blk, pu + static_cast<size_t>(row * seqlen + s) * blk,
                    blk);
      }
  ctx.set_output(0, out);
}

// ---------------------------------------------------------------------------------------------

void one_hot_kernel(KernelContext& ctx) {
  const Tensor& ind = ctx.input(0);
  const Tensor& dep = ctx.input(1);
  const Tensor& vals = ctx.input(2);
  if (vals.numel() != 2) ctx.fail_invalid("values must hold two elements [off, on]");
  const double depf = scalar_f64(ctx, dep, "depth");
  if (!(depf >= 1) || depf > 1e12) ctx.fail_invalid("depth must be a positive number");
  const int64_t depth = static_cast<int64_t>(depf);
  const int64_t r = ind.rank();
  int64_t axis = ctx.attr_int("axis", -1);
  if (axis < -(r + 1) || axis > r) ctx.fail_invalid("axis " + str(axis) + " is out of range");
  if (axis < 0) axis += r + 1;
  Shape os = ind.shape();
  os.insert(os.begin() + axis, depth);
  std::vector<int64_t> iv(static_cast<size_t>(ind.numel()));
  for (int64_t i = 0; i < ind.numel(); ++i) {
    double v = ind.get_f64(i);
    int64_t k = std::isfinite(v) ? static_cast<int64_t>(std::trunc(v)) : -depth - 1;
    if (k < 0 && k >= -depth) k += depth;
    iv[static_cast<size_t>(i)] = k;
  }
  Tensor& out = ctx.make_output(0, vals.dtype(), os);
  const size_t es = dtype_size(vals.dtype());
  const auto* pv = static_cast<const std::byte*>(vals.raw());
  auto* po = static_cast<std::byte*>(out.raw());
  for_each_index(os, [&](int64_t k, const std::vector<int64_t>& idx) {
    // index position in `ind`: drop coordinate `axis`.
    int64_t pos = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      if (static_cast<int64_t>(d) != axis) pos = pos * os[d] + idx[d];
    const bool on = iv[static_cast<size_t>(pos)] == idx[static_cast<size_t>(axis)];
    std::memcpy(po + static_cast<size_t>(k) * es, pv + (on ? es : 0), es);
  });
}

}  // namespace

std::vector<int64_t> int_input(const KernelContext& ctx, size_t i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (dtype_is_float(t.dtype()) || t.dtype() == DType::boolean)
    ctx.fail_invalid(std::string(what) + " must be an integer tensor, got " + dtype_name(t.dtype()));
  return to_int_vector(t);
}

int64_t check_index(const KernelContext& ctx, int64_t i, int64_t dim) {
  if (i < -dim || i >= dim) ctx.fail_invalid("index " + std::to_string(i) + " is out of range for dim " + std::to_string(dim));
  return i < 0 ? i + dim : i;
}

void add_shape_kernels(KernelTable& t) {
  t.add(OpKind::Identity, identity_kernel);
  t.add(OpKind::Constant, constant_kernel);
  t.add(OpKind::Reshape, reshape_kernel);
  t.add(OpKind::Flatten, flatten_kernel);
  t.add(OpKind::Squeeze, squeeze_kernel);
  t.add(OpKind::Unsqueeze, unsqueeze_kernel);
  t.add(OpKind::Shape, shape_kernel);
  t.add(OpKind::Size, size_kernel);
  t.add(OpKind::ConstantOfShape, constant_of_shape_kernel);
  t.add(OpKind::EyeLike, eye_like_kernel);
  t.add(OpKind::Range, range_kernel);
  t.add(OpKind::Transpose, transpose_kernel);
  t.add(OpKind::Concat, concat_kernel);
  t.add(OpKind::Split, split_kernel);
  t.add(OpKind::Slice, slice_kernel);
  t.add(OpKind::Expand, expand_kernel);
  t.add(OpKind::Tile, tile_kernel);
  t.add(OpKind::Pad, pad_kernel);
  t.add(OpKind::CenterCropPad, center_crop_pad_kernel);
  t.add(OpKind::DepthToSpace, depth_to_space_kernel);
  t.add(OpKind::SpaceToDepth, space_to_depth_kernel);
  t.add(OpKind::Trilu, trilu_kernel);
  t.add(OpKind::ReverseSequence, reverse_sequence_kernel);
  t.add(OpKind::Gather, gather_kernel);
  t.add(OpKind::GatherElements, gather_elements_kernel);
  t.add(OpKind::GatherND, gather_nd_kernel);
  t.add(OpKind::Scatter, scatter_elements_kernel);
  t.add(OpKind::ScatterElements, scatter_elements_kernel);
  t.add(OpKind::ScatterND, scatter_nd_kernel);
  t.add(OpKind::TensorScatter, tensor_scatter_kernel);
  t.add(OpKind::OneHot, one_hot_kernel);
  add_shape_resize_kernels(t);
}

}  // namespace tac::ref
