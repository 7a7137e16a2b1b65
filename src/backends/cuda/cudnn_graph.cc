#include "backends/cuda/cudnn_graph.h"

// The operation graph and the plans take the handle through CUDNN_ATTR_*_HANDLE, deprecated in
// cuDNN 9.19's headers (for device properties) but the attribute every cuDNN 9 accepts: the GPU
// machine's cuDNN comes from its Python packages and may be older than these headers.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <algorithm>
#include <cfloat>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

namespace tac::cuda::dnn {

std::string last_error() {
  char buf[512] = {};
  cudnnGetLastErrorString(buf, sizeof buf);
  return buf;
}

namespace {
Status fail(cudnnStatus_t st, const std::string& what) {
  std::string msg = "cuDNN graph: " + what + ": " + cudnnGetErrorString(st);
  if (std::string e = last_error(); !e.empty()) msg += " (" + e + ")";
  // CUDNN_STATUS_NOT_SUPPORTED and its refinements (3000-3999): this graph, shape, layout or
  // device is not what the engine takes.
  return static_cast<int>(st) / 1000 == 3 ? Status(ErrorKind::not_applicable, msg) : internal_error(msg);
}
}  // namespace

Desc& Desc::operator=(Desc&& o) noexcept {
  if (this != &o) {
    if (d_) cudnnBackendDestroyDescriptor(d_);
    d_ = o.d_;
    o.d_ = nullptr;
  }
  return *this;
}

Desc::~Desc() {
  if (d_) cudnnBackendDestroyDescriptor(d_);
}

Result<Desc> Desc::create(cudnnBackendDescriptorType_t type) {
  cudnnBackendDescriptor_t d = nullptr;
  if (cudnnStatus_t st = cudnnBackendCreateDescriptor(type, &d); st != CUDNN_STATUS_SUCCESS)
    return fail(st, "create descriptor " + std::to_string(static_cast<int>(type)));
  return Desc(d);
}

Status Desc::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values) {
  if (cudnnStatus_t st = cudnnBackendSetAttribute(d_, name, type, count, values); st != CUDNN_STATUS_SUCCESS)
    return fail(st, "set attribute " + std::to_string(static_cast<int>(name)));
  return Status::ok();
}

Status Desc::finalize(const char* what) {
  if (cudnnStatus_t st = cudnnBackendFinalize(d_); st != CUDNN_STATUS_SUCCESS) return fail(st, std::string("finalize ") + what);
  return Status::ok();
}

void Graph::keep(Result<Desc> d, std::vector<Desc>& into) {
  if (!d) {
    if (error_.is_ok()) error_ = d.status();
    into.emplace_back();
    return;
  }
  into.push_back(std::move(d).value());
}

const Desc* Graph::find(int64_t uid) {
  for (size_t i = 0; i < uids_.size(); ++i)
    if (uids_[i] == uid) return &tensors_[i];
  if (error_.is_ok()) error_ = internal_error("cuDNN graph: no tensor " + std::to_string(uid));
  return nullptr;
}

int64_t Graph::tensor(cudnnDataType_t type, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                      bool is_virtual) {
  const int64_t uid = next_uid_++;
  auto make = [&]() -> Result<Desc> {
    TAC_ASSIGN_OR_RETURN(Desc d, Desc::create(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
    const int64_t align = 16;
    const bool v = is_virtual;
    TAC_RETURN_IF_ERROR(d.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
    TAC_RETURN_IF_ERROR(d.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, static_cast<int64_t>(dims.size()), dims.data()));
    TAC_RETURN_IF_ERROR(d.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, static_cast<int64_t>(strides.size()), strides.data()));
    TAC_RETURN_IF_ERROR(d.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    TAC_RETURN_IF_ERROR(d.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    TAC_RETURN_IF_ERROR(d.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v));
    TAC_RETURN_IF_ERROR(d.finalize("tensor"));
    return d;
  };
  keep(make(), tensors_);
  uids_.push_back(uid);
  return uid;
}

void Graph::conv(int64_t x, int64_t w, int64_t y, const std::vector<int64_t>& pre_pads, const std::vector<int64_t>& post_pads,
                 const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations) {
  const Desc *dx = find(x), *dw = find(w), *dy = find(y);
  if (!dx || !dw || !dy) return;
  auto make_conv = [&]() -> Result<Desc> {
    TAC_ASSIGN_OR_RETURN(Desc c, Desc::create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
    const cudnnDataType_t acc = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    const int64_t n = static_cast<int64_t>(pre_pads.size());
    TAC_RETURN_IF_ERROR(c.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &acc));
    TAC_RETURN_IF_ERROR(c.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
    TAC_RETURN_IF_ERROR(c.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &n));
    TAC_RETURN_IF_ERROR(c.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, n, pre_pads.data()));
    TAC_RETURN_IF_ERROR(c.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, n, post_pads.data()));
    TAC_RETURN_IF_ERROR(c.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, n, strides.data()));
    TAC_RETURN_IF_ERROR(c.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, n, dilations.data()));
    TAC_RETURN_IF_ERROR(c.finalize("convolution"));
    return c;
  };
  keep(make_conv(), others_);
  if (!error_.is_ok()) return;
  const Desc& cd = others_.back();
  auto make_op = [&]() -> Result<Desc> {
    TAC_ASSIGN_OR_RETURN(Desc op, Desc::create(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
    const float alpha = 1.0f, beta = 0.0f;
    TAC_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, *dx));
    TAC_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, *dw));
    TAC_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, *dy));
    TAC_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, cd));
    TAC_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha));
    TAC_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta));
    TAC_RETURN_IF_ERROR(op.finalize("convolution forward"));
    return op;
  };
  keep(make_op(), ops_);
}

void Graph::matmul(int64_t a, int64_t b, int64_t y) {
  const Desc *da = find(a), *db = find(b), *dy = find(y);
  if (!da || !db || !dy) return;
  auto make_mm = [&]() -> Result<Desc> {
    TAC_ASSIGN_OR_RETURN(Desc m, Desc::create(CUDNN_BACKEND_MATMUL_DESCRIPTOR));
    const cudnnDataType_t acc = CUDNN_DATA_FLOAT;
    TAC_RETURN_IF_ERROR(m.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &acc));
    TAC_RETURN_IF_ERROR(m.finalize("matmul"));
    return m;
  };
  keep(make_mm(), others_);
  if (!error_.is_ok()) return;
  const Desc& md = others_.back();
  auto make_op = [&]() -> Result<Desc> {
    TAC_ASSIGN_OR_RETURN(Desc op, Desc::create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR));
    TAC_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, *da));
    TAC_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, *db));
    TAC_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, *dy));
    TAC_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, md));
    TAC_RETURN_IF_ERROR(op.finalize("matmul operation"));
    return op;
  };
  keep(make_op(), ops_);
}

void Graph::pointwise(cudnnPointwiseMode_t mode, int64_t x, int64_t b, int64_t y, const PointwiseParams& p) {
  const Desc *dx = find(x), *dy = find(y), *db = b >= 0 ? find(b) : nullptr;
  if (!dx || !dy || (b >= 0 && !db)) return;
  auto make_pw = [&]() -> Result<Desc> {
    TAC_ASSIGN_OR_RETURN(Desc pw, Desc::create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    TAC_RETURN_IF_ERROR(pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
    TAC_RETURN_IF_ERROR(pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec));
    if (mode == CUDNN_POINTWISE_RELU_FWD) {
      TAC_RETURN_IF_ERROR(pw.set(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, CUDNN_TYPE_DOUBLE, 1, &p.relu_lower));
      if (p.has_upper) TAC_RETURN_IF_ERROR(pw.set(CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_DOUBLE, 1, &p.relu_upper));
      if (p.has_slope)
        TAC_RETURN_IF_ERROR(pw.set(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, CUDNN_TYPE_DOUBLE, 1, &p.relu_slope));
    }
    if (mode == CUDNN_POINTWISE_SWISH_FWD)
      TAC_RETURN_IF_ERROR(pw.set(CUDNN_ATTR_POINTWISE_SWISH_BETA, CUDNN_TYPE_DOUBLE, 1, &p.swish_beta));
    TAC_RETURN_IF_ERROR(pw.finalize("pointwise"));
    return pw;
  };
  keep(make_pw(), others_);
  if (!error_.is_ok()) return;
  const Desc& pd = others_.back();
  auto make_op = [&]() -> Result<Desc> {
    TAC_ASSIGN_OR_RETURN(Desc op, Desc::create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
    TAC_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pd));
    TAC_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, *dx));
    if (db) TAC_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *db));
    TAC_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, *dy));
    TAC_RETURN_IF_ERROR(op.finalize("pointwise operation"));
    return op;
  };
  keep(make_op(), ops_);
}

Status Graph::finalize(cudnnHandle_t h) {
  TAC_RETURN_IF_ERROR(error_);
  if (ops_.empty()) return internal_error("cuDNN graph: no operations");
  TAC_ASSIGN_OR_RETURN(graph_, Desc::create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  std::vector<cudnnBackendDescriptor_t> ops;
  for (const Desc& d : ops_) ops.push_back(d.get());
  TAC_RETURN_IF_ERROR(graph_.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops.size()),
                                 ops.data()));
  TAC_RETURN_IF_ERROR(graph_.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  return graph_.finalize("operation graph");
}

namespace {
// The engine configurations of one heuristic query (mode), in its order.
Result<std::vector<Desc>> query(const Desc& graph, cudnnBackendHeurMode_t mode) {
  TAC_ASSIGN_OR_RETURN(Desc heur, Desc::create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
  TAC_RETURN_IF_ERROR(heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph));
  TAC_RETURN_IF_ERROR(heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
  TAC_RETURN_IF_ERROR(heur.finalize("engine heuristic"));
  int64_t n = 0;
  if (cudnnStatus_t st = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n,
                                                  nullptr);
      st != CUDNN_STATUS_SUCCESS)
    return fail(st, "heuristic result count");
  std::vector<Desc> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < n; ++i) {
    TAC_ASSIGN_OR_RETURN(Desc c, Desc::create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(c.get());
    cfgs.push_back(std::move(c));
  }
  int64_t got = 0;
  if (n > 0) {
    if (cudnnStatus_t st = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n,
                                                    &got, raw.data());
        st != CUDNN_STATUS_SUCCESS)
      return fail(st, "heuristic results");
  }
  cfgs.resize(static_cast<size_t>(std::clamp<int64_t>(got, 0, n)));
  return cfgs;
}

// The engine of a configuration: its global index (-1 if unknown) and numerical notes.
struct EngineInfo {
  int64_t index = -1;
  std::vector<cudnnBackendNumericalNote_t> notes;
};
EngineInfo engine_info(const Desc& cfg) {
  EngineInfo info;
  auto engine = Desc::create(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  if (!engine) return info;
  cudnnBackendDescriptor_t e = engine->get();
  int64_t n = 0;
  if (cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e) !=
      CUDNN_STATUS_SUCCESS)
    return info;
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &info.index) != CUDNN_STATUS_SUCCESS)
    info.index = -1;
  info.notes.resize(CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               static_cast<int64_t>(info.notes.size()), &n, info.notes.data()) != CUDNN_STATUS_SUCCESS)
    n = 0;
  info.notes.resize(static_cast<size_t>(std::clamp<int64_t>(n, 0, CUDNN_NUMERICAL_NOTE_TYPE_COUNT)));
  return info;
}
int64_t engine_index(const Desc& cfg) { return engine_info(cfg).index; }
}  // namespace

Status Graph::heuristics(cudnnHandle_t, int max, const std::vector<cudnnBackendNumericalNote_t>& exclude) {
  configs_.clear();
  std::set<int64_t> engines;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    auto cfgs = query(graph_, mode);
    if (!cfgs) {
      if (mode == CUDNN_HEUR_MODE_A) return cfgs.status();
      continue;  // no fallback list: mode A's is the list
    }
    for (Desc& c : *cfgs) {
      if (static_cast<int>(configs_.size()) >= max) return Status::ok();
      const EngineInfo e = engine_info(c);
      if (std::any_of(e.notes.begin(), e.notes.end(),
                      [&](cudnnBackendNumericalNote_t n) { return std::count(exclude.begin(), exclude.end(), n) > 0; }))
        continue;
      // The fallback list repeats engines mode A proposed (other knob settings): keep the first.
      if (mode == CUDNN_HEUR_MODE_FALLBACK && e.index >= 0 && engines.count(e.index)) continue;
      engines.insert(e.index);
      configs_.push_back(std::move(c));
    }
  }
  return Status::ok();
}

Result<std::shared_ptr<const Plan>> Graph::plan(cudnnHandle_t h, size_t i) const {
  if (i >= configs_.size()) return Status(ErrorKind::not_applicable, "cuDNN's heuristic proposes fewer engine configurations");
  auto p = std::make_shared<Plan>();
  TAC_ASSIGN_OR_RETURN(p->plan_, Desc::create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
  TAC_RETURN_IF_ERROR(p->plan_.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs_[i]));
  TAC_RETURN_IF_ERROR(p->plan_.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  p->engine_ = engine_index(configs_[i]);
  if (Status st = p->plan_.finalize("execution plan"); !st.is_ok())
    return Status(ErrorKind::not_applicable, "engine " + std::to_string(p->engine_) + ": " + st.message());
  int64_t ws = 0, n = 0;
  if (cudnnStatus_t st = cudnnBackendGetAttribute(p->plan_.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                                  &n, &ws);
      st != CUDNN_STATUS_SUCCESS)
    return fail(st, "plan workspace size");
  p->workspace_ = static_cast<size_t>(std::max<int64_t>(ws, 0));
  return std::shared_ptr<const Plan>(std::move(p));
}

Status Call::run(cudnnHandle_t h, const Plan& plan, const std::vector<int64_t>& uids, const std::vector<void*>& ptrs,
                 void* workspace) {
  if (!pack_.get() || ptrs != ptrs_ || workspace != workspace_) {
    TAC_ASSIGN_OR_RETURN(Desc pack, Desc::create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
    TAC_RETURN_IF_ERROR(pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(ptrs.size()),
                                 ptrs.data()));
    TAC_RETURN_IF_ERROR(pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
                                 uids.data()));
    TAC_RETURN_IF_ERROR(pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
    TAC_RETURN_IF_ERROR(pack.finalize("variant pack"));
    pack_ = std::move(pack);
    ptrs_ = ptrs;
    workspace_ = workspace;
  }
  if (cudnnStatus_t st = cudnnBackendExecute(h, plan.plan_.get(), pack_.get()); st != CUDNN_STATUS_SUCCESS)
    return fail(st, "execute (engine " + std::to_string(plan.engine_) + ")");
  return Status::ok();
}

Result<std::pair<cudnnPointwiseMode_t, PointwiseParams>> pointwise_of(const ir::Epilogue& ep) {
  using A = ir::Epilogue::Act;
  PointwiseParams p;
  switch (ep.act) {
    case A::relu: return std::make_pair(CUDNN_POINTWISE_RELU_FWD, p);
    case A::clip:
      // Clip's open ends as the largest finite floats (fp32 math: cuDNN's frontend clamps so too).
      p.relu_lower = std::max<double>(ep.alpha, -FLT_MAX), p.relu_upper = std::min<double>(ep.beta, FLT_MAX);
      p.has_upper = true;
      return std::make_pair(CUDNN_POINTWISE_RELU_FWD, p);
    case A::leaky_relu:
      p.relu_slope = ep.alpha, p.has_slope = true;
      return std::make_pair(CUDNN_POINTWISE_RELU_FWD, p);
    case A::sigmoid: return std::make_pair(CUDNN_POINTWISE_SIGMOID_FWD, p);
    case A::tanh: return std::make_pair(CUDNN_POINTWISE_TANH_FWD, p);
    case A::gelu: return std::make_pair(CUDNN_POINTWISE_GELU_FWD, p);  // erf GELU (GELU_APPROX_TANH_FWD is the other)
    case A::silu: return std::make_pair(CUDNN_POINTWISE_SWISH_FWD, p);  // x * sigmoid(beta x), beta 1
    case A::none:
    case A::hard_sigmoid:
    case A::hard_swish: break;
  }
  return Status(ErrorKind::not_applicable, "no cuDNN pointwise mode for this activation");
}

namespace {
std::mutex cache_mu;
}  // namespace

Cached* cached(const std::string& key, const std::function<Status(Cached&, cudnnHandle_t)>& build) {
  static std::map<std::string, std::unique_ptr<Cached>> cache;
  Context* ctx = context_if_available();
  if (!ctx) return nullptr;
  std::lock_guard<std::mutex> lock(cache_mu);
  auto [it, fresh] = cache.emplace(key, nullptr);
  if (fresh) {
    it->second = std::make_unique<Cached>();
    Cached& c = *it->second;
    c.status = build(c, ctx->dnn);
    c.plans.resize(c.g.configs());
    c.plan_status.resize(c.g.configs());
    c.tried.resize(c.g.configs());
  }
  return it->second.get();
}

Status config_applies(const Cached& c, int r) {
  if (!c.status.is_ok()) return Status(ErrorKind::not_applicable, c.status.message());
  if (r >= static_cast<int>(c.g.configs()))
    return Status(ErrorKind::not_applicable,
                  "cuDNN's heuristic proposes " + std::to_string(c.g.configs()) + " engine configurations for this graph");
  std::lock_guard<std::mutex> lock(cache_mu);
  const size_t i = static_cast<size_t>(r);
  if (c.tried[i] && !c.plan_status[i].is_ok()) return c.plan_status[i];
  return Status::ok();
}

size_t config_workspace(const Cached& c, int r) {
  std::lock_guard<std::mutex> lock(cache_mu);
  const size_t i = static_cast<size_t>(r);
  return i < c.plans.size() && c.plans[i] ? c.plans[i]->workspace_bytes() : 0;
}

Result<std::shared_ptr<const Plan>> config_plan(Cached& c, int r, cudnnHandle_t h) {
  TAC_RETURN_IF_ERROR(config_applies(c, r));
  std::lock_guard<std::mutex> lock(cache_mu);
  const size_t i = static_cast<size_t>(r);
  if (!c.tried[i]) {
    c.tried[i] = true;
    auto p = c.g.plan(h, i);
    if (p) c.plans[i] = *p;
    else c.plan_status[i] = p.status();
  }
  TAC_RETURN_IF_ERROR(c.plan_status[i]);
  return c.plans[i];
}

}  // namespace tac::cuda::dnn
