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
#include <utility>
#include <vector>

#include "tactician/status.h"

namespace tac::cuda {

// True when this binary was built with the CUDA backend (TAC_CUDA=ON).
bool compiled();
// True when a CUDA device can be used. Probed once, in a child process: `check` forks one child
// per test, and a CUDA context created before fork() is unusable in the children.
bool device_present();
// The device's compute capability as major * 10 + minor (90 for an H100 or H200), 0 without a
// usable device; probed as device_present() is, without creating CUDA state in this process.
int device_capability();

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

// A CUDA graph of the work enqueued on the context's stream between begin_capture() and
// end_capture() (global capture mode: a forbidden call such as a synchronization fails the
// capture instead of running). launch() replays it on the stream. Move-only; destroyed with it.
class Graph {
 public:
  Graph() = default;
  Graph(Graph&& o) noexcept : graph_(o.graph_), exec_(o.exec_) { o.graph_ = o.exec_ = nullptr; }
  Graph& operator=(Graph&& o) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();
  static Status begin_capture();
  // Ends the capture begun last and instantiates it; a capture that failed is an error (and the
  // stream is usable again).
  static Result<Graph> end_capture();
  Status launch() const;
  bool empty() const { return exec_ == nullptr; }

 private:
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
};

// Device time, in ms, between two events recorded on the context's stream around the work that
// `enqueue` puts there (waits for the second event).
class EventTimer {
 public:
  static Result<EventTimer> create();
  EventTimer(EventTimer&& o) noexcept : start_(o.start_), stop_(o.stop_) { o.start_ = o.stop_ = nullptr; }
  EventTimer& operator=(EventTimer&& o) noexcept {
    std::swap(start_, o.start_);
    std::swap(stop_, o.stop_);
    return *this;
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  ~EventTimer();
  Status start();
  Result<double> stop_ms();  // records the second event, waits for it, returns the time between

 private:
  EventTimer() = default;
  void* start_ = nullptr;  // cudaEvent_t
  void* stop_ = nullptr;
};

// Events recorded on the context's stream between the steps of one run, for per-step device
// times without a synchronization between steps (tactician profile): record(i) before step i and
// record(n) after the last, then elapsed_ms(i) (waits for the last event) is step i's time.
class EventSeries {
 public:
  static Result<EventSeries> create(size_t n);  // n + 1 events
  EventSeries(EventSeries&& o) noexcept : events_(std::move(o.events_)) {}
  EventSeries(const EventSeries&) = delete;
  EventSeries& operator=(const EventSeries&) = delete;
  ~EventSeries();
  Status record(size_t i);
  Result<double> elapsed_ms(size_t i);

 private:
  EventSeries() = default;
  std::vector<void*> events_;  // cudaEvent_t
};

// Enqueues a pass over a scratch buffer of twice the L2 size (allocated at first use), so that
// what runs next starts with a cold L2.
Status flush_l2();

}  // namespace tac::cuda
