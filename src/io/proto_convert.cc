#include "io/proto_convert.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>

#include "io/file.h"

namespace tac::io {

namespace {

// The external data of a tensor: the file, opened, and the byte range the tensor reads from it.
// The file must lie inside the model's folder, as ONNX's checker requires: a location that is
// absolute, has a '..' component, or resolves (through symlinks) outside the folder is refused, and
// so is anything but a regular file (a FIFO would block the reader forever).
struct ExternalData {
  Fd fd;
  std::filesystem::path file;
  int64_t offset = 0;
};

Status parse_extent(const std::string& key, const std::string& text, const std::string& what, int64_t& out) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, out);
  if (text.empty() || ec != std::errc() || p != end || out < 0)
    return invalid_model(what + ": external data " + key + " '" + text + "' is not a non-negative integer");
  return Status::ok();
}

Status open_external(const onnx::TensorProto& p, const std::string& base_dir, const std::string& what,
                     int64_t need, ExternalData& ext) {
  namespace fs = std::filesystem;
  std::string location;
  int64_t length = -1;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") TAC_RETURN_IF_ERROR(parse_extent("offset", kv.value(), what, ext.offset));
    else if (kv.key() == "length") TAC_RETURN_IF_ERROR(parse_extent("length", kv.value(), what, length));
  }
  if (location.empty()) return invalid_model(what + ": external data without a location");
  if (base_dir.empty()) return invalid_model(what + ": external data '" + location + "' but no model directory");
  const std::string where = what + ": external data location '" + location + "'";
  const fs::path rel(location);
  if (rel.is_absolute())
    return invalid_model(where + " is an absolute path; it must name a file inside the model's folder");
  for (const fs::path& part : rel)
    if (part == "..") return invalid_model(where + " climbs outside the model's folder ('..')");
  std::error_code ec;
  const fs::path root = fs::canonical(base_dir, ec);
  if (ec) return io_error(what + ": cannot resolve the model's folder " + base_dir + ": " + ec.message());
  ext.file = fs::canonical(root / rel, ec);
  if (ec) return io_error(where + ": cannot open " + (root / rel).string() + ": " + ec.message());
  auto [mismatch, _] = std::mismatch(root.begin(), root.end(), ext.file.begin(), ext.file.end());
  if (mismatch != root.end())
    return invalid_model(where + " resolves outside the model's folder, to " + ext.file.string());
  int64_t size = 0;
  auto fd = open_regular_file(ext.file.string(), &size);
  if (!fd) return fd.status().with_context(where + ": ");
  ext.fd = std::move(fd).value();
  if (length >= 0 && length != need)
    return invalid_model(what + ": external data length " + std::to_string(length) + " does not match the " +
                         std::to_string(need) + " bytes its shape needs");
  if (ext.offset > size || need > size - ext.offset)
    return invalid_model(what + ": external data file " + ext.file.string() + " is too short (" +
                         std::to_string(size) + " bytes; the tensor needs " + std::to_string(need) +
                         " from offset " + std::to_string(ext.offset) + ")");
  return Status::ok();
}

Status read_external(const ExternalData& ext, const std::string& what, Tensor& t) {
  char* dst = static_cast<char*>(t.raw());
  for (size_t done = 0, need = t.bytes(); done < need;) {
    ssize_t n = pread(ext.fd.get(), dst + done, need - done, static_cast<off_t>(ext.offset + static_cast<int64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return io_error(what + ": reading external data file " + ext.file.string() + " failed");
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

// How many values the tensor's typed field (float_data, int64_data, ...) holds.
int64_t typed_count(const onnx::TensorProto& p, DType dt) {
  switch (dt) {
    case DType::float32: return p.float_data_size();
    case DType::float64: return p.double_data_size();
    case DType::int64: return p.int64_data_size();
    case DType::uint32:
    case DType::uint64: return p.uint64_data_size();
    default: return p.int32_data_size();  // int32, int16, int8, uint16, uint8, bool, float16, bfloat16
  }
}

}  // namespace

void normalize_bools(Tensor& t) {
  auto* b = static_cast<unsigned char*>(t.raw());
  for (size_t i = 0; i < t.bytes(); ++i) b[i] = b[i] != 0;
}

Result<Tensor> tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir,
                                 const std::string& what) {
  int32_t code = p.data_type();
  if (!dtype_supported(code))
    return unsupported(what + ": data type " + dtype_name(code) + " is not supported");
  DType dt = static_cast<DType>(code);
  Shape shape(p.dims().begin(), p.dims().end());
  for (int64_t d : shape)
    if (d < 0) return invalid_model(what + ": negative dimension in " + shape_to_string(shape));
  // The data present is checked against the shape before anything is allocated: a few bytes of
  // model may declare a tensor of any size.
  const int64_t n = shape_numel(shape);
  if (n < 0 || static_cast<uint64_t>(n) > static_cast<uint64_t>(INT64_MAX) / dtype_size(dt))
    return invalid_model(what + ": shape " + shape_to_string(shape) + " is too large");
  const int64_t need = n * static_cast<int64_t>(dtype_size(dt));
  ExternalData ext;
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    TAC_RETURN_IF_ERROR(open_external(p, base_dir, what, need, ext));
  } else if (p.has_raw_data()) {
    if (p.raw_data().size() != static_cast<uint64_t>(need))
      return invalid_model(what + ": raw_data has " + std::to_string(p.raw_data().size()) + " bytes, shape " +
                           shape_to_string(shape) + " of " + dtype_name(dt) + " needs " + std::to_string(need));
  } else if (typed_count(p, dt) != n) {
    return invalid_model(what + ": the tensor holds " + std::to_string(typed_count(p, dt)) +
                         " values, its shape " + shape_to_string(shape) + " needs " + std::to_string(n));
  }
  auto created = Tensor::create(dt, shape);
  if (!created) return created.status().with_context(what + ": ");
  Tensor t = std::move(created).value();
  if (ext.fd.get() >= 0) {
    TAC_RETURN_IF_ERROR(read_external(ext, what, t));
    if (dt == DType::boolean) normalize_bools(t);
    return t;
  }
  if (p.has_raw_data()) {
    std::memcpy(t.raw(), p.raw_data().data(), t.bytes());
    if (dt == DType::boolean) normalize_bools(t);
    return t;
  }
  switch (dt) {
    case DType::float32:
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = p.float_data(static_cast<int>(i));
      break;
    case DType::float64:
      for (int64_t i = 0; i < n; ++i) t.data<double>()[i] = p.double_data(static_cast<int>(i));
      break;
    case DType::int64:
      for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = p.int64_data(static_cast<int>(i));
      break;
    case DType::uint32:
    case DType::uint64:
      for (int64_t i = 0; i < n; ++i) t.set_i64(i, static_cast<int64_t>(p.uint64_data(static_cast<int>(i))));
      break;
    case DType::float16:
    case DType::bfloat16:  // stored as raw 16-bit patterns in int32_data
      for (int64_t i = 0; i < n; ++i)
        t.data<uint16_t>()[i] = static_cast<uint16_t>(p.int32_data(static_cast<int>(i)));
      break;
    default:  // int32, int16, int8, uint16, uint8, bool
      for (int64_t i = 0; i < n; ++i) t.set_i64(i, p.int32_data(static_cast<int>(i)));
      break;
  }
  return t;
}

Result<Tensor> take_tensor_from_proto(onnx::TensorProto& p, const std::string& base_dir, const std::string& what) {
  if (!p.has_raw_data() || p.data_location() == onnx::TensorProto::EXTERNAL || !dtype_supported(p.data_type()) ||
      p.data_type() == onnx::TensorProto::BOOL)  // bools are normalised on the copy
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
