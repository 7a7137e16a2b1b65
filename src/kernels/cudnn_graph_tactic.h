// What the cuDNN graph-API tactics (cudnn_graph_h* for convolutions, cudnn_graph_mm_h* for
// matmuls) share on top of backends/cuda/cudnn_graph.h: configuration `r` of a cached graph
// checked against the route's workspace cap, in applies() and at prepare, and the kernel that
// runs a plan. CUDA builds only.
#pragma once

#include <memory>
#include <vector>

#include "backends/cuda/cudnn_graph.h"
#include "kernels/elementwise/cuda_kernels.h"
#include "kernels/tactic.h"

namespace tac::kernels {

// applies(): configuration `r` of `gc` exists, has not failed to finalize and, once finalized,
// fits `workspace_limit`. A null `gc` (no device to ask) applies: decided when built on one.
inline Status graph_config_applies(const cuda::dnn::Cached* gc, int r, size_t workspace_limit) {
  if (!gc) return Status::ok();
  TAC_RETURN_IF_ERROR(cuda::dnn::config_applies(*gc, r));
  if (const size_t ws = cuda::dnn::config_workspace(*gc, r); ws > workspace_limit)
    return workspace_over_limit(ws, workspace_limit);
  return Status::ok();
}

// prepare: configuration `r` of `gc` as a plan (finalized the first time), within `workspace_limit`.
inline Result<std::shared_ptr<const cuda::dnn::Plan>> graph_config_plan(cuda::dnn::Cached* gc, int r, cudnnHandle_t h,
                                                                         size_t workspace_limit) {
  if (!gc) return internal_error("cuDNN graph: no CUDA device to plan on");
  TAC_ASSIGN_OR_RETURN(std::shared_ptr<const cuda::dnn::Plan> plan, cuda::dnn::config_plan(*gc, r, h));
  if (plan->workspace_bytes() > workspace_limit) return workspace_over_limit(plan->workspace_bytes(), workspace_limit);
  return plan;
}

inline cudnnDataType_t cudnn_type(cuda::kern::Elem t) {
  using cuda::kern::Elem;
  return t == Elem::f16 ? CUDNN_DATA_HALF : t == Elem::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

// Runs one finalized plan on the context's handle; a tactic says which device pointers a run
// binds, in the order of its graph's uids.
class GraphPlanKernel : public Kernel {
 public:
  GraphPlanKernel(cuda::Context* ctx, std::vector<int64_t> uids, std::shared_ptr<const cuda::dnn::Plan> plan)
      : ctx_(ctx), uids_(std::move(uids)), plan_(std::move(plan)) {}
  size_t workspace_bytes() const final { return plan_->workspace_bytes(); }
  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* ws) final {
    ptrs_.clear();
    TAC_RETURN_IF_ERROR(pointers(in, out, ptrs_));
    return call_.run(ctx_->dnn, *plan_, uids_, ptrs_, ws);
  }

 protected:
  virtual Status pointers(std::span<const TensorView> in, std::span<const TensorView> out, std::vector<void*>& ptrs) = 0;

 private:
  cuda::Context* ctx_;
  std::vector<int64_t> uids_;
  std::shared_ptr<const cuda::dnn::Plan> plan_;
  cuda::dnn::Call call_;
  std::vector<void*> ptrs_;
};

}  // namespace tac::kernels
