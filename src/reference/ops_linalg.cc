// Reference kernels: Gemm, MatMul, MatMulInteger, QLinearMatMul, QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, Einsum, Det. Attention-style ops and losses live in ops_linalg_attention.cc.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "reference/helpers.h"

namespace tac::ref {

void add_linalg_attention_kernels(KernelTable& t);  // ops_linalg_attention.cc

namespace {

using ir::OpKind;

bool is_float_dtype(DType t) { return dtype_is_float(t); }

// Fails unless `t` is one of `allowed`.
void require_dtype(const KernelContext& ctx, const Tensor& t, const char* what, std::initializer_list<DType> allowed) {
  for (DType d : allowed)
    if (t.dtype() == d) return;
  ctx.fail_invalid(std::string(what) + " has unsupported type " + dtype_name(t.dtype()));
}

const std::initializer_list<DType> kMatMulTypes = {DType::float32, DType::float64, DType::float16, DType::bfloat16,
                                                   DType::int32,   DType::int64,   DType::uint32,  DType::uint64};

// out[M,N] += a[M,K] * b[K,N] with row-major contiguous operands (i-k-j order, Acc accumulator).
// Rows are independent and each is computed by the same sequential loop, so spreading them over
// threads (large products only) changes no result bit: it only makes the reference of a
// BERT-size model take seconds instead of a minute (the tuner computes it before every tune).
template <class Acc>
void matmul_2d(const Acc* a, const Acc* b, Acc* out, int64_t M, int64_t K, int64_t N) {
#pragma omp parallel for schedule(static) if (M > 1 && M * K * N > (int64_t{1} << 22))
  for (int64_t i = 0; i < M; ++i) {
    Acc* row = out + i * N;
    for (int64_t k = 0; k < K; ++k) {
      const Acc av = a[i * K + k];
      const Acc* brow = b + k * N;
      for (int64_t j = 0; j < N; ++j) row[j] += av * brow[j];
    }
  }
}

// Batched matmul with numpy semantics over already >=2-D shapes sa [..., M, K] and sb [..., K, N].
// Returns the output shape [batch..., M, N] and fills `out`.
template <class Acc>
Shape batched_matmul(const KernelContext& ctx, const Shape& sa, const std::vector<Acc>& a, const Shape& sb,
                     const std::vector<Acc>& b, std::vector<Acc>& out) {
  const int64_t M = sa[sa.size() - 2], K = sa.back();
  const int64_t K2 = sb[sb.size() - 2], N = sb.back();
  if (K != K2)
    ctx.fail_invalid("inner dimensions do not match: " + shape_to_string(sa) + " x " + shape_to_string(sb));
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  Shape batch = broadcast_shapes(ctx, ba, bb);
  auto ia = broadcast_index(ba, batch);
  auto ib = broadcast_index(bb, batch);
  const int64_t nb = shape_numel(batch);
  Shape so = batch;
  so.push_back(M);
  so.push_back(N);
  const int64_t total = shape_numel(so);
  if (total < 0) ctx.fail_invalid("output shape overflows");
  out.assign(static_cast<size_t>(total), Acc(0));
  for (int64_t bi = 0; bi < nb; ++bi) {
    const Acc* pa = a.data() + ia[static_cast<size_t>(bi)] * M * K;
    const Acc* pb = b.data() + ib[static_cast<size_t>(bi)] * K * N;
    matmul_2d(pa, pb, out.data() + bi * M * N, M, K, N);
  }
  return so;
}

// Integer contents as uint64 (two's complement wrap) so that integer matmul wraps like the type.
std::vector<uint64_t> to_u64_vector(const Tensor& t) {
  std::vector<uint64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = static_cast<uint64_t>(t.get_i64(i));
  return v;
}

void write_f64(Tensor& out, const std::vector<double>& v) {
  for (int64_t i = 0; i < out.numel(); ++i) out.set_f64(i, v[static_cast<size_t>(i)]);
}
void write_u64(Tensor& out, const std::vector<uint64_t>& v) {
  for (int64_t i = 0; i < out.numel(); ++i) out.set_i64(i, static_cast<int64_t>(v[static_cast<size_t>(i)]));
}

// ---------------------------------------------------------------------------------------------
// MatMul

// numpy 1-D promotion: returns the promoted shapes and the final output shape adjustment.
void promote_matmul_shapes(const KernelContext& ctx, Shape& sa, Shape& sb, bool& drop_m, bool& drop_n) {
  if (sa.empty() || sb.empty()) ctx.fail_invalid("MatMul inputs must have rank >= 1");
  drop_m = drop_n = false;
  if (sa.size() == 1) {
    sa.insert(sa.begin(), 1);
    drop_m = true;
  }
  if (sb.size() == 1) {
    sb.push_back(1);
    drop_n = true;
  }
}

Shape finish_matmul_shape(Shape so, bool drop_m, bool drop_n) {
  if (drop_n) so.erase(so.end() - 1);
  if (drop_m) so.erase(so.end() - (drop_n ? 1 : 2));
  return so;
}

void matmul_kernel(KernelContext& ctx) {
  const Tensor& A = ctx.input(0);
  const Tensor& B = ctx.input(1);
  if (A.dtype() != B.dtype())
    ctx.fail_invalid("inputs have different types: " + dtype_name(A.dtype()) + " and " + dtype_name(B.dtype()));
  require_dtype(ctx, A, "input A", kMatMulTypes);
  Shape sa = A.shape(), sb = B.shape();
  bool drop_m, drop_n;
  promote_matmul_shapes(ctx, sa, sb, drop_m, drop_n);
  if (is_float_dtype(A.dtype())) {
    std::vector<double> out;
    Shape so = batched_matmul(ctx, sa, to_double_vector(A), sb, to_double_vector(B), out);
    write_f64(ctx.make_output(0, A.dtype(), finish_matmul_shape(so, drop_m, drop_n)), out);
  } else {
    std::vector<uint64_t> out;
    Shape so = batched_matmul(ctx, sa, to_u64_vector(A), sb, to_u64_vector(B), out);
    write_u64(ctx.make_output(0, A.dtype(), finish_matmul_shape(so, drop_m, drop_n)), out);
  }
}

// ---------------------------------------------------------------------------------------------
// Gemm: Y = alpha * A' * B' + beta * C

void gemm_kernel(KernelContext& ctx) {
  const Tensor& A = ctx.input(0);
  const Tensor& B = ctx.input(1);
  if (A.dtype() != B.dtype())
    ctx.fail_invalid("inputs have different types: " + dtype_name(A.dtype()) + " and " + dtype_name(B.dtype()));
  require_dtype(ctx, A, "input A", kMatMulTypes);
  if (A.rank() != 2 || B.rank() != 2)
    ctx.fail_invalid("A and B must be 2-D, got " + shape_to_string(A.shape()) + " and " + shape_to_string(B.shape()));
  const bool ta = ctx.attr_int("transA", 0) != 0, tb = ctx.attr_int("transB", 0) != 0;
  const double alpha = ctx.attr_float("alpha", 1.0f), beta = ctx.attr_float("beta", 1.0f);
  const int64_t M = ta ? A.dim(1) : A.dim(0), K = ta ? A.dim(0) : A.dim(1);
  const int64_t K2 = tb ? B.dim(1) : B.dim(0), N = tb ? B.dim(0) : B.dim(1);
  if (K != K2)
    ctx.fail_invalid("inner dimensions do not match: " + shape_to_string(A.shape()) + " x " + shape_to_string(B.shape()) +
                     (ta ? " (transA)" : "") + (tb ? " (transB)" : ""));
  const Shape so = {M, N};
  const Tensor* C = nullptr;
  if (ctx.has_input(2)) {
    C = &ctx.input(2);
    if (C->dtype() != A.dtype()) ctx.fail_invalid("C has type " + dtype_name(C->dtype()) + ", A has " + dtype_name(A.dtype()));
    if (C->rank() > 2 || broadcast_shapes(ctx, C->shape(), so) != so)
      ctx.fail_invalid("C of shape " + shape_to_string(C->shape()) + " does not broadcast to " + shape_to_string(so));
  }
  Tensor& Y = ctx.make_output(0, A.dtype(), so);
  const bool is_float = is_float_dtype(A.dtype());
  // Lay out A as [M,K] and B as [K,N].
  auto fetch = [](const Tensor& t, bool trans, int64_t r, int64_t c, bool fl) -> std::pair<std::vector<double>, std::vector<uint64_t>> {
    std::vector<double> d;
    std::vector<uint64_t> u;
    if (fl) d.resize(static_cast<size_t>(r * c));
    else u.resize(static_cast<size_t>(r * c));
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) {
        int64_t src = trans ? j * r + i : i * c + j;
        if (fl) d[static_cast<size_t>(i * c + j)] = t.get_f64(src);
        else u[static_cast<size_t>(i * c + j)] = static_cast<uint64_t>(t.get_i64(src));
      }
    return {std::move(d), std::move(u)};
  };
  auto [ad, au] = fetch(A, ta, M, K, is_float);
  auto [bd, bu] = fetch(B, tb, K, N, is_float);
  std::vector<int64_t> ci;
  if (C) ci = broadcast_index(C->shape(), so);
  if (is_float) {
    std::vector<double> out(static_cast<size_t>(M * N), 0.0);
    matmul_2d(ad.data(), bd.data(), out.data(), M, K, N);
    for (int64_t i = 0; i < M * N; ++i) {
      double v = alpha * out[static_cast<size_t>(i)];
      if (C) v += beta * C->get_f64(ci[static_cast<size_t>(i)]);
      Y.set_f64(i, v);
    }
  } else {
    std::vector<uint64_t> out(static_cast<size_t>(M * N), 0);
    matmul_2d(au.data(), bu.data(), out.data(), M, K, N);
    const bool exact = alpha == 1.0 && (beta == 1.0 || !C);
    for (int64_t i = 0; i < M * N; ++i) {
      if (exact) {
        uint64_t v = out[static_cast<size_t>(i)];
        if (C) v += static_cast<uint64_t>(C->get_i64(ci[static_cast<size_t>(i)]));
        Y.set_i64(i, static_cast<int64_t>(v));
      } else {
        double v = alpha * static_cast<double>(static_cast<int64_t>(out[static_cast<size_t>(i)]));
        if (C) v += beta * static_cast<double>(C->get_i64(ci[static_cast<size_t>(i)]));
        Y.set_f64(i, v);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Integer / quantized matmuls

// Zero point values for a matrix operand: scalar, or per-row (A: length M) / per-column (B: length N).
// Returns a per-element vector of zero points for the [.., R, C] operand, indexed by `axis_len` dim.
std::vector<int64_t> zero_point_values(const KernelContext& ctx, int in_idx, const Tensor& x, const char* what,
                                       int64_t expect_len) {
  if (!ctx.has_input(static_cast<size_t>(in_idx))) return {0};
  const Tensor& zp = ctx.input(static_cast<size_t>(in_idx));
  if (zp.dtype() != x.dtype())
    ctx.fail_invalid(std::string(what) + " zero point has type " + dtype_name(zp.dtype()) + ", expected " +
                     dtype_name(x.dtype()));
  if (zp.numel() == 1) return {zp.get_i64(0)};
  if (zp.rank() > 1) ctx.fail_unsupported(std::string(what) + " zero point of rank > 1");
  if (zp.numel() != expect_len)
    ctx.fail_invalid(std::string(what) + " zero point of shape " + shape_to_string(zp.shape()) + " must be a scalar or have " +
                     std::to_string(expect_len) + " elements");
  return to_int_vector(zp);
}

// Subtracts zero points: per_row => zp indexed by the row (dim -2), else by the column (dim -1).
std::vector<int64_t> centered(const Tensor& x, const Shape& s, const std::vector<int64_t>& zp, bool per_row) {
  std::vector<int64_t> v(static_cast<size_t>(x.numel()));
  const int64_t cols = s.back(), rows = s[s.size() - 2];
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t z = zp.size() == 1 ? zp[0] : zp[static_cast<size_t>(per_row ? (i / cols) % rows : i % cols)];
    v[static_cast<size_t>(i)] = x.get_i64(i) - z;
  }
  return v;
}

void matmul_integer_kernel(KernelContext& ctx) {
  const Tensor& A = ctx.input(0);
  const Tensor& B = ctx.input(1);
  require_dtype(ctx, A, "input A", {DType::uint8, DType::int8});
  require_dtype(ctx, B, "input B", {DType::uint8, DType::int8});
  Shape sa = A.shape(), sb = B.shape();
  bool drop_m, drop_n;
  promote_matmul_shapes(ctx, sa, sb, drop_m, drop_n);
  auto zpa = zero_point_values(ctx, 2, A, "a", sa[sa.size() - 2]);
  auto zpb = zero_point_values(ctx, 3, B, "b", sb.back());
  auto a = centered(A, sa, zpa, true);
  auto b = centered(B, sb, zpb, false);
  std::vector<int64_t> out;
  Shape so = batched_matmul(ctx, sa, a, sb, b, out);
  Tensor& Y = ctx.make_output(0, DType::int32, finish_matmul_shape(so, drop_m, drop_n));
  for (int64_t i = 0; i < Y.numel(); ++i) Y.data<int32_t>()[i] = static_cast<int32_t>(out[static_cast<size_t>(i)]);
}

// Round half to even, then saturate into [lo, hi].
double round_saturate(double v, double lo, double hi) {
  if (std::isnan(v)) return lo < 0 ? 0 : lo;  // NaN: undefined; 0 is the conventional choice
  v = std::nearbyint(v);
  return std::min(hi, std::max(lo, v));
}

void int_range(const KernelContext& ctx, DType t, double& lo, double& hi) {
  switch (t) {
    case DType::uint8: lo = 0, hi = 255; break;
    case DType::int8: lo = -128, hi = 127; break;
    case DType::uint16: lo = 0, hi = 65535; break;
    case DType::int16: lo = -32768, hi = 32767; break;
    case DType::int32: lo = -2147483648.0, hi = 2147483647.0; break;
    default: ctx.fail_unsupported("quantized type " + dtype_name(t) + " is not supported");
  }
}

void qlinear_matmul_kernel(KernelContext& ctx) {
  const Tensor& A = ctx.input(0);
  const Tensor& B = ctx.input(3);
  require_dtype(ctx, A, "input a", {DType::uint8, DType::int8});
  require_dtype(ctx, B, "input b", {DType::uint8, DType::int8});
  Shape sa = A.shape(), sb = B.shape();
  bool drop_m, drop_n;
  promote_matmul_shapes(ctx, sa, sb, drop_m, drop_n);
  auto zpa = zero_point_values(ctx, 2, A, "a", sa[sa.size() - 2]);
  auto zpb = zero_point_values(ctx, 5, B, "b", sb.back());
  const Tensor& as = ctx.input(1);
  const Tensor& bs = ctx.input(4);
  const Tensor& ys = ctx.input(6);
  for (const Tensor* s : {&as, &bs, &ys})
    if (!is_float_dtype(s->dtype())) ctx.fail_invalid("scales must be floating point, got " + dtype_name(s->dtype()));
  const int64_t M = sa[sa.size() - 2], N = sb.back();
  if (as.numel() != 1 && as.numel() != M) ctx.fail_invalid("a_scale must be a scalar or have M elements");
  if (bs.numel() != 1 && bs.numel() != N) ctx.fail_invalid("b_scale must be a scalar or have N elements");
  if (ys.numel() != 1) ctx.fail_invalid("y_scale must be a scalar");
  DType out_t = A.dtype();
  double yzp = 0;
  if (ctx.has_input(7)) {
    const Tensor& z = ctx.input(7);
    if (z.numel() != 1) ctx.fail_invalid("y_zero_point must be a scalar");
    out_t = z.dtype();
    yzp = z.get_f64(0);
  }
  double lo, hi;
  int_range(ctx, out_t, lo, hi);
  auto a = centered(A, sa, zpa, true);
  auto b = centered(B, sb, zpb, false);
  std::vector<int64_t> out;
  Shape so = batched_matmul(ctx, sa, a, sb, b, out);
  Tensor& Y = ctx.make_output(0, out_t, finish_matmul_shape(so, drop_m, drop_n));
  // Multiplier a_scale*b_scale/y_scale computed in the scales' precision, as the reference does.
  const bool f32 = as.dtype() == DType::float32 && bs.dtype() == DType::float32 && ys.dtype() == DType::float32;
  const double y_s = ys.get_f64(0);
  for (int64_t i = 0; i < Y.numel(); ++i) {
    const int64_t col = i % N, row = (i / N) % M;
    double sa_v = as.get_f64(as.numel() == 1 ? 0 : row), sb_v = bs.get_f64(bs.numel() == 1 ? 0 : col);
    double mult = f32 ? static_cast<double>(static_cast<float>(static_cast<float>(sa_v * sb_v) / static_cast<float>(y_s)))
                      : sa_v * sb_v / y_s;
    double v = static_cast<double>(out[static_cast<size_t>(i)]) * mult;
    if (f32) v = static_cast<float>(v);
    v += yzp;
    Y.set_f64(i, round_saturate(v, lo, hi));
  }
}

// ---------------------------------------------------------------------------------------------
// QuantizeLinear / DequantizeLinear

// For element i of x, the index into scale/zero_point: per-tensor, per-axis or blocked.
struct QuantParams {
  int kind = 0;  // 0 per-tensor, 1 per-axis, 2 blocked
  int64_t axis = 0, block = 0;
  Shape xs;
  std::vector<int64_t> xstrides, sstrides;
  Shape ss;
  int64_t param_index(int64_t i) const {
    if (kind == 0) return 0;
    if (kind == 1) return (i / xstrides[static_cast<size_t>(axis)]) % xs[static_cast<size_t>(axis)];
    int64_t off = 0, rem = i;
    for (size_t d = 0; d < xs.size(); ++d) {
      int64_t c = rem / xstrides[d];
      rem %= xstrides[d];
      if (static_cast<int64_t>(d) == axis) c /= block;
      off += c * sstrides[d];
    }
    return off;
  }
};

QuantParams quant_params(const KernelContext& ctx, const Tensor& x, const Tensor& scale, const Tensor* zp) {
  QuantParams q;
  q.xs = x.shape();
  q.xstrides = strides_of(q.xs);
  if (zp && zp->shape() != scale.shape())
    ctx.fail_invalid("zero point shape " + shape_to_string(zp->shape()) + " differs from scale shape " +
                     shape_to_string(scale.shape()));
  const int64_t block = ctx.attr_int("block_size", 0);
  if (block < 0) ctx.fail_invalid("block_size must be >= 0");
  if (scale.rank() == 0 || (scale.rank() == 1 && scale.numel() == 1 && block == 0)) return q;
  q.axis = normalize_axis(ctx, ctx.attr_int("axis", 1), x.rank());
  const int64_t dim = x.dim(q.axis);
  if (block == 0) {
    if (scale.rank() != 1 || scale.numel() != dim)
      ctx.fail_invalid("per-axis scale of shape " + shape_to_string(scale.shape()) + " must have " + std::to_string(dim) +
                       " elements (axis " + std::to_string(q.axis) + " of " + shape_to_string(x.shape()) + ")");
    q.kind = 1;
    return q;
  }
  if (scale.rank() != x.rank()) ctx.fail_invalid("blocked scale must have the rank of the input");
  for (int64_t d = 0; d < x.rank(); ++d) {
    int64_t want = d == q.axis ? (x.dim(d) + block - 1) / block : x.dim(d);
    if (scale.dim(d) != want)
      ctx.fail_invalid("blocked scale shape " + shape_to_string(scale.shape()) + " does not match input " +
                       shape_to_string(x.shape()) + " with block_size " + std::to_string(block));
  }
  q.kind = 2;
  q.block = block;
  q.ss = scale.shape();
  q.sstrides = strides_of(q.ss);
  return q;
}

void quantize_linear_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  require_dtype(ctx, x, "input x", {DType::float32, DType::float16, DType::bfloat16, DType::int32, DType::float64});
  if (!is_float_dtype(scale.dtype())) ctx.fail_invalid("y_scale must be floating point");
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  DType out_t = DType::uint8;
  if (zp) out_t = zp->dtype();
  else if (ctx.has_attr("output_dtype") && ctx.attr_int("output_dtype", 0) != 0) {
    int64_t code = ctx.attr_int("output_dtype", 0);
    if (!dtype_supported(static_cast<int32_t>(code))) ctx.fail_unsupported("output_dtype " + dtype_name(static_cast<int32_t>(code)));
    out_t = static_cast<DType>(code);
  }
  if (zp && ctx.has_attr("output_dtype") && ctx.attr_int("output_dtype", 0) != 0 &&
      ctx.attr_int("output_dtype", 0) != static_cast<int64_t>(zp->dtype()))
    ctx.fail_invalid("output_dtype disagrees with the zero point type");
  double lo, hi;
  if (out_t == DType::int32) ctx.fail_unsupported("quantizing to int32 is not supported");
  int_range(ctx, out_t, lo, hi);
  QuantParams q = quant_params(ctx, x, scale, zp);
  Tensor& y = ctx.make_output(0, out_t, x.shape());
  // The division happens in float32 for float32 inputs (the reference does), else in double.
  const bool f32 = x.dtype() != DType::float64 && scale.dtype() != DType::float64;
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t p = q.param_index(i);
    double s = scale.get_f64(p);
    double v = x.get_f64(i) / s;
    if (f32) v = static_cast<float>(v);
    v = std::nearbyint(v) + (zp ? zp->get_f64(p) : 0.0);
    y.set_f64(i, std::isnan(v) ? 0.0 : std::min(hi, std::max(lo, v)));
  }
}

void dequantize_linear_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  require_dtype(ctx, x, "input x", {DType::uint8, DType::int8, DType::uint16, DType::int16, DType::int32});
  if (!is_float_dtype(scale.dtype())) ctx.fail_invalid("x_scale must be floating point");
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (zp && zp->dtype() != x.dtype())
    ctx.fail_invalid("zero point type " + dtype_name(zp->dtype()) + " differs from input type " + dtype_name(x.dtype()));
  DType out_t = scale.dtype();
  if (ctx.has_attr("output_dtype") && ctx.attr_int("output_dtype", 0) != 0) {
    int64_t code = ctx.attr_int("output_dtype", 0);
    if (code != static_cast<int64_t>(scale.dtype()))
      ctx.fail_invalid("output_dtype must equal the scale type " + dtype_name(scale.dtype()));
  }
  QuantParams q = quant_params(ctx, x, scale, zp);
  Tensor& y = ctx.make_output(0, out_t, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t p = q.param_index(i);
    double v = static_cast<double>(x.get_i64(i) - (zp ? zp->get_i64(p) : 0)) * scale.get_f64(p);
    y.set_f64(i, v);
  }
}

void dynamic_quantize_linear_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_dtype(ctx, x, "input x", {DType::float32});
  const float* px = x.data<float>();
  float mn = 0, mx = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (std::isnan(px[i])) ctx.fail_invalid("input contains NaN");
    mn = std::min(mn, px[i]);
    mx = std::max(mx, px[i]);
  }
  // float32 arithmetic throughout, as the specification's formula in float.
  const float scale = (mx - mn) / 255.0f;
  float zpf = 0;
  if (scale != 0) zpf = static_cast<float>(std::min(255.0, std::max(0.0, static_cast<double>(std::nearbyint((0.0f - mn) / scale)))));
  Tensor& y = ctx.make_output(0, DType::uint8, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = scale == 0 ? 0.0 : static_cast<double>(std::nearbyint(px[i] / scale)) + zpf;
    y.data<uint8_t>()[i] = static_cast<uint8_t>(std::min(255.0, std::max(0.0, v)));
  }
  if (ctx.wants_output(1)) ctx.make_output(1, DType::float32, {}).data<float>()[0] = scale;
  if (ctx.wants_output(2)) ctx.make_output(2, DType::uint8, {}).data<uint8_t>()[0] = static_cast<uint8_t>(zpf);
}

// ---------------------------------------------------------------------------------------------
// Einsum: a generic index loop over output labels x summed labels.

struct EinsumTerm {
  std::vector<int> labels;  // letter labels (ASCII codes) and -1 for the ellipsis position
  bool has_ellipsis = false;
};

EinsumTerm parse_einsum_term(const KernelContext& ctx, const std::string& s) {
  EinsumTerm t;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '.') {
      if (s.compare(i, 3, "...") != 0 || t.has_ellipsis) ctx.fail_invalid("bad ellipsis in einsum term '" + s + "'");
      t.has_ellipsis = true;
      t.labels.push_back(-1);
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      t.labels.push_back(c);
    } else {
      ctx.fail_invalid(std::string("bad character '") + c + "' in einsum equation");
    }
  }
  return t;
}

void einsum_kernel(KernelContext& ctx) {
  std::string eq;
  for (char c : ctx.attr_string("equation", "")) if (c != ' ') eq += c;
  if (eq.empty()) ctx.fail_invalid("missing equation");
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<EinsumTerm> terms;
  {
    size_t start = 0;
    while (true) {
      size_t comma = lhs.find(',', start);
      terms.push_back(parse_einsum_term(ctx, lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  const size_t n = ctx.num_inputs();
  if (terms.size() != n)
    ctx.fail_invalid("equation has " + std::to_string(terms.size()) + " terms but the node has " + std::to_string(n) + " inputs");
  const DType dt = ctx.input(0).dtype();
  for (size_t k = 0; k < n; ++k)
    if (ctx.input(k).dtype() != dt) ctx.fail_invalid("inputs have different types");
  if (dt == DType::boolean) ctx.fail_invalid("Einsum does not accept bool");
  // Ellipsis ranks; the broadcast ellipsis has E dims, labeled 0..E-1 (letters keep their codes >= 65).
  int64_t E = 0;
  std::vector<int64_t> erank(n, 0);
  for (size_t k = 0; k < n; ++k) {
    int64_t letters = 0;
    for (int l : terms[k].labels) letters += l >= 0;
    const int64_t r = ctx.input(k).rank();
    if (terms[k].has_ellipsis) {
      if (r < letters) ctx.fail_invalid("input " + std::to_string(k) + " has fewer dims than its einsum term");
      erank[k] = r - letters;
    } else if (r != letters) {
      ctx.fail_invalid("input " + std::to_string(k) + " of rank " + std::to_string(r) + " does not match its term");
    }
    E = std::max(E, erank[k]);
  }
  if (E > 60) ctx.fail_unsupported("einsum ellipsis covering more than 60 dims");
  // Expand each term into per-dim label ids.
  std::vector<std::vector<int>> dims(n);
  for (size_t k = 0; k < n; ++k)
    for (int l : terms[k].labels) {
      if (l >= 0) dims[k].push_back(l);
      else
        for (int64_t j = 0; j < erank[k]; ++j) dims[k].push_back(static_cast<int>(E - erank[k] + j));
    }
  // Label sizes.
  std::vector<int64_t> size(128, -1);
  for (size_t k = 0; k < n; ++k) {
    const Tensor& t = ctx.input(k);
    for (size_t d = 0; d < dims[k].size(); ++d) {
      int l = dims[k][d];
      int64_t s = t.dim(static_cast<int64_t>(d));
      int64_t& cur = size[static_cast<size_t>(l)];
      if (cur == -1 || (l < E && cur == 1)) cur = s;
      else if (cur != s && !(l < E && s == 1))
        ctx.fail_invalid("einsum label '" + (l < E ? std::string("...") : std::string(1, static_cast<char>(l))) +
                         "' has inconsistent sizes " + std::to_string(cur) + " and " + std::to_string(s));
    }
  }
  // Output labels.
  std::vector<int> out;
  if (arrow != std::string::npos) {
    EinsumTerm ot = parse_einsum_term(ctx, eq.substr(arrow + 2));
    bool used_ell = false;
    for (int l : ot.labels) {
      if (l < 0) {
        used_ell = true;
        for (int64_t j = 0; j < E; ++j) out.push_back(static_cast<int>(j));
      } else {
        if (size[static_cast<size_t>(l)] < 0) ctx.fail_invalid(std::string("output label '") + static_cast<char>(l) + "' is not in any input");
        if (std::count(out.begin(), out.end(), l)) ctx.fail_invalid("output label repeated");
        out.push_back(l);
      }
    }
    if (E > 0 && !used_ell) ctx.fail_unsupported("ellipsis in inputs but not in the explicit output");
  } else {
    for (int64_t j = 0; j < E; ++j) out.push_back(static_cast<int>(j));
    std::vector<int> count(128, 0);
    for (size_t k = 0; k < n; ++k)
      for (int l : terms[k].labels) if (l >= 0) ++count[static_cast<size_t>(l)];
    for (int l = 65; l < 128; ++l) if (count[static_cast<size_t>(l)] == 1) out.push_back(l);
  }
  std::vector<int> summed;
  for (int l = 0; l < 128; ++l)
    if (size[static_cast<size_t>(l)] >= 0 && !std::count(out.begin(), out.end(), l)) summed.push_back(l);
  // Per-operand stride of each label (summing repeated labels: diagonals; 0 for broadcast size-1 dims).
  std::vector<std::vector<int64_t>> lstride(n, std::vector<int64_t>(128, 0));
  for (size_t k = 0; k < n; ++k) {
    auto st = strides_of(ctx.input(k).shape());
    for (size_t d = 0; d < dims[k].size(); ++d) {
      int l = dims[k][d];
      if (ctx.input(k).dim(static_cast<int64_t>(d)) == 1 && size[static_cast<size_t>(l)] != 1) continue;
      lstride[k][static_cast<size_t>(l)] += st[d];
    }
  }
  Shape oshape;
  for (int l : out) oshape.push_back(size[static_cast<size_t>(l)]);
  int64_t nsum = 1;
  for (int l : summed) nsum *= size[static_cast<size_t>(l)];
  // Offsets of every summed combination, per operand.
  std::vector<std::vector<int64_t>> soff(n, std::vector<int64_t>(static_cast<size_t>(std::max<int64_t>(nsum, 0)), 0));
  {
    std::vector<int64_t> pos(summed.size(), 0);
    for (int64_t s = 0; s < nsum; ++s) {
      for (size_t k = 0; k < n; ++k) {
        int64_t off = 0;
        for (size_t j = 0; j < summed.size(); ++j) off += pos[j] * lstride[k][static_cast<size_t>(summed[j])];
        soff[k][static_cast<size_t>(s)] = off;
      }
      for (size_t j = summed.size(); j-- > 0;) {
        if (++pos[j] < size[static_cast<size_t>(summed[j])]) break;
        pos[j] = 0;
      }
    }
  }
  Tensor& Y = ctx.make_output(0, dt, oshape);
  const bool fl = is_float_dtype(dt);
  std::vector<std::vector<double>> vd(n);
  std::vector<std::vector<int64_t>> vi(n);
  for (size_t k = 0; k < n; ++k) {
    if (fl) vd[k] = to_double_vector(ctx.input(k));
    else vi[k] = to_int_vector(ctx.input(k));
  }
  std::vector<int64_t> opos(out.size(), 0);
  std::vector<int64_t> base(n, 0);
  for (int64_t o = 0; o < Y.numel(); ++o) {
    for (size_t k = 0; k < n; ++k) {
      int64_t off = 0;
      for (size_t j = 0; j < out.size(); ++j) off += opos[j] * lstride[k][static_cast<size_t>(out[j])];
      base[k] = off;
    }
    if (fl) {
      double acc = 0;
      for (int64_t s = 0; s < nsum; ++s) {
        double p = 1;
        for (size_t k = 0; k < n; ++k) p *= vd[k][static_cast<size_t>(base[k] + soff[k][static_cast<size_t>(s)])];
        acc += p;
      }
      Y.set_f64(o, acc);
    } else {
      uint64_t acc = 0;
      for (int64_t s = 0; s < nsum; ++s) {
        uint64_t p = 1;
        for (size_t k = 0; k < n; ++k) p *= static_cast<uint64_t>(vi[k][static_cast<size_t>(base[k] + soff[k][static_cast<size_t>(s)])]);
        acc += p;
      }
      Y.set_i64(o, static_cast<int64_t>(acc));
    }
    for (size_t j = out.size(); j-- > 0;) {
      if (++opos[j] < oshape[j]) break;
      opos[j] = 0;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Det: LU decomposition with partial pivoting in double, per matrix of [..., M, M].

void det_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_dtype(ctx, x, "input X", {DType::float32, DType::float64, DType::float16, DType::bfloat16});
  if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2))
    ctx.fail_invalid("input must be [..., M, M], got " + shape_to_string(x.shape()));
  const int64_t m = x.dim(x.rank() - 1);
  Shape so(x.shape().begin(), x.shape().end() - 2);
  Tensor& y = ctx.make_output(0, x.dtype(), so);
  std::vector<double> a(static_cast<size_t>(m * m));
  for (int64_t b = 0; b < y.numel(); ++b) {
    for (int64_t i = 0; i < m * m; ++i) a[static_cast<size_t>(i)] = x.get_f64(b * m * m + i);
    double det = 1;
    for (int64_t c = 0; c < m && det != 0; ++c) {
      int64_t piv = c;
      for (int64_t r = c + 1; r < m; ++r)
        if (std::fabs(a[static_cast<size_t>(r * m + c)]) > std::fabs(a[static_cast<size_t>(piv * m + c)])) piv = r;
      if (a[static_cast<size_t>(piv * m + c)] == 0) {
        det = 0;
        break;
      }
      if (piv != c) {
        for (int64_t j = 0; j < m; ++j) std::swap(a[static_cast<size_t>(c * m + j)], a[static_cast<size_t>(piv * m + j)]);
        det = -det;
      }
      const double d = a[static_cast<size_t>(c * m + c)];
      det *= d;
      for (int64_t r = c + 1; r < m; ++r) {
        const double f = a[static_cast<size_t>(r * m + c)] / d;
        if (f == 0) continue;
        for (int64_t j = c; j < m; ++j) a[static_cast<size_t>(r * m + j)] -= f * a[static_cast<size_t>(c * m + j)];
      }
    }
    y.set_f64(b, det);
  }
}

}  // namespace

void add_linalg_kernels(KernelTable& t) {
  t.add(OpKind::Gemm, gemm_kernel);
  t.add(OpKind::MatMul, matmul_kernel);
  t.add(OpKind::MatMulInteger, matmul_integer_kernel);
  t.add(OpKind::QLinearMatMul, qlinear_matmul_kernel);
  t.add(OpKind::QuantizeLinear, quantize_linear_kernel);
  t.add(OpKind::DequantizeLinear, dequantize_linear_kernel);
  t.add(OpKind::DynamicQuantizeLinear, dynamic_quantize_linear_kernel);
  t.add(OpKind::Einsum, einsum_kernel);
  t.add(OpKind::Det, det_kernel);
  add_linalg_attention_kernels(t);
}

}  // namespace tac::ref
