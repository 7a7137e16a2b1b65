// CUDA tactics "cudnn_graph_mm_h0".."_h3" for MatMul / FusedMatMul: the step as one cuDNN v9
// operation graph, matmul -> + bias -> activation, the intermediates virtual fp32 inside the
// fused kernel, each tactic one engine configuration of cuDNN's heuristic (as cudnn_graph_h* for
// convolutions). Their use: activations cuBLASLt's epilogue lacks, the erf GELU above all (its
// GELU epilogue is the tanh approximation; our epilogue kernel after cuBLASLt costs a pass over
// the output). fp16 / bf16 operands (cuDNN's runtime-fusion engines are tensor-core engines), a
// strided batch (B may broadcast), no residual; bias fp32 (a constant bias of another type is
// uploaded as fp32). Ranked after the cuBLASLt tactics: the tuner's search and
// builder.selection=isolated try them.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <cstdint>

#include "kernels/cuda_util.h"
#include "kernels/cudnn_graph_tactic.h"
#include "kernels/gemm/problem.h"

namespace tac::kernels {

namespace {

using cuda::kern::Elem;

constexpr int kTactics = 4;
const char* const kNames[kTactics] = {"cudnn_graph_mm_h0", "cudnn_graph_mm_h1", "cudnn_graph_mm_h2", "cudnn_graph_mm_h3"};

struct MmProblem {
  gemm::Problem p;
  Elem t = Elem::f16;
  int64_t a_stride = 0, b_stride = 0;  // per batch, elements (0: broadcast)
  const Tensor* bias_const = nullptr;  // uploaded as fp32 when not fp32 already
  DType bias_dtype = DType::float32;
  bool has_bias() const { return p.bias_input >= 0; }
  std::string key() const {
    char buf[256];
    std::snprintf(buf, sizeof buf, "mm|%lld,%lld,%lld,%lld|%lld,%lld,%lld,%lld,%lld,%lld|%d|%d|%d,%g,%g", (long long)p.M,
                  (long long)p.N, (long long)p.K, (long long)p.batches, (long long)a_stride, (long long)p.a_rs,
                  (long long)p.a_cs, (long long)b_stride, (long long)p.b_rs, (long long)p.b_cs, static_cast<int>(t), has_bias(),
                  static_cast<int>(p.act.act), p.act.alpha, p.act.beta);
    return buf;
  }
};

Result<MmProblem> mm_problem(const StepDesc& s) {
  MmProblem q;
  if (s.out_dtypes.empty()) return not_applicable("no output");
  if (cuda::computes_in_fp8(s)) return not_applicable("the node computes in fp8 (the cublaslt_fp8 tactics)");
  const auto e = cuda::elem_of(s.out_dtypes[0]);
  if (!e || *e == Elem::f32) return not_applicable("fp16 or bf16 only (cuDNN's fused matmul engines use tensor cores)");
  q.t = *e;
  TAC_RETURN_IF_ERROR(gemm::analyze_typed_problem(s, q.p));
  const gemm::Problem& p = q.p;
  if (p.res_input >= 0) return not_applicable("a residual (cuBLASLt takes it as its C)");
  if (p.alpha != 1) return not_applicable("alpha other than 1");
  if (q.has_bias()) {
    q.bias_dtype = s.in_dtypes[static_cast<size_t>(p.bias_input)];
    q.bias_const = s.constants[static_cast<size_t>(p.bias_input)];
    if (q.bias_dtype != DType::float32 && !q.bias_const) return not_applicable("a bias computed at run time must be fp32");
  }
  if (p.act.act != ir::Epilogue::Act::none) TAC_RETURN_IF_ERROR(cuda::dnn::pointwise_of(p.act).status());
  if (!gemm::uniform_stride(p.a_off, q.a_stride) || !gemm::uniform_stride(p.b_off, q.b_stride))
    return not_applicable("batch dims broadcast partially (not a strided batch)");
  return q;
}

// The graph; its uids: A, B, D, then the bias where present.
Status build_graph(cuda::dnn::Cached& gc, const MmProblem& q, cudnnHandle_t h) {
  const gemm::Problem& p = q.p;
  cuda::dnn::Graph& g = gc.g;
  const int64_t ba = q.a_stride ? p.batches : 1, bb = q.b_stride ? p.batches : 1;
  const cudnnDataType_t t = cudnn_type(q.t);
  const int64_t a = g.tensor(t, {ba, p.M, p.K}, {q.a_stride ? q.a_stride : p.M * p.K, p.a_rs, p.a_cs});
  const int64_t b = g.tensor(t, {bb, p.K, p.N}, {q.b_stride ? q.b_stride : p.K * p.N, p.b_rs, p.b_cs});
  const std::vector<int64_t> ddims{p.batches, p.M, p.N}, dstr{p.M * p.N, p.N, 1};
  const int64_t d = g.tensor(t, ddims, dstr);
  gc.uids = {a, b, d};
  const bool act = p.act.act != ir::Epilogue::Act::none;
  const int stages = 1 + (q.has_bias() ? 1 : 0) + (act ? 1 : 0);
  int stage = 0;
  auto out = [&]() { return ++stage == stages ? d : g.tensor(CUDNN_DATA_FLOAT, ddims, dstr, /*is_virtual=*/true); };
  int64_t v = out();
  g.matmul(a, b, v);
  if (q.has_bias()) {
    const int64_t bias = g.tensor(CUDNN_DATA_FLOAT, {1, 1, p.N}, {p.N, p.N, 1});
    gc.uids.push_back(bias);
    const int64_t o = out();
    g.pointwise(CUDNN_POINTWISE_ADD, v, bias, o);
    v = o;
  }
  if (act) {
    TAC_ASSIGN_OR_RETURN(auto m, cuda::dnn::pointwise_of(p.act));
    g.pointwise(m.first, v, -1, out(), m.second);
  }
  TAC_RETURN_IF_ERROR(g.finalize(h));
  return g.heuristics(h, kTactics);
}

cuda::dnn::Cached* graph_of(const MmProblem& q) {
  return cuda::dnn::cached(q.key(), [&](cuda::dnn::Cached& gc, cudnnHandle_t h) { return build_graph(gc, q, h); });
}

template <int R>
Status mm_applies(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(MmProblem q, mm_problem(s));
  return graph_config_applies(graph_of(q), R, s.workspace_limit);
}

template <int R>
double mm_cost(const StepDesc& s) {
  auto q = mm_problem(s);
  const double flops = q ? q->p.flops() : 1e9;
  return 14000.0 + flops / 4e5 + 1000.0 * R;  // after every cuBLASLt tactic (5000 + flops / rate + 100 * rank)
}

class MmKernel final : public GraphPlanKernel {
 public:
  MmKernel(MmProblem q, cuda::Context* ctx, std::vector<int64_t> uids, std::shared_ptr<const cuda::dnn::Plan> plan)
      : GraphPlanKernel(ctx, std::move(uids), std::move(plan)), q_(std::move(q)) {}
  Status init() {
    if (q_.bias_const && q_.bias_dtype != DType::float32) {
      TAC_ASSIGN_OR_RETURN(bias_, cuda::upload(*q_.bias_const, DType::float32));
    }
    return Status::ok();
  }

 protected:
  // A, B, D, then the bias where present (build_graph's uids).
  Status pointers(std::span<const TensorView> in, std::span<const TensorView> out, std::vector<void*>& ptrs) override {
    ptrs = {in[0].data, in[1].data, out[0].data};
    if (q_.has_bias()) ptrs.push_back(bias_.get() ? bias_.get() : in[static_cast<size_t>(q_.p.bias_input)].data);
    // The graph's tensors promise cuDNN 16-byte alignment.
    for (void* p : ptrs)
      if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return internal_error("cudnn_graph_mm: an operand is not 16-byte aligned");
    return Status::ok();
  }

 private:
  MmProblem q_;
  cuda::DeviceBuffer bias_;
};

template <int R>
Result<std::unique_ptr<Kernel>> mm_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(MmProblem q, mm_problem(s));
  TAC_ASSIGN_OR_RETURN(cuda::Context * ctx, cuda::context());
  cuda::dnn::Cached* gc = graph_of(q);
  TAC_ASSIGN_OR_RETURN(std::shared_ptr<const cuda::dnn::Plan> plan, graph_config_plan(gc, R, ctx->dnn, s.workspace_limit));
  auto k = std::make_unique<MmKernel>(std::move(q), ctx, gc->uids, std::move(plan));
  TAC_RETURN_IF_ERROR(k->init());
  return std::unique_ptr<Kernel>(std::move(k));
}

template <int R>
void add_tactics(std::vector<Tactic>& t) {
  for (ir::OpKind op : {ir::OpKind::MatMul, ir::OpKind::FusedMatMul})
    t.push_back({kNames[R], op,
                 "cuDNN v9 graph API: matmul + bias + activation (erf GELU, SiLU, sigmoid, tanh, ...) as one operation "
                 "graph, the heuristic's engine configuration of this rank (fp16/bf16)",
                 mm_applies<R>, mm_cost<R>, mm_prepare<R>, Backend::cuda});
}

}  // namespace

std::span<const Tactic> cuda_graph_matmul_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t;
    add_tactics<0>(t), add_tactics<1>(t), add_tactics<2>(t), add_tactics<3>(t);
    return t;
  }();
  return table;
}

}  // namespace tac::kernels
