// Private helpers shared by the NN-family reference kernels (ops_nn*.cc). Not a public header.
#pragma once

#include <vector>

#include "reference/helpers.h"

namespace tac::ref::nn {

// Tensor contents as doubles (fast path through typed pointers).
inline std::vector<double> load_f64(const KernelContext& ctx, const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  dispatch(ctx, t.dtype(), [&]<class T>() {
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = to_f64(p[i]);
  });
  return v;
}

// Writes doubles into `out` (converted to its dtype).
inline void store_f64(const KernelContext& ctx, Tensor& out, const double* v) {
  dispatch(ctx, out.dtype(), [&]<class T>() {
    T* p = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) p[i] = from_f64<T>(v[i]);
  });
}

inline void require_float(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (!dtype_is_float(t.dtype()))
    ctx.fail_invalid(std::string(what) + " must be a floating-point tensor, got " + dtype_name(t.dtype()));
}

inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

inline int64_t prod(const Shape& s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e && i < s.size(); ++i) p *= s[i];
  return p;
}

void add_norm_kernels(KernelTable& t);
void add_sample_kernels(KernelTable& t);

}  // namespace tac::ref::nn
