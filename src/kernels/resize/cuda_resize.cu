// Our own CUDA Resize kernel (see cuda_resize.h): one thread per output element, the filter taps
// of each dim precomputed on the host (the reference's formulas, in double) and read from a table.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda_elem.cuh"
#include "kernels/resize/cuda_resize.h"

namespace tac::cuda::kern {

namespace {

template <class T>
__global__ void __launch_bounds__(256) resize_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                     const ResizeTap* __restrict__ table, ResizeDesc d, int64_t n) {
  TAC_GRID_STRIDE(i, n) {
    const ResizeTap* tap[kMaxDims];
    int64_t rem = i;
    bool outside = false;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t c = rem % d.out_dims[k];
      rem /= d.out_dims[k];
      tap[k] = table + d.tap_off[k] + c * d.taps[k];
      outside |= tap[k][0].idx < 0;
    }
    if (outside) {
      st(y, i, d.extrapolation);
      continue;
    }
    int pos[kMaxDims] = {};
    float acc = 0.f;
    for (;;) {
      int64_t off = 0;
      float w = 1.f;
      for (int k = 0; k < d.rank; ++k) {
        const ResizeTap t = tap[k][pos[k]];
        off += static_cast<int64_t>(t.idx) * d.in_strides[k];
        w *= t.w;
      }
      if (w != 0.f) acc += w * ld(x, off);
      int k = d.rank - 1;
      while (k >= 0 && ++pos[k] == d.taps[k]) pos[k--] = 0;
      if (k < 0) break;
    }
    st(y, i, acc);
  }
}

}  // namespace

int resize(Elem t, const void* x, void* y, const ResizeTap* table, const ResizeDesc& d, int64_t n, void* stream) {
  if (n <= 0) return 0;
  return with_elem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    resize_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(static_cast<const T*>(x), static_cast<T*>(y), table, d, n);
    return launched();
  });
}

}  // namespace tac::cuda::kern
