// CUDA tactics of the gemm family: cuBLASLt. MatMul, Gemm and FusedMatMul become one (strided
// batched) fp32 GEMM; each of the first kMaxAlgos algorithms cuBLASLt's heuristic proposes for
// the problem is a tactic, "cublaslt_h0" (its first choice) .. "cublaslt_h7". Bias and ReLU are
// fused into cuBLASLt's epilogue where it offers them, a residual that is a whole matrix per
// batch is its C (beta = the residual's scale); other activations and residuals run as our
// epilogue kernel right after, inside the same tactic. "cublaslt_gelu_h0" .. "_h3" take a GEMM
// whose epilogue ends in the (erf) GELU with cuBLASLt's GELU epilogue instead, which computes the
// tanh approximation (|difference| < 4.8e-4, below an fp16 ulp at 1): approximate tactics, a
// value only the tuner's search tries, kept when the outputs stay within its tolerance.
// "cublaslt_fp8_h0" .. "_h3" run the nodes the precision rewrite marked `tac_math=fp8`
// (precision.<node>=fp8, Hopper and Ada; the only tactics that take such a node): the constant
// weights quantized once to fp8 E4M3 with a per-tensor scale (their |max| / 448), transposed to
// the K-major layout cuBLASLt's fp8 kernels need; the activation quantized per run by our kernel
// with the static per-tensor scale the rewrite calibrated (`tac_fp8_amax` / 448, saturating),
// into the step's workspace; fp32 accumulation, D (and bias, residual) fp16 or bf16.
//
// Row-major C[M,N] = A[M,K] B[K,N] is computed as column-major C^T = B^T A^T, so cuBLASLt's
// "A" is our B and its "B" is our A.
//
// Precision: A, B, D (and the residual) all fp32, fp16 or bf16, as the precision rewrite leaves
// them (builder/precision.h). Compute type CUBLAS_COMPUTE_32F (fp32 accumulation; tensor cores
// for fp16/bf16), or CUBLAS_COMPUTE_32F_FAST_TF32 for fp32 nodes the rewrite marked
// `tac_math=tf32`. A constant bias is uploaded at prepare in D's type for cuBLASLt's epilogue
// (fp32 for ours); a bias computed at run time must be fp32 and goes through our epilogue.
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>

#include "kernels/cuda_util.h"
#include "kernels/elementwise/cuda_kernels.h"
#include "kernels/gemm/problem.h"
#include "kernels/weight_cache.h"

namespace tac::kernels {

namespace {

constexpr int kMaxAlgos = 8;
constexpr int kGeluAlgos = 4;
constexpr size_t kMaxWorkspace = size_t{64} << 20;
const char* const kNames[kMaxAlgos] = {"cublaslt_h0", "cublaslt_h1", "cublaslt_h2", "cublaslt_h3",
                                       "cublaslt_h4", "cublaslt_h5", "cublaslt_h6", "cublaslt_h7"};
const char* const kGeluNames[kGeluAlgos] = {"cublaslt_gelu_h0", "cublaslt_gelu_h1", "cublaslt_gelu_h2", "cublaslt_gelu_h3"};
constexpr int kFp8Algos = 4;
const char* const kFp8Names[kFp8Algos] = {"cublaslt_fp8_h0", "cublaslt_fp8_h1", "cublaslt_fp8_h2", "cublaslt_fp8_h3"};
constexpr float kE4M3Max = 448.0f;
constexpr size_t kAlign = 256;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

using cuda::kern::Elem;

struct LtProblem {
  gemm::Problem p;
  Elem t = Elem::f32;
  bool tf32 = false;
  DType bias_dtype = DType::float32;
  const Tensor* bias_const = nullptr;
  int64_t a_stride = 0, b_stride = 0, r_stride = 0;
  bool b_trans = false, a_trans = false;  // cuBLASLt's op on our B (its A) and our A (its B)
  int64_t ldb = 0, lda = 0;
  bool lt_bias = false, lt_relu = false, own_epilogue = false;
  bool lt_gelu = false;   // cuBLASLt's GELU epilogue (tanh approximation) for the erf GELU
  bool lt_res = false;  // the residual is cuBLASLt's C (beta = res_scale)
  bool fp8 = false;     // A and B in fp8 E4M3 (B: the weights, transposed; A: quantized per run)
  float a_amax = 0;     // fp8: the calibrated |max| of A
  std::string key() const {
    char buf[320];
    std::snprintf(buf, sizeof buf, "%lld,%lld,%lld,%lld|%lld,%lld|%d%d|%lld,%lld|%d%d%d|%d%d|%d,%lld,%lld|%d", (long long)p.M,
                  (long long)p.N, (long long)p.K, (long long)p.batches, (long long)a_stride, (long long)b_stride, a_trans,
                  b_trans, (long long)lda, (long long)ldb, lt_bias, lt_relu, lt_gelu, static_cast<int>(t), tf32 ? 1 : 0, lt_res,
                  (long long)p.res_rs, (long long)r_stride, fp8 ? 1 : 0);
    return buf;
  }
};

cudaDataType_t cuda_type(Elem t) { return t == Elem::f16 ? CUDA_R_16F : t == Elem::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

// gelu: the problem as the cublaslt_gelu tactics run it (not applicable without a GELU); fp8: as
// the cublaslt_fp8 tactics do (only for a node marked tac_math=fp8, which the others refuse).
Result<LtProblem> lt_problem(const StepDesc& s, bool gelu = false, bool fp8 = false) {
  LtProblem q;
  if (s.out_dtypes.empty()) return not_applicable("no output");
  if (cuda::computes_in_fp8(s) != fp8)
    return not_applicable(fp8 ? "fp8 only where precision.<node>=fp8" : "the node computes in fp8 (the cublaslt_fp8 tactics)");
  const DType dt = s.out_dtypes[0];
  if (dt == DType::float16) q.t = Elem::f16;
  else if (dt == DType::bfloat16) q.t = Elem::bf16;
  else if (dt != DType::float32) return not_applicable("fp32, fp16 or bf16 only");
  // Operands and the residual of the output's type, a bias fp32 or (constant) of the output's type.
  TAC_RETURN_IF_ERROR(gemm::analyze_typed_problem(s, q.p));
  const gemm::Problem& p = q.p;
  if (p.bias_input >= 0) {
    q.bias_dtype = s.in_dtypes[static_cast<size_t>(p.bias_input)];
    q.bias_const = s.constants[static_cast<size_t>(p.bias_input)];
    if (q.bias_dtype != DType::float32 && !q.bias_const) return not_applicable("a bias computed at run time must be fp32");
  }
  const ir::Attribute* m = s.node->attr("tac_math");
  q.tf32 = q.t == Elem::f32 && m && m->s == "tf32";
  if (!gemm::uniform_stride(p.a_off, q.a_stride) || !gemm::uniform_stride(p.b_off, q.b_stride))
    return not_applicable("batch dims broadcast partially (not a strided batch)");
  if (p.res_input >= 0 && !gemm::uniform_stride(p.r_off, q.r_stride)) return not_applicable("residual batch layout");
  if (p.b_cs == 1) q.b_trans = false, q.ldb = p.b_rs;
  else if (p.b_rs == 1) q.b_trans = true, q.ldb = p.b_cs;
  else return not_applicable("B layout");
  if (p.a_cs == 1) q.a_trans = false, q.lda = p.a_rs;
  else if (p.a_rs == 1) q.a_trans = true, q.lda = p.a_cs;
  else return not_applicable("A layout");
  if (fp8) {
    // cuBLASLt's fp8 kernels take "TN" operands only (both K-major), leading dims and K multiples
    // of 16: our A as it is, our B transposed once at prepare.
    if (q.t == Elem::f32) return not_applicable("fp8 with an fp16 or bf16 output only");
    if (!p.b_const || p.b_count != 1 || p.batches != 1) return not_applicable("fp8 needs one constant weight matrix");
    if (q.a_trans || q.lda != p.K) return not_applicable("fp8 needs a contiguous, K-major A");
    if (p.K % 16 != 0 || p.N % 16 != 0) return not_applicable("fp8 needs K and N multiples of 16");
    const ir::Attribute* amax = s.node->attr("tac_fp8_amax");
    if (!amax) return not_applicable("no calibrated range (tac_fp8_amax)");
    q.fp8 = true;
    q.a_amax = amax->f;
    q.b_trans = true, q.ldb = p.K, q.b_stride = 0;
  }
  using A = ir::Epilogue::Act;
  const bool simple_act = p.act.act == A::none || p.act.act == A::relu;
  // A residual that is a whole matrix per batch (row stride >= N, unit column stride) is
  // cuBLASLt's C: D = act(alpha A·B + res_scale C + bias), one pass over D.
  const bool full_res = p.res_input >= 0 && p.res_rows == p.M && p.res_cols == p.N && p.res_cs == 1 &&
                        p.res_rs >= p.N && (p.batches == 1 || q.r_stride >= p.M * p.res_rs);
  const bool lt_takes = (p.res_input < 0 || full_res) && (p.bias_input < 0 || q.bias_const || q.t == Elem::f32);
  if (gelu && p.act.act != A::gelu) return not_applicable("no GELU in the epilogue");
  if (gelu && !lt_takes) return not_applicable("bias or residual cuBLASLt cannot take");
  if (lt_takes && (gelu || simple_act)) {
    q.lt_bias = p.bias_input >= 0;
    q.lt_relu = p.act.act == A::relu;
    q.lt_gelu = gelu;
    q.lt_res = full_res;
  } else {
    q.own_epilogue = true;
  }
  return q;
}

// The cuBLASLt descriptors of a problem; destroyed with it.
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t x = nullptr, y = nullptr, d = nullptr;  // cuBLASLt's A (our B), B (our A), D
  cublasLtMatrixLayout_t c = nullptr;                              // C: the residual (lt_res), else D's
  LtDescs() = default;
  LtDescs(const LtDescs&) = delete;
  LtDescs& operator=(const LtDescs&) = delete;
  ~LtDescs() {
    if (op) TAC_LT(cublasLtMatmulDescDestroy)(op);
    if (x) TAC_LT(cublasLtMatrixLayoutDestroy)(x);
    if (y) TAC_LT(cublasLtMatrixLayoutDestroy)(y);
    if (d) TAC_LT(cublasLtMatrixLayoutDestroy)(d);
    if (c) TAC_LT(cublasLtMatrixLayoutDestroy)(c);
  }
  cublasLtMatrixLayout_t c_or_d() const { return c ? c : d; }
};

Status set_batch(cublasLtMatrixLayout_t l, int64_t batches, int64_t stride) {
  if (batches <= 1) return Status::ok();
  int32_t count = static_cast<int32_t>(batches);
  TAC_CUBLAS_CALL(TAC_LT(cublasLtMatrixLayoutSetAttribute)(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
  TAC_CUBLAS_CALL(TAC_LT(cublasLtMatrixLayoutSetAttribute)(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  return Status::ok();
}

Status make_descs(const LtProblem& q, LtDescs& ds) {
  const gemm::Problem& p = q.p;
  TAC_CUBLAS_CALL(TAC_LT(cublasLtMatmulDescCreate)(&ds.op, q.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t tx = q.b_trans ? CUBLAS_OP_T : CUBLAS_OP_N, ty = q.a_trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  TAC_CUBLAS_CALL(TAC_LT(cublasLtMatmulDescSetAttribute)(ds.op, CUBLASLT_MATMUL_DESC_TRANSA, &tx, sizeof tx));
  TAC_CUBLAS_CALL(TAC_LT(cublasLtMatmulDescSetAttribute)(ds.op, CUBLASLT_MATMUL_DESC_TRANSB, &ty, sizeof ty));
  cublasLtEpilogue_t ep = q.lt_gelu ? (q.lt_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU)
                         : q.lt_bias ? (q.lt_relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                     : (q.lt_relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
  TAC_CUBLAS_CALL(TAC_LT(cublasLtMatmulDescSetAttribute)(ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
  // Stored (column-major) shapes: our B^T is N x K (or K x N when transposed); our A^T is K x M
  // (or M x K); D is N x M.
  const cudaDataType_t dt = cuda_type(q.t), in_t = q.fp8 ? CUDA_R_8F_E4M3 : dt;
  TAC_CUBLAS_CALL(TAC_LT(cublasLtMatrixLayoutCreate)(&ds.x, in_t, q.b_trans ? p.K : p.N, q.b_trans ? p.N : p.K, q.ldb));
  TAC_CUBLAS_CALL(TAC_LT(cublasLtMatrixLayoutCreate)(&ds.y, in_t, q.a_trans ? p.M : p.K, q.a_trans ? p.K : p.M, q.lda));
  TAC_CUBLAS_CALL(TAC_LT(cublasLtMatrixLayoutCreate)(&ds.d, dt, p.N, p.M, p.N));
  TAC_RETURN_IF_ERROR(set_batch(ds.x, p.batches, q.b_stride));
  TAC_RETURN_IF_ERROR(set_batch(ds.y, p.batches, q.a_stride));
  TAC_RETURN_IF_ERROR(set_batch(ds.d, p.batches, p.M * p.N));
  if (q.lt_res) {
    TAC_CUBLAS_CALL(TAC_LT(cublasLtMatrixLayoutCreate)(&ds.c, dt, p.N, p.M, p.res_rs));
    TAC_RETURN_IF_ERROR(set_batch(ds.c, p.batches, q.r_stride));
  }
  return Status::ok();
}

Result<std::vector<cublasLtMatmulHeuristicResult_t>> heuristic(cuda::Context& c, const LtDescs& ds) {
  cublasLtMatmulPreference_t pref = nullptr;
  TAC_CUBLAS_CALL(TAC_LT(cublasLtMatmulPreferenceCreate)(&pref));
  size_t ws = kMaxWorkspace;
  TAC_LT(cublasLtMatmulPreferenceSetAttribute)(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  // fp32 accumulation throughout: no split-K whose partial sums are reduced in the output type
  // (fp16 / bf16 there; seen on an H200 as errors of one fp16 ulp of the partial sums).
  uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_MASK & ~static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE);
  TAC_LT(cublasLtMatmulPreferenceSetAttribute)(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction, sizeof reduction);
  std::vector<cublasLtMatmulHeuristicResult_t> r(kMaxAlgos);
  int n = 0;
  cublasStatus_t st = TAC_LT(cublasLtMatmulAlgoGetHeuristic)(c.lt, ds.op, ds.x, ds.y, ds.c_or_d(), ds.d, pref, kMaxAlgos, r.data(), &n);
  TAC_LT(cublasLtMatmulPreferenceDestroy)(pref);
  if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) return cuda::cublas_status(st, "cublasLtMatmulAlgoGetHeuristic");
  r.resize(st == CUBLAS_STATUS_SUCCESS ? static_cast<size_t>(n) : 0);
  return r;
}

// The algorithms cuBLASLt's heuristic offers for a problem, in its order, cached per problem for
// the process: applies() asks per node and per build, every kernel's init() again, and a
// persistent evaluator (tuner/evaluator.h) builds candidate after candidate. Empty when the
// heuristic has none (or failed); nullptr without a device.
const std::vector<cublasLtMatmulHeuristicResult_t>* algos_for(const LtProblem& q) {
  static std::mutex mu;
  static std::map<std::string, std::vector<cublasLtMatmulHeuristicResult_t>> cache;
  cuda::Context* c = cuda::context_if_available();
  if (!c) return nullptr;
  std::lock_guard<std::mutex> lock(mu);
  auto [it, fresh] = cache.emplace(q.key(), std::vector<cublasLtMatmulHeuristicResult_t>{});
  if (fresh) {
    LtDescs ds;
    auto r = make_descs(q, ds).is_ok() ? heuristic(*c, ds) : Result<std::vector<cublasLtMatmulHeuristicResult_t>>(internal_error(""));
    if (r) it->second = std::move(r).value();
  }
  return &it->second;
}

// Applies where the heuristic offers an I-th algorithm within the workspace limit (always without
// a device, as before the cache).
template <int I, bool G, bool F>
Status lt_applies(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(LtProblem q, lt_problem(s, G, F));
  const std::vector<cublasLtMatmulHeuristicResult_t>* algos = algos_for(q);
  if (!algos) return Status::ok();
  if (I >= static_cast<int>(algos->size()))
    return not_applicable("cuBLASLt's heuristic offers " + std::to_string(algos->size()) + " algorithms here");
  const size_t ws = (*algos)[I].workspaceSize + (q.fp8 ? align_up(static_cast<size_t>(q.p.M * q.p.K)) : 0);
  if (ws > s.workspace_limit) return workspace_over_limit(ws, s.workspace_limit);
  return Status::ok();
}

template <int I, bool G, bool F>
double lt_cost(const StepDesc& s) {
  auto q = lt_problem(s, G, F);
  const double flops = q ? q->p.flops() : 1e9;
  // ~50 fp32 TFLOP/s at best on an H200 (~400 on tensor cores, ~800 in fp8, which also quantizes
  // A: a memory-bound launch), a launch, and the heuristic's order as the tie-break.
  if (q && q->fp8) return 5000.0 + cuda::memory_bound_ns(3.0 * q->p.M * q->p.K) + flops / 8e5 + 100.0 * I;
  const double rate = q && (q->t != Elem::f32 || q->tf32) ? 4e5 : 5e4;
  return 5000.0 + flops / rate + 100.0 * I;
}

// The constant weights B [K, N] (or [N, K] with transB) as fp8 E4M3 in [N, K] (K-major), scaled
// by their |max| / 448, which `scale` receives. The host bytes are kept in the weight cache (a
// worker building candidate after candidate quantizes each weight once).
Result<cuda::DeviceBuffer> quantize_weights_fp8(const Tensor& w, const gemm::Problem& p, float& scale) {
  char how[96];
  std::snprintf(how, sizeof how, "fp8 e4m3 [N,K] %lld,%lld,%lld,%lld", (long long)p.K, (long long)p.N, (long long)p.b_rs,
                (long long)p.b_cs);
  const std::shared_ptr<const DerivedWeights> q = derived_weights(w, how, [&] {
    DerivedWeights d;
    double amax = 0;
    for (int64_t i = 0; i < w.numel(); ++i) amax = std::max(amax, std::fabs(w.get_f64(i)));
    d.scale = amax > 0 && std::isfinite(amax) ? static_cast<float>(amax / kE4M3Max) : 1.0f;
    d.bytes.resize(static_cast<size_t>(p.N * p.K));
    for (int64_t k = 0; k < p.K; ++k)
      for (int64_t n = 0; n < p.N; ++n) {
        const float x = static_cast<float>(w.get_f64(k * p.b_rs + n * p.b_cs)) / d.scale;
        d.bytes[static_cast<size_t>(n * p.K + k)] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
      }
    return d;
  });
  scale = q->scale;
  TAC_ASSIGN_OR_RETURN(cuda::DeviceBuffer b, cuda::DeviceBuffer::allocate(q->bytes.size()));
  TAC_RETURN_IF_ERROR(cuda::copy_to_device(b.get(), q->bytes.data(), q->bytes.size()));
  TAC_RETURN_IF_ERROR(cuda::synchronize());
  return b;
}

class LtKernel final : public Kernel {
 public:
  LtKernel(LtProblem q, cuda::Context* c) : q_(std::move(q)), c_(c) {}
  Status init(int index, const StepDesc& s) {
    TAC_RETURN_IF_ERROR(make_descs(q_, ds_));
    const std::vector<cublasLtMatmulHeuristicResult_t>* algos = algos_for(q_);
    if (!algos) return unsupported("cuBLASLt: no CUDA device");
    if (index >= static_cast<int>(algos->size()))
      return not_applicable("cuBLASLt's heuristic offers " + std::to_string(algos->size()) + " algorithms here");
    algo_ = (*algos)[static_cast<size_t>(index)];
    // A constant bias, uploaded once: in D's type for cuBLASLt's epilogue, in fp32 for ours.
    if (q_.bias_const && (q_.t != Elem::f32 || q_.bias_dtype != DType::float32)) {
      const DType want = q_.lt_bias ? (q_.t == Elem::f16 ? DType::float16 : q_.t == Elem::bf16 ? DType::bfloat16 : DType::float32)
                                    : DType::float32;
      TAC_ASSIGN_OR_RETURN(bias_, cuda::upload(*q_.bias_const, want));
    }
    if (q_.fp8) TAC_RETURN_IF_ERROR(init_fp8(*s.constants[1]));
    return Status::ok();
  }
  size_t workspace_bytes() const override { return a8_bytes_ + algo_.workspaceSize; }
  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* ws) override {
    const gemm::Problem& p = q_.p;
    const float alpha = p.alpha, beta = q_.lt_res ? p.res_scale : 0.0f;
    const void* bias = bias_.get() ? bias_.get() : p.bias_input >= 0 ? in[static_cast<size_t>(p.bias_input)].data : nullptr;
    if (q_.lt_bias)
      TAC_CUBLAS_CALL(TAC_LT(cublasLtMatmulDescSetAttribute)(ds_.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    void* y = out[0].data;
    const void* c = q_.lt_res ? in[static_cast<size_t>(p.res_input)].data : y;
    const void *a = in[0].data, *b = in[1].data;
    void* lt_ws = ws;
    if (q_.fp8) {  // A quantized into the workspace's first a8_bytes_, cuBLASLt's after them
      TAC_RETURN_IF_ERROR(cuda::launch_status(cuda::kern::quantize_fp8(q_.t, a, ws, p.M * p.K, 1.0f / a_scale_, c_->stream),
                                              "fp8 quantize kernel (before cuBLASLt)"));
      a = ws, b = w8_.get(), lt_ws = static_cast<char*>(ws) + a8_bytes_;
    }
    TAC_CUBLAS_CALL(TAC_LT(cublasLtMatmul)(c_->lt, ds_.op, &alpha, b, ds_.x, a, ds_.y, &beta, c, ds_.c_or_d(), y, ds_.d,
                                           &algo_.algo, lt_ws, algo_.workspaceSize, c_->stream));
    if (!q_.own_epilogue) return Status::ok();
    cuda::kern::EpilogueDesc e;
    e.total = p.batches * p.M * p.N;
    e.rows = p.M;
    e.cols = p.N;
    e.res_scale = p.res_scale;
    e.r_bs = q_.r_stride;
    e.r_rs = p.res_rs;
    e.r_cs = p.res_cs;
    e.act = static_cast<int>(p.act.act);
    e.alpha = p.act.alpha;
    e.beta = p.act.beta;
    const void* res = p.res_input >= 0 ? in[static_cast<size_t>(p.res_input)].data : nullptr;
    return cuda::launch_status(cuda::kern::epilogue(q_.t, y, static_cast<const float*>(bias), res, e, c_->stream),
                               "epilogue kernel (after cuBLASLt)");
  }

 private:
  // The weights in fp8 and both scales on the device, where cuBLASLt reads them: its A (our B)
  // scale first, then its B's (our A's).
  Status init_fp8(const Tensor& w) {
    float scales[2];
    TAC_ASSIGN_OR_RETURN(w8_, quantize_weights_fp8(w, q_.p, scales[0]));
    a_scale_ = q_.a_amax > 0 && std::isfinite(q_.a_amax) ? q_.a_amax / kE4M3Max : 1.0f;
    scales[1] = a_scale_;
    TAC_ASSIGN_OR_RETURN(scales_, cuda::DeviceBuffer::allocate(sizeof scales));
    TAC_RETURN_IF_ERROR(cuda::copy_to_device(scales_.get(), scales, sizeof scales));
    TAC_RETURN_IF_ERROR(cuda::synchronize());
    const float* sa = static_cast<const float*>(scales_.get());
    const float* sb = sa + 1;
    TAC_CUBLAS_CALL(TAC_LT(cublasLtMatmulDescSetAttribute)(ds_.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
    TAC_CUBLAS_CALL(TAC_LT(cublasLtMatmulDescSetAttribute)(ds_.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
    a8_bytes_ = align_up(static_cast<size_t>(q_.p.M * q_.p.K));
    return Status::ok();
  }

  LtProblem q_;
  cuda::Context* c_;
  LtDescs ds_;
  cublasLtMatmulHeuristicResult_t algo_{};
  cuda::DeviceBuffer bias_;
  cuda::DeviceBuffer w8_, scales_;  // fp8 only
  float a_scale_ = 1;
  size_t a8_bytes_ = 0;
};

template <int I, bool G, bool F>
Result<std::unique_ptr<Kernel>> lt_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(LtProblem q, lt_problem(s, G, F));
  TAC_ASSIGN_OR_RETURN(cuda::Context * c, cuda::context());
  auto k = std::make_unique<LtKernel>(std::move(q), c);
  TAC_RETURN_IF_ERROR(k->init(I, s));
  if (k->workspace_bytes() > s.workspace_limit) return workspace_over_limit(k->workspace_bytes(), s.workspace_limit);
  return std::unique_ptr<Kernel>(std::move(k));
}

template <int I>
void add_tactics(std::vector<Tactic>& t) {
  for (ir::OpKind op : {ir::OpKind::MatMul, ir::OpKind::Gemm, ir::OpKind::FusedMatMul})
    t.push_back({kNames[I], op,
                 "cuBLASLt, the heuristic's algorithm of this rank (fp32/tf32/fp16/bf16; bias/ReLU in its epilogue)",
                 lt_applies<I, false, false>, lt_cost<I, false, false>, lt_prepare<I, false, false>, Backend::cuda});
  if constexpr (I < kGeluAlgos) {
    Tactic g{kGeluNames[I],
             ir::OpKind::FusedMatMul,
             "cuBLASLt with bias + GELU in its epilogue, the heuristic's algorithm of this rank: GELU's tanh "
             "approximation (|diff| < 4.8e-4), searched by the tuner only",
             lt_applies<I, true, false>,
             lt_cost<I, true, false>,
             lt_prepare<I, true, false>,
             Backend::cuda};
    g.approximate = true;
    t.push_back(g);
  }
  if constexpr (I < kFp8Algos)
    for (ir::OpKind op : {ir::OpKind::MatMul, ir::OpKind::FusedMatMul})
      t.push_back({kFp8Names[I], op,
                   "cuBLASLt in fp8 E4M3 (weights and activation scaled per tensor, fp32 accumulation), the heuristic's "
                   "algorithm of this rank: the nodes precision.<node>=fp8 marks",
                   lt_applies<I, false, true>, lt_cost<I, false, true>, lt_prepare<I, false, true>, Backend::cuda});
}

}  // namespace

std::span<const Tactic> cuda_gemm_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t;
    add_tactics<0>(t), add_tactics<1>(t), add_tactics<2>(t), add_tactics<3>(t);
    add_tactics<4>(t), add_tactics<5>(t), add_tactics<6>(t), add_tactics<7>(t);
    return t;
  }();
  return table;
}

}  // namespace tac::kernels
