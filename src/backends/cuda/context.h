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
