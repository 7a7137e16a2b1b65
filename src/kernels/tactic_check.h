// Running one tactic on one node against the reference kernel: the harness behind every tactic
// test (tests/unit/*_tactics_test.cc) and behind `builder.selection=isolated` timing.
#pragma once

#include <string>
#include <vector>

#include "backends/cuda/device.h"
#include "kernels/tactic.h"

namespace tac::kernels {

struct TacticCheck {
  Status status;               // ok, not_applicable, or the failure
  std::vector<Tensor> outputs; // the tactic's outputs
  std::vector<Tensor> expected;  // the reference kernel's outputs
  double max_abs_diff = 0;     // over all outputs
  double max_rel_diff = 0;     // |got - want| / max(|want|, 1e-6), over all outputs
};

// Runs `tactic` on `node` with `inputs` (inputs[i] is used as a constant, i.e. visible to
// prepare(), when const_mask[i] is true) and the reference kernel on the same inputs; shapes of
// the outputs come from the reference run.
// `in_layouts` / `out_layout` (CPU and CUDA tactics): the tactic reads the non-constant inputs and writes
// output 0 in these layouts (ir/layout.h); the harness converts with the plain loops of
// ir::to_layout / from_layout, and a blocked output whose padded channels are not zero fails.
TacticCheck check_tactic(const Tactic& tactic, const ir::Node& node, const std::vector<Tensor>& inputs,
                         const std::vector<bool>& const_mask, int threads = 1,
                         const std::vector<ir::Layout>& in_layouts = {}, ir::Layout out_layout = ir::Layout::nchw);

// A CUDA tactic's memory for a run outside an engine (check_tactic, isolated timing): each input
// copied to device memory in the step's layout (an empty tensor: no buffer, a null view), each
// output allocated at its physical size and every byte set to `fill` (poison), and `kernel`'s
// workspace. Owns the buffers.
struct DeviceRun {
  std::vector<cuda::DeviceBuffer> bufs;
  std::vector<TensorView> in, out;
  cuda::DeviceBuffer workspace;
};
Result<DeviceRun> device_run(const Kernel& kernel, const StepDesc& step, const std::vector<Tensor>& inputs, int fill);

// A node for tests: op type, inputs named in0.., outputs out0.., opset 17 unless given.
ir::Node make_node(const std::string& op_type, size_t n_inputs, size_t n_outputs, int opset = 17);
void set_attr(ir::Node& n, const std::string& key, int64_t v);
void set_attr(ir::Node& n, const std::string& key, float v);
void set_attr(ir::Node& n, const std::string& key, const std::string& v);
void set_attr(ir::Node& n, const std::string& key, std::vector<int64_t> v);

// Seeded random tensor (normal(0,1) for floats, small integers otherwise). Never all zeros.
Tensor random_tensor(DType dtype, Shape shape, uint64_t seed);

}  // namespace tac::kernels
