// Private helpers shared by the shape-family kernel files (ops_shape*.cc) only.
#pragma once

#include <cstring>
#include <vector>

#include "reference/helpers.h"

namespace tac::ref {

// Calls f(k, idx) for every multi-index idx of `shape` in row-major order (k = linear index).
template <class F>
void for_each_index(const Shape& shape, F&& f) {
  const int64_t n = shape_numel(shape);
  if (n <= 0) return;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    f(k, static_cast<const std::vector<int64_t>&>(idx));
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// out[k] = in[src(idx)] for every output multi-index idx, copied as raw bytes (any dtype).
// src returns -1 for elements taken from `fill` (one element of out's dtype) or left zero.
template <class F>
void move_elements(const Tensor& in, Tensor& out, F&& src, const void* fill = nullptr) {
  const size_t es = dtype_size(out.dtype());
  const auto* pi = static_cast<const std::byte*>(in.raw());
  auto* po = static_cast<std::byte*>(out.raw());
  for_each_index(out.shape(), [&](int64_t k, const std::vector<int64_t>& idx) {
    const int64_t s = src(idx);
    if (s >= 0) std::memcpy(po + static_cast<size_t>(k) * es, pi + static_cast<size_t>(s) * es, es);
    else if (fill) std::memcpy(po + static_cast<size_t>(k) * es, fill, es);
  });
}

// out[k] = in[src[k]] as raw bytes.
inline void copy_indexed(const Tensor& in, Tensor& out, const std::vector<int64_t>& src) {
  const size_t es = dtype_size(out.dtype());
  const auto* pi = static_cast<const std::byte*>(in.raw());
  auto* po = static_cast<std::byte*>(out.raw());
  for (size_t k = 0; k < src.size(); ++k) std::memcpy(po + k * es, pi + static_cast<size_t>(src[k]) * es, es);
}

// Contents of integer input i (fails for float/bool tensors, naming `what`).
std::vector<int64_t> int_input(const KernelContext& ctx, size_t i, const char* what);
// Index in [-dim, dim) -> [0, dim); fails otherwise.
int64_t check_index(const KernelContext& ctx, int64_t i, int64_t dim);

// Resize and Upsample (ops_shape_resize.cc).
void add_shape_resize_kernels(KernelTable& t);

}  // namespace tac::ref
