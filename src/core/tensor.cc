#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <new>

#include "tactician/tensor.h"

#include <cstddef>

namespace tac {

uint64_t max_tensor_bytes() {
  // The machine's physical memory, or the address-space limit when one is lower (a tuner's
  // candidate runs under one): no single tensor can be larger.
  static const uint64_t limit = [] {
    uint64_t mem = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    if (mem == 0) mem = uint64_t{1} << 36;
    rlimit lim{};
    if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) mem = std::min<uint64_t>(mem, lim.rlim_cur);
    return mem;
  }();
  return limit;
}

std::string bytes_to_string(uint64_t bytes) {
  char buf[32];
  if (bytes >= (uint64_t{1} << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  else if (bytes >= (uint64_t{1} << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  else std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  return buf;
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

std::string shape_to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

Result<Tensor> Tensor::create(DType dtype, Shape shape) {
  size_t es = dtype_size(dtype);
  if (es == 0) return unsupported("data type " + dtype_name(dtype) + " is not supported");
  int64_t n = shape_numel(shape);
  if (n < 0) return invalid_model("tensor shape " + shape_to_string(shape) + " is invalid or too large");
  if (static_cast<uint64_t>(n) > max_tensor_bytes() / es)
    return out_of_memory("tensor of shape " + shape_to_string(shape) + " and type " + dtype_name(dtype) + " needs " +
                         bytes_to_string(static_cast<uint64_t>(n) * es) + ", more than this machine's " +
                         bytes_to_string(max_tensor_bytes()) + " of memory");
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = n;
  // Always allocate at least one byte so that raw() of an empty tensor is a valid pointer.
  const size_t bytes = std::max<size_t>(1, static_cast<size_t>(n) * es);
  try {
    t.data_ = std::shared_ptr<std::byte[]>(new std::byte[bytes]());
  } catch (const std::bad_alloc&) {
    return out_of_memory("cannot allocate " + bytes_to_string(bytes) + " for a tensor of shape " +
                         shape_to_string(t.shape_) + " and type " + dtype_name(dtype));
  }
  return t;
}

Result<Tensor> Tensor::adopt(std::unique_ptr<std::string> bytes, DType dtype, Shape shape) {
  const size_t es = dtype_size(dtype);
  const int64_t n = shape_numel(shape);
  if (es == 0 || n < 0 || static_cast<uint64_t>(n) > SIZE_MAX / es || !bytes ||
      bytes->size() != static_cast<size_t>(n) * es)
    return invalid_model("tensor of shape " + shape_to_string(shape) + " and type " + dtype_name(dtype) +
                         " cannot own " + std::to_string(bytes ? bytes->size() : 0) + " bytes");
  // The buffer of a string long enough to live on the heap is operator new's (aligned as
  // create()'s); a short one lives inside the string object: copy those.
  if (bytes->size() < 64 || reinterpret_cast<uintptr_t>(bytes->data()) % alignof(std::max_align_t) != 0) {
    TAC_ASSIGN_OR_RETURN(Tensor t, create(dtype, std::move(shape)));
    std::memcpy(t.raw(), bytes->data(), bytes->size());
    return t;
  }
  Tensor t;
  t.dtype_ = dtype;
  t.numel_ = n;
  t.shape_ = std::move(shape);
  // The deleter holds the string: it lives as long as the last copy of the tensor.
  std::shared_ptr<std::string> owner(std::move(bytes));
  t.data_ = std::shared_ptr<std::byte[]>(reinterpret_cast<std::byte*>(owner->data()),
                                         [owner](std::byte*) { (void)owner; });
  return t;
}

Tensor Tensor::wrap(void* data, DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.numel_ = shape_numel(shape);
  t.shape_ = std::move(shape);
  t.data_ = std::shared_ptr<std::byte[]>(static_cast<std::byte*>(data), [](std::byte*) {});
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = *this;
  if (data_) {
    size_t b = std::max<size_t>(1, bytes());
    t.data_ = std::shared_ptr<std::byte[]>(new std::byte[b]);
    std::memcpy(t.data_.get(), data_.get(), b);
  }
  return t;
}

double Tensor::get_f64(int64_t i) const {
  switch (dtype_) {
    case DType::float32: return data<float>()[i];
    case DType::float64: return data<double>()[i];
    case DType::float16: return static_cast<float>(data<Float16>()[i]);
    case DType::bfloat16: return static_cast<float>(data<BFloat16>()[i]);
    case DType::int8: return data<int8_t>()[i];
    case DType::int16: return data<int16_t>()[i];
    case DType::int32: return data<int32_t>()[i];
    case DType::int64: return static_cast<double>(data<int64_t>()[i]);
    case DType::uint8: return data<uint8_t>()[i];
    case DType::uint16: return data<uint16_t>()[i];
    case DType::uint32: return data<uint32_t>()[i];
    case DType::uint64: return static_cast<double>(data<uint64_t>()[i]);
    case DType::boolean: return data<uint8_t>()[i] ? 1.0 : 0.0;
    default: return 0.0;
  }
}

namespace {
// Float -> integer conversion as C does (truncation), saturating instead of UB when out of range.
template <class T>
T saturate_cast(double v) {
  if (std::isnan(v)) return T(0);
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
  if (v <= lo) return std::numeric_limits<T>::min();
  if (v >= hi) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}
}  // namespace

void Tensor::set_f64(int64_t i, double v) {
  switch (dtype_) {
    case DType::float32: data<float>()[i] = static_cast<float>(v); break;
    case DType::float64: data<double>()[i] = v; break;
    case DType::float16: data<Float16>()[i] = Float16(static_cast<float>(v)); break;
    case DType::bfloat16: data<BFloat16>()[i] = BFloat16(static_cast<float>(v)); break;
    case DType::int8: data<int8_t>()[i] = saturate_cast<int8_t>(v); break;
    case DType::int16: data<int16_t>()[i] = saturate_cast<int16_t>(v); break;
    case DType::int32: data<int32_t>()[i] = saturate_cast<int32_t>(v); break;
    case DType::int64: data<int64_t>()[i] = saturate_cast<int64_t>(v); break;
    case DType::uint8: data<uint8_t>()[i] = saturate_cast<uint8_t>(v); break;
    case DType::uint16: data<uint16_t>()[i] = saturate_cast<uint16_t>(v); break;
    case DType::uint32: data<uint32_t>()[i] = saturate_cast<uint32_t>(v); break;
    case DType::uint64: data<uint64_t>()[i] = saturate_cast<uint64_t>(v); break;
    case DType::boolean: data<uint8_t>()[i] = v != 0.0 ? 1 : 0; break;
    default: break;
  }
}

int64_t Tensor::get_i64(int64_t i) const {
  switch (dtype_) {
    case DType::int8: return data<int8_t>()[i];
    case DType::int16: return data<int16_t>()[i];
    case DType::int32: return data<int32_t>()[i];
    case DType::int64: return data<int64_t>()[i];
    case DType::uint8: return data<uint8_t>()[i];
    case DType::uint16: return data<uint16_t>()[i];
    case DType::uint32: return data<uint32_t>()[i];
    case DType::uint64: return static_cast<int64_t>(data<uint64_t>()[i]);
    case DType::boolean: return data<uint8_t>()[i] ? 1 : 0;
    default: return saturate_cast<int64_t>(get_f64(i));
  }
}

void Tensor::set_i64(int64_t i, int64_t v) {
  switch (dtype_) {
    case DType::int8: data<int8_t>()[i] = static_cast<int8_t>(v); break;
    case DType::int16: data<int16_t>()[i] = static_cast<int16_t>(v); break;
    case DType::int32: data<int32_t>()[i] = static_cast<int32_t>(v); break;
    case DType::int64: data<int64_t>()[i] = v; break;
    case DType::uint8: data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
    case DType::uint16: data<uint16_t>()[i] = static_cast<uint16_t>(v); break;
    case DType::uint32: data<uint32_t>()[i] = static_cast<uint32_t>(v); break;
    case DType::uint64: data<uint64_t>()[i] = static_cast<uint64_t>(v); break;
    case DType::boolean: data<uint8_t>()[i] = v != 0 ? 1 : 0; break;
    default: set_f64(i, static_cast<double>(v)); break;
  }
}

}  // namespace tac
