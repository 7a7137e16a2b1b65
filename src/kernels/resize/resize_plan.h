// How a Resize / Upsample step is read: its attributes and constant inputs as the reference reads
// them (reference/ops_shape_resize.cc resize_kernel, resize_legacy), for the CPU (cpu_resize.cc) and
// CUDA (cuda_resize.cc) tactics, which then tabulate the reference's filter (reference/resize_filter.h).
#pragma once

#include <vector>

#include "kernels/tactic.h"
#include "reference/resize_filter.h"

namespace tac::kernels {

struct ResizePlan {
  ref::resize::Params p;
  std::vector<double> scale, roi_start, roi_end;  // per dim
  std::vector<bool> resized;                      // per dim: an axis the node resizes
  Shape out;                                      // the output shape scales / sizes give
};

// not_applicable unless the step has one input and one output of its type, known dims, a rank of
// at most `max_rank`, constant float scales (and roi for tf_crop_and_resize) or constant sizes,
// values the reference takes, and an output shape that agrees with them (no empty axis resized to a
// non-empty one).
Result<ResizePlan> resize_plan(const StepDesc& s, size_t max_rank);

}  // namespace tac::kernels
