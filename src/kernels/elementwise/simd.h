// Vector wrappers for the elementwise family, one namespace per instruction set.
//
// Each ISA namespace (isa_avx2, isa_avx512) defines the same small API on a float vector `V`
// and a lane mask `M`; the kernels (the *.inc files) are written once against that API and
// included into each namespace under a `#pragma GCC target` region, so the library builds
// with plain flags and each tactic checks cpu_features() before running that code.
#pragma once

#include <immintrin.h>

#include <cstdint>


#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace tac::kernels::ew::isa_avx2 {

struct V {
  static constexpr int N = 8;
  __m256 v;
  V() = default;
  V(__m256 x) : v(x) {}
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  static __m256i tail_mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  // The first n (< N) lanes; the others read as `fill`.
  static V load_n(const float* p, int64_t n, float fill = 0.0f) {
    __m256i m = tail_mask(n);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  void store_n(float* p, int64_t n) const { _mm256_maskstore_ps(p, tail_mask(n), v); }
};
using M = __m256;
inline V operator+(V a, V b) { return _mm256_add_ps(a.v, b.v); }
inline V operator-(V a, V b) { return _mm256_sub_ps(a.v, b.v); }
inline V operator*(V a, V b) { return _mm256_mul_ps(a.v, b.v); }
inline V operator/(V a, V b) { return _mm256_div_ps(a.v, b.v); }
inline V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a.v, b.v, c.v); }
inline V fmsub(V a, V b, V c) { return _mm256_fmsub_ps(a.v, b.v, c.v); }
// x86 semantics: when either operand is NaN the result is b (the second operand).
inline V max_raw(V a, V b) { return _mm256_max_ps(a.v, b.v); }
inline V min_raw(V a, V b) { return _mm256_min_ps(a.v, b.v); }
inline V vsqrt(V a) { return _mm256_sqrt_ps(a.v); }
inline V vand(V a, V b) { return _mm256_and_ps(a.v, b.v); }
inline V vor(V a, V b) { return _mm256_or_ps(a.v, b.v); }
inline V vxor(V a, V b) { return _mm256_xor_ps(a.v, b.v); }
inline V vandnot(V a, V b) { return _mm256_andnot_ps(a.v, b.v); }  // ~a & b
inline M lt(V a, V b) { return _mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ); }
inline M le(V a, V b) { return _mm256_cmp_ps(a.v, b.v, _CMP_LE_OQ); }
inline M ge(V a, V b) { return _mm256_cmp_ps(a.v, b.v, _CMP_GE_OQ); }
inline M gt(V a, V b) { return _mm256_cmp_ps(a.v, b.v, _CMP_GT_OQ); }
inline M eq(V a, V b) { return _mm256_cmp_ps(a.v, b.v, _CMP_EQ_OQ); }
inline M isnan(V a) { return _mm256_cmp_ps(a.v, a.v, _CMP_UNORD_Q); }
inline V select(M m, V a, V b) { return _mm256_blendv_ps(b.v, a.v, m); }  // m ? a : b
inline V round_nearest(V a) { return _mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline V floor_(V a) { return _mm256_floor_ps(a.v); }
// 2^k for integral k in [-126, 127].
inline V pow2i(V k) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k.v), _mm256_set1_epi32(127)), 23));
}
// p * 2^n for integral n in [-150, 129]: two steps keep each factor a normal float, so the
// product underflows to denormals and overflows to inf exactly like the true value.
inline V scale2(V p, V n) {
  V n1 = floor_(n * V::set1(0.5f));
  return p * pow2i(n1) * pow2i(n - n1);
}
inline float hsum(V a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float hmax(V a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// Even-indexed elements of p[0 .. 2N): the stride-2 pooling window starts.
inline V load_even(const float* p) {
  __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
  __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));  // a0 a2 b0 b2 | a4 a6 b4 b6
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
}

#include "kernels/elementwise/vmath.inc"

}  // namespace tac::kernels::ew::isa_avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")
namespace tac::kernels::ew::isa_avx512 {

struct V {
  static constexpr int N = 16;
  __m512 v;
  V() = default;
  V(__m512 x) : v(x) {}
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  static __mmask16 tail_mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static V load_n(const float* p, int64_t n, float fill = 0.0f) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), tail_mask(n), p);
  }
  void store_n(float* p, int64_t n) const { _mm512_mask_storeu_ps(p, tail_mask(n), v); }
};
using M = __mmask16;
inline V operator+(V a, V b) { return _mm512_add_ps(a.v, b.v); }
inline V operator-(V a, V b) { return _mm512_sub_ps(a.v, b.v); }
inline V operator*(V a, V b) { return _mm512_mul_ps(a.v, b.v); }
inline V operator/(V a, V b) { return _mm512_div_ps(a.v, b.v); }
inline V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a.v, b.v, c.v); }
inline V fmsub(V a, V b, V c) { return _mm512_fmsub_ps(a.v, b.v, c.v); }
inline V max_raw(V a, V b) { return _mm512_max_ps(a.v, b.v); }
inline V min_raw(V a, V b) { return _mm512_min_ps(a.v, b.v); }
inline V vsqrt(V a) { return _mm512_sqrt_ps(a.v); }
inline V vand(V a, V b) { return _mm512_and_ps(a.v, b.v); }
inline V vor(V a, V b) { return _mm512_or_ps(a.v, b.v); }
inline V vxor(V a, V b) { return _mm512_xor_ps(a.v, b.v); }
inline V vandnot(V a, V b) { return _mm512_andnot_ps(a.v, b.v); }
inline M lt(V a, V b) { return _mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ); }
inline M le(V a, V b) { return _mm512_cmp_ps_mask(a.v, b.v, _CMP_LE_OQ); }
inline M ge(V a, V b) { return _mm512_cmp_ps_mask(a.v, b.v, _CMP_GE_OQ); }
inline M gt(V a, V b) { return _mm512_cmp_ps_mask(a.v, b.v, _CMP_GT_OQ); }
inline M eq(V a, V b) { return _mm512_cmp_ps_mask(a.v, b.v, _CMP_EQ_OQ); }
inline M isnan(V a) { return _mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q); }
inline V select(M m, V a, V b) { return _mm512_mask_blend_ps(m, b.v, a.v); }
inline V round_nearest(V a) { return _mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline V floor_(V a) { return _mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
// vscalefps rounds once and handles overflow / gradual underflow itself.
inline V scale2(V p, V n) { return _mm512_scalef_ps(p.v, n.v); }
inline float hsum(V a) { return _mm512_reduce_add_ps(a.v); }
inline float hmax(V a) { return _mm512_reduce_max_ps(a.v); }
inline V load_even(const float* p) {
  const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  return _mm512_permutex2var_ps(_mm512_loadu_ps(p), idx, _mm512_loadu_ps(p + 16));
}

#include "kernels/elementwise/vmath.inc"

}  // namespace tac::kernels::ew::isa_avx512
#pragma GCC pop_options
