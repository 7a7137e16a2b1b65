// "raw_buffer": the layout tactic (Tactic::layouts) that runs an op on nhwc or channel-blocked
// activations (ir/layout.h) through the op's best plain tactic of the same backend:
//   elementwise ops (and FusedElementwise chains) with f(0, ..., 0) = 0 whose activation inputs
//   all share the output's shape and layout: the whole buffer as one row (blocked padding
//   included, which stays zero);
//   Concat along channels: blocked with every input's C a multiple of the block is a per-image
//   concatenation of buffers, nhwc one per pixel ([N*H*W, C]); both the plain Concat on the
//   equivalent plain shapes.
// One implementation for every backend (CPU: fp32; CUDA: fp32, fp16, bf16).
#pragma once

#include <vector>

#include "kernels/tactic.h"

namespace tac::kernels {

// Appends backend `b`'s raw_buffer tactics (one per op above) to `t`.
void add_raw_buffer_tactics(std::vector<Tactic>& t, Backend b);
// Appends channel_affine (channel_affine.cc): BatchNormalization in nhwc / blocked, CPU.
void add_channel_affine_tactics(std::vector<Tactic>& t);
// Appends gather_channels (gather_channels.cc): a Gather of channels in nhwc, CPU.
void add_gather_channels_tactics(std::vector<Tactic>& t);

}  // namespace tac::kernels
