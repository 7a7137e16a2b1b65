// Tensors in and out of files: ONNX TensorProto (.pb, also Sequence/Optional protos) and NumPy .npy.
#pragma once

#include <string>

#include "core/datum.h"
#include "ir/graph.h"

namespace tac::io {

// Reads a serialized onnx.TensorProto (`expected.kind == tensor`), SequenceProto or
// OptionalProto (as the expected type says) or a .npy file (by extension).
Result<Datum> load_datum(const std::string& path, const ir::ValueType& expected);
Result<Tensor> load_tensor_pb(const std::string& path);
Result<Tensor> load_npy(const std::string& path);

Status save_tensor_pb(const Tensor& t, const std::string& name, const std::string& path);
Status save_npy(const Tensor& t, const std::string& path);

}  // namespace tac::io
