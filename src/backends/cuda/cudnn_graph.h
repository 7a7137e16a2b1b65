// cuDNN's v9 graph API (the backend descriptors of cudnn_graph.h) in a few RAII types, for CUDA
// tactics (CUDA builds only): a Graph of operations on tensors named by unique ids, the engine
// configurations cuDNN's heuristic proposes for it, and a Plan (one configuration, finalized)
// that runs with the device pointers of one call.
//
//   cuda::dnn::Graph g;
//   int64_t x = g.tensor(CUDNN_DATA_HALF, dims, strides), y = ...;
//   g.conv(x, w, y, pads, strides, dilations);  g.pointwise(CUDNN_POINTWISE_RELU_FWD, y0, -1, y);
//   g.finalize(handle);  g.heuristics(handle, 8);   // g.configs() engine configurations, best first
//   auto plan = g.plan(handle, 0);                  // fails where that configuration cannot run it
//   call.run(handle, **plan, {x, w, y}, {px, pw, py}, workspace);   // cuda::dnn::Call call;
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/context.h"
#include "ir/epilogue.h"

namespace tac::cuda::dnn {

// One backend descriptor, destroyed with the object.
class Desc {
 public:
  Desc() = default;
  explicit Desc(cudnnBackendDescriptor_t d) : d_(d) {}
  Desc(Desc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  Desc& operator=(Desc&& o) noexcept;
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  ~Desc();
  static Result<Desc> create(cudnnBackendDescriptorType_t type);
  cudnnBackendDescriptor_t get() const { return d_; }
  // cudnnBackendSetAttribute / cudnnBackendFinalize as a Status naming the attribute.
  Status set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values);
  Status set_desc(cudnnBackendAttributeName_t name, const Desc& d) {
    cudnnBackendDescriptor_t v = d.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
  }
  Status finalize(const char* what);

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

class Call;

// A finalized execution plan: one engine configuration for one graph.
class Plan {
 public:
  size_t workspace_bytes() const { return workspace_; }
  // cuDNN's engine index (its global numbering; for messages).
  int64_t engine() const { return engine_; }

 private:
  friend class Graph;
  friend class Call;
  Desc plan_;
  size_t workspace_ = 0;
  int64_t engine_ = -1;
};

// A pointwise mode's parameters: CUDNN_POINTWISE_RELU_FWD's clips (Clip, LeakyRelu), and
// CUDNN_POINTWISE_SWISH_FWD's beta.
struct PointwiseParams {
  double relu_lower = 0, relu_upper = -1, relu_slope = 0, swish_beta = 1;
  bool has_upper = false, has_slope = false;
};

class Graph {
 public:
  // A tensor of `dims` and `strides` (elements), 16-byte aligned; a virtual one is an
  // intermediate that lives inside the fused kernel. Returns its id (0 where creation failed;
  // the error is kept and returned by finalize()).
  int64_t tensor(cudnnDataType_t type, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                 bool is_virtual = false);
  // y = conv(x, w): cross-correlation, fp32 accumulation; spatial dims from pads.size().
  void conv(int64_t x, int64_t w, int64_t y, const std::vector<int64_t>& pre_pads, const std::vector<int64_t>& post_pads,
            const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations);
  // y = a b over the last two dims (batch dims before them; a dim of 1 broadcasts), fp32
  // accumulation.
  void matmul(int64_t a, int64_t b, int64_t y);
  // y = mode(x[, b]) in fp32 math (b < 0: a unary mode).
  void pointwise(cudnnPointwiseMode_t mode, int64_t x, int64_t b, int64_t y, const PointwiseParams& p = {});
  // The operation graph, after the last operation.
  Status finalize(cudnnHandle_t h);
  // Up to `max` engine configurations by cuDNN's heuristic (mode A, then its fallback list for
  // what mode A leaves out), best first, without engines carrying a numerical note of `exclude`
  // (true fp32 excludes CUDNN_NUMERICAL_NOTE_TENSOR_CORE and _DOWN_CONVERT_INPUTS: TF32 or fp16
  // math). Each may still fail to finalize as a plan.
  Status heuristics(cudnnHandle_t h, int max, const std::vector<cudnnBackendNumericalNote_t>& exclude = {});
  size_t configs() const { return configs_.size(); }
  // Configuration `i` finalized as a plan; not_applicable (with cuDNN's reason) where it cannot
  // run this graph.
  Result<std::shared_ptr<const Plan>> plan(cudnnHandle_t h, size_t i) const;

 private:
  Status error_;
  int64_t next_uid_ = 1;
  std::vector<Desc> tensors_;
  std::vector<int64_t> uids_;  // per tensors_ entry
  std::vector<Desc> others_;   // op, pointwise and convolution descriptors the graph refers to
  std::vector<Desc> ops_;
  Desc graph_;
  std::vector<Desc> configs_;
  const Desc* find(int64_t uid);
  void keep(Result<Desc> d, std::vector<Desc>& into);
};

// Runs a plan with the device pointers of one call (one per id of `uids`) on the handle's
// stream. The variant pack is built again only when the pointers change (an engine replays the
// same buffers run after run).
class Call {
 public:
  Status run(cudnnHandle_t h, const Plan& plan, const std::vector<int64_t>& uids, const std::vector<void*>& ptrs,
             void* workspace);

 private:
  Desc pack_;
  std::vector<void*> ptrs_;
  void* workspace_ = nullptr;
};

// cudnnGetLastErrorString's text for the last failing call of this thread ("" if none).
std::string last_error();

// An activation epilogue as a pointwise mode and its parameters, or not_applicable.
Result<std::pair<cudnnPointwiseMode_t, PointwiseParams>> pointwise_of(const ir::Epilogue& ep);

// A graph a tactic builds once per key (geometry, types, epilogue) and keeps for the process:
// cuDNN's configurations for it and the plans finalized so far (plans refer to the graph).
// Tactics call cached() from applies() (heuristics only: cheap) and plan() from prepare
// (finalizing may compile a kernel at run time: once per process and configuration).
struct Cached {
  Graph g;
  Status status;              // building the graph or its heuristic failed: why
  std::vector<int64_t> uids;  // the tensors a run binds, in the order its tactic keeps them
  std::vector<std::shared_ptr<const Plan>> plans;
  std::vector<Status> plan_status;
  std::vector<char> tried;
};
// The entry of `key`, built by `build` (the graph, uids and heuristics) the first time; null
// without a device.
Cached* cached(const std::string& key, const std::function<Status(Cached&, cudnnHandle_t)>& build);
// Whether configuration `r` of `c` can run, as far as known before its plan is finalized: it
// exists and did not fail to finalize (not_applicable with the reason otherwise).
Status config_applies(const Cached& c, int r);
// The workspace of configuration `r` once its plan is finalized, else 0.
size_t config_workspace(const Cached& c, int r);
// Configuration `r` of `c` as a plan, finalized the first time.
Result<std::shared_ptr<const Plan>> config_plan(Cached& c, int r, cudnnHandle_t h);

}  // namespace tac::cuda::dnn
