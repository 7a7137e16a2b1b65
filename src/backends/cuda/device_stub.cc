// The CUDA backend in a build without CUDA (TAC_CUDA=OFF): nothing is available, and every
// call says so instead of failing later in an obscure way.
#include "backends/cuda/device.h"

namespace tac::cuda {

namespace {
Status no_cuda() { return unsupported("this tactician was built without the CUDA backend (TAC_CUDA=OFF)"); }
}  // namespace

bool compiled() { return false; }
bool device_present() { return false; }
int device_capability() { return 0; }
Result<DeviceInfo> device_info() { return no_cuda(); }
Result<std::string> device_fingerprint() { return no_cuda(); }
std::string library_versions() { return "no CUDA backend in this build"; }
Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  if (bytes == 0) return DeviceBuffer();
  return no_cuda();
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(ptr_, o.ptr_);
  std::swap(bytes_, o.bytes_);
  return *this;
}
DeviceBuffer::~DeviceBuffer() = default;
Status copy_to_device(void*, const void*, size_t) { return no_cuda(); }
Status copy_to_host(void*, const void*, size_t) { return no_cuda(); }
Status copy_on_device(void*, const void*, size_t) { return no_cuda(); }
Status fill_bytes(void*, int, size_t) { return no_cuda(); }
Status synchronize() { return no_cuda(); }
Graph& Graph::operator=(Graph&& o) noexcept {
  std::swap(graph_, o.graph_);
  std::swap(exec_, o.exec_);
  return *this;
}
Graph::~Graph() = default;
Status Graph::begin_capture() { return no_cuda(); }
Result<Graph> Graph::end_capture() { return no_cuda(); }
Status Graph::launch() const { return no_cuda(); }
Result<EventTimer> EventTimer::create() { return no_cuda(); }
EventTimer::~EventTimer() = default;
Status EventTimer::start() { return no_cuda(); }
Result<double> EventTimer::stop_ms() { return no_cuda(); }
Result<EventSeries> EventSeries::create(size_t) { return no_cuda(); }
EventSeries::~EventSeries() = default;
Status EventSeries::record(size_t) { return no_cuda(); }
Result<double> EventSeries::elapsed_ms(size_t) { return no_cuda(); }
Status flush_l2() { return no_cuda(); }

}  // namespace tac::cuda
