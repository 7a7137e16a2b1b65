#include "io/proto_convert.h"

#include <filesystem>
#include <fstream>

namespace tac::io {

namespace {

template <class Field>
Status check_count(const Field& f, int64_t n, const std::string& what, const char* field) {
  if (static_cast<int64_t>(f.size()) != n)
    return invalid_model(what + ": " + field + " holds " + std::to_string(f.size()) +
                         " values, the shape needs " + std::to_string(n));
  return Status::ok();
}

Status read_external(const onnx::TensorProto& p, const std::string& base_dir, const std::string& what,
                     Tensor& t) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::strtoll(kv.value().c_str(), nullptr, 10);
    else if (kv.key() == "length") length = std::strtoll(kv.value().c_str(), nullptr, 10);
  }
  if (location.empty()) return invalid_model(what + ": external data without a location");
  if (base_dir.empty()) return invalid_model(what + ": external data '" + location + "' but no model directory");
  std::filesystem::path file = std::filesystem::path(base_dir) / location;
  std::ifstream in(file, std::ios::binary);
  if (!in) return io_error(what + ": cannot open external data file " + file.string());
  int64_t need = static_cast<int64_t>(t.bytes());
  if (length >= 0 && length != need)
    return invalid_model(what + ": external data length " + std::to_string(length) + " does not match the " +
                         std::to_string(need) + " bytes its shape needs");
  if (offset < 0) return invalid_model(what + ": negative external data offset");
  in.seekg(offset);
  in.read(static_cast<char*>(t.raw()), need);
  if (in.gcount() != need)
    return invalid_model(what + ": external data file " + file.string() + " is too short");
  return Status::ok();
}

}  // namespace

Result<Tensor> tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir,
                                 const std::string& what) {
  int32_t code = p.data_type();
  if (!dtype_supported(code))
    return unsupported(what + ": data type " + dtype_name(code) + " is not supported");
  DType dt = static_cast<DType>(code);
  Shape shape(p.dims().begin(), p.dims().end());
  for (int64_t d : shape)
    if (d < 0) return invalid_model(what + ": negative dimension in " + shape_to_string(shape));
  auto created = Tensor::create(dt, shape);
  if (!created) return created.status().with_context(what + ": ");
  Tensor t = std::move(created).value();
  const int64_t n = t.numel();
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    TAC_RETURN_IF_ERROR(read_external(p, base_dir, what, t));
    return t;
  }
  if (p.has_raw_data()) {
    if (p.raw_data().size() != t.bytes())
      return invalid_model(what + ": raw_data has " + std::to_string(p.raw_data().size()) + " bytes, shape " +
                           shape_to_string(shape) + " of " + dtype_name(dt) + " needs " + std::to_string(t.bytes()));
    std::memcpy(t.raw(), p.raw_data().data(), t.bytes());
    return t;
  }
  switch (dt) {
    case DType::float32:
      TAC_RETURN_IF_ERROR(check_count(p.float_data(), n, what, "float_data"));
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = p.float_data(static_cast<int>(i));
      break;
    case DType::float64:
      TAC_RETURN_IF_ERROR(check_count(p.double_data(), n, what, "double_data"));
      for (int64_t i = 0; i < n; ++i) t.data<double>()[i] = p.double_data(static_cast<int>(i));
      break;
    case DType::int64:
      TAC_RETURN_IF_ERROR(check_count(p.int64_data(), n, what, "int64_data"));
      for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = p.int64_data(static_cast<int>(i));
      break;
    case DType::uint32:
    case DType::uint64:
      TAC_RETURN_IF_ERROR(check_count(p.uint64_data(), n, what, "uint64_data"));
      for (int64_t i = 0; i < n; ++i) t.set_i64(i, static_cast<int64_t>(p.uint64_data(static_cast<int>(i))));
      break;
    case DType::float16:
    case DType::bfloat16:  // stored as raw 16-bit patterns in int32_data
      TAC_RETURN_IF_ERROR(check_count(p.int32_data(), n, what, "int32_data"));
      for (int64_t i = 0; i < n; ++i)
        t.data<uint16_t>()[i] = static_cast<uint16_t>(p.int32_data(static_cast<int>(i)));
      break;
    default:  // int32, int16, int8, uint16, uint8, bool
      TAC_RETURN_IF_ERROR(check_count(p.int32_data(), n, what, "int32_data"));
      for (int64_t i = 0; i < n; ++i) t.set_i64(i, p.int32_data(static_cast<int>(i)));
      break;
  }
  return t;
}

Result<Tensor> take_tensor_from_proto(onnx::TensorProto& p, const std::string& base_dir, const std::string& what) {
  if (!p.has_raw_data() || p.data_location() == onnx::TensorProto::EXTERNAL || !dtype_supported(p.data_type()))
    return tensor_from_proto(p, base_dir, what);
  Shape shape(p.dims().begin(), p.dims().end());
  for (int64_t d : shape)
    if (d < 0) return invalid_model(what + ": negative dimension in " + shape_to_string(shape));
  const DType dt = static_cast<DType>(p.data_type());
  const int64_t n = shape_numel(shape);
  if (n < 0 || p.raw_data().size() != static_cast<size_t>(n) * dtype_size(dt))
    return tensor_from_proto(p, base_dir, what);  // its error names the sizes
  auto t = Tensor::adopt(std::unique_ptr<std::string>(p.release_raw_data()), dt, std::move(shape));
  if (!t) return t.status().with_context(what + ": ");
  return t;
}

void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  p->Clear();
  p->set_name(name);
  p->set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.shape()) p->add_dims(d);
  p->set_raw_data(t.raw(), t.bytes());
}

Result<ir::ValueType> value_type_from_proto(const onnx::TypeProto& p, const std::string& what) {
  ir::ValueType vt;
  const onnx::TypeProto* elem = &p;
  if (p.has_sequence_type()) {
    vt.kind = ir::ValueKind::sequence;
    elem = &p.sequence_type().elem_type();
  } else if (p.has_optional_type()) {
    vt.kind = ir::ValueKind::optional;
    elem = &p.optional_type().elem_type();
    if (elem->has_sequence_type()) {
      vt.inner = ir::ValueKind::sequence;
      elem = &elem->sequence_type().elem_type();
    }
  } else if (p.has_map_type() || p.has_sparse_tensor_type()) {
    return unsupported(what + ": map and sparse tensor types are not supported");
  }
  if (!elem->has_tensor_type()) return vt;  // type left unspecified
  const auto& tt = elem->tensor_type();
  if (tt.elem_type() != 0) {
    if (!dtype_supported(tt.elem_type()))
      return unsupported(what + ": data type " + dtype_name(tt.elem_type()) + " is not supported");
    vt.dtype = static_cast<DType>(tt.elem_type());
  }
  if (tt.has_shape()) {
    vt.has_shape = true;
    for (const auto& d : tt.shape().dim()) {
      ir::Dim dim;
      if (d.has_dim_value()) dim.value = d.dim_value();
      else if (d.has_dim_param()) dim.symbol = d.dim_param();
      vt.dims.push_back(dim);
    }
  }
  return vt;
}

}  // namespace tac::io
