#include "ir/layout.h"

#include <cstdint>

#include <cstring>

namespace tac::ir {

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::nchw: return "nchw";
    case Layout::nhwc: return "nhwc";
    case Layout::nchw16c: return "nchw16c";
    case Layout::nchw8c: return "nchw8c";
  }
  return "?";
}

int64_t physical_numel(const Shape& s, Layout l) {
  if (!is_blocked(l) || s.size() != 4) return shape_numel(s);
  const int64_t b = layout_block(l);
  if (s[1] < 0 || s[1] > INT64_MAX - b) return -1;
  return shape_numel({s[0], (s[1] + b - 1) / b * b, s[2], s[3]});
}

int64_t physical_bytes(const Shape& logical, Layout l, DType dtype) {
  const int64_t n = physical_numel(logical, l), es = static_cast<int64_t>(dtype_size(dtype));
  return n < 0 || (es > 0 && n > INT64_MAX / es) ? -1 : n * es;
}

Tensor to_layout(const Tensor& plain, Layout l) {
  const Shape& s = plain.shape();
  if (l == Layout::nchw || s.size() != 4) return plain;
  Tensor out = Tensor::create(plain.dtype(), {physical_numel(s, l)}).value();
  std::memset(out.raw(), 0, out.bytes());
  const size_t e = dtype_size(plain.dtype());
  const auto* src = static_cast<const unsigned char*>(plain.raw());
  auto* dst = static_cast<unsigned char*>(out.raw());
  for (int64_t n = 0, i = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t h = 0; h < s[2]; ++h)
        for (int64_t w = 0; w < s[3]; ++w, ++i)
          std::memcpy(dst + static_cast<size_t>(layout_offset(s, l, n, c, h, w)) * e, src + static_cast<size_t>(i) * e, e);
  return out;
}

Tensor from_layout(const Tensor& physical, const Shape& s, Layout l) {
  if (l == Layout::nchw || s.size() != 4) return physical.reshaped(s).clone();
  Tensor out = Tensor::create(physical.dtype(), s).value();
  const size_t e = dtype_size(physical.dtype());
  const auto* src = static_cast<const unsigned char*>(physical.raw());
  auto* dst = static_cast<unsigned char*>(out.raw());
  for (int64_t n = 0, i = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t h = 0; h < s[2]; ++h)
        for (int64_t w = 0; w < s[3]; ++w, ++i)
          std::memcpy(dst + static_cast<size_t>(i) * e, src + static_cast<size_t>(layout_offset(s, l, n, c, h, w)) * e, e);
  return out;
}

}  // namespace tac::ir
