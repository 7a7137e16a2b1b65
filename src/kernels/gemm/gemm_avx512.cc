// AVX-512 microkernels and the vectorised epilogue row. Compiled for AVX-512 through a target
// pragma that covers only this file's own functions (no library templates are instantiated
// inside it), so the rest of the library keeps the baseline ISA; callers check isa_available().
#include <immintrin.h>

#include <utility>

#include "kernels/gemm/gemm.h"

namespace tac::kernels::gemm::detail {

// GCC 12's max/min intrinsics pass _mm512_undefined_ps() as the masked-off source, which
// -Wmaybe-uninitialized reports inside the system header (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")

namespace {

// M rows x NV vectors of 16 floats. Accumulators stay in zmm registers: M*NV + NV + 1 <= 32.
// kPackedA: A is a packed panel (row i of step k at a[i]); otherwise row i is at a[i * a_rs].
template <int M, int NV, bool kPackedA>
void ukr(int64_t kc, const float* __restrict a, int64_t a_rs, int64_t as, const float* __restrict b, int64_t bs,
         float* c, int64_t ldc, bool accumulate) {
  __m512 acc[M][NV];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(b + v * 16);
    _mm_prefetch(reinterpret_cast<const char*>(b + bs * 8), _MM_HINT_T0);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const __m512 av = _mm512_set1_ps(kPackedA ? a[i] : a[i * a_rs]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
    a += as;
    b += bs;
  }
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* p = c + i * ldc + v * 16;
      _mm512_storeu_ps(p, accumulate ? _mm512_add_ps(_mm512_loadu_ps(p), acc[i][v]) : acc[i][v]);
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

MicroKernel avx512_kernel(int m, int nr, bool packed_a) {
  switch (nr) {
    case 16: return pick<1>(m, packed_a, std::make_integer_sequence<int, 15>{});
    case 32: return pick<2>(m, packed_a, std::make_integer_sequence<int, 14>{});
    case 48: return pick<3>(m, packed_a, std::make_integer_sequence<int, 8>{});
    case 64: return pick<4>(m, packed_a, std::make_integer_sequence<int, 6>{});
    default: return nullptr;
  }
}

void avx512_row_epilogue(float* c, int64_t n, float alpha, const float* bias, float row_bias, const float* res,
                         int64_t res_cs, float res_scale, const ir::Epilogue& act) {
  if (act.act == ir::Epilogue::Act::gelu || act.act == ir::Epilogue::Act::sigmoid || act.act == ir::Epilogue::Act::tanh) {
    // Linear part here, then the activation as the elementwise family's vector function.
    avx512_row_epilogue(c, n, alpha, bias, row_bias, res, res_cs, res_scale, ir::Epilogue{});
    vector_act_row(Isa::avx512, act, c, n);
    return;
  }
  using A = ir::Epilogue::Act;
  const bool vec_act = act.act == A::none || act.act == A::relu || act.act == A::clip || act.act == A::leaky_relu ||
                       act.act == A::hard_sigmoid;
  const __m512 va = _mm512_set1_ps(alpha), vrb = _mm512_set1_ps(row_bias), vrs = _mm512_set1_ps(res_scale);
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
  const __m512 p0 = _mm512_set1_ps(act.alpha), p1 = _mm512_set1_ps(act.beta);
  const __m512 vres_bcast = res && res_cs == 0 ? _mm512_set1_ps(res[0]) : zero;
  for (int64_t j = 0; j < n; j += 16) {
    const int64_t left = n - j;
    const __mmask16 m = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
    __m512 v = _mm512_mul_ps(va, _mm512_maskz_loadu_ps(m, c + j));
    if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + j));
    if (row_bias != 0.0f) v = _mm512_add_ps(v, vrb);
    if (res) {
      __m512 r = res_cs == 0 ? vres_bcast : _mm512_maskz_loadu_ps(m, res + j);
      v = res_scale == 1.0f ? _mm512_add_ps(v, r) : _mm512_fmadd_ps(vrs, r, v);
    }
    if (vec_act) {
      switch (act.act) {
        case A::relu: v = _mm512_max_ps(v, zero); break;
        case A::clip: v = _mm512_min_ps(_mm512_max_ps(v, p0), p1); break;
        case A::leaky_relu: v = _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, p0); break;
        case A::hard_sigmoid: v = _mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(p0, v, p1), zero), one); break;
        default: break;
      }
      _mm512_mask_storeu_ps(c + j, m, v);
    } else {
      alignas(64) float t[16];
      _mm512_store_ps(t, v);
      for (int64_t q = 0; q < (left < 16 ? left : 16); ++q) c[j + q] = act.apply(t[q]);
    }
  }
}

bool avx512_tile_epilogue(float* c, int64_t ldc, int64_t i0, int64_t rows, int64_t j0, int64_t n, const Epilogue& ep) {
  using A = ir::Epilogue::Act;
  const A act = ep.act.act;
  if (!(act == A::none || act == A::relu || act == A::clip) || (ep.res && ep.res_cs != 1)) return false;
  // The same operations in the same order as avx512_row_epilogue (bitwise the same results),
  // with the constants set up once per tile instead of once per row.
  const __m512 va = _mm512_set1_ps(ep.alpha), vrs = _mm512_set1_ps(ep.res_scale);
  const __m512 lo = _mm512_set1_ps(act == A::relu ? 0.0f : ep.act.alpha), hi = _mm512_set1_ps(ep.act.beta);
  const float* bias = ep.bias && !ep.bias_per_row ? ep.bias + j0 : nullptr;
  for (int64_t i = i0; i < i0 + rows; ++i) {
    float* cr = c + i * ldc + j0;
    const float row_bias = ep.bias && ep.bias_per_row ? ep.bias[i] : 0.0f;
    const __m512 vrb = _mm512_set1_ps(row_bias);
    const float* res = ep.res ? ep.res + i * ep.res_rs + j0 : nullptr;
    for (int64_t j = 0; j < n; j += 16) {
      const int64_t left = n - j;
      const __mmask16 m = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
      __m512 v = _mm512_mul_ps(va, _mm512_maskz_loadu_ps(m, cr + j));
      if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + j));
      if (row_bias != 0.0f) v = _mm512_add_ps(v, vrb);
      if (res) {
        const __m512 r = _mm512_maskz_loadu_ps(m, res + j);
        v = ep.res_scale == 1.0f ? _mm512_add_ps(v, r) : _mm512_fmadd_ps(vrs, r, v);
      }
      if (act != A::none) v = _mm512_max_ps(v, lo);
      if (act == A::clip) v = _mm512_min_ps(v, hi);
      _mm512_mask_storeu_ps(cr + j, m, v);
    }
  }
  return true;
}

#pragma GCC pop_options
#pragma GCC diagnostic pop

}  // namespace tac::kernels::gemm::detail
