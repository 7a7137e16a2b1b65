// The CUDA backend's device, context, memory and copies (CUDA builds; see device.h).
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "backends/cuda/context.h"

namespace tac::cuda {

Status cuda_status(cudaError_t e, const char* call) {
  return internal_error(std::string("CUDA: ") + call + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}
Status cublas_status(cublasStatus_t e, const char* call) {
  return internal_error(std::string("cuBLASLt: ") + call + " failed: status " + std::to_string(static_cast<int>(e)));
}
Status cudnn_status(cudnnStatus_t e, const char* call) {
  return internal_error(std::string("cuDNN: ") + call + " failed: " + cudnnGetErrorString(e));
}

bool compiled() { return true; }

namespace {
// Every cuBLASLt function the backend calls (TAC_LT call sites), checked at load.
constexpr const char* kLtFunctions[] = {
    "cublasLtCreate", "cublasLtGetVersion", "cublasLtMatmul", "cublasLtMatmulAlgoGetHeuristic",
    "cublasLtMatmulDescCreate", "cublasLtMatmulDescDestroy", "cublasLtMatmulDescSetAttribute",
    "cublasLtMatmulPreferenceCreate", "cublasLtMatmulPreferenceDestroy", "cublasLtMatmulPreferenceSetAttribute",
    "cublasLtMatrixLayoutCreate", "cublasLtMatrixLayoutDestroy", "cublasLtMatrixLayoutSetAttribute"};
void* g_lt = nullptr;
}  // namespace

Status load_cublaslt() {
  static std::once_flag once;
  static Status result = Status::ok();
  std::call_once(once, [] {
    const std::string lib = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = dlerror();
      result = unsupported("cannot load " + lib + " (cuBLASLt, for the CUDA backend): " + (why ? why : "dlopen failed"));
      return;
    }
    for (const char* f : kLtFunctions)
      if (!dlsym(h, f)) {
        result = unsupported(lib + " lacks " + f + " (a cuBLASLt older than this build's headers)");
        return;
      }
    g_lt = h;
  });
  return result;
}

void* cublaslt_symbol(const char* name) { return g_lt ? dlsym(g_lt, name) : nullptr; }

namespace {
Context* g_context = nullptr;
std::mutex g_mutex;

Status create_context(Context& c) {
  int n = 0;
  if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess || n == 0)
    return unsupported(std::string("no CUDA device (cudaGetDeviceCount: ") +
                       (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") + ")");
  TAC_CUDA_CALL(cudaSetDevice(c.device));
  TAC_CUDA_CALL(cudaGetDeviceProperties(&c.prop, c.device));
  TAC_CUDA_CALL(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  TAC_RETURN_IF_ERROR(load_cublaslt());
  TAC_CUBLAS_CALL(TAC_LT(cublasLtCreate)(&c.lt));
  TAC_CUDNN_CALL(cudnnCreate(&c.dnn));
  TAC_CUDNN_CALL(cudnnSetStream(c.dnn, c.stream));
  return Status::ok();
}
}  // namespace

Result<Context*> context() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_context) return g_context;
  static Status failed = Status::ok();  // a failed creation is not retried
  if (!failed.is_ok()) return failed;
  auto* c = new Context();
  if (Status st = create_context(*c); !st.is_ok()) {
    delete c;
    failed = st;
    return st;
  }
  g_context = c;  // lives until exit: kernels and engines refer to it
  return g_context;
}

Context* context_if_available() {
  if (!g_context && !device_present()) return nullptr;
  auto c = context();
  return c ? *c : nullptr;
}

int device_capability() {
  static const int cc = [] {
    if (g_context) return g_context->prop.major * 10 + g_context->prop.minor;
    // Probe in a child: creating CUDA state here would break children that `check` forks later.
    // It exits with the capability (major * 10 + minor), 0 without a usable device.
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {
      int n = 0;
      cudaDeviceProp p{};
      if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0 || cudaGetDeviceProperties(&p, 0) != cudaSuccess) _exit(0);
      _exit(std::clamp(p.major * 10 + p.minor, 1, 255));
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  }();
  return cc;
}

bool device_present() { return g_context || device_capability() > 0; }

Result<DeviceInfo> device_info() {
  TAC_ASSIGN_OR_RETURN(Context * c, context());
  DeviceInfo d;
  d.name = c->prop.name;
  d.cc_major = c->prop.major;
  d.cc_minor = c->prop.minor;
  d.memory_bytes = static_cast<int64_t>(c->prop.totalGlobalMem);
  d.sm_count = c->prop.multiProcessorCount;
  return d;
}

Result<std::string> device_fingerprint() {
  TAC_ASSIGN_OR_RETURN(DeviceInfo d, device_info());
  return "cuda:" + d.name + " [sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor) + ", " +
         std::to_string(d.memory_bytes >> 20) + " MiB]";
}

std::string library_versions() {
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  auto v = [](int x) { return std::to_string(x / 1000) + "." + std::to_string(x % 1000 / 10); };
  const std::string lt = load_cublaslt().is_ok() ? std::to_string(TAC_LT(cublasLtGetVersion)()) : "not loadable";
  return "CUDA runtime " + v(rt) + " (built with " + v(CUDART_VERSION) + "), driver API " + v(drv) + ", cuBLASLt " +
         lt + ", cuDNN " + std::to_string(cudnnGetVersion()) + " (built with " +
         std::to_string(CUDNN_VERSION) + ")";
}

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  DeviceBuffer b;
  if (bytes == 0) return b;
  TAC_RETURN_IF_ERROR(context().status());
  if (cudaError_t e = cudaMalloc(&b.ptr_, bytes); e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free allocation error
    return internal_error("CUDA: cudaMalloc(" + std::to_string(bytes) + " bytes) failed: " + cudaGetErrorString(e));
  }
  b.bytes_ = bytes;
  return b;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(ptr_, o.ptr_);
  std::swap(bytes_, o.bytes_);
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

namespace {
Status copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, const char* what) {
  if (bytes == 0) return Status::ok();
  TAC_ASSIGN_OR_RETURN(Context * c, context());
  if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, c->stream); e != cudaSuccess) return cuda_status(e, what);
  return Status::ok();
}
}  // namespace

Status copy_to_device(void* dst, const void* src, size_t bytes) {
  return copy(dst, src, bytes, cudaMemcpyHostToDevice, "cudaMemcpyAsync(host to device)");
}
Status copy_to_host(void* dst, const void* src, size_t bytes) {
  return copy(dst, src, bytes, cudaMemcpyDeviceToHost, "cudaMemcpyAsync(device to host)");
}
Status copy_on_device(void* dst, const void* src, size_t bytes) {
  return copy(dst, src, bytes, cudaMemcpyDeviceToDevice, "cudaMemcpyAsync(device to device)");
}
Status fill_bytes(void* dst, int byte, size_t bytes) {
  if (bytes == 0) return Status::ok();
  TAC_ASSIGN_OR_RETURN(Context * c, context());
  TAC_CUDA_CALL(cudaMemsetAsync(dst, byte, bytes, c->stream));
  return Status::ok();
}

Status synchronize() {
  TAC_ASSIGN_OR_RETURN(Context * c, context());
  TAC_CUDA_CALL(cudaStreamSynchronize(c->stream));
  TAC_CUDA_CALL(cudaGetLastError());
  return Status::ok();
}

Graph& Graph::operator=(Graph&& o) noexcept {
  std::swap(graph_, o.graph_);
  std::swap(exec_, o.exec_);
  return *this;
}
Graph::~Graph() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}
Status Graph::begin_capture() {
  TAC_ASSIGN_OR_RETURN(Context * c, context());
  TAC_CUDA_CALL(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeGlobal));
  return Status::ok();
}
Result<Graph> Graph::end_capture() {
  TAC_ASSIGN_OR_RETURN(Context * c, context());
  cudaGraph_t g = nullptr;
  cudaError_t e = cudaStreamEndCapture(c->stream, &g);
  if (e != cudaSuccess) {
    cudaGetLastError();  // the capture's failure is not sticky; clear it
    if (g) cudaGraphDestroy(g);
    return cuda_status(e, "cudaStreamEndCapture");
  }
  Graph out;
  out.graph_ = g;
  cudaGraphExec_t exec = nullptr;
  TAC_CUDA_CALL(cudaGraphInstantiate(&exec, g, 0));
  out.exec_ = exec;
  return out;
}
Status Graph::launch() const {
  TAC_ASSIGN_OR_RETURN(Context * c, context());
  TAC_CUDA_CALL(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), c->stream));
  return Status::ok();
}

Result<EventTimer> EventTimer::create() {
  TAC_RETURN_IF_ERROR(context().status());
  EventTimer t;
  cudaEvent_t a = nullptr, b = nullptr;
  TAC_CUDA_CALL(cudaEventCreate(&a));
  t.start_ = a;
  TAC_CUDA_CALL(cudaEventCreate(&b));
  t.stop_ = b;
  return t;
}
EventTimer::~EventTimer() {
  if (start_) cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  if (stop_) cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}
Status EventTimer::start() {
  TAC_ASSIGN_OR_RETURN(Context * c, context());
  TAC_CUDA_CALL(cudaEventRecord(static_cast<cudaEvent_t>(start_), c->stream));
  return Status::ok();
}
Result<double> EventTimer::stop_ms() {
  TAC_ASSIGN_OR_RETURN(Context * c, context());
  TAC_CUDA_CALL(cudaEventRecord(static_cast<cudaEvent_t>(stop_), c->stream));
  TAC_CUDA_CALL(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)));
  TAC_CUDA_CALL(cudaGetLastError());
  float ms = 0;
  TAC_CUDA_CALL(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)));
  return static_cast<double>(ms);
}

Result<EventSeries> EventSeries::create(size_t n) {
  TAC_RETURN_IF_ERROR(context().status());
  EventSeries es;
  for (size_t i = 0; i <= n; ++i) {
    cudaEvent_t e = nullptr;
    TAC_CUDA_CALL(cudaEventCreate(&e));
    es.events_.push_back(e);
  }
  return es;
}
EventSeries::~EventSeries() {
  for (void* e : events_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
}
Status EventSeries::record(size_t i) {
  TAC_ASSIGN_OR_RETURN(Context * c, context());
  if (i >= events_.size()) return internal_error("EventSeries::record: index out of range");
  TAC_CUDA_CALL(cudaEventRecord(static_cast<cudaEvent_t>(events_[i]), c->stream));
  return Status::ok();
}
Result<double> EventSeries::elapsed_ms(size_t i) {
  if (i + 1 >= events_.size()) return internal_error("EventSeries::elapsed_ms: index out of range");
  TAC_CUDA_CALL(cudaEventSynchronize(static_cast<cudaEvent_t>(events_.back())));
  float ms = 0;
  TAC_CUDA_CALL(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(events_[i]), static_cast<cudaEvent_t>(events_[i + 1])));
  return static_cast<double>(ms);
}

Status flush_l2() {
  TAC_ASSIGN_OR_RETURN(Context * c, context());
  static DeviceBuffer scratch;  // lives until exit, like the context
  const size_t bytes = 2 * static_cast<size_t>(std::max(c->prop.l2CacheSize, 1 << 20));
  if (scratch.bytes() < bytes) {
    TAC_ASSIGN_OR_RETURN(scratch, DeviceBuffer::allocate(bytes));
    TAC_RETURN_IF_ERROR(fill_bytes(scratch.get(), 1, bytes));
  }
  // One write pass over twice the L2's size: the lines the engine left there are evicted.
  static int pattern = 0;
  TAC_CUDA_CALL(cudaMemsetAsync(scratch.get(), ++pattern & 0xff, bytes, c->stream));
  return Status::ok();
}

}  // namespace tac::cuda
