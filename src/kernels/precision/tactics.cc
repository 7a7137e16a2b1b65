// Tactic table of the precision-conversion steps the builder's precision rewrite inserts
// (src/builder/precision.h):
//   cast_bf16_avx512: Cast fp32 -> bf16 (AVX512-BF16 vcvtne2ps2bf16: round to nearest even, as the
//                     reference's BFloat16; denormal inputs become zero) and bf16 -> fp32 (a
//                     16-bit shift, exact); elementwise on the buffer, so it also runs in the
//                     layout rewrite's layouts (nhwc, nChw16c: padding 0 stays 0);
//   cast_fp16_avx512: Cast fp32 <-> fp16 (AVX-512F vcvtps2ph / vcvtph2ps: IEEE round to nearest
//                     even with subnormals and overflow to Inf, as the reference's Float16; the
//                     boundary Casts of a model stored in fp16), in any layout as above;
//   quantize_avx512:  QuantizeLinear fp32 -> s8 / u8 with one scale and zero point (constants):
//                     x / scale (IEEE division, as the reference), round half to even, add the
//                     zero point, saturate.
// Both stream memory; large tensors split over the step's threads.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ir/layout.h"
#include "kernels/tactic.h"

namespace tac::kernels {

// GCC 12's intrinsics pass _mm512_undefined_*() as the masked-off source, which
// -Wmaybe-uninitialized reports inside the system header (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

constexpr int64_t kChunk = 1 << 14;  // elements per parallel chunk

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void f32_to_bf16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(x + i), hi = _mm512_loadu_ps(x + i + 16);
    const __m512bh v = _mm512_cvtne2ps_pbh(hi, lo);
    _mm512_storeu_si512(reinterpret_cast<void*>(y + i), reinterpret_cast<const __m512i&>(v));
  }
  for (; i < n; ++i) y[i] = BFloat16(x[i]).bits;
}

__attribute__((target("avx512f,avx512bw"))) void bf16_to_f32(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    _mm512_storeu_ps(y + i, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
  }
  for (; i < n; ++i) {
    const uint32_t b = static_cast<uint32_t>(x[i]) << 16;
    std::memcpy(y + i, &b, 4);
  }
}

__attribute__((target("avx512f"))) void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) y[i] = Float16(x[i]).bits;
}

__attribute__((target("avx512f"))) void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))));
  for (; i < n; ++i) {
    Float16 h;
    h.bits = x[i];
    y[i] = static_cast<float>(h);
  }
}

__attribute__((target("avx512f,avx512bw"))) void quantize(const float* x, void* y, int64_t n, float scale, int zp,
                                                          bool u8) {
  const __m512 s = _mm512_set1_ps(scale);
  const __m512i z = _mm512_set1_epi32(zp);
  const __m512i lo = _mm512_set1_epi32(u8 ? 0 : -128), hi = _mm512_set1_epi32(u8 ? 255 : 127);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __m512 q = _mm512_roundscale_ps(_mm512_div_ps(v, s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    // Clamp in float first: out-of-range floats would convert to INT_MIN.
    const __m512 qc = _mm512_min_ps(_mm512_max_ps(q, _mm512_set1_ps(-1e6f)), _mm512_set1_ps(1e6f));
    __m512i r = _mm512_add_epi32(_mm512_cvtps_epi32(qc), z);
    r = _mm512_min_epi32(_mm512_max_epi32(r, lo), hi);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_setzero_si512());
    _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<int8_t*>(y) + i), _mm512_cvtepi32_epi8(r));
  }
  for (; i < n; ++i) {
    float q = std::nearbyint(x[i] / scale);
    double v = std::isnan(q) ? 0.0 : std::clamp(static_cast<double>(q) + zp, u8 ? 0.0 : -128.0, u8 ? 255.0 : 127.0);
    if (std::isnan(x[i])) v = 0;
    if (u8) static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(v);
    else static_cast<int8_t*>(y)[i] = static_cast<int8_t>(v);
  }
}

// Runs body(begin, end) over [0, n) in chunks, on up to `threads` threads.
template <class F>
void chunked(int64_t n, int threads, F body) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  if (threads <= 1 || chunks <= 1) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) body(c * kChunk, std::min(n, (c + 1) * kChunk));
}

// ---- Cast ----
// fp32 <-> `half` (bfloat16 or float16).
Status cast_applies(const StepDesc& s, DType half) {
  if (half == DType::bfloat16 && !cpu_features().avx512_bf16) return not_applicable("needs AVX512-BF16");
  if (!cpu_features().avx512) return not_applicable("needs AVX-512");
  if (s.in_dtypes.size() != 1 || s.out_dtypes.size() != 1) return not_applicable("one input and one output");
  const DType a = s.in_dtypes[0], b = s.out_dtypes[0];
  if (!((a == DType::float32 && b == half) || (a == half && b == DType::float32)))
    return not_applicable(half == DType::bfloat16 ? "only fp32 <-> bf16" : "only fp32 <-> fp16");
  if (s.in_shapes[0] != s.out_shapes[0]) return not_applicable("input and output shapes differ");
  if (s.in_layout(0) != s.out_layout(0)) return not_applicable("input and output in one layout");
  if (!s.plain() && s.in_shapes[0].size() != 4) return not_applicable("layouts are 4-D");
  return Status::ok();
}
// Elements of the buffer (padded channels included in a blocked layout).
int64_t buffer_numel(const StepDesc& s) { return ir::physical_numel(s.in_shapes[0], s.in_layout(0)); }
double cast_cost(const StepDesc& s) {
  const double n = static_cast<double>(std::max<int64_t>(1, buffer_numel(s)));
  return 200.0 + 6.0 * n / 12.0 / std::max(1, std::min<int>(s.threads, static_cast<int>(n / kChunk) + 1));
}
class CastKernel final : public Kernel {
 public:
  using Narrow = void (*)(const float*, uint16_t*, int64_t);
  using Widen = void (*)(const uint16_t*, float*, int64_t);
  CastKernel(Narrow narrow, Widen widen, int threads, int64_t n)
      : narrow_(narrow), widen_(widen), threads_(std::max(threads, 1)), n_(n) {}
  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void*) override {
    if (narrow_)
      chunked(n_, threads_, [&](int64_t b, int64_t e) { narrow_(in[0].as<const float>() + b, out[0].as<uint16_t>() + b, e - b); });
    else
      chunked(n_, threads_, [&](int64_t b, int64_t e) { widen_(in[0].as<const uint16_t>() + b, out[0].as<float>() + b, e - b); });
    return Status::ok();
  }

 private:
  Narrow narrow_;  // set when the cast narrows fp32, else widen_
  Widen widen_;
  int threads_;
  int64_t n_;
};
template <DType kHalf>
Status cast_half_applies(const StepDesc& s) {
  return cast_applies(s, kHalf);
}
template <DType kHalf>
Result<std::unique_ptr<Kernel>> cast_prepare(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(cast_applies(s, kHalf));
  const bool bf16 = kHalf == DType::bfloat16;
  if (s.out_dtypes[0] == kHalf)
    return std::unique_ptr<Kernel>(new CastKernel(bf16 ? f32_to_bf16 : f32_to_f16, nullptr, s.threads, buffer_numel(s)));
  return std::unique_ptr<Kernel>(new CastKernel(nullptr, bf16 ? bf16_to_f32 : f16_to_f32, s.threads, buffer_numel(s)));
}

// ---- QuantizeLinear ----
Status quantize_applies(const StepDesc& s) {
  if (!cpu_features().avx512) return not_applicable("needs AVX-512");
  if (s.in_dtypes.size() < 2 || s.in_dtypes[0] != DType::float32) return not_applicable("fp32 input only");
  if (s.out_dtypes.size() != 1 || (s.out_dtypes[0] != DType::int8 && s.out_dtypes[0] != DType::uint8))
    return not_applicable("int8 / uint8 output only");
  if (!s.constants[1] || s.constants[1]->numel() != 1 || s.constants[1]->dtype() != DType::float32)
    return not_applicable("one constant fp32 scale only (per tensor)");
  if (s.has_input(2) && (!s.constants[2] || s.constants[2]->numel() != 1 || s.constants[2]->dtype() != s.out_dtypes[0]))
    return not_applicable("one constant zero point of the output type only");
  if (const ir::Attribute* a = s.node->attr("output_dtype"); a && a->i != 0 && a->i != static_cast<int64_t>(s.out_dtypes[0]))
    return not_applicable("output_dtype differs");
  if (s.node->attr("block_size")) return not_applicable("blocked quantization");
  const float scale = s.constants[1]->data<float>()[0];
  if (!(scale > 0) || !std::isfinite(scale)) return not_applicable("scale must be positive and finite");
  return Status::ok();
}
double quantize_cost(const StepDesc& s) {
  const double n = static_cast<double>(std::max<int64_t>(1, shape_numel(s.in_shapes[0])));
  return 200.0 + n * (5.0 / 12.0 + 0.1) / std::max(1, std::min<int>(s.threads, static_cast<int>(n / kChunk) + 1));
}
class QuantizeKernel final : public Kernel {
 public:
  QuantizeKernel(float scale, int zp, bool u8, int threads) : scale_(scale), zp_(zp), u8_(u8), threads_(std::max(threads, 1)) {}
  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void*) override {
    chunked(in[0].numel(), threads_, [&](int64_t b, int64_t e) {
      quantize(in[0].as<const float>() + b, out[0].as<int8_t>() + b, e - b, scale_, zp_, u8_);
    });
    return Status::ok();
  }

 private:
  float scale_;
  int zp_;
  bool u8_;
  int threads_;
};
Result<std::unique_ptr<Kernel>> quantize_prepare(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(quantize_applies(s));
  const bool u8 = s.out_dtypes[0] == DType::uint8;
  int zp = 0;
  if (s.has_input(2)) zp = u8 ? s.constants[2]->data<uint8_t>()[0] : s.constants[2]->data<int8_t>()[0];
  return std::unique_ptr<Kernel>(new QuantizeKernel(s.constants[1]->data<float>()[0], zp, u8, s.threads));
}

const Tactic kPrecisionTactics[] = {
    {"cast_bf16_avx512", ir::OpKind::Cast,
     "fp32 <-> bf16 (AVX512-BF16 vcvtne2ps2bf16, round to nearest even), in any layout (layout.*)",
     cast_half_applies<DType::bfloat16>, cast_cost, cast_prepare<DType::bfloat16>, Backend::cpu, /*layouts=*/true},
    {"cast_fp16_avx512", ir::OpKind::Cast,
     "fp32 <-> fp16 (AVX-512F vcvtps2ph / vcvtph2ps, IEEE round to nearest even), in any layout (layout.*)",
     cast_half_applies<DType::float16>, cast_cost, cast_prepare<DType::float16>, Backend::cpu, /*layouts=*/true},
    {"quantize_avx512", ir::OpKind::QuantizeLinear,
     "fp32 -> s8/u8 with one constant scale and zero point (AVX-512; round half to even, saturate)", quantize_applies,
     quantize_cost, quantize_prepare},
};

}  // namespace

std::span<const Tactic> precision_tactics() { return kPrecisionTactics; }

#pragma GCC diagnostic pop

}  // namespace tac::kernels
