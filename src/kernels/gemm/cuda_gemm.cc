// CUDA tactics of the gemm family: cuBLASLt. MatMul, Gemm and FusedMatMul become one (strided
// batched) fp32 GEMM; each of the first kMaxAlgos algorithms cuBLASLt's heuristic proposes for
// the problem is a tactic, "cublaslt_h0" (its first choice) .. "cublaslt_h7". Bias and ReLU are
// fused into cuBLASLt's epilogue where it offers them, a residual that is a whole matrix per
// batch is its C (beta = the residual's scale); other activations and residuals run as our
// epilogue kernel right after, inside the same tactic. "cublaslt_gelu_h0" .. "_h3" take a GEMM
// whose epilogue ends in the (erf) GELU with cuBLASLt's GELU epilogue instead, which computes the
// tanh approximation (|difference| < 4.8e-4, below an fp16 ulp at 1): approximate tactics, a
// value only the tuner's search tries, kept when the outputs stay within its tolerance.
//
// Row-major C[M,N] = A[M,K] B[K,N] is computed as column-major C^T = B^T A^T, so cuBLASLt's
// "A" is our B and its "B" is our A.
//
// Precision: A, B, D (and the residual) all fp32, fp16 or bf16, as the precision rewrite leaves
// them (builder/precision.h). Compute type CUBLAS_COMPUTE_32F (fp32 accumulation; tensor cores
// for fp16/bf16), or CUBLAS_COMPUTE_32F_FAST_TF32 for fp32 nodes the rewrite marked
// `tac_math=tf32`. A constant bias is uploaded at prepare in D's type for cuBLASLt's epilogue
// (fp32 for ours); a bias computed at run time must be fp32 and goes through our epilogue.
#include <map>
#include <mutex>

#include "kernels/cuda_util.h"
#include "kernels/elementwise/cuda_kernels.h"
#include "kernels/gemm/problem.h"

namespace tac::kernels {

namespace {

constexpr int kMaxAlgos = 8;
constexpr int kGeluAlgos = 4;
constexpr size_t kMaxWorkspace = size_t{64} << 20;
const char* const kNames[kMaxAlgos] = {"cublaslt_h0", "cublaslt_h1", "cublaslt_h2", "cublaslt_h3",
                                       "cublaslt_h4", "cublaslt_h5", "cublaslt_h6", "cublaslt_h7"};
const char* const kGeluNames[kGeluAlgos] = {"cublaslt_gelu_h0", "cublaslt_gelu_h1", "cublaslt_gelu_h2", "cublaslt_gelu_h3"};

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
  std::string key() const {
    char buf[320];
    std::snprintf(buf, sizeof buf, "%lld,%lld,%lld,%lld|%lld,%lld|%d%d|%lld,%lld|%d%d%d|%d%d|%d,%lld,%lld", (long long)p.M,
                  (long long)p.N, (long long)p.K, (long long)p.batches, (long long)a_stride, (long long)b_stride, a_trans,
                  b_trans, (long long)lda, (long long)ldb, lt_bias, lt_relu, lt_gelu, static_cast<int>(t), tf32 ? 1 : 0, lt_res,
                  (long long)p.res_rs, (long long)r_stride);
    return buf;
  }
};

cudaDataType_t cuda_type(Elem t) { return t == Elem::f16 ? CUDA_R_16F : t == Elem::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

// gelu: the problem as the cublaslt_gelu tactics run it (not applicable without a GELU).
Result<LtProblem> lt_problem(const StepDesc& s, bool gelu = false) {
  LtProblem q;
  if (s.out_dtypes.empty()) return not_applicable("no output");
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
  const cudaDataType_t dt = cuda_type(q.t);
  TAC_CUBLAS_CALL(TAC_LT(cublasLtMatrixLayoutCreate)(&ds.x, dt, q.b_trans ? p.K : p.N, q.b_trans ? p.N : p.K, q.ldb));
  TAC_CUBLAS_CALL(TAC_LT(cublasLtMatrixLayoutCreate)(&ds.y, dt, q.a_trans ? p.M : p.K, q.a_trans ? p.K : p.M, q.lda));
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
template <int I, bool G>
Status lt_applies(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(LtProblem q, lt_problem(s, G));
  const std::vector<cublasLtMatmulHeuristicResult_t>* algos = algos_for(q);
  if (!algos) return Status::ok();
  if (I >= static_cast<int>(algos->size()))
    return not_applicable("cuBLASLt's heuristic offers " + std::to_string(algos->size()) + " algorithms here");
  const size_t ws = (*algos)[I].workspaceSize;
  if (ws > s.workspace_limit) return workspace_over_limit(ws, s.workspace_limit);
  return Status::ok();
}

template <int I, bool G>
double lt_cost(const StepDesc& s) {
  auto q = lt_problem(s, G);
  const double flops = q ? q->p.flops() : 1e9;
  // ~50 fp32 TFLOP/s at best on an H200 (~400 on tensor cores), a launch, and the heuristic's
  // order as the tie-break.
  const double rate = q && (q->t != Elem::f32 || q->tf32) ? 4e5 : 5e4;
  return 5000.0 + flops / rate + 100.0 * I;
}

class LtKernel final : public Kernel {
 public:
  LtKernel(LtProblem q, cuda::Context* c) : q_(std::move(q)), c_(c) {}
  Status init(int index) {
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
    return Status::ok();
  }
  size_t workspace_bytes() const override { return algo_.workspaceSize; }
  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* ws) override {
    const gemm::Problem& p = q_.p;
    const float alpha = p.alpha, beta = q_.lt_res ? p.res_scale : 0.0f;
    const void* bias = bias_.get() ? bias_.get() : p.bias_input >= 0 ? in[static_cast<size_t>(p.bias_input)].data : nullptr;
    if (q_.lt_bias)
      TAC_CUBLAS_CALL(TAC_LT(cublasLtMatmulDescSetAttribute)(ds_.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    void* y = out[0].data;
    const void* c = q_.lt_res ? in[static_cast<size_t>(p.res_input)].data : y;
    TAC_CUBLAS_CALL(TAC_LT(cublasLtMatmul)(c_->lt, ds_.op, &alpha, in[1].data, ds_.x, in[0].data, ds_.y, &beta, c, ds_.c_or_d(), y,
                                   ds_.d, &algo_.algo, ws, algo_.workspaceSize, c_->stream));
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
  LtProblem q_;
  cuda::Context* c_;
  LtDescs ds_;
  cublasLtMatmulHeuristicResult_t algo_{};
  cuda::DeviceBuffer bias_;
};

template <int I, bool G>
Result<std::unique_ptr<Kernel>> lt_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(LtProblem q, lt_problem(s, G));
  TAC_ASSIGN_OR_RETURN(cuda::Context * c, cuda::context());
  auto k = std::make_unique<LtKernel>(std::move(q), c);
  TAC_RETURN_IF_ERROR(k->init(I));
  if (k->workspace_bytes() > s.workspace_limit) return workspace_over_limit(k->workspace_bytes(), s.workspace_limit);
  return std::unique_ptr<Kernel>(std::move(k));
}

template <int I>
void add_tactics(std::vector<Tactic>& t) {
  for (ir::OpKind op : {ir::OpKind::MatMul, ir::OpKind::Gemm, ir::OpKind::FusedMatMul})
    t.push_back({kNames[I], op, "cuBLASLt, the heuristic's algorithm of this rank (fp32/tf32/fp16/bf16; bias/ReLU in its epilogue)",
                 lt_applies<I, false>, lt_cost<I, false>, lt_prepare<I, false>, Backend::cuda});
  if constexpr (I < kGeluAlgos) {
    Tactic g{kGeluNames[I], ir::OpKind::FusedMatMul,
             "cuBLASLt with bias + GELU in its epilogue, the heuristic's algorithm of this rank: GELU's tanh "
             "approximation (|diff| < 4.8e-4), searched by the tuner only",
             lt_applies<I, true>, lt_cost<I, true>, lt_prepare<I, true>, Backend::cuda};
    g.approximate = true;
    t.push_back(g);
  }
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
