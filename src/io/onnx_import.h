// ONNX import: file -> onnx::ModelProto (libonnx's protobuf classes) -> our IR.
#pragma once

#include <string>
#include <string_view>

#include "ir/graph.h"

namespace tac::io {

// Loads `path`, resolving external data next to it, converting to the IR and sorting every
// graph topologically. Errors name the file and, where there is one, the node.
Result<ir::Model> load_model(const std::string& path);
// Same, from bytes in memory (the fuzz target, a plan's graph); `base_dir` resolves external data
// ("" = none).
Result<ir::Model> load_model_from_bytes(std::string_view bytes, const std::string& label, const std::string& base_dir);

}  // namespace tac::io
