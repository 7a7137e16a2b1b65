// Tactics: the ways a step (one node of the built graph) can be computed.
//
// Each op family keeps a table of tactics (src/kernels/<family>/tactics.cc), listed explicitly in
// src/kernels/registry.cc. A tactic is data: a name, the op it implements, a constraint check
// (`applies`: ok, or ErrorKind::not_applicable with the reason), a cost estimate for the default
// ranking, and `prepare`, which returns a Kernel ready to run (weights prepacked, scratch sized).
// The builder filters by `applies`, ranks by `cost` for the default route, and a route can pin
// any applicable tactic for any node. Nothing else chooses kernels: no rules in setup code.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/datum.h"
#include "ir/graph.h"
#include "tactician/status.h"
#include "tactician/tensor.h"

namespace tac::kernels {

// A non-owning view of a tensor in the engine's arena, an input, or a constant.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::undefined;
  Shape shape;
  int64_t numel() const { return shape_numel(shape); }
  template <class T> T* as() const { return static_cast<T*>(data); }
};

// What a tactic knows of the step it may run, at build time.
struct StepDesc {
  const ir::Node* node = nullptr;  // op, attributes (fusions add attributes, see passes), opset
  std::vector<DType> in_dtypes, out_dtypes;
  // Concrete, except in a dynamic step, where a value known only at run time (a data-dependent
  // shape, a sequence or optional) has unknown (-1) or no dims here.
  std::vector<Shape> in_shapes, out_shapes;
  // Per input: its data when it is a constant (weights), else nullptr. Absent optional inputs
  // have DType::undefined.
  std::vector<const Tensor*> constants;
  int threads = 1;  // intra-op threads the engine runs with
  // Per input / output: the layout of its buffer (empty or short: nchw). Shapes stay logical;
  // only tactics with Tactic::layouts set are offered steps with a non-nchw layout.
  std::vector<ir::Layout> in_layouts, out_layouts;
  // Bytes of scratch a tactic may ask for (Kernel::workspace_bytes; the route's cuda.workspace_mb
  // on CUDA): a tactic needing more is not applicable, saying so with workspace_over_limit().
  size_t workspace_limit = SIZE_MAX;
  // A dynamic step: some input or output is known only at run time. Only tactics that take
  // run-time shapes (Tactic::dynamic_shapes) are offered, and the engine calls run_dynamic().
  bool dynamic = false;

  bool has_input(size_t i) const { return i < in_dtypes.size() && in_dtypes[i] != DType::undefined; }
  ir::Layout in_layout(size_t i) const { return i < in_layouts.size() ? in_layouts[i] : ir::Layout::nchw; }
  ir::Layout out_layout(size_t i) const { return i < out_layouts.size() ? out_layouts[i] : ir::Layout::nchw; }
  bool plain() const;  // every input and output nchw
};

// A prepared tactic for one step. `run` must not allocate in the common case (scratch comes from
// `workspace`, sized by workspace_bytes(); 64-byte aligned) and reads inputs / writes outputs
// through the views. Outputs never alias inputs unless the step was planned in place.
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual size_t workspace_bytes() const { return 0; }
  virtual Status run(std::span<const TensorView> inputs, std::span<const TensorView> outputs, void* workspace) = 0;
  // Dynamic steps only (optional: tactics with Tactic::dynamic_shapes implement it). Inputs as
  // run-time values (nullptr for an omitted input); fills `outputs` (one per node output, shapes
  // decided now, storage owned by the outputs or aliasing an input) and may allocate.
  virtual Status run_dynamic(std::span<const Datum* const> inputs, std::vector<Datum>& outputs) {
    (void)inputs;
    (void)outputs;
    return internal_error("this tactic does not run dynamic steps");
  }
};

// Where a tactic's kernel runs. For CUDA tactics, every TensorView handed to Kernel::run (inputs,
// outputs, workspace) is device memory and the kernel enqueues its work on the CUDA context's one
// stream (src/backends/cuda/context.h); the engine synchronizes at the end of a run.
enum class Backend { cpu, cuda };
const char* backend_name(Backend b);  // "cpu", "cuda"
// "cpu" / "cuda" -> Backend; invalid_argument naming the value otherwise.
Result<Backend> backend_from_name(const std::string& name);

struct Tactic {
  const char* name;  // unique per op and backend: "reference", "gemm_avx512_6x32", "cublaslt_h0", ...
  ir::OpKind op;
  const char* help;  // one line, shown by `tactician knobs`
  Status (*applies)(const StepDesc& step);
  double (*cost)(const StepDesc& step);  // estimated nanoseconds; the default ranking sorts by it
  Result<std::unique_ptr<Kernel>> (*prepare)(const StepDesc& step);
  Backend backend = Backend::cpu;  // defaulted, so that CPU tables need not spell it
  // Reads and writes the layouts of StepDesc::in_layouts / out_layouts (its `applies` checks
  // which); every other tactic only ever sees plain (nchw) steps.
  bool layouts = false;
  bool dynamic_shapes = false;  // can run dynamic steps (StepDesc::dynamic; Kernel::run_dynamic)
  // Computes an approximation of the op beyond rounding (cuBLASLt's tanh GELU for the graph's erf
  // GELU): never the default's choice nor the isolated selection's, only a value the tuner may
  // search, where the accuracy gate decides (builder.cc rank_tactics).
  bool approximate = false;
  // The slow catch-all (the CPU reference kernel): ranks after every other applicable tactic,
  // whatever the costs say (its cost is a placeholder, not an estimate: an honest estimate of a
  // large LSTM exceeded it). CUDA's host_reference is not one: a CUDA tactic that has not yet run
  // on a GPU ranks after it by cost (kernels/cuda_util.h not_yet_run_on_a_gpu).
  bool fallback = false;
  // The input whose buffer the kernel may write its output over, or -1: the builder then plans
  // output 0 in that buffer when no later step reads it (memory.inplace), as it does for
  // elementwise ops over input 0. oneDNN's convolutions over the residual (input 3 of FusedConv):
  // their sum post-op starts from dst holding it, so the copy into dst goes.
  int over_input = -1;
  // Runs any op through the reference interpreter's kernel (reference, host_reference): the
  // tuner's search values leave it out where a real kernel applies (it stays pinnable).
  bool catch_all = false;
  // A tactic of the CUDA backend whose kernel runs on the host, with copies to and from the device
  // (host_reference): an engine with such a step cannot be captured in a CUDA graph.
  bool on_host = false;
};

// Every CPU tactic for `op` (the reference fallback included, always last). With
// `planted_faults`, also the planted-fault tactics (tests of the tuner's fault handling only:
// one crashes, one hangs, one computes wrong numbers; never offered otherwise).
std::vector<const Tactic*> tactics_for(ir::OpKind op, bool planted_faults = false);
// Every tactic of `backend` for `op`. On CUDA the host_reference fallback goes last; a build
// without CUDA has no CUDA tactics.
std::vector<const Tactic*> tactics_for(ir::OpKind op, Backend backend, bool planted_faults = false);
// The CPU tactic `name` for `op`, or nullptr.
const Tactic* find_tactic(ir::OpKind op, const std::string& name);
const Tactic* find_tactic(ir::OpKind op, const std::string& name, Backend backend);

// Helpers for tactic implementations.
inline Status not_applicable(std::string why) { return Status(ErrorKind::not_applicable, std::move(why)); }
// The not_applicable of a tactic needing `need` bytes of workspace over StepDesc::workspace_limit
// (its message names cuda.workspace_mb: the build report lists these skips).
inline Status workspace_over_limit(size_t need, size_t limit) {
  return not_applicable("needs " + std::to_string((need + (1u << 20) - 1) >> 20) + " MiB of workspace, over the route's " +
                        "limit (cuda.workspace_mb=" + std::to_string(limit >> 20) + ")");
}
// Unique CPU features, checked once (AVX-512 F/BW/VL/DQ, AVX-512 BF16, VNNI, AVX2+FMA).
struct CpuFeatures {
  bool avx2_fma = false;
  bool avx512 = false;
  bool avx512_bf16 = false;
  bool avx512_vnni = false;
};
const CpuFeatures& cpu_features();

// Family tables, one per folder under src/kernels/ (listed in registry.cc).
std::span<const Tactic> reference_tactics();  // one "reference" tactic per op, built at first use
std::span<const Tactic> gemm_tactics();
std::span<const Tactic> conv_tactics();
std::span<const Tactic> elementwise_tactics();
std::span<const Tactic> attention_tactics();
std::span<const Tactic> chain_tactics();  // FusedElementwise
std::span<const Tactic> precision_tactics();  // Cast fp32<->bf16, QuantizeLinear (precision rewrite)
std::span<const Tactic> resize_tactics();  // Resize / Upsample (kernels/resize/cpu_resize.cc)
std::span<const Tactic> pad_tactics();  // Pad, any element size (kernels/elementwise/pad.cc)
std::span<const Tactic> rnn_tactics();  // LSTM / GRU / RNN through oneDNN (kernels/rnn/onednn_rnn.cc)
std::span<const Tactic> layout_tactics();  // Reformat, and pooling / elementwise / Concat in nhwc and blocked layouts
std::span<const Tactic> planted_fault_tactics();  // see tactics_for()
// CUDA tables (empty spans in a build without CUDA): src/kernels/<family>/cuda_*.cc.
std::span<const Tactic> cuda_gemm_tactics();         // cuBLASLt
std::span<const Tactic> cuda_graph_matmul_tactics();  // cuDNN graph API: matmul + bias + activation
std::span<const Tactic> cuda_conv_tactics();         // cuDNN
std::span<const Tactic> cuda_attention_tactics();    // FusedAttention, own kernel
std::span<const Tactic> cuda_rnn_tactics();          // LSTM / GRU / RNN, cuDNN
std::span<const Tactic> cuda_chain_tactics();        // FusedElementwise, own kernel
std::span<const Tactic> cuda_elementwise_tactics();  // our own kernels and data movement
std::span<const Tactic> cuda_reduce_tactics();       // Reduce*, ArgMax / ArgMin, own kernels
std::span<const Tactic> cuda_resize_tactics();       // Resize / Upsample, own kernel
std::span<const Tactic> cuda_select_tactics();       // Pad, Expand, Tile, Where, comparisons, logic, Split
std::span<const Tactic> cuda_reference_tactics();    // host_reference: any op, through the host
std::span<const Tactic> cuda_planted_fault_tactics();  // see tactics_for()

}  // namespace tac::kernels
