// Small helpers for CUDA tactics (CUDA builds only): a Kernel made of a function, the context
// captured at prepare, launch-status conversion, our kernels' element type of a dtype, and
// constant tensors uploaded at prepare.
#pragma once

#include <functional>
#include <memory>

#include "backends/cuda/context.h"
#include "backends/cuda/device.h"
#include "ir/epilogue.h"
#include "kernels/elementwise/cuda_kernels.h"
#include "kernels/tactic.h"

namespace tac::cuda {

// The epilogues pass ir::Epilogue::Act to our kernels as an int (kern::EpilogueDesc::act).
static_assert(static_cast<int>(ir::Epilogue::Act::hard_swish) + 1 == kern::kNumEpilogueActs,
              "an ir::Epilogue::Act without its case in cuda_act.cuh's apply_act");

// A prepared CUDA kernel whose run is a function of the views (device pointers) and workspace.
class FnKernel final : public kernels::Kernel {
 public:
  using Fn = std::function<Status(std::span<const kernels::TensorView>, std::span<const kernels::TensorView>, void*)>;
  explicit FnKernel(Fn fn, size_t workspace = 0) : fn_(std::move(fn)), workspace_(workspace) {}
  size_t workspace_bytes() const override { return workspace_; }
  Status run(std::span<const kernels::TensorView> in, std::span<const kernels::TensorView> out, void* ws) override {
    return fn_(in, out, ws);
  }

 private:
  Fn fn_;
  size_t workspace_;
};

inline Result<std::unique_ptr<kernels::Kernel>> make_kernel(FnKernel::Fn fn, size_t workspace = 0) {
  return std::unique_ptr<kernels::Kernel>(new FnKernel(std::move(fn), workspace));
}

// A launch's return code (kern:: functions return cudaError_t as int) as a Status naming it.
inline Status launch_status(int err, const char* kernel) {
  if (err == 0) return Status::ok();
  return cuda_status(static_cast<cudaError_t>(err), kernel);
}

// Our kernels' element type for a float dtype, or not_applicable.
inline Result<kern::Elem> elem_of(DType t) {
  switch (t) {
    case DType::float32: return kern::Elem::f32;
    case DType::float16: return kern::Elem::f16;
    case DType::bfloat16: return kern::Elem::bf16;
    default: return kernels::not_applicable("fp32, fp16 or bf16 only");
  }
}

// A constant tensor uploaded once, converted to `as` first unless that is its type (or
// undefined); the copy is complete when it returns.
inline Result<DeviceBuffer> upload(const Tensor& t, DType as = DType::undefined) {
  const Tensor* src = &t;
  Tensor converted;
  if (as != DType::undefined && as != t.dtype()) {
    TAC_ASSIGN_OR_RETURN(converted, Tensor::create(as, t.shape()));
    for (int64_t i = 0; i < t.numel(); ++i) converted.set_f64(i, t.get_f64(i));
    src = &converted;
  }
  TAC_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::allocate(src->bytes()));
  TAC_RETURN_IF_ERROR(copy_to_device(b.get(), src->raw(), src->bytes()));
  TAC_RETURN_IF_ERROR(synchronize());  // the host copy goes out of scope
  return b;
}

// True when the precision rewrite marked the step's node `tac_math=fp8` (precision.<node>=fp8):
// only the cublaslt_fp8 tactics run it, the fp16 ones refuse it (builder/precision.h).
inline bool computes_in_fp8(const kernels::StepDesc& s) {
  const ir::Attribute* m = s.node ? s.node->attr("tac_math") : nullptr;
  return m && m->s == "fp8";
}

// Estimated ns of a memory-bound step moving `bytes` (H200: ~4 TB/s copy bandwidth measured;
// 3 bytes/ns is kept for the ranking) plus a launch.
inline double memory_bound_ns(double bytes) { return 3000.0 + bytes / 3000.0; }

// The cost of a tactic whose kernels have not yet run on a GPU: ranked after host_reference
// (1e12 + ...), so the default route keeps the host step, while a pin, builder.selection=isolated
// or the tuner (behind its accuracy gate) can take it. The Reduce*, Resize and selection tactics of
// issue 27 used it until CudaTactics.Reductions/Resize/Selection passed on an H100 (2026-12-07).
inline double not_yet_run_on_a_gpu(double ns) { return 2e12 + ns; }

}  // namespace tac::cuda
