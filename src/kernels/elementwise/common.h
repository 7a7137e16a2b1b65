// Shared pieces of the elementwise family: ISA choice, attribute reading, the OpenMP split,
// cost model constants, and the per-ISA entry points (defined in the *.cc files, once per ISA
// namespace of simd.h).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/epilogue.h"
#include "kernels/tactic.h"

namespace tac::kernels::ew {

enum class Isa { avx2, avx512 };

inline Status isa_applies(Isa isa) {
  if (isa == Isa::avx512) return cpu_features().avx512 ? Status::ok() : not_applicable("needs AVX-512 F/BW/VL/DQ");
  return cpu_features().avx2_fma ? Status::ok() : not_applicable("needs AVX2 and FMA");
}

// ---- attributes (absent -> default)
inline int64_t attr_i(const StepDesc& s, const char* key, int64_t def) {
  const ir::Attribute* a = s.node->attr(key);
  return a ? a->i : def;
}
inline float attr_f(const StepDesc& s, const char* key, float def) {
  const ir::Attribute* a = s.node->attr(key);
  return a ? a->f : def;
}
inline std::string attr_s(const StepDesc& s, const char* key, const std::string& def) {
  const ir::Attribute* a = s.node->attr(key);
  return a ? a->s : def;
}
inline std::vector<int64_t> attr_ints(const StepDesc& s, const char* key, std::vector<int64_t> def) {
  const ir::Attribute* a = s.node->attr(key);
  return a ? a->ints : def;
}
// Constant integer input `i` (int32 / int64) as int64 values; not_applicable otherwise.
inline Result<std::vector<int64_t>> const_ints(const StepDesc& s, size_t i, const char* what) {
  if (!s.constants[i]) return not_applicable(std::string(what) + " must be a constant");
  if (s.in_dtypes[i] != DType::int64 && s.in_dtypes[i] != DType::int32) return not_applicable(std::string(what) + ": int32/int64");
  std::vector<int64_t> v;
  for (int64_t k = 0; k < s.constants[i]->numel(); ++k) v.push_back(s.constants[i]->get_i64(k));
  return v;
}

// Pad's `pads` over `axes` (every dim when empty) as per-dim counts before and after, as the
// reference reads them; not_applicable on a wrong length or an axis out of range or repeated.
inline Status pads_per_dim(const std::vector<int64_t>& pads, std::vector<int64_t> axes, int64_t rank,
                           std::vector<int64_t>& before, std::vector<int64_t>& after) {
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  const size_t na = axes.size();
  if (pads.size() != 2 * na) return not_applicable("pads of the wrong length");
  before.assign(static_cast<size_t>(rank), 0);
  after.assign(static_cast<size_t>(rank), 0);
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < na; ++i) {
    const int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank || seen[static_cast<size_t>(a)]) return not_applicable("axes out of range or repeated");
    seen[static_cast<size_t>(a)] = true;
    before[static_cast<size_t>(a)] = pads[i];
    after[static_cast<size_t>(a)] = pads[i + na];
  }
  return Status::ok();
}


// Every present input and every output is float32 (inputs listed in `float_inputs`; others any).
inline Status all_f32(const StepDesc& s, std::initializer_list<size_t> float_inputs) {
  for (size_t i : float_inputs)
    if (s.has_input(i) && s.in_dtypes[i] != DType::float32) return not_applicable("float32 only");
  for (DType d : s.out_dtypes)
    if (d != DType::float32 && d != DType::undefined) return not_applicable("float32 only");
  if (s.out_shapes.empty() || s.in_shapes.empty()) return not_applicable("no inputs or outputs");
  return Status::ok();
}

// Outputs other than the first are absent (the optional statistics outputs of some ops).
inline bool only_first_output(const StepDesc& s) {
  for (size_t i = 1; i < s.node->outputs.size(); ++i)
    if (s.node->outputs[i] != ir::kNoValue) return false;
  return true;
}

// ---- threading
// Below this many element-operations per thread a parallel region costs more than it saves
// (an OpenMP fork/join is a few microseconds; simple ops stream ~1 element per ns).
constexpr int64_t kMinWorkPerThread = 32 * 1024;

inline int threads_for(int64_t work, int threads) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, work / kMinWorkPerThread)));
}

// Calls f(begin, end) over [0, n) split evenly into at most `threads` chunks (chunk starts
// aligned to `align` items). Each item is computed by exactly one thread, so the result does not
// depend on the thread count.
template <class F>
void parallel_for(int64_t n, int64_t work_per_item, int threads, F f, int64_t align = 1) {
  const int nt = threads_for(n * work_per_item, threads);
  if (nt <= 1 || n <= 1) {
    f(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
    const int64_t per = (n + T - 1) / T;
    int64_t b = std::min(n, (per * t + align - 1) / align * align);
    int64_t e = t == T - 1 ? n : std::min(n, (per * (t + 1) + align - 1) / align * align);
    if (b < e) f(b, e);
  }
}

// Inference BatchNormalization folded to y = x * s[c] + t[c], in double and rounded once:
// s = scale / sqrt(var + eps), t = bias - mean * s, over scale's channels. The parameters may be
// of any float type. One fold for every BatchNormalization tactic (CPU plain and channels-last,
// CUDA), so they round alike.
inline void bn_fold(const Tensor& scale, const Tensor& bias, const Tensor& mean, const Tensor& var, double eps, float* s,
                    float* t) {
  for (int64_t c = 0; c < scale.numel(); ++c) {
    const double sc = scale.get_f64(c) / std::sqrt(var.get_f64(c) + eps);
    s[c] = static_cast<float>(sc);
    t[c] = static_cast<float>(bias.get_f64(c) - mean.get_f64(c) * sc);
  }
}

// ---- cost model (ns). One core streams ~10 GB/s from L2/L3-resident tensors; a parallel
// region splits that over the threads used, plus its fork/join.
inline double stream_cost_ns(double bytes, double compute_ns, int threads, int64_t work) {
  const int nt = threads_for(work, threads);
  return 50.0 + (nt > 1 ? 3000.0 : 0.0) + std::max(bytes * 0.1, compute_ns) / nt;
}
inline double isa_factor(Isa isa) { return isa == Isa::avx512 ? 0.55 : 1.0; }

// ---- per-ISA entry points
enum class UnaryOp { relu, leaky_relu, clip, sigmoid, tanh, erf, gelu_erf, gelu_tanh, hard_sigmoid, hard_swish, silu, exp, sqrt, neg, abs, reciprocal, square, copy };
enum class BinaryOp { add, sub, mul, div, max, min };

struct PoolGeom {
  int64_t ih, iw, oh, ow, kh, kw, sh, sw, ph, pw;  // pads at the start; the end is implied by oh/ow
  bool max, include_pad;
  int64_t pe_h, pe_w;  // pads at the end (for count_include_pad)
};

struct IsaKernels {
  void (*unary)(UnaryOp op, const float* x, float* y, int64_t n, float a, float b);
  // y[i] = a[i*sa] op b[i*sb], sa, sb in {0, 1}
  void (*binary)(BinaryOp op, const float* a, const float* b, float* y, int64_t n, int sa, int sb);
  void (*where)(const bool* c, const float* x, const float* y, float* out, int64_t n, int sc, int sx, int sy);
  void (*softmax_rows)(const float* x, float* y, int64_t rows, int64_t d, bool log);
  void (*layernorm_rows)(const float* x, const float* scale, const float* bias, float* y, int64_t rows, int64_t d, float eps);
  void (*reduce_rows)(const float* x, float* y, int64_t rows, int64_t d, float mul, bool max);
  void (*scale_shift)(const float* x, float* y, int64_t n, float s, float t);
  void (*pool_plane)(const PoolGeom& g, const float* x, float* y, float* tmp);
};

namespace isa_avx2 { const IsaKernels& kernels(); }
namespace isa_avx512 { const IsaKernels& kernels(); }
inline const IsaKernels& isa_kernels(Isa isa) {
  return isa == Isa::avx512 ? isa_avx512::kernels() : isa_avx2::kernels();
}

// The unary kernel computing a fused activation in place (y = op(y), with the epilogue's alpha and
// beta as a and b), for the convolution and GEMM epilogues that apply one over a buffer.
inline std::optional<UnaryOp> unary_of(ir::Epilogue::Act act) {
  using A = ir::Epilogue::Act;
  switch (act) {
    case A::relu: return UnaryOp::relu;
    case A::leaky_relu: return UnaryOp::leaky_relu;
    case A::clip: return UnaryOp::clip;
    case A::sigmoid: return UnaryOp::sigmoid;
    case A::tanh: return UnaryOp::tanh;
    case A::gelu: return UnaryOp::gelu_erf;
    case A::silu: return UnaryOp::silu;
    case A::hard_swish: return UnaryOp::hard_swish;
    case A::hard_sigmoid: return UnaryOp::hard_sigmoid;
    case A::none: break;
  }
  return std::nullopt;
}

// A Kernel from a lambda: run(inputs, outputs, workspace) -> Status.
template <class F>
class FnKernel final : public Kernel {
 public:
  FnKernel(F f, size_t ws) : f_(std::move(f)), ws_(ws) {}
  size_t workspace_bytes() const override { return ws_; }
  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* ws) override { return f_(in, out, ws); }

 private:
  F f_;
  size_t ws_;
};
template <class F>
Result<std::unique_ptr<Kernel>> make_kernel(F f, size_t ws = 0) {
  return std::unique_ptr<Kernel>(new FnKernel<F>(std::move(f), ws));
}

// Family sub-tables (one per .cc file), concatenated by elementwise_tactics().
std::vector<Tactic> unary_tactics();
std::vector<Tactic> binary_tactics();
std::vector<Tactic> norm_tactics();
std::vector<Tactic> pool_tactics();
std::vector<Tactic> movement_tactics();

}  // namespace tac::kernels::ew
