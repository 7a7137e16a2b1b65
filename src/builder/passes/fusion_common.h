// Matching activations for the fused epilogues (fuse_conv, fuse_matmul).
#pragma once

#include <optional>

#include "builder/passes/pass.h"
#include "ir/epilogue.h"

namespace tac::builder {

// The epilogue activation equivalent to node `n`, or nullopt when `n` is not a fusable
// activation (Clip needs constant bounds; LeakyRelu / HardSigmoid carry their attributes).
std::optional<ir::Epilogue> activation_of(const ir::Graph& g, const ir::Node& n);

}  // namespace tac::builder
