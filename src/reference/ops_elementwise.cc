// Reference kernels: elementwise unary and binary ops, activations, comparison and logic, casts.
//
// Conventions: floats are computed in double and rounded once to the output type; integer
// arithmetic wraps like two's complement (computed in uint64, no UB); integer division and
// modulo by zero fail as invalid input.
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

#include "reference/helpers.h"

namespace tac::ref {

namespace {

using ir::OpKind;

// ---------------------------------------------------------------- type checks

enum TypeSet : unsigned {
  kFloat = 1,
  kSigned = 2,
  kUnsigned = 4,  // excluding bool
  kBool = 8,
  kInt = kSigned | kUnsigned,
  kNumeric = kFloat | kInt,
  kSignedNumeric = kFloat | kSigned,
};

bool dtype_in(DType dt, unsigned allowed) {
  if (dt == DType::boolean) return allowed & kBool;
  if (dtype_is_float(dt)) return allowed & kFloat;
  if (dtype_is_signed_int(dt)) return allowed & kSigned;
  if (dtype_is_unsigned_int(dt)) return allowed & kUnsigned;
  return false;
}

// Fails naming the input when its type is not in `allowed` (unsupported types fail as such).
void require_type(const KernelContext& ctx, DType dt, unsigned allowed, const char* what = "input") {
  if (dtype_size(dt) == 0) ctx.fail_unsupported("data type " + dtype_name(dt) + " is not supported");
  if (!dtype_in(dt, allowed)) ctx.fail_invalid(std::string(what) + " type " + dtype_name(dt) + " is not allowed for this op");
}

void require_same_dtype(const KernelContext& ctx, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    ctx.fail_invalid("inputs have different types: " + dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()));
}

template <class T>
constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Two's complement wrap of a 64-bit pattern to T (well defined in C++20).
template <class T>
T wrap(uint64_t v) {
  return static_cast<T>(v);
}

// ---------------------------------------------------------------- broadcasting

// Index maps of two inputs broadcast against each other. Before opset 7 the arithmetic, logic
// and comparison ops had `broadcast`/`axis` attributes: with broadcast=1, B's dims align with
// A's starting at `axis` (trailing alignment when absent); without it shapes must be equal.
struct Broadcast2 {
  Shape shape;
  std::vector<int64_t> ia, ib;
};

Broadcast2 broadcast2(const KernelContext& ctx, const Tensor& a, const Tensor& b, bool legacy) {
  Shape sb = b.shape();
  legacy = legacy && ctx.opset < 7;
  if (legacy) {
    if (ctx.attr_int("broadcast", 0) != 0) {
      if (ctx.has_attr("axis")) {
        int64_t ra = a.rank(), rb = b.rank();
        int64_t axis = ctx.attr_int("axis", 0);
        if (axis < 0) axis += ra;
        if (axis < 0 || axis + rb > ra)
          ctx.fail_invalid("legacy broadcast axis " + std::to_string(ctx.attr_int("axis", 0)) + " does not fit shapes " +
                           shape_to_string(a.shape()) + " and " + shape_to_string(b.shape()));
        sb.assign(static_cast<size_t>(ra), 1);
        for (int64_t i = 0; i < rb; ++i) sb[static_cast<size_t>(axis + i)] = b.dim(i);
      }
      if (sb.size() > a.shape().size()) ctx.fail_invalid("legacy broadcast: B has a higher rank than A");
    } else if (a.shape() != b.shape()) {
      ctx.fail_invalid("shapes " + shape_to_string(a.shape()) + " and " + shape_to_string(b.shape()) +
                       " differ and the broadcast attribute is not set");
    }
  }
  Broadcast2 r;
  r.shape = broadcast_shapes(ctx, a.shape(), sb);
  if (legacy && r.shape != a.shape())
    ctx.fail_invalid("legacy broadcast: B of shape " + shape_to_string(b.shape()) + " does not broadcast to A " +
                     shape_to_string(a.shape()));
  r.ia = broadcast_index(a.shape(), r.shape);
  r.ib = broadcast_index(sb, r.shape);
  return r;
}

// out[i] = f(a[.], b[.]) with broadcasting; A, B are the input element types, Out the output's.
// `legacy`: the op had the pre-opset-7 broadcast/axis attributes.
template <class A, class B, class Out, class F>
void binary_map(KernelContext& ctx, DType out_dtype, F f, bool legacy = true) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Broadcast2 bc = broadcast2(ctx, a, b, legacy);
  Tensor& out = ctx.make_output(0, out_dtype, bc.shape);
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  Out* po = out.data<Out>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    size_t k = static_cast<size_t>(i);
    po[i] = f(pa[bc.ia[k]], pb[bc.ib[k]]);
  }
}

// Same-type binary op producing the input type; `f` is a template-callable on (T, T).
template <class F>
void same_type_binary(KernelContext& ctx, unsigned allowed, F f) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  require_same_dtype(ctx, a, b);
  require_type(ctx, a.dtype(), allowed);
  dispatch(ctx, a.dtype(), [&]<class T>() { binary_map<T, T, T>(ctx, a.dtype(), [&](T x, T y) { return f(x, y); }); });
}

// Comparison operand: floats compare as double, the others natively.
template <class T>
auto cmp_value(T x) {
  if constexpr (is_float_v<T>) return to_f64(x);
  else return x;
}

// Same-type binary op producing bool.
template <class F>
void predicate_binary(KernelContext& ctx, unsigned allowed, F f) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  require_same_dtype(ctx, a, b);
  require_type(ctx, a.dtype(), allowed);
  dispatch(ctx, a.dtype(), [&]<class T>() {
    binary_map<T, T, bool>(ctx, DType::boolean, [&](T x, T y) -> bool { return f(cmp_value(x), cmp_value(y)); });
  });
}

// ---------------------------------------------------------------- arithmetic

void add_kernel(KernelContext& ctx) {
  same_type_binary(ctx, kNumeric, []<class T>(T x, T y) -> T {
    if constexpr (is_float_v<T>) return from_f64<T>(to_f64(x) + to_f64(y));
    else return wrap<T>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
  });
}

void sub_kernel(KernelContext& ctx) {
  same_type_binary(ctx, kNumeric, []<class T>(T x, T y) -> T {
    if constexpr (is_float_v<T>) return from_f64<T>(to_f64(x) - to_f64(y));
    else return wrap<T>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
  });
}

void mul_kernel(KernelContext& ctx) {
  same_type_binary(ctx, kNumeric, []<class T>(T x, T y) -> T {
    if constexpr (is_float_v<T>) return from_f64<T>(to_f64(x) * to_f64(y));
    else return wrap<T>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
  });
}

// Integer division truncates toward zero (as C and the ONNX reference do).
void div_kernel(KernelContext& ctx) {
  same_type_binary(ctx, kNumeric, [&]<class T>(T x, T y) -> T {
    if constexpr (is_float_v<T>) {
      return from_f64<T>(to_f64(x) / to_f64(y));
    } else {
      if (y == 0) ctx.fail_invalid("integer division by zero");
      if constexpr (std::is_signed_v<T>) {
        if (x == std::numeric_limits<T>::min() && y == -1) return x;  // wraps
      }
      return static_cast<T>(x / y);
    }
  });
}

// fmod=1: result has the sign of the dividend (C fmod / %); fmod=0 (integers only): the sign of
// the divisor (Python %).
void mod_kernel(KernelContext& ctx) {
  const bool fmod = ctx.attr_int("fmod", 0) != 0;
  if (!fmod && dtype_is_float(ctx.input(0).dtype()))
    ctx.fail_invalid("Mod on floating-point inputs requires fmod=1");
  same_type_binary(ctx, kNumeric, [&]<class T>(T x, T y) -> T {
    if constexpr (is_float_v<T>) {
      return from_f64<T>(std::fmod(to_f64(x), to_f64(y)));
    } else {
      if (y == 0) ctx.fail_invalid("integer modulo by zero");
      if constexpr (std::is_signed_v<T>) {
        if (y == -1) return T(0);  // avoids INT_MIN % -1
        T r = static_cast<T>(x % y);
        if (!fmod && r != 0 && ((r < 0) != (y < 0))) r = static_cast<T>(r + y);
        return r;
      } else {
        return static_cast<T>(x % y);
      }
    }
  });
}

// Integer power by squaring, wrapping; negative exponents truncate 1/x^n toward zero.
template <class T>
T int_pow(const KernelContext& ctx, T base, int64_t e) {
  if (e < 0) {
    if (base == 0) ctx.fail_invalid("integer zero raised to a negative power");
    if (base == 1) return T(1);
    if constexpr (std::is_signed_v<T>) {
      if (base == -1) return (e % 2 == 0) ? T(1) : T(-1);
    }
    return T(0);
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  uint64_t ue = static_cast<uint64_t>(e);
  while (ue) {
    if (ue & 1) result *= b;
    b *= b;
    ue >>= 1;
  }
  return wrap<T>(result);
}

template <class T, class E>
T pow_value(const KernelContext& ctx, T x, E y) {
  if constexpr (is_float_v<T> || is_float_v<E>) {
    return from_f64<T>(std::pow(to_f64(x), to_f64(y)));
  } else {
    int64_t e;
    if constexpr (std::is_same_v<E, uint64_t>) {
      e = y > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                           : static_cast<int64_t>(y);
    } else {
      e = static_cast<int64_t>(y);
    }
    return int_pow<T>(ctx, x, e);
  }
}

// Pow: base and exponent may have different types; the output has the base's type.
void pow_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  require_type(ctx, a.dtype(), kNumeric, "base");
  require_type(ctx, b.dtype(), kNumeric, "exponent");
  dispatch(ctx, a.dtype(), [&]<class T>() {
    dispatch(ctx, b.dtype(), [&]<class E>() {
      binary_map<T, E, T>(ctx, a.dtype(), [&](T x, E y) -> T { return pow_value<T, E>(ctx, x, y); });
    });
  });
}

void bitshift_kernel(KernelContext& ctx) {
  std::string dir = ctx.attr_string("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") ctx.fail_invalid("direction must be LEFT or RIGHT, got '" + dir + "'");
  const bool left = dir == "LEFT";
  same_type_binary(ctx, kUnsigned, [&]<class T>(T x, T y) -> T {
    if constexpr (std::is_unsigned_v<T> && !std::is_same_v<T, bool>) {
      if (static_cast<uint64_t>(y) >= sizeof(T) * 8) return T(0);
      return left ? static_cast<T>(static_cast<uint64_t>(x) << y) : static_cast<T>(x >> y);
    } else {
      return x;  // unreachable: type checked above
    }
  });
}

template <class T>
T bit_op(char op, T x, T y) {
  uint64_t a = static_cast<uint64_t>(x), b = static_cast<uint64_t>(y);
  uint64_t r = op == '&' ? (a & b) : op == '|' ? (a | b) : (a ^ b);
  return wrap<T>(r);
}

template <char Op>
void bitwise_kernel(KernelContext& ctx) {
  same_type_binary(ctx, kInt, []<class T>(T x, T y) -> T {
    if constexpr (is_int_v<T>) return bit_op<T>(Op, x, y);
    else return x;  // unreachable
  });
}

template <char Op>
void logical_kernel(KernelContext& ctx) {
  same_type_binary(ctx, kBool, []<class T>(T x, T y) -> T {
    if constexpr (std::is_same_v<T, bool>) {
      if constexpr (Op == '&') return x && y;
      else if constexpr (Op == '|') return x || y;
      else return x != y;
    } else {
      return x;  // unreachable
    }
  });
}

// ---------------------------------------------------------------- comparison

void equal_kernel(KernelContext& ctx) {
  predicate_binary(ctx, kNumeric | kBool, [](auto x, auto y) { return x == y; });
}
void greater_kernel(KernelContext& ctx) {
  predicate_binary(ctx, kNumeric, [](auto x, auto y) { return x > y; });
}
void less_kernel(KernelContext& ctx) {
  predicate_binary(ctx, kNumeric, [](auto x, auto y) { return x < y; });
}
void greater_equal_kernel(KernelContext& ctx) {
  predicate_binary(ctx, kNumeric, [](auto x, auto y) { return x >= y; });
}
void less_equal_kernel(KernelContext& ctx) {
  predicate_binary(ctx, kNumeric, [](auto x, auto y) { return x <= y; });
}

// ---------------------------------------------------------------- unary

// y = f(x) in double for floating-point inputs only.
template <class F>
void unary_float(KernelContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  require_type(ctx, x.dtype(), kFloat);
  dispatch(ctx, x.dtype(), [&]<class T>() {
    if constexpr (is_float_v<T>) {
      Tensor& y = ctx.make_output(0, x.dtype(), x.shape());
      const T* px = x.data<T>();
      T* py = y.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) py[i] = from_f64<T>(f(to_f64(px[i])));
    }
  });
}

// y = f(x) for the types in `allowed`; `f` is a template-callable T -> T.
template <class F>
void unary_typed(KernelContext& ctx, unsigned allowed, F f) {
  const Tensor& x = ctx.input(0);
  require_type(ctx, x.dtype(), allowed);
  dispatch(ctx, x.dtype(), [&]<class T>() {
    Tensor& y = ctx.make_output(0, x.dtype(), x.shape());
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) py[i] = f(px[i]);
  });
}

#define TAC_UNARY_FLOAT(name, expr)                                  \
  void name##_kernel(KernelContext& ctx) {                           \
    unary_float(ctx, [](double x) -> double { return (expr); });     \
  }

TAC_UNARY_FLOAT(exp, std::exp(x))
TAC_UNARY_FLOAT(log, std::log(x))
TAC_UNARY_FLOAT(sqrt, std::sqrt(x))
TAC_UNARY_FLOAT(reciprocal, 1.0 / x)
TAC_UNARY_FLOAT(sin, std::sin(x))
TAC_UNARY_FLOAT(cos, std::cos(x))
TAC_UNARY_FLOAT(tan, std::tan(x))
TAC_UNARY_FLOAT(asin, std::asin(x))
TAC_UNARY_FLOAT(acos, std::acos(x))
TAC_UNARY_FLOAT(atan, std::atan(x))
TAC_UNARY_FLOAT(sinh, std::sinh(x))
TAC_UNARY_FLOAT(cosh, std::cosh(x))
TAC_UNARY_FLOAT(tanh, std::tanh(x))
TAC_UNARY_FLOAT(asinh, std::asinh(x))
TAC_UNARY_FLOAT(acosh, std::acosh(x))
TAC_UNARY_FLOAT(atanh, std::atanh(x))
TAC_UNARY_FLOAT(erf, std::erf(x))
TAC_UNARY_FLOAT(ceil, std::ceil(x))
TAC_UNARY_FLOAT(floor, std::floor(x))
TAC_UNARY_FLOAT(round, std::nearbyint(x))  // default rounding mode: half to even
TAC_UNARY_FLOAT(softsign, x / (1.0 + std::fabs(x)))

double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}
double softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

TAC_UNARY_FLOAT(sigmoid, sigmoid(x))
TAC_UNARY_FLOAT(softplus, softplus(x))
TAC_UNARY_FLOAT(mish, x * std::tanh(softplus(x)))
TAC_UNARY_FLOAT(hardswish, x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5)))

#undef TAC_UNARY_FLOAT

void abs_kernel(KernelContext& ctx) {
  unary_typed(ctx, kNumeric, []<class T>(T x) -> T {
    if constexpr (is_float_v<T>) return from_f64<T>(std::fabs(to_f64(x)));
    else if constexpr (std::is_signed_v<T>) return x < 0 ? wrap<T>(0 - static_cast<uint64_t>(x)) : x;
    else return x;
  });
}

void neg_kernel(KernelContext& ctx) {
  unary_typed(ctx, kSignedNumeric, []<class T>(T x) -> T {
    if constexpr (is_float_v<T>) return from_f64<T>(-to_f64(x));
    else return wrap<T>(0 - static_cast<uint64_t>(x));
  });
}

void sign_kernel(KernelContext& ctx) {
  unary_typed(ctx, kNumeric, []<class T>(T x) -> T {
    if constexpr (is_float_v<T>) {
      double v = to_f64(x);
      return from_f64<T>(std::isnan(v) ? v : v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0);
    } else {
      if constexpr (std::is_signed_v<T>) return static_cast<T>(x > 0 ? 1 : x < 0 ? -1 : 0);
      else return static_cast<T>(x != 0);
    }
  });
}

void relu_kernel(KernelContext& ctx) {
  unary_typed(ctx, kSignedNumeric, []<class T>(T x) -> T {
    if constexpr (is_float_v<T>) {
      double v = to_f64(x);
      return from_f64<T>(v > 0 || std::isnan(v) ? v : 0.0);
    } else {
      return x > 0 ? x : T(0);
    }
  });
}

void not_kernel(KernelContext& ctx) {
  unary_typed(ctx, kBool, []<class T>(T x) -> T { return static_cast<T>(!x); });
}

void bitwise_not_kernel(KernelContext& ctx) {
  unary_typed(ctx, kInt, []<class T>(T x) -> T { return wrap<T>(~static_cast<uint64_t>(x)); });
}

// Floating-point input, bool output.
template <class F>
void float_predicate(KernelContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  require_type(ctx, x.dtype(), kFloat);
  Tensor& y = ctx.make_output(0, DType::boolean, x.shape());
  bool* py = y.data<bool>();
  dispatch(ctx, x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) py[i] = f(to_f64(px[i]));
  });
}

void isnan_kernel(KernelContext& ctx) {
  float_predicate(ctx, [](double v) { return std::isnan(v); });
}

void isinf_kernel(KernelContext& ctx) {
  const bool neg = ctx.attr_int("detect_negative", 1) != 0;
  const bool pos = ctx.attr_int("detect_positive", 1) != 0;
  float_predicate(ctx, [&](double v) { return std::isinf(v) && (v > 0 ? pos : neg); });
}

// ---------------------------------------------------------------- activations with attributes

void leaky_relu_kernel(KernelContext& ctx) {
  const double alpha = ctx.attr_float("alpha", 0.01f);
  unary_float(ctx, [&](double x) { return x >= 0 ? x : alpha * x; });
}

void elu_kernel(KernelContext& ctx) {
  const double alpha = ctx.attr_float("alpha", 1.0f);
  unary_float(ctx, [&](double x) { return x >= 0 ? x : alpha * std::expm1(x); });
}

void selu_kernel(KernelContext& ctx) {
  const double alpha = ctx.attr_float("alpha", 1.67326319217681884765625f);
  const double gamma = ctx.attr_float("gamma", 1.05070102214813232421875f);
  unary_float(ctx, [&](double x) { return x > 0 ? gamma * x : gamma * alpha * std::expm1(x); });
}

void celu_kernel(KernelContext& ctx) {
  const double alpha = ctx.attr_float("alpha", 1.0f);
  if (alpha == 0) ctx.fail_invalid("alpha must not be zero");
  unary_float(ctx, [&](double x) { return std::max(0.0, x) + std::min(0.0, alpha * std::expm1(x / alpha)); });
}

void hard_sigmoid_kernel(KernelContext& ctx) {
  const double alpha = ctx.attr_float("alpha", 0.2f);
  const double beta = ctx.attr_float("beta", 0.5f);
  unary_float(ctx, [&](double x) { return std::max(0.0, std::min(1.0, alpha * x + beta)); });
}

void thresholded_relu_kernel(KernelContext& ctx) {
  const double alpha = ctx.attr_float("alpha", 1.0f);
  unary_float(ctx, [&](double x) { return x > alpha ? x : 0.0; });
}

void shrink_kernel(KernelContext& ctx) {
  const double lambd = ctx.attr_float("lambd", 0.5f);
  const double bias = ctx.attr_float("bias", 0.0f);
  unary_typed(ctx, kNumeric, [&]<class T>(T x) -> T {
    double v = to_f64(x);
    return from_f64<T>(v < -lambd ? v + bias : v > lambd ? v - bias : 0.0);
  });
}

void gelu_kernel(KernelContext& ctx) {
  std::string approx = ctx.attr_string("approximate", "none");
  if (approx == "none") {
    unary_float(ctx, [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); });
  } else if (approx == "tanh") {
    const double k = std::sqrt(2.0 / std::numbers::pi);
    unary_float(ctx, [&](double x) { return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x))); });
  } else {
    ctx.fail_invalid("approximate must be 'none' or 'tanh', got '" + approx + "'");
  }
}

void swish_kernel(KernelContext& ctx) {
  const double alpha = ctx.attr_float("alpha", 1.0f);
  unary_float(ctx, [&](double x) { return x * sigmoid(alpha * x); });
}

// PRelu: slope broadcasts unidirectionally to X. Before opset 7 a 1-D slope of size C is one
// value per channel (axis 1), as PyTorch's PReLU, not a numpy broadcast over the last axis.
void prelu_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(1);
  require_same_dtype(ctx, x, s);
  require_type(ctx, x.dtype(), kNumeric);
  Shape slope_shape = s.shape();
  if (ctx.opset < 7 && s.rank() == 1 && x.rank() >= 2 && s.dim(0) == x.dim(1)) {
    slope_shape.assign(static_cast<size_t>(x.rank() - 1), 1);
    slope_shape[0] = s.dim(0);
  }
  Shape shape = broadcast_shapes(ctx, x.shape(), slope_shape);
  if (shape != x.shape())
    ctx.fail_invalid("slope of shape " + shape_to_string(s.shape()) + " does not broadcast to X of shape " +
                     shape_to_string(x.shape()));
  const std::vector<int64_t> is = broadcast_index(slope_shape, shape);
  dispatch(ctx, x.dtype(), [&]<class T>() {
    Tensor& out = ctx.make_output(0, x.dtype(), shape);
    const T* px = x.data<T>();
    const T* ps = s.data<T>();
    T* po = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      T v = px[i], a = ps[is[static_cast<size_t>(i)]];
      if constexpr (is_float_v<T>) {
        double d = to_f64(v);
        po[i] = d < 0 ? from_f64<T>(d * to_f64(a)) : v;
      } else if constexpr (std::is_signed_v<T>) {
        po[i] = v < 0 ? wrap<T>(static_cast<uint64_t>(v) * static_cast<uint64_t>(a)) : v;
      } else {
        po[i] = v;
      }
    }
  });
}

// Clip: min/max attributes before opset 11, optional inputs from opset 11.
void clip_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (ctx.opset < 11) {
    require_type(ctx, x.dtype(), kFloat);
    const double lo = ctx.attr_float("min", std::numeric_limits<float>::lowest());
    const double hi = ctx.attr_float("max", std::numeric_limits<float>::max());
    unary_float(ctx, [&](double v) { return v < lo ? lo : v > hi ? hi : v; });
    return;
  }
  require_type(ctx, x.dtype(), kNumeric);
  for (size_t i = 1; i <= 2; ++i) {
    if (!ctx.has_input(i)) continue;
    const Tensor& b = ctx.input(i);
    require_same_dtype(ctx, x, b);
    if (b.numel() != 1) ctx.fail_invalid(std::string(i == 1 ? "min" : "max") + " must be a scalar");
  }
  dispatch(ctx, x.dtype(), [&]<class T>() {
    const bool has_lo = ctx.has_input(1), has_hi = ctx.has_input(2);
    const T lo = has_lo ? ctx.input(1).data<T>()[0] : T();
    const T hi = has_hi ? ctx.input(2).data<T>()[0] : T();
    Tensor& y = ctx.make_output(0, x.dtype(), x.shape());
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      if constexpr (is_float_v<T>) {
        double v = to_f64(px[i]);
        if (has_lo && v < to_f64(lo)) v = to_f64(lo);
        if (has_hi && v > to_f64(hi)) v = to_f64(hi);
        py[i] = from_f64<T>(v);
      } else {
        T v = px[i];
        if (has_lo && v < lo) v = lo;
        if (has_hi && v > hi) v = hi;
        py[i] = v;
      }
    }
  });
}

// ---------------------------------------------------------------- variadic

// Output shape and each input's index map for the variadic ops (numpy broadcast of all).
Shape variadic_shape(KernelContext& ctx, std::vector<std::vector<int64_t>>& maps) {
  if (ctx.num_inputs() == 0) ctx.fail_invalid("needs at least one input");
  const DType dt = ctx.input(0).dtype();
  Shape shape = ctx.input(0).shape();
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).dtype() != dt)
      ctx.fail_invalid("input " + std::to_string(i) + " has type " + dtype_name(ctx.input(i).dtype()) + ", expected " +
                       dtype_name(dt));
    shape = broadcast_shapes(ctx, shape, ctx.input(i).shape());
  }
  for (size_t i = 0; i < ctx.num_inputs(); ++i) maps.push_back(broadcast_index(ctx.input(i).shape(), shape));
  return shape;
}

template <bool Mean>
void sum_mean_kernel(KernelContext& ctx) {
  require_type(ctx, ctx.input(0).dtype(), Mean ? kFloat : kNumeric);
  std::vector<std::vector<int64_t>> maps;
  Shape shape = variadic_shape(ctx, maps);
  const DType dt = ctx.input(0).dtype();
  dispatch(ctx, dt, [&]<class T>() {
    Tensor& y = ctx.make_output(0, dt, shape);
    T* py = y.data<T>();
    const int64_t n = y.numel();
    if constexpr (is_float_v<T>) {
      std::vector<double> acc(static_cast<size_t>(n), 0.0);
      for (size_t k = 0; k < ctx.num_inputs(); ++k) {
        const T* p = ctx.input(k).data<T>();
        for (int64_t i = 0; i < n; ++i) acc[static_cast<size_t>(i)] += to_f64(p[maps[k][static_cast<size_t>(i)]]);
      }
      const double div = Mean ? static_cast<double>(ctx.num_inputs()) : 1.0;
      for (int64_t i = 0; i < n; ++i) py[i] = from_f64<T>(acc[static_cast<size_t>(i)] / div);
    } else if constexpr (is_int_v<T>) {
      std::vector<uint64_t> acc(static_cast<size_t>(n), 0);
      for (size_t k = 0; k < ctx.num_inputs(); ++k) {
        const T* p = ctx.input(k).data<T>();
        for (int64_t i = 0; i < n; ++i)
          acc[static_cast<size_t>(i)] += static_cast<uint64_t>(p[maps[k][static_cast<size_t>(i)]]);
      }
      for (int64_t i = 0; i < n; ++i) py[i] = wrap<T>(acc[static_cast<size_t>(i)]);
    }
  });
}

// Max / Min; NaN propagates (as numpy's maximum / minimum).
template <bool IsMax>
void max_min_kernel(KernelContext& ctx) {
  require_type(ctx, ctx.input(0).dtype(), kNumeric);
  std::vector<std::vector<int64_t>> maps;
  Shape shape = variadic_shape(ctx, maps);
  const DType dt = ctx.input(0).dtype();
  dispatch(ctx, dt, [&]<class T>() {
    Tensor& y = ctx.make_output(0, dt, shape);
    T* py = y.data<T>();
    const int64_t n = y.numel();
    for (int64_t i = 0; i < n; ++i) {
      const size_t si = static_cast<size_t>(i);
      T best = ctx.input(0).data<T>()[maps[0][si]];
      for (size_t k = 1; k < ctx.num_inputs(); ++k) {
        T v = ctx.input(k).data<T>()[maps[k][si]];
        if constexpr (is_float_v<T>) {
          double b = to_f64(best), d = to_f64(v);
          if (std::isnan(b)) continue;
          if (std::isnan(d) || (IsMax ? d > b : d < b)) best = v;
        } else {
          if (IsMax ? v > best : v < best) best = v;
        }
      }
      py[i] = best;
    }
  });
}

// ---------------------------------------------------------------- selection

void where_kernel(KernelContext& ctx) {
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  if (c.dtype() != DType::boolean) ctx.fail_invalid("condition must be bool, got " + dtype_name(c.dtype()));
  if (x.dtype() != y.dtype())
    ctx.fail_invalid("X and Y have different types: " + dtype_name(x.dtype()) + " and " + dtype_name(y.dtype()));
  const size_t es = dtype_size(x.dtype());
  if (es == 0) ctx.fail_unsupported("data type " + dtype_name(x.dtype()) + " is not supported");
  Shape shape = broadcast_shapes(ctx, broadcast_shapes(ctx, c.shape(), x.shape()), y.shape());
  auto ic = broadcast_index(c.shape(), shape);
  auto ix = broadcast_index(x.shape(), shape);
  auto iy = broadcast_index(y.shape(), shape);
  Tensor& out = ctx.make_output(0, x.dtype(), shape);
  const uint8_t* pc = c.data<uint8_t>();
  const std::byte* px = static_cast<const std::byte*>(x.raw());
  const std::byte* py = static_cast<const std::byte*>(y.raw());
  std::byte* po = static_cast<std::byte*>(out.raw());
  for (int64_t i = 0; i < out.numel(); ++i) {
    const size_t k = static_cast<size_t>(i);
    const std::byte* src = pc[ic[k]] ? px + static_cast<size_t>(ix[k]) * es : py + static_cast<size_t>(iy[k]) * es;
    std::memcpy(po + k * es, src, es);
  }
}

// ---------------------------------------------------------------- casts

// One value From -> To: float -> int truncates toward zero and saturates (NaN -> 0);
// int -> int wraps (two's complement, as numpy's astype); anything -> bool is `!= 0`.
template <class To, class From>
To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (is_float_v<From>) return to_f64(v) != 0.0;
    else return v != 0;
  } else if constexpr (is_float_v<To>) {
    if constexpr (std::is_same_v<To, float> && !is_float_v<From>) return static_cast<float>(v);  // one rounding
    else return from_f64<To>(to_f64(v));
  } else {  // integer target
    if constexpr (is_float_v<From>) return from_f64<To>(to_f64(v));
    else return static_cast<To>(v);
  }
}

void cast_to(KernelContext& ctx, const Tensor& x, DType to) {
  if (dtype_size(to) == 0 || !dtype_supported(static_cast<int32_t>(to)))
    ctx.fail_unsupported("cast to data type " + dtype_name(static_cast<int32_t>(to)) + " is not supported");
  if (dtype_size(x.dtype()) == 0) ctx.fail_unsupported("data type " + dtype_name(x.dtype()) + " is not supported");
  dispatch(ctx, x.dtype(), [&]<class From>() {
    dispatch(ctx, to, [&]<class To>() {
      Tensor& y = ctx.make_output(0, to, x.shape());
      const From* px = x.data<From>();
      To* py = y.data<To>();
      for (int64_t i = 0; i < x.numel(); ++i) py[i] = convert<To, From>(px[i]);
    });
  });
}

void cast_kernel(KernelContext& ctx) {
  cast_to(ctx, ctx.input(0), static_cast<DType>(ctx.require_int("to")));
}

void cast_like_kernel(KernelContext& ctx) { cast_to(ctx, ctx.input(0), ctx.input(1).dtype()); }

// BitCast (opset 26): reinterpret the bits of each element as another type of the same size.
void bitcast_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const DType to = static_cast<DType>(ctx.require_int("to"));
  if (dtype_size(to) == 0 || !dtype_supported(static_cast<int32_t>(to)))
    ctx.fail_unsupported("bitcast to data type " + dtype_name(static_cast<int32_t>(to)) + " is not supported");
  if (dtype_size(x.dtype()) == 0) ctx.fail_unsupported("data type " + dtype_name(x.dtype()) + " is not supported");
  if (dtype_size(to) != dtype_size(x.dtype()))
    ctx.fail_invalid("bitcast between types of different sizes: " + dtype_name(x.dtype()) + " and " +
                     dtype_name(to));
  Tensor& y = ctx.make_output(0, to, x.shape());
  if (x.bytes() > 0) std::memcpy(y.raw(), x.raw(), x.bytes());
  if (to == DType::boolean) {  // keep bools canonical (0 / 1)
    uint8_t* p = y.data<uint8_t>();
    for (int64_t i = 0; i < y.numel(); ++i) p[i] = p[i] != 0;
  }
}

// Dropout in inference mode: output = input, mask all true. Training with a nonzero ratio is
// random and not supported.
void dropout_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_type(ctx, x.dtype(), kFloat);
  bool training = false;
  double ratio = 0.5;
  if (ctx.opset < 7) {
    training = ctx.attr_int("is_test", 0) == 0;
    ratio = ctx.attr_float("ratio", 0.5f);
  } else if (ctx.opset < 12) {
    ratio = ctx.attr_float("ratio", 0.5f);
  } else {
    if (ctx.has_input(1)) ratio = scalar_f64(ctx, ctx.input(1), "ratio");
    if (ctx.has_input(2)) training = scalar_i64(ctx, ctx.input(2), "training_mode") != 0;
  }
  if (ratio < 0 || ratio >= 1) ctx.fail_invalid("ratio must be in [0, 1), got " + std::to_string(ratio));
  if (training && ratio != 0) ctx.fail_unsupported("Dropout in training mode with a nonzero ratio (random)");
  ctx.set_output(0, x);
  if (ctx.wants_output(1)) {
    // The mask is bool from opset 10 (the input's type before).
    const DType mdt = ctx.opset >= 10 ? DType::boolean : x.dtype();
    Tensor& m = ctx.make_output(1, mdt, x.shape());
    for (int64_t i = 0; i < m.numel(); ++i) m.set_f64(i, 1.0);
  }
}

}  // namespace

void add_elementwise_kernels(KernelTable& t) {
  // arithmetic
  t.add(OpKind::Add, add_kernel);
  t.add(OpKind::Sub, sub_kernel);
  t.add(OpKind::Mul, mul_kernel);
  t.add(OpKind::Div, div_kernel);
  t.add(OpKind::Mod, mod_kernel);
  t.add(OpKind::Pow, pow_kernel);
  // bitwise and logic
  t.add(OpKind::BitShift, bitshift_kernel);
  t.add(OpKind::BitwiseAnd, bitwise_kernel<'&'>);
  t.add(OpKind::BitwiseOr, bitwise_kernel<'|'>);
  t.add(OpKind::BitwiseXor, bitwise_kernel<'^'>);
  t.add(OpKind::BitwiseNot, bitwise_not_kernel);
  t.add(OpKind::And, logical_kernel<'&'>);
  t.add(OpKind::Or, logical_kernel<'|'>);
  t.add(OpKind::Xor, logical_kernel<'^'>);
  t.add(OpKind::Not, not_kernel);
  // comparison
  t.add(OpKind::Equal, equal_kernel);
  t.add(OpKind::Greater, greater_kernel);
  t.add(OpKind::Less, less_kernel);
  t.add(OpKind::GreaterOrEqual, greater_equal_kernel);
  t.add(OpKind::LessOrEqual, less_equal_kernel);
  // unary math
  t.add(OpKind::Abs, abs_kernel);
  t.add(OpKind::Neg, neg_kernel);
  t.add(OpKind::Sign, sign_kernel);
  t.add(OpKind::Exp, exp_kernel);
  t.add(OpKind::Log, log_kernel);
  t.add(OpKind::Sqrt, sqrt_kernel);
  t.add(OpKind::Reciprocal, reciprocal_kernel);
  t.add(OpKind::Sin, sin_kernel);
  t.add(OpKind::Cos, cos_kernel);
  t.add(OpKind::Tan, tan_kernel);
  t.add(OpKind::Asin, asin_kernel);
  t.add(OpKind::Acos, acos_kernel);
  t.add(OpKind::Atan, atan_kernel);
  t.add(OpKind::Sinh, sinh_kernel);
  t.add(OpKind::Cosh, cosh_kernel);
  t.add(OpKind::Tanh, tanh_kernel);
  t.add(OpKind::Asinh, asinh_kernel);
  t.add(OpKind::Acosh, acosh_kernel);
  t.add(OpKind::Atanh, atanh_kernel);
  t.add(OpKind::Erf, erf_kernel);
  t.add(OpKind::Ceil, ceil_kernel);
  t.add(OpKind::Floor, floor_kernel);
  t.add(OpKind::Round, round_kernel);
  t.add(OpKind::IsNaN, isnan_kernel);
  t.add(OpKind::IsInf, isinf_kernel);
  // activations
  t.add(OpKind::Relu, relu_kernel);
  t.add(OpKind::LeakyRelu, leaky_relu_kernel);
  t.add(OpKind::Elu, elu_kernel);
  t.add(OpKind::Selu, selu_kernel);
  t.add(OpKind::Celu, celu_kernel);
  t.add(OpKind::Sigmoid, sigmoid_kernel);
  t.add(OpKind::HardSigmoid, hard_sigmoid_kernel);
  t.add(OpKind::HardSwish, hardswish_kernel);
  t.add(OpKind::Softplus, softplus_kernel);
  t.add(OpKind::Softsign, softsign_kernel);
  t.add(OpKind::Mish, mish_kernel);
  t.add(OpKind::Gelu, gelu_kernel);
  t.add(OpKind::Swish, swish_kernel);
  t.add(OpKind::ThresholdedRelu, thresholded_relu_kernel);
  t.add(OpKind::Shrink, shrink_kernel);
  t.add(OpKind::PRelu, prelu_kernel);
  t.add(OpKind::Clip, clip_kernel);
  // variadic
  t.add(OpKind::Sum, sum_mean_kernel<false>);
  t.add(OpKind::Mean, sum_mean_kernel<true>);
  t.add(OpKind::Max, max_min_kernel<true>);
  t.add(OpKind::Min, max_min_kernel<false>);
  // selection, casts
  t.add(OpKind::Where, where_kernel);
  t.add(OpKind::Cast, cast_kernel);
  t.add(OpKind::CastLike, cast_like_kernel);
  t.add(OpKind::BitCast, bitcast_kernel);
  t.add(OpKind::Dropout, dropout_kernel);
}

}  // namespace tac::ref
