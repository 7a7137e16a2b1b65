#include "io/tensor_io.h"

#include <cerrno>
#include <fstream>
#include <sstream>

#include "io/file.h"
#include "io/proto_convert.h"  // before onnx-data.pb.h: it defines ONNX_API
#include <onnx/onnx-data.pb.h>

namespace tac::io {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<Datum> datum_from_sequence(const onnx::SequenceProto& sp, const std::string& path) {
  if (sp.elem_type() != onnx::SequenceProto::TENSOR && sp.elem_type() != onnx::SequenceProto::UNDEFINED)
    return unsupported(path + ": only sequences of tensors are supported");
  std::vector<Tensor> items;
  for (const auto& tp : sp.tensor_values()) {
    TAC_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(tp, "", path));
    items.push_back(std::move(t));
  }
  DType elem = items.empty() ? DType::undefined : items[0].dtype();
  return Datum::make_sequence(std::move(items), elem);
}

}  // namespace

Result<Tensor> load_tensor_pb(const std::string& path) {
  TAC_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  onnx::TensorProto tp;
  if (!tp.ParseFromString(bytes)) return invalid_argument(path + ": not a serialized onnx.TensorProto");
  return tensor_from_proto(tp, "", path);
}

Result<Datum> load_datum(const std::string& path, const ir::ValueType& expected) {
  if (ends_with(path, ".npy")) {
    TAC_ASSIGN_OR_RETURN(Tensor t, load_npy(path));
    return Datum(std::move(t));
  }
  if (expected.kind == ir::ValueKind::tensor) {
    TAC_ASSIGN_OR_RETURN(Tensor t, load_tensor_pb(path));
    return Datum(std::move(t));
  }
  TAC_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  if (expected.kind == ir::ValueKind::sequence) {
    onnx::SequenceProto sp;
    if (!sp.ParseFromString(bytes)) return invalid_argument(path + ": not a serialized onnx.SequenceProto");
    return datum_from_sequence(sp, path);
  }
  onnx::OptionalProto op;
  if (!op.ParseFromString(bytes)) return invalid_argument(path + ": not a serialized onnx.OptionalProto");
  if (op.has_tensor_value()) {
    TAC_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(op.tensor_value(), "", path));
    return Datum(std::move(t));
  }
  if (op.has_sequence_value()) return datum_from_sequence(op.sequence_value(), path);
  return Datum::make_none(expected.dtype);
}

Status save_tensor_pb(const Tensor& t, const std::string& name, const std::string& path) {
  onnx::TensorProto tp;
  tensor_to_proto(t, name, &tp);
  std::ofstream out(path, std::ios::binary);
  if (!out || !tp.SerializeToOstream(&out)) return io_error(path + ": cannot write the file");
  return Status::ok();
}

// ---- NumPy .npy (format versions 1-3, little-endian, C order) ----

namespace {

const char* npy_descr(DType t) {
  switch (t) {
    case DType::float32: return "<f4";
    case DType::float64: return "<f8";
    case DType::float16: return "<f2";
    case DType::int8: return "|i1";
    case DType::int16: return "<i2";
    case DType::int32: return "<i4";
    case DType::int64: return "<i8";
    case DType::uint8: return "|u1";
    case DType::uint16: return "<u2";
    case DType::uint32: return "<u4";
    case DType::uint64: return "<u8";
    case DType::boolean: return "|b1";
    default: return nullptr;  // bfloat16 has no NumPy type
  }
}

DType dtype_from_descr(const std::string& d) {
  for (DType t : {DType::float32, DType::float64, DType::float16, DType::int8, DType::int16, DType::int32,
                  DType::int64, DType::uint8, DType::uint16, DType::uint32, DType::uint64, DType::boolean}) {
    std::string ours = npy_descr(t);
    if (d == ours || (d.size() == 3 && ours.size() == 3 && d.substr(1) == ours.substr(1) &&
                      (d[0] == '=' || d[0] == '|' || d[0] == '<')))
      return t;
  }
  return DType::undefined;
}

// Value of `key` in the header dict, e.g. 'descr': '<f4' -> <f4.
std::string header_field(const std::string& h, const std::string& key) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) return {};
  size_t colon = h.find(':', k);
  if (colon == std::string::npos) return {};
  size_t start = h.find_first_not_of(" ", colon + 1);
  if (start == std::string::npos) return {};
  if (h[start] == '\'') {
    size_t end = h.find('\'', start + 1);
    return end == std::string::npos ? std::string() : h.substr(start + 1, end - start - 1);
  }
  if (h[start] == '(') {
    size_t end = h.find(')', start);
    return end == std::string::npos ? std::string() : h.substr(start, end - start + 1);
  }
  size_t end = h.find_first_of(",}", start);
  return h.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

Result<Tensor> load_npy(const std::string& path) {
  TAC_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    return invalid_argument(path + ": not a NumPy .npy file");
  uint8_t major = static_cast<uint8_t>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    offset = 10;
  } else {
    if (bytes.size() < 12) return invalid_argument(path + ": truncated .npy header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + static_cast<size_t>(i)])) << (8 * i);
    offset = 12;
  }
  if (offset + header_len > bytes.size()) return invalid_argument(path + ": truncated .npy header");
  std::string h = bytes.substr(offset, header_len);
  std::string descr = header_field(h, "descr");
  if (header_field(h, "fortran_order") == "True")
    return unsupported(path + ": Fortran-ordered arrays are not supported");
  DType dt = dtype_from_descr(descr);
  if (dt == DType::undefined) return unsupported(path + ": NumPy dtype '" + descr + "' is not supported");
  std::string shape_s = header_field(h, "shape");
  Shape shape;
  for (size_t i = 0; i < shape_s.size();) {
    if (std::isdigit(static_cast<unsigned char>(shape_s[i]))) {
      size_t j = i;
      while (j < shape_s.size() && std::isdigit(static_cast<unsigned char>(shape_s[j]))) ++j;
      errno = 0;
      const long long d = std::strtoll(shape_s.substr(i, j - i).c_str(), nullptr, 10);
      if (errno == ERANGE) return invalid_argument(path + ": a dim of shape " + shape_s + " is too large");
      shape.push_back(d);
      i = j;
    } else {
      ++i;
    }
  }
  // The data present is checked against the shape before anything is allocated.
  const size_t data_off = offset + header_len;
  const int64_t n = shape_numel(shape);
  const uint64_t have = bytes.size() - data_off;
  if (n < 0 || static_cast<uint64_t>(n) > have / dtype_size(dt) || have != static_cast<uint64_t>(n) * dtype_size(dt))
    return invalid_argument(path + ": holds " + std::to_string(have) + " data bytes, shape " + shape_to_string(shape) +
                            " of " + dtype_name(dt) + " needs " +
                            (n < 0 ? std::string("more than 2^63") : std::to_string(static_cast<uint64_t>(n) * dtype_size(dt))));
  TAC_ASSIGN_OR_RETURN(Tensor t, Tensor::create(dt, shape));
  std::memcpy(t.raw(), bytes.data() + data_off, t.bytes());
  if (dt == DType::boolean) normalize_bools(t);
  return t;
}

Status save_npy(const Tensor& t, const std::string& path) {
  const char* descr = npy_descr(t.dtype());
  if (!descr) return unsupported(path + ": " + dtype_name(t.dtype()) + " has no NumPy type; use .pb");
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i) shape += std::to_string(t.shape()[i]) + (t.shape().size() == 1 ? "," : (i + 1 < t.shape().size() ? ", " : ""));
  shape += ")";
  std::string h = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) return io_error(path + ": cannot write the file");
  out.write("\x93NUMPY\x01\x00", 8);
  char len[2] = {static_cast<char>(h.size() & 0xff), static_cast<char>(h.size() >> 8)};
  out.write(len, 2);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  out.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.bytes()));
  if (!out) return io_error(path + ": write failed");
  return Status::ok();
}

}  // namespace tac::io
