// Our own depthwise convolution (see cuda_kernels.h): one thread per output element, the
// KH x KW taps of its input channel read directly (the input plane is small and stays in L1/L2),
// fp32 accumulation, the epilogue (bias, residual, activation) applied before the one store.
// nchw or nhwc activations (the residual in y's layout; W always [M][KH][KW]).
// MobileNet-style layers are memory-bound: 9 multiply-adds per output element against one load
// of the input; cuDNN's implicit GEMM spends a GEMM's setup on them.
#include "kernels/cuda_elem.cuh"
#include "kernels/elementwise/cuda_act.cuh"

namespace tac::cuda::kern {

namespace {

template <class T>
__global__ void depthwise_kernel(const T* __restrict__ x, const T* __restrict__ w, const float* __restrict__ bias,
                                 const T* __restrict__ res, T* __restrict__ y, DepthwiseDesc d) {
  const int64_t total = d.N * d.M * d.OH * d.OW;
  const int64_t mult = d.M / d.C;
  TAC_GRID_STRIDE(i, total) {
    // nchw: i = ((n*M + m)*OH + oh)*OW + ow, x's plane of channel c at (n*C + c)*H*W, pixels 1 apart;
    // nhwc: i = ((n*OH + oh)*OW + ow)*M + m (neighbouring threads, neighbouring channels), pixels C apart.
    int64_t ow, oh, m, n;
    if (d.nhwc) {
      m = i % d.M, ow = (i / d.M) % d.OW, oh = (i / (d.M * d.OW)) % d.OH, n = i / (d.M * d.OW * d.OH);
    } else {
      ow = i % d.OW, oh = (i / d.OW) % d.OH, m = (i / (d.OW * d.OH)) % d.M, n = i / (d.OW * d.OH * d.M);
    }
    const int64_t c = m / mult, pix = d.nhwc ? d.C : 1;
    const T* xp = d.nhwc ? x + n * d.H * d.W * d.C + c : x + (n * d.C + c) * d.H * d.W;
    const T* wp = w + m * d.KH * d.KW;
    const int64_t h0 = oh * d.SH - d.PT, w0 = ow * d.SW - d.PL;
    float acc = 0.f;
    for (int64_t kh = 0; kh < d.KH; ++kh) {
      const int64_t h = h0 + kh * d.DH;
      if (h < 0 || h >= d.H) continue;
      for (int64_t kw = 0; kw < d.KW; ++kw) {
        const int64_t ww = w0 + kw * d.DW;
        if (ww < 0 || ww >= d.W) continue;
        acc += ld(xp, (h * d.W + ww) * pix) * ld(wp, kh * d.KW + kw);
      }
    }
    if (bias) acc += bias[m];
    if (res) acc += ld(res, i);
    st(y, i, apply_act(d.act, acc, d.alpha, d.beta));
  }
}

}  // namespace

int depthwise_conv(Elem t, const void* x, const void* w, const float* bias, const void* res, void* y,
                   const DepthwiseDesc& d, void* stream) {
  const int64_t total = d.N * d.M * d.OH * d.OW;
  if (total <= 0) return 0;
  if (d.C <= 0 || d.M % d.C != 0) return static_cast<int>(cudaErrorInvalidValue);
  return with_elem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    depthwise_kernel<T><<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(x), static_cast<const T*>(w), bias, static_cast<const T*>(res), static_cast<T*>(y), d);
    return launched();
  });
}

}  // namespace tac::cuda::kern
