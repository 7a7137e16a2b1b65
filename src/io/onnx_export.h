// IR -> ONNX (the builder's graph after passes goes into plan files this way; internal ops keep
// their "tactician" domain, so the file also opens in ONNX viewers).
#pragma once

#include <string>

#include "ir/graph.h"

namespace tac::io {

// Serialized onnx.ModelProto of `m`: nodes in their current order, every initializer that a node
// or output uses, declared types of inputs, outputs and intermediate values.
Result<std::string> save_model_to_bytes(const ir::Model& m);

}  // namespace tac::io
