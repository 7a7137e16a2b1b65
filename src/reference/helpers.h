// Small shared helpers for reference kernels: type dispatch, broadcasting, axes, conversions.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "reference/kernel.h"

namespace tac::ref {

// Calls f.template operator()<T>() with the C++ type of `dt`. Unsupported types fail via ctx.
// Use with a template lambda: dispatch(ctx, dt, [&]<class T>() { ... });
template <class F>
decltype(auto) dispatch(const KernelContext& ctx, DType dt, F&& f) {
  switch (dt) {
    case DType::float32: return f.template operator()<float>();
    case DType::float64: return f.template operator()<double>();
    case DType::float16: return f.template operator()<Float16>();
    case DType::bfloat16: return f.template operator()<BFloat16>();
    case DType::int8: return f.template operator()<int8_t>();
    case DType::int16: return f.template operator()<int16_t>();
    case DType::int32: return f.template operator()<int32_t>();
    case DType::int64: return f.template operator()<int64_t>();
    case DType::uint8: return f.template operator()<uint8_t>();
    case DType::uint16: return f.template operator()<uint16_t>();
    case DType::uint32: return f.template operator()<uint32_t>();
    case DType::uint64: return f.template operator()<uint64_t>();
    case DType::boolean: return f.template operator()<bool>();
    default: ctx.fail_unsupported("data type " + dtype_name(dt) + " is not supported");
  }
}

template <class T>
constexpr bool is_float_v = std::is_floating_point_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// The accumulator type used for T: double for floats, int64/uint64 for integers.
template <class T>
using acc_t = std::conditional_t<is_float_v<T>, double,
                                 std::conditional_t<std::is_unsigned_v<T>, uint64_t, int64_t>>;

template <class T>
inline double to_f64(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) return static_cast<float>(v);
  else return static_cast<double>(v);
}

// double -> T: rounding for half types, saturating truncation for integers (NaN -> 0).
template <class T>
inline T from_f64(double v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) return T(static_cast<float>(v));
  else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(v);
  else if constexpr (std::is_same_v<T, bool>) return v != 0.0;
  else {
    if (std::isnan(v)) return T(0);
    if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// Numpy-style broadcast of two shapes; fails naming both when incompatible.
Shape broadcast_shapes(const KernelContext& ctx, const Shape& a, const Shape& b);
// Row-major strides (in elements).
std::vector<int64_t> strides_of(const Shape& s);
// For each linear index of `out`, the linear index into a tensor of shape `in` broadcast to it.
std::vector<int64_t> broadcast_index(const Shape& in, const Shape& out);
// Axis in [-rank, rank) -> [0, rank); fails when out of range.
int64_t normalize_axis(const KernelContext& ctx, int64_t axis, int64_t rank);
// Integer / float tensor contents as a vector (any numeric dtype).
std::vector<int64_t> to_int_vector(const Tensor& t);
std::vector<double> to_double_vector(const Tensor& t);
// Scalar from a tensor with exactly one element (fails otherwise).
double scalar_f64(const KernelContext& ctx, const Tensor& t, const char* what);
int64_t scalar_i64(const KernelContext& ctx, const Tensor& t, const char* what);
// A new tensor of `dtype`/`shape` (fails on absurd sizes).
Tensor new_tensor(const KernelContext& ctx, DType dtype, Shape shape);

}  // namespace tac::ref
