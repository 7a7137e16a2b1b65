// CUDA tactics of the conv family: cuDNN's convolution, one tactic per forward algorithm
// ("cudnn_implicit_gemm", "cudnn_winograd", ...), and our own depthwise kernel
// ("cuda_depthwise", cuda_depthwise.cu). Which cuDNN algorithms apply, and their default
// ranking, come from cuDNN itself (a workspace query for support, cudnnGetConvolutionForward-
// Algorithm_v7 for the order). FusedConv's bias, residual and activation run as our epilogue
// kernel right after the convolution, inside the same tactic; "cudnn_fused" does bias, relu and
// the residual in cuDNN's one call (cudnnConvolutionBiasActivationForward).
//
// Layouts (builder/layout.h): every cuDNN tactic runs nchw or nhwc activations (x, y and the
// residual alike); in nhwc the weights are uploaded once as [M][KH][KW][C/G], the layout cuDNN's
// tensor-core kernels read natively (no transposes inside cuDNN).
//
// Precision: x, W, y (and the residual) all fp32, all fp16 or all bf16, as the precision rewrite
// leaves them (builder/precision.h); bias fp32; accumulation in fp32 (compute type float). Math
// type: CUDNN_FMA_MATH for fp32 (true fp32), CUDNN_TENSOR_OP_MATH for fp16/bf16 and for fp32
// nodes the rewrite marked `tac_math=tf32` (TF32 tensor cores).
//
// The algorithm tactics use cuDNN's legacy convolution API (deprecated in cuDNN 9 but complete);
// "cudnn_graph_h0".."_h5" are the engine configurations of the v9 graph API's heuristic for the
// whole step (convolution, bias, residual and activation as one operation graph).
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <cstring>
#include <map>
#include <mutex>

#include "kernels/conv/conv_common.h"
#include "kernels/cuda_util.h"
#include "kernels/cudnn_graph_tactic.h"
#include "kernels/elementwise/cuda_kernels.h"

namespace tac::kernels {

namespace {

constexpr size_t kMaxWorkspace = size_t{1} << 30;
constexpr int kAlgos = 8;
const char* const kNames[kAlgos] = {"cudnn_implicit_gemm", "cudnn_implicit_precomp_gemm", "cudnn_gemm",
                                    "cudnn_direct",        "cudnn_fft",                   "cudnn_fft_tiling",
                                    "cudnn_winograd",      "cudnn_winograd_nonfused"};
static_assert(CUDNN_CONVOLUTION_FWD_ALGO_COUNT == kAlgos, "one tactic per cuDNN forward algorithm");

using cuda::kern::Elem;

// A convolution with its element type and math mode.
struct Conv : conv::ConvGeom {
  Elem t = Elem::f32;
  bool tf32 = false;
  bool nhwc = false;  // x, y (and the residual) nhwc, W uploaded as [M][KH][KW][C/G] (cuDNN's NHWC filter)
};

// The geometry of an fp32, fp16 or bf16 convolution (x, W, y and the residual of one type, bias
// fp32): conv_geom() reads an fp32 view of the step.
Result<Conv> any_geom(const StepDesc& s) {
  if (s.in_dtypes.size() < 2 || s.out_dtypes.empty()) return not_applicable("missing inputs");
  const DType dt = s.out_dtypes[0];
  Conv c;
  if (dt == DType::float16) c.t = Elem::f16;
  else if (dt == DType::bfloat16) c.t = Elem::bf16;
  else if (dt != DType::float32) return not_applicable("fp32, fp16 or bf16 only");
  StepDesc f = s;
  for (size_t i : {size_t{0}, size_t{1}, size_t{3}}) {
    if (i >= f.in_dtypes.size() || !f.has_input(i)) continue;
    if (f.in_dtypes[i] != dt) return not_applicable("x, W and the residual of the output's type");
    f.in_dtypes[i] = DType::float32;
  }
  f.out_dtypes[0] = DType::float32;
  TAC_ASSIGN_OR_RETURN(static_cast<conv::ConvGeom&>(c), conv::conv_geom(f));
  const ir::Attribute* m = s.node->attr("tac_math");
  c.tf32 = c.t == Elem::f32 && m && m->s == "tf32";
  // Layouts (builder/layout.h): x, y and the residual all nchw or all nhwc.
  const ir::Layout l = s.out_layout(0);
  if (l != ir::Layout::nchw && l != ir::Layout::nhwc) return not_applicable("nchw or nhwc activations");
  if (s.in_layout(0) != l || (c.has_res && s.in_layout(3) != l)) return not_applicable("x and the residual in y's layout");
  c.nhwc = l == ir::Layout::nhwc;
  if (c.nhwc && (s.constants.size() < 2 || !s.constants[1])) return not_applicable("nhwc needs constant weights");
  return c;
}

Result<Conv> geom(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(Conv g, any_geom(s));
  if (g.PT != g.PB || g.PL != g.PR) return not_applicable("asymmetric pads (cuDNN pads both sides alike)");
  return g;
}

std::string key_of(const Conv& g) {
  char b[256];
  std::snprintf(b, sizeof b, "%lld,%lld,%lld,%lld|%lld,%lld|%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld|%d%d%d", (long long)g.N,
                (long long)g.C, (long long)g.H, (long long)g.W, (long long)g.M, (long long)g.G, (long long)g.KH,
                (long long)g.KW, (long long)g.SH, (long long)g.SW, (long long)g.DH, (long long)g.DW, (long long)g.PT,
                (long long)g.PL, static_cast<int>(g.t), g.tf32 ? 1 : 0, g.nhwc ? 1 : 0);
  return b;
}

struct ConvDescs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ConvDescs() = default;
  ConvDescs(const ConvDescs&) = delete;
  ConvDescs& operator=(const ConvDescs&) = delete;
  ~ConvDescs() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

Status make_descs(const Conv& g, ConvDescs& d) {
  auto i = [](int64_t v) { return static_cast<int>(v); };
  TAC_CUDNN_CALL(cudnnCreateTensorDescriptor(&d.x));
  TAC_CUDNN_CALL(cudnnCreateTensorDescriptor(&d.y));
  TAC_CUDNN_CALL(cudnnCreateFilterDescriptor(&d.w));
  TAC_CUDNN_CALL(cudnnCreateConvolutionDescriptor(&d.conv));
  const cudnnDataType_t dt = cudnn_type(g.t);
  const cudnnTensorFormat_t f = g.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  TAC_CUDNN_CALL(cudnnSetTensor4dDescriptor(d.x, f, dt, i(g.N), i(g.C), i(g.H), i(g.W)));
  TAC_CUDNN_CALL(cudnnSetTensor4dDescriptor(d.y, f, dt, i(g.N), i(g.M), i(g.OH), i(g.OW)));
  TAC_CUDNN_CALL(cudnnSetFilter4dDescriptor(d.w, dt, f, i(g.M), i(g.Cg()), i(g.KH), i(g.KW)));
  TAC_CUDNN_CALL(cudnnSetConvolution2dDescriptor(d.conv, i(g.PT), i(g.PL), i(g.SH), i(g.SW), i(g.DH), i(g.DW),
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  TAC_CUDNN_CALL(cudnnSetConvolutionGroupCount(d.conv, i(g.G)));
  TAC_CUDNN_CALL(cudnnSetConvolutionMathType(d.conv, g.t == Elem::f32 && !g.tf32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
  return Status::ok();
}

// Per algorithm: its rank in cuDNN's heuristic order (-1: not supported here) and workspace.
struct AlgoInfo {
  int rank[kAlgos];
  size_t workspace[kAlgos];
};

Result<AlgoInfo> query(cuda::Context& c, const Conv& g) {
  ConvDescs d;
  TAC_RETURN_IF_ERROR(make_descs(g, d));
  AlgoInfo info;
  for (int a = 0; a < kAlgos; ++a) {
    info.rank[a] = -1;
    info.workspace[a] = 0;
    size_t ws = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(c.dnn, d.x, d.w, d.conv, d.y, static_cast<cudnnConvolutionFwdAlgo_t>(a), &ws) ==
            CUDNN_STATUS_SUCCESS &&
        ws <= kMaxWorkspace) {
      info.rank[a] = kAlgos;  // supported; ranked below the heuristic's list unless it names it
      info.workspace[a] = ws;
    }
  }
  cudnnConvolutionFwdAlgoPerf_t perf[kAlgos];
  int n = 0;
  TAC_CUDNN_CALL(cudnnGetConvolutionForwardAlgorithm_v7(c.dnn, d.x, d.w, d.conv, d.y, kAlgos, &n, perf));
  for (int r = 0; r < n; ++r) {
    const int a = static_cast<int>(perf[r].algo);
    if (a >= 0 && a < kAlgos && info.rank[a] >= 0 && perf[r].status == CUDNN_STATUS_SUCCESS) info.rank[a] = std::min(info.rank[a], r);
  }
  return info;
}

// Cached per geometry (applies() and cost() run per node and per build); null without a device.
const AlgoInfo* algo_info(const Conv& g) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<AlgoInfo>> cache;
  cuda::Context* c = cuda::context_if_available();
  if (!c) return nullptr;
  std::lock_guard<std::mutex> lock(mu);
  auto [it, fresh] = cache.emplace(key_of(g), nullptr);
  if (fresh) {
    auto r = query(*c, g);
    it->second = std::make_unique<AlgoInfo>();
    if (r) *it->second = *r;
    else
      for (int a = 0; a < kAlgos; ++a) it->second->rank[a] = -1;
  }
  return it->second.get();
}

template <int A>
Status cudnn_applies(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(Conv g, geom(s));
  if (const AlgoInfo* info = algo_info(g)) {
    if (info->rank[A] < 0)
      return not_applicable(std::string("cuDNN does not support ") + kNames[A] + " for this convolution (or it needs over 1 GiB of workspace)");
    if (info->workspace[A] > s.workspace_limit) return workspace_over_limit(info->workspace[A], s.workspace_limit);
  }
  return Status::ok();
}

template <int A>
double cudnn_cost(const StepDesc& s) {
  auto g = geom(s);
  if (!g) return 1e12;
  const AlgoInfo* info = algo_info(*g);
  const int rank = info ? std::max(info->rank[A], 0) : A;
  // ~50 fp32 TFLOP/s at best (~400 on tensor cores), a launch, then cuDNN's own order.
  const double rate = g->t == Elem::f32 && !g->tf32 ? 5e4 : 4e5;
  return 5000.0 + g->flops() / rate + 1000.0 * rank;
}

// W [M][C/G][KH][KW] as cuDNN's NHWC filter: [M][KH][KW][C/G], any element type.
Result<cuda::DeviceBuffer> upload_khwc(const Tensor& w) {
  const Shape& d = w.shape();
  if (d.size() != 4) return invalid_argument("conv weights: 4-D expected");
  const int64_t M = d[0], Cg = d[1], KH = d[2], KW = d[3];
  const size_t e = dtype_size(w.dtype());
  TAC_ASSIGN_OR_RETURN(Tensor host, Tensor::create(w.dtype(), {M, KH, KW, Cg}));
  const auto* src = static_cast<const unsigned char*>(w.raw());
  auto* dst = static_cast<unsigned char*>(host.raw());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < Cg; ++c)
      for (int64_t h = 0; h < KH; ++h)
        for (int64_t x = 0; x < KW; ++x)
          std::memcpy(dst + static_cast<size_t>(((m * KH + h) * KW + x) * Cg + c) * e,
                      src + static_cast<size_t>(((m * Cg + c) * KH + h) * KW + x) * e, e);
  return cuda::upload(host);
}

// cuDNN's convolution with algorithm `algo`, then (bias, residual, activation) as our epilogue
// kernel; or, `fused`, all in one cudnnConvolutionBiasActivationForward call (relu or none,
// bias in y's type, residual as z).
class CudnnKernel final : public Kernel {
 public:
  CudnnKernel(Conv g, cuda::Context* c, cudnnConvolutionFwdAlgo_t algo, bool fused) : g_(g), c_(c), algo_(algo), fused_(fused) {}
  Status init(const StepDesc& s) {
    TAC_RETURN_IF_ERROR(make_descs(g_, d_));
    if (cudnnStatus_t st = cudnnGetConvolutionForwardWorkspaceSize(c_->dnn, d_.x, d_.w, d_.conv, d_.y, algo_, &ws_);
        st != CUDNN_STATUS_SUCCESS)
      return not_applicable(std::string("cuDNN: algorithm not supported here (") + cudnnGetErrorString(st) + ")");
    if (ws_ > s.workspace_limit) return workspace_over_limit(ws_, s.workspace_limit);
    if (g_.nhwc) {
      TAC_ASSIGN_OR_RETURN(w_, upload_khwc(*s.constants[1]));
    }
    if (fused_) {
      // Bias in y's type (zeros without one), per output channel.
      const DType bt = g_.t == Elem::f16 ? DType::float16 : g_.t == Elem::bf16 ? DType::bfloat16 : DType::float32;
      TAC_ASSIGN_OR_RETURN(Tensor host, Tensor::create(bt, {g_.M}));
      const Tensor* b = g_.has_bias && s.constants.size() > 2 ? s.constants[2] : nullptr;
      if (g_.has_bias && !b) return not_applicable("the fused call needs a constant bias");
      for (int64_t i = 0; i < g_.M; ++i) host.set_f64(i, b ? b->get_f64(i) : 0.0);
      TAC_ASSIGN_OR_RETURN(bias_, cuda::upload(host));
      TAC_CUDNN_CALL(cudnnCreateTensorDescriptor(&bias_desc_));
      TAC_CUDNN_CALL(cudnnSetTensor4dDescriptor(bias_desc_, CUDNN_TENSOR_NCHW, cudnn_type(g_.t), 1, static_cast<int>(g_.M), 1, 1));
      TAC_CUDNN_CALL(cudnnCreateActivationDescriptor(&act_));
      const bool relu = g_.ep.act == ir::Epilogue::Act::relu;
      TAC_CUDNN_CALL(cudnnSetActivationDescriptor(act_, relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                                  CUDNN_PROPAGATE_NAN, 0.0));
    }
    return Status::ok();
  }
  ~CudnnKernel() override {
    if (bias_desc_) cudnnDestroyTensorDescriptor(bias_desc_);
    if (act_) cudnnDestroyActivationDescriptor(act_);
  }
  size_t workspace_bytes() const override { return ws_; }
  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* ws) override {
    const float one = 1.0f, zero = 0.0f;
    void* y = out[0].data;
    const void* w = g_.nhwc ? w_.get() : in[1].data;
    if (fused_) {
      const float alpha2 = g_.has_res ? 1.0f : 0.0f;
      const void* z = g_.has_res ? in[3].data : y;
      TAC_CUDNN_CALL(cudnnConvolutionBiasActivationForward(c_->dnn, &one, d_.x, in[0].data, d_.w, w, d_.conv, algo_, ws, ws_,
                                                           &alpha2, d_.y, z, bias_desc_, bias_.get(), act_, d_.y, y));
      return Status::ok();
    }
    TAC_CUDNN_CALL(cudnnConvolutionForward(c_->dnn, &one, d_.x, in[0].data, d_.w, w, d_.conv, algo_, ws, ws_, &zero, d_.y, y));
    if (!g_.has_bias && !g_.has_res && g_.ep.act == ir::Epilogue::Act::none) return Status::ok();
    cuda::kern::EpilogueDesc e;
    e.total = g_.N * g_.M * g_.ohw();
    if (g_.nhwc) {  // [N*OH*OW][M]: bias per column; the residual laid out as y
      e.rows = g_.N * g_.ohw();
      e.cols = g_.M;
      e.bias_per_row = false;
      e.r_rs = g_.M;
    } else {  // [N][M][OH*OW]: bias per row
      e.rows = g_.M;
      e.cols = g_.ohw();
      e.bias_per_row = true;
      e.r_bs = g_.M * g_.ohw();
      e.r_rs = g_.ohw();
    }
    e.r_cs = 1;
    e.act = static_cast<int>(g_.ep.act);
    e.alpha = g_.ep.alpha;
    e.beta = g_.ep.beta;
    return cuda::launch_status(cuda::kern::epilogue(g_.t, y, g_.has_bias ? in[2].as<float>() : nullptr,
                                                    g_.has_res ? in[3].data : nullptr, e, c_->stream),
                               "epilogue kernel (after cuDNN)");
  }

 private:
  Conv g_;
  cuda::Context* c_;
  cudnnConvolutionFwdAlgo_t algo_;
  bool fused_;
  ConvDescs d_;
  size_t ws_ = 0;
  cuda::DeviceBuffer w_, bias_;
  cudnnTensorDescriptor_t bias_desc_ = nullptr;
  cudnnActivationDescriptor_t act_ = nullptr;
};

template <int A>
Result<std::unique_ptr<Kernel>> cudnn_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(Conv g, geom(s));
  TAC_ASSIGN_OR_RETURN(cuda::Context * c, cuda::context());
  auto k = std::make_unique<CudnnKernel>(g, c, static_cast<cudnnConvolutionFwdAlgo_t>(A), /*fused=*/false);
  TAC_RETURN_IF_ERROR(k->init(s));
  return std::unique_ptr<Kernel>(std::move(k));
}

template <int A>
void add_tactics(std::vector<Tactic>& t) {
  for (ir::OpKind op : {ir::OpKind::Conv, ir::OpKind::FusedConv})
    t.push_back({kNames[A], op,
                 "cuDNN convolution with this forward algorithm (fp32/tf32/fp16/bf16, nchw or nhwc); our epilogue kernel after it",
                 cudnn_applies<A>, cudnn_cost<A>, cudnn_prepare<A>, Backend::cuda, /*layouts=*/true});
}

// ---- cuDNN's fused convolution + bias + activation (+ residual) ----
constexpr int kFusedAlgo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;  // the one that takes an identity activation
Status fused_applies(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(cudnn_applies<kFusedAlgo>(s));
  TAC_ASSIGN_OR_RETURN(Conv g, geom(s));
  if (g.ep.act != ir::Epilogue::Act::none && g.ep.act != ir::Epilogue::Act::relu)
    return not_applicable("cuDNN's fused call takes relu or no activation");
  if (g.has_bias && (s.constants.size() < 3 || !s.constants[2])) return not_applicable("constant bias only");
  if (!g.has_bias && !g.has_res && g.ep.act == ir::Epilogue::Act::none) return not_applicable("nothing to fuse");
  return Status::ok();
}
// In nhwc ranked first where it applies (one call instead of a convolution and an epilogue pass):
// on an H200 in fp16 nhwc, pinned on every convolution it takes, ResNet-50 batch 1 0.447 -> 0.335
// ms, batch 32 3.281 -> 1.230 ms. In nchw it lost (ResNet-50 fp16 batch 1 0.852 ms against 0.639
// with our epilogue): ranked after the unfused algorithm there (bench/results/cuda-2026-12-03-nhwc.md).
double fused_cost(const StepDesc& s) {
  auto g = geom(s);
  if (!g) return 1e12;
  if (!g->nhwc) return cudnn_cost<kFusedAlgo>(s) + 500.0;
  const double rate = g->t == Elem::f32 && !g->tf32 ? 5e4 : 4e5;
  return 4000.0 + g->flops() / rate;  // below every other cuDNN tactic's (5000 + ... + 1000 * rank)
}
Result<std::unique_ptr<Kernel>> fused_prepare(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(fused_applies(s));
  TAC_ASSIGN_OR_RETURN(Conv g, geom(s));
  TAC_ASSIGN_OR_RETURN(cuda::Context * c, cuda::context());
  auto k = std::make_unique<CudnnKernel>(g, c, static_cast<cudnnConvolutionFwdAlgo_t>(kFusedAlgo), /*fused=*/true);
  TAC_RETURN_IF_ERROR(k->init(s));
  return std::unique_ptr<Kernel>(std::move(k));
}

// ---- cuDNN's v9 graph API: one tactic per engine configuration its heuristic proposes ----
// The step as one operation graph: convolution -> + bias -> + residual -> activation, the
// intermediates virtual (fp32, inside the fused kernel), y in the step's type; the bias is the
// step's fp32 vector read as [1, M, 1, 1]. "cudnn_graph_hR" is the R-th configuration of the
// heuristic's list (mode A, then the fallback list's other engines). Where the configuration
// cannot run the graph, its plan fails to finalize at prepare and the tactic is not applicable
// (the reason names cuDNN's engine). Ranked after the legacy tactics: the tuner's search and
// builder.selection=isolated try them.
constexpr int kGraphTactics = 6;
const char* const kGraphNames[kGraphTactics] = {"cudnn_graph_h0", "cudnn_graph_h1", "cudnn_graph_h2",
                                                "cudnn_graph_h3", "cudnn_graph_h4", "cudnn_graph_h5"};

std::vector<int64_t> strides4(int64_t c, int64_t h, int64_t w, bool nhwc) {
  return nhwc ? std::vector<int64_t>{h * w * c, 1, w * c, c} : std::vector<int64_t>{c * h * w, h * w, w, 1};
}

// The step's graph; its uids: x, w, y, then the bias and the residual where present.
Status build_graph(cuda::dnn::Cached& gc, const Conv& c, cudnnHandle_t h) {
  using E = ir::Epilogue::Act;
  cuda::dnn::Graph& g = gc.g;
  const cudnnDataType_t t = cudnn_type(c.t);
  const bool act = c.ep.act != E::none;
  const int64_t x = g.tensor(t, {c.N, c.C, c.H, c.W}, strides4(c.C, c.H, c.W, c.nhwc));
  const int64_t w = g.tensor(t, {c.M, c.Cg(), c.KH, c.KW}, strides4(c.Cg(), c.KH, c.KW, c.nhwc));
  const std::vector<int64_t> ydims{c.N, c.M, c.OH, c.OW}, ystr = strides4(c.M, c.OH, c.OW, c.nhwc);
  const int64_t y = g.tensor(t, ydims, ystr);
  gc.uids = {x, w, y};
  // Each stage writes y when it is the last, else a virtual fp32 tensor.
  const int stages = 1 + (c.has_bias ? 1 : 0) + (c.has_res ? 1 : 0) + (act ? 1 : 0);
  int stage = 0;
  auto out = [&]() { return ++stage == stages ? y : g.tensor(CUDNN_DATA_FLOAT, ydims, ystr, /*is_virtual=*/true); };
  int64_t v = out();
  g.conv(x, w, v, {c.PT, c.PL}, {c.PB, c.PR}, {c.SH, c.SW}, {c.DH, c.DW});
  if (c.has_bias) {
    const int64_t b = g.tensor(CUDNN_DATA_FLOAT, {1, c.M, 1, 1}, {c.M, 1, 1, 1});
    gc.uids.push_back(b);
    const int64_t o = out();
    g.pointwise(CUDNN_POINTWISE_ADD, v, b, o);
    v = o;
  }
  if (c.has_res) {
    const int64_t r = g.tensor(t, ydims, ystr);
    gc.uids.push_back(r);
    const int64_t o = out();
    g.pointwise(CUDNN_POINTWISE_ADD, v, r, o);
    v = o;
  }
  if (act) {
    TAC_ASSIGN_OR_RETURN(auto a, cuda::dnn::pointwise_of(c.ep));
    g.pointwise(a.first, v, -1, out(), a.second);
  }
  TAC_RETURN_IF_ERROR(g.finalize(h));
  // True fp32 leaves out the engines that compute in TF32 or fp16 (cuDNN's numerical notes).
  std::vector<cudnnBackendNumericalNote_t> exclude;
  if (c.t == Elem::f32 && !c.tf32) exclude = {CUDNN_NUMERICAL_NOTE_TENSOR_CORE, CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS};
  return g.heuristics(h, kGraphTactics, exclude);
}

// Per geometry and epilogue (applies() and cost() run per node and per build); null without a
// device.
cuda::dnn::Cached* graph_of(const Conv& c) {
  char ep[128];
  std::snprintf(ep, sizeof ep, "|%d,%g,%g|%d%d|%lld,%lld", static_cast<int>(c.ep.act), c.ep.alpha, c.ep.beta, c.has_bias,
                c.has_res, (long long)c.PB, (long long)c.PR);
  return cuda::dnn::cached(key_of(c) + ep, [&](cuda::dnn::Cached& gc, cudnnHandle_t h) { return build_graph(gc, c, h); });
}

template <int R>
Status graph_applies(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(Conv c, any_geom(s));
  if (c.ep.act != ir::Epilogue::Act::none) TAC_RETURN_IF_ERROR(cuda::dnn::pointwise_of(c.ep).status());
  return graph_config_applies(graph_of(c), R, s.workspace_limit);
}

template <int R>
double graph_cost(const StepDesc& s) {
  auto c = any_geom(s);
  if (!c) return 1e12;
  const double rate = c->t == Elem::f32 && !c->tf32 ? 5e4 : 4e5;
  return 14000.0 + c->flops() / rate + 1000.0 * R;  // after every legacy tactic (5000 + ... + 1000 * rank <= 8)
}

class ConvGraphKernel final : public GraphPlanKernel {
 public:
  ConvGraphKernel(Conv c, cuda::Context* ctx, std::vector<int64_t> uids, std::shared_ptr<const cuda::dnn::Plan> plan)
      : GraphPlanKernel(ctx, std::move(uids), std::move(plan)), c_(c) {}
  Status init(const StepDesc& s) {
    if (c_.nhwc) {
      TAC_ASSIGN_OR_RETURN(w_, upload_khwc(*s.constants[1]));
    }
    return Status::ok();
  }

 protected:
  // x, w, y, then the bias and the residual where present (build_graph's uids).
  Status pointers(std::span<const TensorView> in, std::span<const TensorView> out, std::vector<void*>& ptrs) override {
    ptrs = {in[0].data, c_.nhwc ? w_.get() : in[1].data, out[0].data};
    if (c_.has_bias) ptrs.push_back(in[2].data);
    if (c_.has_res) ptrs.push_back(in[3].data);
    return Status::ok();
  }

 private:
  Conv c_;
  cuda::DeviceBuffer w_;
};

template <int R>
Result<std::unique_ptr<Kernel>> graph_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(Conv c, any_geom(s));
  TAC_ASSIGN_OR_RETURN(cuda::Context * ctx, cuda::context());
  cuda::dnn::Cached* gc = graph_of(c);
  TAC_ASSIGN_OR_RETURN(std::shared_ptr<const cuda::dnn::Plan> plan, graph_config_plan(gc, R, ctx->dnn, s.workspace_limit));
  auto k = std::make_unique<ConvGraphKernel>(c, ctx, gc->uids, std::move(plan));
  TAC_RETURN_IF_ERROR(k->init(s));
  return std::unique_ptr<Kernel>(std::move(k));
}

template <int R>
void add_graph_tactics(std::vector<Tactic>& t) {
  for (ir::OpKind op : {ir::OpKind::Conv, ir::OpKind::FusedConv})
    t.push_back({kGraphNames[R], op,
                 "cuDNN v9 graph API: convolution + bias + residual + activation as one operation graph, the heuristic's "
                 "engine configuration of this rank (fp32/tf32/fp16/bf16, nchw or nhwc)",
                 graph_applies<R>, graph_cost<R>, graph_prepare<R>, Backend::cuda, /*layouts=*/true});
}

// ---- our depthwise kernel ----
Result<cuda::kern::DepthwiseDesc> depthwise_desc(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(Conv g, any_geom(s));
  if (g.G != g.C || g.G == 1) return not_applicable("not depthwise (group == input channels > 1)");
  cuda::kern::DepthwiseDesc d;
  d.N = g.N, d.C = g.C, d.H = g.H, d.W = g.W, d.M = g.M, d.OH = g.OH, d.OW = g.OW;
  d.KH = g.KH, d.KW = g.KW, d.SH = g.SH, d.SW = g.SW, d.DH = g.DH, d.DW = g.DW, d.PT = g.PT, d.PL = g.PL;
  d.act = static_cast<int>(g.ep.act);
  d.alpha = g.ep.alpha;
  d.beta = g.ep.beta;
  d.nhwc = g.nhwc;
  return d;
}
Status depthwise_applies(const StepDesc& s) { return depthwise_desc(s).status(); }
// Memory-bound: ranked ahead of cuDNN, whose every algorithm pays a GEMM's setup here.
double depthwise_cost(const StepDesc& s) {
  auto g = any_geom(s);
  if (!g) return 1e12;
  const double e = g->t == Elem::f32 ? 4 : 2;
  return cuda::memory_bound_ns(e * (g->N * g->C * g->hw() + g->N * g->M * g->ohw() * (g->has_res ? 2 : 1))) + g->flops() / 1e5;
}
Result<std::unique_ptr<Kernel>> depthwise_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(cuda::kern::DepthwiseDesc d, depthwise_desc(s));
  TAC_ASSIGN_OR_RETURN(Conv g, any_geom(s));
  TAC_ASSIGN_OR_RETURN(cuda::Context * c, cuda::context());
  const Elem t = g.t;
  const bool bias = g.has_bias, res = g.has_res;
  cudaStream_t st = c->stream;
  return cuda::make_kernel([d, t, bias, res, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::depthwise_conv(t, in[0].data, in[1].data, bias ? in[2].template as<float>() : nullptr,
                                                          res ? in[3].data : nullptr, out[0].data, d, st),
                               "depthwise conv kernel");
  });
}

}  // namespace

std::span<const Tactic> cuda_conv_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t;
    for (ir::OpKind op : {ir::OpKind::Conv, ir::OpKind::FusedConv})
      t.push_back({"cuda_depthwise", op,
                   "own depthwise kernel (group == channels; fp32/fp16/bf16; nchw or nhwc), bias, residual and activation fused",
                   depthwise_applies, depthwise_cost, depthwise_prepare, Backend::cuda, /*layouts=*/true});
    add_tactics<0>(t), add_tactics<1>(t), add_tactics<2>(t), add_tactics<3>(t);
    add_tactics<4>(t), add_tactics<5>(t), add_tactics<6>(t), add_tactics<7>(t);
    for (ir::OpKind op : {ir::OpKind::Conv, ir::OpKind::FusedConv})
      t.push_back({"cudnn_fused", op,
                   "cuDNN's fused convolution + bias + relu (+ residual) in one call (implicit precomputed GEMM; nchw or nhwc)",
                   fused_applies, fused_cost, fused_prepare, Backend::cuda, /*layouts=*/true});
    add_graph_tactics<0>(t), add_graph_tactics<1>(t), add_graph_tactics<2>(t);
    add_graph_tactics<3>(t), add_graph_tactics<4>(t), add_graph_tactics<5>(t);
    return t;
  }();
  return table;
}

}  // namespace tac::kernels
