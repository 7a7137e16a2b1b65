// The CUDA context of the process (CUDA builds only; include from CUDA tactics and the backend):
// device 0, one stream, the cuBLASLt and cuDNN handles, and the error checks that turn every
// CUDA / cuBLAS / cuDNN failure into a Status naming the call.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "backends/cuda/device.h"

namespace tac::cuda {

struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudnnHandle_t dnn = nullptr;
  cudaDeviceProp prop{};
};

// The process's context, created at first use; unsupported when there is no device.
Result<Context*> context();
// The context when it already exists or a device is present (host-side checks such as
// Tactic::applies use this to consult the libraries' heuristics); nullptr otherwise.
Context* context_if_available();

// cuBLASLt is opened with dlopen at first use (context creation), not linked: its half-gigabyte
// library costs every process that links it ~0.5 s of relocations at start (25,000 page faults
// on the 2-core VM), which every tuner candidate, CPU ones included, would pay. The error names
// the library and dlerror's reason; a symbol this build calls and the library lacks is an error
// too (a cuBLASLt older than the headers).
Status load_cublaslt();
// The cuBLASLt function `name` (after load_cublaslt() succeeded); nullptr otherwise.
void* cublaslt_symbol(const char* name);

Status cuda_status(cudaError_t e, const char* call);
Status cublas_status(cublasStatus_t e, const char* call);
Status cudnn_status(cudnnStatus_t e, const char* call);

}  // namespace tac::cuda

#define TAC_CUDA_CALL(expr)                                                              \
  do {                                                                                   \
    if (cudaError_t tac_e_ = (expr); tac_e_ != cudaSuccess) return ::tac::cuda::cuda_status(tac_e_, #expr); \
  } while (0)
#define TAC_CUBLAS_CALL(expr)                                                                       \
  do {                                                                                              \
    if (cublasStatus_t tac_e_ = (expr); tac_e_ != CUBLAS_STATUS_SUCCESS) return ::tac::cuda::cublas_status(tac_e_, #expr); \
  } while (0)
#define TAC_CUDNN_CALL(expr)                                                                        \
  do {                                                                                              \
    if (cudnnStatus_t tac_e_ = (expr); tac_e_ != CUDNN_STATUS_SUCCESS) return ::tac::cuda::cudnn_status(tac_e_, #expr); \
  } while (0)

// The cuBLASLt function `f` (declared by cublasLt.h, resolved once per call site).
#define TAC_LT(f)                                                                                   \
  ([] {                                                                                             \
    static const auto tac_p_ = reinterpret_cast<decltype(&f)>(::tac::cuda::cublaslt_symbol(#f));   \
    return tac_p_;                                                                                  \
  }())
