// Conversions between libonnx's protobuf messages and our types. Internal to src/io.
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

#include "ir/graph.h"

namespace tac::io {

// `base_dir` resolves external data ("" refuses it). `what` names the tensor in errors.
Result<Tensor> tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir,
                                 const std::string& what);
// The same, moving raw_data out of `p` into the tensor instead of copying it (the importer's own
// parse of a model file: the weights are then copied once, by the parser).
Result<Tensor> take_tensor_from_proto(onnx::TensorProto& p, const std::string& base_dir, const std::string& what);
// Bytes of a bool tensor as 0 or 1: kernels read them as C++ bool, for which any other byte is
// undefined behaviour (a file's raw bytes may hold anything).
void normalize_bools(Tensor& t);
void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p);
Result<ir::ValueType> value_type_from_proto(const onnx::TypeProto& p, const std::string& what);

}  // namespace tac::io
