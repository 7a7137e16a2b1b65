// Small helpers for CUDA tactics (CUDA builds only): a Kernel made of a function, the context
// captured at prepare, and launch-status conversion.
#pragma once

#include <functional>
#include <memory>

#include "backends/cuda/context.h"
#include "kernels/tactic.h"

namespace tac::cuda {

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

// Estimated ns of a memory-bound step moving `bytes` (H200: ~4 TB/s copy bandwidth measured;
// 3 bytes/ns is kept for the ranking) plus a launch.
inline double memory_bound_ns(double bytes) { return 3000.0 + bytes / 3000.0; }

}  // namespace tac::cuda
