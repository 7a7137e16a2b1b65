// Activation layouts (DESIGN.md section 3 "Precision, layout, memory"). A value's shape is always
// its logical NCHW shape; its layout says how the elements lie in its buffer:
//   nchw     plain row-major in the logical order (every value of rank != 4 is plain)
//   nhwc     [N][H][W][C]
//   nchw16c  [N][ceil(C/16)][H][W][16], channel-blocked (oneDNN's nChw16c, native on AVX-512)
//   nchw8c   [N][ceil(C/8)][H][W][8]   (oneDNN's nChw8c, native on AVX2)
// Blocked buffers hold ceil(C/b)*b channels; the padded channels are kept zero (every tactic
// that writes a blocked value writes zeros there, and oneDNN relies on it).
#pragma once

#include <cstdint>
#include <string>

#include "tactician/tensor.h"

namespace tac::ir {

enum class Layout : uint8_t { nchw = 0, nhwc = 1, nchw16c = 2, nchw8c = 3 };
constexpr uint8_t kMaxLayout = 3;

const char* layout_name(Layout l);  // "nchw", "nhwc", "nchw16c", "nchw8c"
// Channel block: 16 / 8 for the blocked layouts, 1 otherwise.
inline int64_t layout_block(Layout l) { return l == Layout::nchw16c ? 16 : l == Layout::nchw8c ? 8 : 1; }
inline bool is_blocked(Layout l) { return layout_block(l) > 1; }

// Elements the buffer holds (the logical count, or N * ceil(C/b)*b * H * W when blocked); -1 when
// a dim is negative or the count overflows.
int64_t physical_numel(const Shape& logical, Layout l);
// Bytes of that buffer for `dtype`; -1 when it overflows int64.
int64_t physical_bytes(const Shape& logical, Layout l, DType dtype);
// Offset of logical element (n, c, h, w) of a 4-D value of `logical` shape [N, C, H, W].
inline int64_t layout_offset(const Shape& s, Layout l, int64_t n, int64_t c, int64_t h, int64_t w) {
  const int64_t C = s[1], H = s[2], W = s[3];
  switch (l) {
    case Layout::nhwc: return ((n * H + h) * W + w) * C + c;
    case Layout::nchw16c: case Layout::nchw8c: {
      const int64_t b = layout_block(l), cb = (C + b - 1) / b;
      return (((n * cb + c / b) * H + h) * W + w) * b + c % b;
    }
    case Layout::nchw: break;
  }
  return ((n * C + c) * H + h) * W + w;
}

// The buffer of a value of logical shape `s` in layout `l` (any dtype), from / to its plain data
// (rank-4 only; padded channels written as zeros). The loops every faster path is tested against.
Tensor to_layout(const Tensor& plain, Layout l);
Tensor from_layout(const Tensor& physical, const Shape& logical, Layout l);

}  // namespace tac::ir
