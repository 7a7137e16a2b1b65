// What the cuDNN graph-API tactics (cudnn_graph_h* for convolutions, cudnn_graph_mm_h* for
// matmuls) share on top of backends/cuda/cudnn_graph.h: configuration `r` of a cached graph
// checked against the route's workspace cap, in applies() and at prepare. CUDA builds only.
#pragma once

#include <memory>

#include "backends/cuda/cudnn_graph.h"
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
inline Result<std::shared_ptr<const cuda::dnn::Plan>> graph_config_plan(cuda::dnn::Cached& gc, int r, cudnnHandle_t h,
                                                                         size_t workspace_limit) {
  TAC_ASSIGN_OR_RETURN(std::shared_ptr<const cuda::dnn::Plan> plan, cuda::dnn::config_plan(gc, r, h));
  if (plan->workspace_bytes() > workspace_limit) return workspace_over_limit(plan->workspace_bytes(), workspace_limit);
  return plan;
}

}  // namespace tac::kernels
