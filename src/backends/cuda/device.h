// The CUDA backend's host-side interface: device discovery, the GPU fingerprint stamped into
// plans, device memory and copies on the context's stream. No CUDA header is needed to use it,
// and a build without CUDA links a stub (device_stub.cc) in which nothing is available, so the
// engine, the builder and the CLI carry no #ifdef.
//
// One device (0) and one stream per process; the context (context.h) is created at first use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tactician/status.h"

namespace tac::cuda {

// True when this binary was built with the CUDA backend (TAC_CUDA=ON).
bool compiled();
// True when a CUDA device can be used. Probed once, in a child process: `check` forks one child
// per test, and a CUDA context created before fork() is unusable in the children.
bool device_present();

struct DeviceInfo {
  std::string name;        // "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  int64_t memory_bytes = 0;
  int sm_count = 0;
};
// Initializes CUDA in this process. unsupported when there is no device or no CUDA build.
Result<DeviceInfo> device_info();
// What plans built for this device are stamped with: "cuda:NVIDIA H200 [sm_90, 143771 MiB]".
Result<std::string> device_fingerprint();
// Library versions (runtime, driver, cuBLASLt, cuDNN) as one line, for reports.
std::string library_versions();

// Device memory, freed on destruction. Empty (null) for zero bytes.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> allocate(size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr, o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Copies enqueued on the context's stream (host memory must stay valid until synchronize()).
Status copy_to_device(void* dst, const void* src, size_t bytes);
Status copy_to_host(void* dst, const void* src, size_t bytes);
Status copy_on_device(void* dst, const void* src, size_t bytes);
Status fill_bytes(void* dst, int byte, size_t bytes);
// Waits for the stream; reports the first asynchronous failure, naming it.
Status synchronize();

}  // namespace tac::cuda
