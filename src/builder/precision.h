// Precision per layer (DESIGN.md section 3 "Precision"): a graph rewrite after the fusion passes.
// Knobs: precision.default=fp32|bf16|int8 (CUDA: fp32|tf32|fp16|bf16) and
// precision.<node>=default|<those> for the
// nodes that have a lower-precision tactic (Conv, FusedConv, MatMul, FusedMatMul, Gemm; int8
// only where the weights are constant). precision.default=int8 leaves the nodes without an int8
// form (a MatMul of two activations, a Gemm) in fp32.
//
// bf16: Cast(fp32->bf16) on the node's activation inputs, the node in bf16 (constant weights
//   converted at build time; bias stays fp32), Cast(bf16->fp32) on its output. A cleanup then
//   drops Cast pairs that cancel (bf16 -> fp32 -> bf16 is exact), so activations flow in bf16
//   between consecutive bf16 layers.
// int8: QuantizeLinear(x, x_scale) on the activation input (u8 when calibration saw no negative
//   value there, else s8; zero point 0), weights quantized symmetrically per output channel at
//   build time to s8, and the node as FusedConv / FusedMatMul with int8 inputs and fp32 output,
//   carrying its scales as attributes `x_scale` and `w_scales` (the node dequantizes: y =
//   x_scale * w_scale[c] * sum(xq * wq) + bias, then its epilogue). x_scale = absmax / 127
//   (s8) or absmax / 255 (u8) over the calibration inputs. An int8 node whose output only feeds
//   the next int8 node's QuantizeLinear (and has no residual) absorbs it: attributes y_scale /
//   y_dtype, it writes u8/s8 directly (y = saturate(round(result / y_scale))).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "builder/knobs.h"
#include "core/datum.h"
#include "ir/graph.h"
#include "kernels/tactic.h"

namespace tac::builder {

// Values precision knobs take on this CPU: fp32, then bf16 (AVX512-BF16) and int8 (AVX512-VNNI).
std::vector<std::string> precision_values();
// On `backend`: the CPU's above; on CUDA fp32, tf32, fp16, bf16.
std::vector<std::string> precision_values(kernels::Backend backend);
// precision.default's default: the type the model stores most of its float weights in ("fp16",
// "bf16") where `backend` computes in it, else "fp32". A model stored in fp16 runs in fp16 on CUDA
// unless the route says otherwise (passes/widen_storage.cc computes it in fp32 in between).
std::string stored_precision(const ir::Model& m, kernels::Backend backend);

// True when `n` (in a graph after passes, shapes known) is a node the precision rewrite can
// lower: a 2-D Conv / FusedConv with constant weights, or a MatMul / FusedMatMul / Gemm with
// rank >= 2 fp32 operands (int8 also needs constant B).
bool precision_candidate(const ir::Graph& g, const ir::Node& n);
// int8 also needs constant weights with per-channel scales: Conv/FusedConv, MatMul/FusedMatMul with 2-D B.
bool int8_candidate(const ir::Graph& g, const ir::Node& n);
// fp8 (CUDA) needs a MatMul/FusedMatMul with constant 2-D weights whose dims are multiples of 16
// (cuBLASLt's fp8 kernels).
bool fp8_candidate(const ir::Graph& g, const ir::Node& n);
// The compute capability (major * 10 + minor) from which the CUDA backend offers fp8: Ada, Hopper.
inline constexpr int kFp8Capability = 89;

// Per quantized node's activation input, recorded over the calibration inputs.
struct Calibration {
  std::string source;  // where the data came from, for the build report
  struct Range {
    float absmax = 0;
    bool nonnegative = true;
  };
  std::map<std::string, Range> ranges;  // by value name
};

// The precision each node computes in under `route` ("fp32", "bf16", "int8"), for the candidate
// nodes of `g` only.
// A node's int8 setting its graph cannot take under this route's passes is inactive: the node
// stays fp32 and `inactive` (optional) says so.
std::map<std::string, std::string> chosen_precisions(const ir::Graph& g, const RouteView& route,
                                                     std::vector<std::string>* inactive = nullptr);

struct PrecisionReport {
  int casts = 0;       // Cast steps left after the cleanup (bf16/fp16 <-> fp32)
  int quantizes = 0;   // QuantizeLinear steps (fp32 -> int8)
  int bf16_nodes = 0, int8_nodes = 0;
  int fp16_nodes = 0, tf32_nodes = 0, fp8_nodes = 0;  // CUDA only
  int followed_nodes = 0;              // CUDA: elementwise / movement nodes that follow into bf16/fp16
  std::vector<std::string> log;
};

// Keeps the constants apply_precision derives from weights (bf16 / fp16 copies, int8
// quantizations) across builds, up to `bytes` (0, the default: off, and emptied). A process that
// builds many routes of one model (the tuner's evaluator worker) then converts each weight once,
// and the kernels' caches keyed by tensor (kernels/weight_cache.h) hit for those routes too.
void set_derived_constant_cache_bytes(size_t bytes);

// Rewrites `m` in place for `choice` (node name -> precision). int8 nodes read their activation
// scales from `calib` (nullptr: placeholder scales of 1, for the knob space, which only needs the
// graph's structure). Errors name the node.
// On the CUDA backend, also fp16 (as bf16) and tf32 (no casts: the node gets attribute
// tac_math=tf32, which the cuBLASLt and cuDNN tactics read as their math mode), and the
// elementwise / movement ops between lowered layers follow them into bf16/fp16 (see
// propagate_low in precision.cc); int8 is refused there. fp8 (where the device offers it) lowers
// the node as fp16 and marks it tac_math=fp8 and tac_fp8_amax (its activation input's calibrated
// |max|), which the cublaslt_fp8 tactics read (kernels/gemm/cuda_gemm.cc).
Status apply_precision(ir::Model& m, const std::map<std::string, std::string>& choice, const Calibration* calib,
                       PrecisionReport* report, kernels::Backend backend = kernels::Backend::cpu);

// The values precision.calibration takes: "max" (the largest |x| seen) or "pNN.NN" (that
// percentile of |x| over every element seen: clips rare outliers, finer steps for the rest).
std::vector<std::string> calibration_methods();

// Runs the fp32 graph `m` (after passes) through the reference interpreter on each input set and
// records the range of every activation input of the nodes in `nodes` by `method` (one of
// calibration_methods()). Deterministic.
Result<Calibration> calibrate_ranges(const ir::Model& m, const std::vector<std::string>& nodes,
                                     const std::vector<std::vector<Datum>>& input_sets, std::string source,
                                     const std::string& method = "max");

// Calibration inputs for `m`: those of `dir` when given (its test_data_set_* or input_K.pb, see
// io::load_data_sets), else the test_data_set_* inputs next to the model file when there are any,
// else one set of seeded random inputs; at most `max_sets`. `source` says which.
Result<std::vector<std::vector<Datum>>> calibration_inputs(const ir::Model& m, size_t max_sets, std::string& source,
                                                           const std::string& dir = "");

// A calibration cache on disk, shared by the builds of one tuning run (each candidate builds in
// its own process): one file per key in `dir`. load returns nullopt when there is no file for
// the key, or it is unreadable or from another key (it is then rebuilt); save writes atomically.
std::optional<Calibration> load_calibration(const std::string& dir, const std::string& key);
Status save_calibration(const std::string& dir, const std::string& key, const Calibration& c);

}  // namespace tac::builder
