// Reference kernels: reductions (Reduce*), ArgMax/ArgMin, TopK, CumSum/CumProd, NonZero, Unique,
// Compress, NonMaxSuppression. The signal ops (windows, DFT, STFT, MelWeightMatrix) live in
// ops_reduce_signal.cc and are registered from add_reduce_kernels() too.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "reference/helpers.h"

namespace tac::ref {

void add_reduce_signal_kernels(KernelTable& t);  // ops_reduce_signal.cc

namespace {

using ir::OpKind;

// ---------------------------------------------------------------------------------------------
// Small shared pieces
// ---------------------------------------------------------------------------------------------

// The type values are compared in: double for floats, the type itself for integers and bool.
template <class T>
using cmp_t = std::conditional_t<is_float_v<T>, double, T>;

template <class T>
inline cmp_t<T> cval(T v) {
  if constexpr (is_float_v<T>) return to_f64(v);
  else return v;
}

template <class C>
inline bool is_nan_v(C v) {
  if constexpr (std::is_floating_point_v<C>) return std::isnan(v);
  else return false;
}

// Strict "a sorts after b" with NaN greater than every number (numpy / torch order).
template <class C>
inline bool greater_nan(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return a > b;
}

// A tensor seen as [outer, n, inner] around `axis`.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisSplit split_at(const Shape& s, int64_t axis) {
  AxisSplit a;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) {
    if (d < axis) a.outer *= s[static_cast<size_t>(d)];
    else if (d == axis) a.n = s[static_cast<size_t>(d)];
    else a.inner *= s[static_cast<size_t>(d)];
  }
  return a;
}

// ---------------------------------------------------------------------------------------------
// Reduce*
// ---------------------------------------------------------------------------------------------

enum class Red { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

// Which input elements feed each output element: outputs enumerate the kept dims (row-major);
// an output's inputs are base(output) + red_offsets[k] for every k.
struct ReducePlan {
  Shape out_shape;
  std::vector<int64_t> kept_dims, kept_strides;  // kept input dims and their input strides
  std::vector<int64_t> red_offsets;              // input offsets of the reduced positions
  int64_t num_out = 0;
};

ReducePlan plan_reduce(const Shape& in, const std::vector<bool>& reduced, bool keepdims) {
  ReducePlan p;
  const auto st = strides_of(in);
  std::vector<int64_t> rdims, rstrides;
  for (size_t d = 0; d < in.size(); ++d) {
    if (reduced[d]) {
      rdims.push_back(in[d]);
      rstrides.push_back(st[d]);
      if (keepdims) p.out_shape.push_back(1);
    } else {
      p.kept_dims.push_back(in[d]);
      p.kept_strides.push_back(st[d]);
      p.out_shape.push_back(in[d]);
    }
  }
  p.num_out = 1;
  for (int64_t d : p.kept_dims) p.num_out *= d;
  int64_t count = 1;
  for (int64_t d : rdims) count *= d;
  p.red_offsets.reserve(static_cast<size_t>(count));
  if (count > 0) {
    std::vector<int64_t> pos(rdims.size(), 0);
    int64_t off = 0;
    for (int64_t k = 0; k < count; ++k) {
      p.red_offsets.push_back(off);
      for (size_t d = rdims.size(); d-- > 0;) {
        ++pos[d];
        off += rstrides[d];
        if (pos[d] < rdims[d]) break;
        off -= rstrides[d] * pos[d];
        pos[d] = 0;
      }
    }
  }
  return p;
}

// Reduces the elements s[offs[k]] with `op`, returning the result in T.
template <class T>
T reduce_one(Red op, const T* s, const std::vector<int64_t>& offs) {
  const size_t n = offs.size();
  using C = cmp_t<T>;
  switch (op) {
    case Red::Max:
    case Red::Min: {
      const bool mx = op == Red::Max;
      C best;
      if constexpr (std::is_floating_point_v<C>) best = mx ? -INFINITY : INFINITY;
      else best = mx ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
      for (size_t k = 0; k < n; ++k) {
        C v = cval(s[offs[k]]);
        if (is_nan_v(v)) return s[offs[k]];  // NaN propagates
        if (mx ? v > best : v < best) best = v;
      }
      if constexpr (is_float_v<T>) return from_f64<T>(best);
      else return best;
    }
    case Red::L2:
    case Red::LogSum: {
      double acc = 0;
      for (size_t k = 0; k < n; ++k) {
        double v = to_f64(s[offs[k]]);
        acc += op == Red::L2 ? v * v : v;
      }
      return from_f64<T>(op == Red::L2 ? std::sqrt(acc) : std::log(acc));
    }
    case Red::LogSumExp: {
      if (n == 0) return from_f64<T>(-INFINITY);
      double mx = -INFINITY;
      for (size_t k = 0; k < n; ++k) {
        double v = to_f64(s[offs[k]]);
        if (std::isnan(v)) return from_f64<T>(v);
        mx = std::max(mx, v);
      }
      if (!std::isfinite(mx)) return from_f64<T>(mx);  // all -inf, or some +inf
      double acc = 0;
      for (size_t k = 0; k < n; ++k) acc += std::exp(to_f64(s[offs[k]]) - mx);
      return from_f64<T>(mx + std::log(acc));
    }
    default: break;
  }
  // Sum, Mean, Prod, L1, SumSquare.
  if constexpr (is_float_v<T>) {
    double acc = op == Red::Prod ? 1.0 : 0.0;
    for (size_t k = 0; k < n; ++k) {
      double v = to_f64(s[offs[k]]);
      switch (op) {
        case Red::Prod: acc *= v; break;
        case Red::L1: acc += std::fabs(v); break;
        case Red::SumSquare: acc += v * v; break;
        default: acc += v; break;
      }
    }
    if (op == Red::Mean) acc /= static_cast<double>(n);  // empty: NaN, as numpy
    return from_f64<T>(acc);
  } else {
    // Integers: exact, wrapping arithmetic in 64 bits (done unsigned to avoid UB), then truncated.
    uint64_t acc = op == Red::Prod ? 1 : 0;
    for (size_t k = 0; k < n; ++k) {
      T x = s[offs[k]];
      uint64_t v = static_cast<uint64_t>(x);  // sign-extends signed values
      if constexpr (std::is_signed_v<T>) {
        if (op == Red::L1 && x < 0) v = uint64_t{0} - v;
      }
      switch (op) {
        case Red::Prod: acc *= v; break;
        case Red::SumSquare: acc += v * v; break;
        default: acc += v; break;
      }
    }
    if (op == Red::Mean) {
      if (n == 0) return T(0);
      double sum = std::is_signed_v<T> ? static_cast<double>(static_cast<int64_t>(acc)) : static_cast<double>(acc);
      return from_f64<T>(sum / static_cast<double>(n));
    }
    return static_cast<T>(acc);
  }
}

template <Red op>
void reduce_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  // Axes: an attribute before opset 13 (ReduceSum) / 18 (the others), an optional input after.
  const int axes_input_since = op == Red::Sum ? 13 : 18;
  std::vector<int64_t> axes;
  if (ctx.opset < axes_input_since) {
    axes = ctx.attr_ints("axes");
  } else {
    if (ctx.has_attr("axes"))
      ctx.fail_invalid("'axes' is an input, not an attribute, at opset " + std::to_string(ctx.opset));
    if (ctx.has_input(1)) {
      const Tensor& a = ctx.input(1);
      if (a.dtype() != DType::int64) ctx.fail_invalid("axes must be int64, got " + dtype_name(a.dtype()));
      if (a.rank() > 1) ctx.fail_invalid("axes must be a 1-D tensor");
      axes = to_int_vector(a);
    }
  }
  const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  const bool noop = ctx.opset >= axes_input_since && ctx.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  if (axes.empty()) {
    // Empty axes: reduce everything, unless noop_with_empty_axes (then reduce over no axis:
    // each output is the op applied to one element).
    if (!noop) std::fill(reduced.begin(), reduced.end(), true);
  } else {
    for (int64_t a : axes) {
      int64_t na = normalize_axis(ctx, a, rank);
      if (reduced[static_cast<size_t>(na)]) ctx.fail_invalid("axis " + std::to_string(a) + " is repeated in axes");
      reduced[static_cast<size_t>(na)] = true;
    }
  }
  if (x.dtype() == DType::boolean && op != Red::Max && op != Red::Min)
    ctx.fail_invalid("bool input is only allowed for ReduceMax and ReduceMin");
  ReducePlan p = plan_reduce(x.shape(), reduced, keepdims);
  dispatch(ctx, x.dtype(), [&]<class T>() {
    Tensor& out = ctx.make_output(0, x.dtype(), p.out_shape);
    const T* src = x.data<T>();
    T* dst = out.data<T>();
    const size_t nk = p.kept_dims.size();
    std::vector<int64_t> pos(nk, 0);
    int64_t base = 0;
    for (int64_t q = 0; q < p.num_out; ++q) {
      dst[q] = reduce_one<T>(op, src + base, p.red_offsets);
      for (size_t d = nk; d-- > 0;) {
        ++pos[d];
        base += p.kept_strides[d];
        if (pos[d] < p.kept_dims[d]) break;
        base -= p.kept_strides[d] * pos[d];
        pos[d] = 0;
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// ArgMax / ArgMin
// ---------------------------------------------------------------------------------------------

template <bool kMax>
void arg_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::boolean) ctx.fail_invalid("bool input is not allowed");
  const int64_t rank = x.rank();
  if (rank == 0) ctx.fail_invalid("input must have rank >= 1");
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), rank);
  const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  const bool last = ctx.opset >= 12 && ctx.attr_int("select_last_index", 0) != 0;
  AxisSplit sp = split_at(x.shape(), axis);
  if (sp.n == 0) ctx.fail_invalid("cannot take the arg of an empty axis");
  Shape out_shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis) out_shape.push_back(x.dim(d));
    else if (keepdims) out_shape.push_back(1);
  }
  dispatch(ctx, x.dtype(), [&]<class T>() {
    Tensor& out = ctx.make_output(0, DType::int64, out_shape);
    const T* src = x.data<T>();
    int64_t* dst = out.data<int64_t>();
    for (int64_t o = 0; o < sp.outer; ++o)
      for (int64_t i = 0; i < sp.inner; ++i) {
        const T* line = src + o * sp.n * sp.inner + i;
        int64_t best_j = 0;
        cmp_t<T> best = cval(line[0]);
        for (int64_t j = 1; j < sp.n; ++j) {
          cmp_t<T> v = cval(line[j * sp.inner]);
          // NaN wins both ArgMax and ArgMin (numpy): it is "more extreme" than any number.
          bool better;
          if constexpr (kMax) better = last ? !greater_nan(best, v) : greater_nan(v, best);
          else {
            if (is_nan_v(v) || is_nan_v(best)) better = last ? is_nan_v(v) : (is_nan_v(v) && !is_nan_v(best));
            else better = last ? v <= best : v < best;
          }
          if (better) {
            best = v;
            best_j = j;
          }
        }
        dst[o * sp.inner + i] = best_j;
      }
  });
}

// ---------------------------------------------------------------------------------------------
// TopK
// ---------------------------------------------------------------------------------------------

void topk_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::boolean) ctx.fail_invalid("bool input is not allowed");
  const int64_t rank = x.rank();
  if (rank == 0) ctx.fail_invalid("input must have rank >= 1");
  int64_t k;
  if (ctx.opset < 10) {
    k = ctx.require_int("k");
  } else {
    const Tensor& kt = ctx.input(1);
    if (kt.dtype() != DType::int64) ctx.fail_invalid("K must be int64");
    k = scalar_i64(ctx, kt, "K");
  }
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), rank);
  const bool largest = ctx.opset < 11 || ctx.attr_int("largest", 1) != 0;
  // sorted=0 leaves the order unspecified: we always return the sorted order, which is one.
  AxisSplit sp = split_at(x.shape(), axis);
  if (k < 0 || k > sp.n)
    ctx.fail_invalid("K = " + std::to_string(k) + " is out of range for axis of size " + std::to_string(sp.n));
  Shape out_shape = x.shape();
  out_shape[static_cast<size_t>(axis)] = k;
  dispatch(ctx, x.dtype(), [&]<class T>() {
    Tensor& vals = ctx.make_output(0, x.dtype(), out_shape);
    Tensor& idxs = ctx.make_output(1, DType::int64, out_shape);
    const T* src = x.data<T>();
    T* pv = vals.data<T>();
    int64_t* pi = idxs.data<int64_t>();
    std::vector<int64_t> order(static_cast<size_t>(sp.n));
    std::vector<cmp_t<T>> line(static_cast<size_t>(sp.n));
    for (int64_t o = 0; o < sp.outer; ++o)
      for (int64_t i = 0; i < sp.inner; ++i) {
        const T* base = src + o * sp.n * sp.inner + i;
        for (int64_t j = 0; j < sp.n; ++j) line[static_cast<size_t>(j)] = cval(base[j * sp.inner]);
        std::iota(order.begin(), order.end(), int64_t{0});
        // Ties: the lower index first.
        auto before = [&](int64_t a, int64_t b) {
          cmp_t<T> va = line[static_cast<size_t>(a)], vb = line[static_cast<size_t>(b)];
          if (largest ? greater_nan(va, vb) : greater_nan(vb, va)) return true;
          if (largest ? greater_nan(vb, va) : greater_nan(va, vb)) return false;
          return a < b;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          int64_t src_j = order[static_cast<size_t>(j)];
          int64_t dst_off = (o * k + j) * sp.inner + i;
          pv[dst_off] = base[src_j * sp.inner];
          pi[dst_off] = src_j;
        }
      }
  });
}

// ---------------------------------------------------------------------------------------------
// CumSum / CumProd
// ---------------------------------------------------------------------------------------------

template <bool kProd>
void cumulative_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::boolean) ctx.fail_invalid("bool input is not allowed");
  const Tensor& at = ctx.input(1);
  if (at.dtype() != DType::int32 && at.dtype() != DType::int64) ctx.fail_invalid("axis must be int32 or int64");
  if (at.rank() > 1) ctx.fail_invalid("axis must be a scalar");
  if (x.rank() == 0) ctx.fail_invalid("input must have rank >= 1");
  const int64_t axis = normalize_axis(ctx, scalar_i64(ctx, at, "axis"), x.rank());
  const bool exclusive = ctx.attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.attr_int("reverse", 0) != 0;
  AxisSplit sp = split_at(x.shape(), axis);
  dispatch(ctx, x.dtype(), [&]<class T>() {
    Tensor& out = ctx.make_output(0, x.dtype(), x.shape());
    const T* src = x.data<T>();
    T* dst = out.data<T>();
    // Floats accumulate in double; integers in wrapping 64-bit unsigned arithmetic.
    using A = std::conditional_t<is_float_v<T>, double, uint64_t>;
    auto load = [](T v) -> A {
      if constexpr (is_float_v<T>) return to_f64(v);
      else return static_cast<A>(v);
    };
    auto store = [](A v) -> T {
      if constexpr (is_float_v<T>) return from_f64<T>(v);
      else return static_cast<T>(v);
    };
    for (int64_t o = 0; o < sp.outer; ++o)
      for (int64_t i = 0; i < sp.inner; ++i) {
        A acc = kProd ? A(1) : A(0);
        for (int64_t s = 0; s < sp.n; ++s) {
          int64_t j = reverse ? sp.n - 1 - s : s;
          int64_t off = (o * sp.n + j) * sp.inner + i;
          A v = load(src[off]);
          if (exclusive) {
            dst[off] = store(acc);
            acc = kProd ? acc * v : acc + v;
          } else {
            acc = kProd ? acc * v : acc + v;
            dst[off] = store(acc);
          }
        }
      }
  });
}

// ---------------------------------------------------------------------------------------------
// NonZero
// ---------------------------------------------------------------------------------------------

void nonzero_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  // A scalar is treated as a 1-element 1-D tensor (as numpy does).
  Shape shape = x.rank() == 0 ? Shape{1} : x.shape();
  const auto st = strides_of(shape);
  std::vector<int64_t> hits;
  dispatch(ctx, x.dtype(), [&]<class T>() {
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      bool nz;
      if constexpr (is_float_v<T>) nz = to_f64(p[i]) != 0.0;  // NaN is non-zero
      else nz = p[i] != T(0);
      if (nz) hits.push_back(i);
    }
  });
  const int64_t r = static_cast<int64_t>(shape.size());
  const int64_t nnz = static_cast<int64_t>(hits.size());
  Tensor& out = ctx.make_output(0, DType::int64, {r, nnz});
  int64_t* po = out.data<int64_t>();
  for (int64_t k = 0; k < nnz; ++k) {
    int64_t rem = hits[static_cast<size_t>(k)];
    for (int64_t d = 0; d < r; ++d) {
      po[d * nnz + k] = rem / st[static_cast<size_t>(d)];
      rem %= st[static_cast<size_t>(d)];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Unique
// ---------------------------------------------------------------------------------------------

void unique_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const bool sorted = ctx.attr_int("sorted", 1) != 0;
  const bool has_axis = ctx.has_attr("axis");
  // Slices: without axis, each element; with axis, each index along it (its elements in
  // row-major order of the remaining dims, compared lexicographically as numpy does).
  AxisSplit sp;
  int64_t axis = 0;
  if (has_axis) {
    if (x.rank() == 0) ctx.fail_invalid("axis given for a scalar input");
    axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
    sp = split_at(x.shape(), axis);
  } else {
    sp.n = x.numel();
  }
  const int64_t n = sp.n;
  dispatch(ctx, x.dtype(), [&]<class T>() {
    const T* src = x.data<T>();
    auto elem = [&](int64_t slice, int64_t e) {  // e in [0, outer*inner)
      int64_t o = e / sp.inner, i = e % sp.inner;
      return cval(src[(o * n + slice) * sp.inner + i]);
    };
    const int64_t m = sp.outer * sp.inner;
    // -1 / 0 / 1 with NaN greater than numbers and equal to NaN.
    auto cmp = [&](int64_t a, int64_t b) {
      for (int64_t e = 0; e < m; ++e) {
        auto va = elem(a, e), vb = elem(b, e);
        if (greater_nan(va, vb)) return 1;
        if (greater_nan(vb, va)) return -1;
      }
      return 0;
    };
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
    // Groups of equal slices, in sorted order; the first of each group is its first occurrence.
    std::vector<int64_t> first, count;
    std::vector<int64_t> group_of(static_cast<size_t>(n));
    for (size_t k = 0; k < order.size(); ++k) {
      if (k == 0 || cmp(order[k - 1], order[k]) != 0) {
        first.push_back(order[k]);
        count.push_back(0);
      }
      ++count.back();
      group_of[static_cast<size_t>(order[k])] = static_cast<int64_t>(first.size()) - 1;
    }
    const int64_t u = static_cast<int64_t>(first.size());
    std::vector<int64_t> rank_of(static_cast<size_t>(u));  // group -> output position
    std::iota(rank_of.begin(), rank_of.end(), int64_t{0});
    if (!sorted) {
      std::vector<int64_t> g(static_cast<size_t>(u));
      std::iota(g.begin(), g.end(), int64_t{0});
      std::sort(g.begin(), g.end(), [&](int64_t a, int64_t b) { return first[static_cast<size_t>(a)] < first[static_cast<size_t>(b)]; });
      for (int64_t p = 0; p < u; ++p) rank_of[static_cast<size_t>(g[static_cast<size_t>(p)])] = p;
    }
    std::vector<int64_t> out_first(static_cast<size_t>(u)), out_count(static_cast<size_t>(u));
    for (int64_t gi = 0; gi < u; ++gi) {
      out_first[static_cast<size_t>(rank_of[static_cast<size_t>(gi)])] = first[static_cast<size_t>(gi)];
      out_count[static_cast<size_t>(rank_of[static_cast<size_t>(gi)])] = count[static_cast<size_t>(gi)];
    }
    Shape y_shape = has_axis ? x.shape() : Shape{u};
    if (has_axis) y_shape[static_cast<size_t>(axis)] = u;
    Tensor& y = ctx.make_output(0, x.dtype(), y_shape);
    T* py = y.data<T>();
    for (int64_t o = 0; o < sp.outer; ++o)
      for (int64_t p = 0; p < u; ++p)
        for (int64_t i = 0; i < sp.inner; ++i)
          py[(o * u + p) * sp.inner + i] = src[(o * n + out_first[static_cast<size_t>(p)]) * sp.inner + i];
    if (ctx.num_outputs() > 1) {
      Tensor& ind = ctx.make_output(1, DType::int64, {u});
      std::copy(out_first.begin(), out_first.end(), ind.data<int64_t>());
    }
    if (ctx.num_outputs() > 2) {
      Tensor& inv = ctx.make_output(2, DType::int64, {n});
      for (int64_t s = 0; s < n; ++s)
        inv.data<int64_t>()[s] = rank_of[static_cast<size_t>(group_of[static_cast<size_t>(s)])];
    }
    if (ctx.num_outputs() > 3) {
      Tensor& cnt = ctx.make_output(3, DType::int64, {u});
      std::copy(out_count.begin(), out_count.end(), cnt.data<int64_t>());
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Compress
// ---------------------------------------------------------------------------------------------

void compress_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& c = ctx.input(1);
  if (c.rank() != 1) ctx.fail_invalid("condition must be 1-D");
  const bool has_axis = ctx.has_attr("axis");
  AxisSplit sp;
  int64_t axis = 0;
  if (has_axis) {
    if (x.rank() == 0) ctx.fail_invalid("axis given for a scalar input");
    axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
    sp = split_at(x.shape(), axis);
  } else {
    sp.n = x.numel();
  }
  // Condition shorter than the axis: the rest is dropped; longer: only false entries may follow.
  std::vector<int64_t> keep;
  for (int64_t j = 0; j < c.numel(); ++j) {
    if (c.get_f64(j) == 0.0) continue;
    if (j >= sp.n)
      ctx.fail_invalid("condition selects index " + std::to_string(j) + " beyond the size " + std::to_string(sp.n));
    keep.push_back(j);
  }
  const int64_t kk = static_cast<int64_t>(keep.size());
  Shape out_shape = has_axis ? x.shape() : Shape{kk};
  if (has_axis) out_shape[static_cast<size_t>(axis)] = kk;
  Tensor& out = ctx.make_output(0, x.dtype(), out_shape);
  const size_t es = dtype_size(x.dtype());
  if (es == 0) ctx.fail_unsupported("data type " + dtype_name(x.dtype()) + " is not supported");
  const auto* src = static_cast<const std::byte*>(x.raw());
  auto* dst = static_cast<std::byte*>(out.raw());
  const size_t row = static_cast<size_t>(sp.inner) * es;
  for (int64_t o = 0; o < sp.outer; ++o)
    for (int64_t p = 0; p < kk; ++p)
      if (row)
        std::memcpy(dst + static_cast<size_t>(o * kk + p) * row,
                    src + static_cast<size_t>(o * sp.n + keep[static_cast<size_t>(p)]) * row, row);
}

// ---------------------------------------------------------------------------------------------
// NonMaxSuppression (float arithmetic, as the ONNX reference and runtimes do)
// ---------------------------------------------------------------------------------------------

bool suppressed_by_iou(const float* b1, const float* b2, bool center, float iou_threshold) {
  float x1_min, x1_max, x2_min, x2_max, y1_min, y1_max, y2_min, y2_max;
  if (!center) {  // [y1, x1, y2, x2], corners in either order
    x1_min = std::min(b1[1], b1[3]); x1_max = std::max(b1[1], b1[3]);
    x2_min = std::min(b2[1], b2[3]); x2_max = std::max(b2[1], b2[3]);
    y1_min = std::min(b1[0], b1[2]); y1_max = std::max(b1[0], b1[2]);
    y2_min = std::min(b2[0], b2[2]); y2_max = std::max(b2[0], b2[2]);
  } else {  // [x_center, y_center, width, height]
    x1_min = b1[0] - b1[2] / 2; x1_max = b1[0] + b1[2] / 2;
    x2_min = b2[0] - b2[2] / 2; x2_max = b2[0] + b2[2] / 2;
    y1_min = b1[1] - b1[3] / 2; y1_max = b1[1] + b1[3] / 2;
    y2_min = b2[1] - b2[3] / 2; y2_max = b2[1] + b2[3] / 2;
  }
  float ix_min = std::max(x1_min, x2_min), ix_max = std::min(x1_max, x2_max);
  if (ix_max <= ix_min) return false;
  float iy_min = std::max(y1_min, y2_min), iy_max = std::min(y1_max, y2_max);
  if (iy_max <= iy_min) return false;
  float inter = (ix_max - ix_min) * (iy_max - iy_min);
  if (inter <= 0) return false;
  float area1 = (x1_max - x1_min) * (y1_max - y1_min);
  float area2 = (x2_max - x2_min) * (y2_max - y2_min);
  float uni = area1 + area2 - inter;
  if (area1 <= 0 || area2 <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

void nms_kernel(KernelContext& ctx) {
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  if (boxes.dtype() != DType::float32 || scores.dtype() != DType::float32)
    ctx.fail_invalid("boxes and scores must be float");
  if (boxes.rank() != 3 || boxes.dim(2) != 4) ctx.fail_invalid("boxes must have shape [batch, boxes, 4]");
  if (scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1))
    ctx.fail_invalid("scores shape " + shape_to_string(scores.shape()) + " does not match boxes " +
                     shape_to_string(boxes.shape()));
  int64_t max_out = 0;
  if (ctx.has_input(2) && ctx.input(2).numel() > 0) max_out = std::max<int64_t>(ctx.input(2).get_i64(0), 0);
  float iou_threshold = 0;
  if (ctx.has_input(3) && ctx.input(3).numel() > 0) iou_threshold = static_cast<float>(ctx.input(3).get_f64(0));
  bool use_score = ctx.has_input(4) && ctx.input(4).numel() > 0;
  float score_threshold = use_score ? static_cast<float>(ctx.input(4).get_f64(0)) : 0.f;
  const int64_t cpb = ctx.attr_int("center_point_box", 0);
  if (cpb != 0 && cpb != 1) ctx.fail_invalid("center_point_box must be 0 or 1");
  const int64_t nb = boxes.dim(0), nbox = boxes.dim(1), ncls = scores.dim(1);
  const float* pb = boxes.data<float>();
  const float* ps = scores.data<float>();
  std::vector<int64_t> sel;  // triples
  std::vector<int64_t> cand, chosen;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t c = 0; c < ncls; ++c) {
      const float* cs = ps + (b * ncls + c) * nbox;
      const float* bb = pb + b * nbox * 4;
      cand.clear();
      for (int64_t i = 0; i < nbox; ++i)
        if (!use_score || cs[i] > score_threshold) cand.push_back(i);
      // Highest score first; ties: the lower box index first.
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t a, int64_t b2) { return cs[a] > cs[b2]; });
      chosen.clear();
      for (int64_t i : cand) {
        if (static_cast<int64_t>(chosen.size()) >= max_out) break;
        bool keep = true;
        for (int64_t j : chosen)
          if (suppressed_by_iou(bb + i * 4, bb + j * 4, cpb == 1, iou_threshold)) {
            keep = false;
            break;
          }
        if (keep) {
          chosen.push_back(i);
          sel.insert(sel.end(), {b, c, i});
        }
      }
    }
  const int64_t ns = static_cast<int64_t>(sel.size() / 3);
  Tensor& out = ctx.make_output(0, DType::int64, {ns, 3});
  std::copy(sel.begin(), sel.end(), out.data<int64_t>());
}

}  // namespace

void add_reduce_kernels(KernelTable& t) {
  t.add(OpKind::ReduceSum, reduce_kernel<Red::Sum>);
  t.add(OpKind::ReduceMean, reduce_kernel<Red::Mean>);
  t.add(OpKind::ReduceMax, reduce_kernel<Red::Max>);
  t.add(OpKind::ReduceMin, reduce_kernel<Red::Min>);
  t.add(OpKind::ReduceProd, reduce_kernel<Red::Prod>);
  t.add(OpKind::ReduceL1, reduce_kernel<Red::L1>);
  t.add(OpKind::ReduceL2, reduce_kernel<Red::L2>);
  t.add(OpKind::ReduceLogSum, reduce_kernel<Red::LogSum>);
  t.add(OpKind::ReduceLogSumExp, reduce_kernel<Red::LogSumExp>);
  t.add(OpKind::ReduceSumSquare, reduce_kernel<Red::SumSquare>);
  t.add(OpKind::ArgMax, arg_kernel<true>);
  t.add(OpKind::ArgMin, arg_kernel<false>);
  t.add(OpKind::TopK, topk_kernel);
  t.add(OpKind::CumSum, cumulative_kernel<false>);
  t.add(OpKind::CumProd, cumulative_kernel<true>);
  t.add(OpKind::NonZero, nonzero_kernel);
  t.add(OpKind::Unique, unique_kernel);
  t.add(OpKind::Compress, compress_kernel);
  t.add(OpKind::NonMaxSuppression, nms_kernel);
  add_reduce_signal_kernels(t);
}

}  // namespace tac::ref
