// Activation layouts per region (DESIGN.md section 3 "Precision, layout, memory"): a graph
// rewrite after the precision rewrite. Knobs: layout.default=nchw|nhwc|blocked and
// layout.<node>=default|nchw|nhwc|blocked for the convolutions that can run in them (2-D fp32 or bf16
// Conv / FusedConv with constant weights). "blocked" is nChw16c on AVX-512, nChw8c otherwise.
//
// Every value gets a layout tag (ir::Value::layout; shapes stay logical NCHW). A convolution
// in layout L writes L; ops that run in any layout (pooling, Concat along channels, elementwise
// ops with f(0) = 0 over inputs of one shape: the layout tactics of src/kernels/layout/) take
// the layout their inputs share when that needs no more reformats than nchw would; every other
// consumer, and every graph output, reads nchw. Where a consumer needs a layout its input is
// not in, a Reformat node converts it (one per value and layout, shared by the consumers).
// A first convolution reads a plain input of few channels (C < 8) directly, as oneDNN's blocked
// kernels do. Against ping-pong: a convolution in L by layout.default whose input must be
// reformatted into L and whose output is reformatted away from L by every consumer goes back
// to nchw (two reformats for one layer); layout.<node> keeps it, the tuner decides.
// A tactic.<node> pin that reads nchw only (every conv tactic but onednn and onednn_bf16), and on
// the CPU int8 (precision.*=int8), keep the node in nchw (logged): routes that pin tactics or
// precisions and choose layouts always build.
// CPU: fp32 and bf16 (onednn_bf16 reads and writes the layouts as they are; Reformat and
// oneDNN pooling in either type; raw_buffer in fp32 only).
// On CUDA: nchw and nhwc (no blocked layouts), in fp32, fp16 and bf16 alike (cuDNN's NHWC
// convolutions, the cuda_nhwc pooling kernels, raw_buffer, Reformat as a 4-D transpose).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "builder/knobs.h"
#include "ir/graph.h"
#include "kernels/tactic.h"

namespace tac::builder {

// Values of layout.default: nchw, nhwc, blocked (CPU); nchw, nhwc (CUDA).
std::vector<std::string> layout_values(kernels::Backend backend = kernels::Backend::cpu);
// layout.default's default: nhwc on both backends (measured; see layout.cc).
std::string default_layout(kernels::Backend backend);
// The layout "blocked" means on this CPU: nchw16c with AVX-512, else nchw8c.
ir::Layout blocked_layout();

// True when `n` (graph after passes and precision, shapes known) is a convolution the layout
// knobs apply to: 2-D Conv / FusedConv with constant weights, fp32 or bf16 (CUDA: fp16 too).
bool layout_candidate(const ir::Graph& g, const ir::Node& n, kernels::Backend backend = kernels::Backend::cpu);

struct LayoutReport {
  int reformats = 0;
  std::vector<std::string> nodes;  // "node: layout" for each node moved off nchw
  std::vector<std::string> log;
};

// Rewrites `m` in place for `route` (layout.default, layout.<node>, tactic.<node>). Errors
// (invalid_argument) name the knob and the node: a layout.<node> for a node that cannot run in
// it. `threads`: the plan's, for the tactic checks.
Status apply_layouts(ir::Model& m, const RouteView& route, int threads, LayoutReport* report,
                     kernels::Backend backend = kernels::Backend::cpu);

}  // namespace tac::builder
