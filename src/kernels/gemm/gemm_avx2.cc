// AVX2+FMA microkernels and the vectorised epilogue row (see gemm_avx512.cc for the pragma).
#include <immintrin.h>

#include <utility>

#include "kernels/gemm/gemm.h"

namespace tac::kernels::gemm::detail {

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace {

// M rows x NV vectors of 8 floats: M*NV + NV + 1 <= 16 ymm registers.
// kPackedA: A is a packed panel (row i of step k at a[i]); otherwise row i is at a[i * a_rs].
template <int M, int NV, bool kPackedA>
void ukr(int64_t kc, const float* __restrict a, int64_t a_rs, int64_t as, const float* __restrict b, int64_t bs,
         float* c, int64_t ldc, bool accumulate) {
  __m256 acc[M][NV];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    __m256 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(b + v * 8);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const __m256 av = _mm256_broadcast_ss(kPackedA ? a + i : a + i * a_rs);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
    }
    a += as;
    b += bs;
  }
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* p = c + i * ldc + v * 8;
      _mm256_storeu_ps(p, accumulate ? _mm256_add_ps(_mm256_loadu_ps(p), acc[i][v]) : acc[i][v]);
    }
}

template <int NV, int... Ms>
MicroKernel pick(int m, bool packed_a, std::integer_sequence<int, Ms...>) {
  MicroKernel k = nullptr;
  if (packed_a)
    ((m == Ms + 1 ? (k = &ukr<Ms + 1, NV, true>, 0) : 0), ...);
  else
    ((m == Ms + 1 ? (k = &ukr<Ms + 1, NV, false>, 0) : 0), ...);
  return k;
}

}  // namespace

MicroKernel avx2_kernel(int m, int nr, bool packed_a) {
  switch (nr) {
    case 8: return pick<1>(m, packed_a, std::make_integer_sequence<int, 8>{});
    case 16: return pick<2>(m, packed_a, std::make_integer_sequence<int, 6>{});
    case 24: return pick<3>(m, packed_a, std::make_integer_sequence<int, 4>{});
    default: return nullptr;
  }
}

void avx2_row_epilogue(float* c, int64_t n, float alpha, const float* bias, float row_bias, const float* res,
                       int64_t res_cs, float res_scale, const ir::Epilogue& act) {
  if (act.act == ir::Epilogue::Act::gelu || act.act == ir::Epilogue::Act::sigmoid || act.act == ir::Epilogue::Act::tanh) {
    // Linear part here, then the activation as the elementwise family's vector function.
    avx2_row_epilogue(c, n, alpha, bias, row_bias, res, res_cs, res_scale, ir::Epilogue{});
    vector_act_row(Isa::avx2, act, c, n);
    return;
  }
  using A = ir::Epilogue::Act;
  const bool vec_act = act.act == A::none || act.act == A::relu || act.act == A::clip || act.act == A::leaky_relu ||
                       act.act == A::hard_sigmoid;
  const __m256 va = _mm256_set1_ps(alpha), vrb = _mm256_set1_ps(row_bias), vrs = _mm256_set1_ps(res_scale);
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  const __m256 p0 = _mm256_set1_ps(act.alpha), p1 = _mm256_set1_ps(act.beta);
  int64_t j = 0;
  if (vec_act && (!res || res_cs == 1)) {
    for (; j + 8 <= n; j += 8) {
      __m256 v = _mm256_mul_ps(va, _mm256_loadu_ps(c + j));
      if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + j));
      if (row_bias != 0.0f) v = _mm256_add_ps(v, vrb);
      if (res) {
        const __m256 r = _mm256_loadu_ps(res + j);
        v = res_scale == 1.0f ? _mm256_add_ps(v, r) : _mm256_fmadd_ps(vrs, r, v);
      }
      switch (act.act) {
        case A::relu: v = _mm256_max_ps(v, zero); break;
        case A::clip: v = _mm256_min_ps(_mm256_max_ps(v, p0), p1); break;
        case A::leaky_relu: v = _mm256_blendv_ps(v, _mm256_mul_ps(v, p0), _mm256_cmp_ps(v, zero, _CMP_LT_OQ)); break;
        case A::hard_sigmoid: v = _mm256_min_ps(_mm256_max_ps(_mm256_fmadd_ps(p0, v, p1), zero), one); break;
        default: break;
      }
      _mm256_storeu_ps(c + j, v);
    }
  }
  // Tail (and the transcendental activations): the same operations one element at a time, with
  // the same float roundings as the vector path (mul, add, fma).
  for (; j < n; ++j) {
    float v = alpha * c[j];
    if (bias) v += bias[j];
    if (row_bias != 0.0f) v += row_bias;
    if (res) {
      const float r = res[j * res_cs];
      v = res_scale == 1.0f ? v + r : __builtin_fmaf(res_scale, r, v);
    }
    c[j] = act.apply(v);
  }
}

#pragma GCC pop_options

}  // namespace tac::kernels::gemm::detail
