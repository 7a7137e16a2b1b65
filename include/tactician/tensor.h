// Data types, shapes and host tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tactician/status.h"

namespace tac {

// Numbering follows onnx.TensorProto.DataType so that conversion is the identity.
enum class DType : int32_t {
  undefined = 0,
  float32 = 1,
  uint8 = 2,
  int8 = 3,
  uint16 = 4,
  int16 = 5,
  int32 = 6,
  int64 = 7,
  string = 8,  // not supported by Tactician; named in errors
  boolean = 9,
  float16 = 10,
  float64 = 11,
  uint32 = 12,
  uint64 = 13,
  complex64 = 14,   // not supported
  complex128 = 15,  // not supported
  bfloat16 = 16,
};

// Name as ONNX spells it ("float", "int64", "float16", ...); "dtype(N)" for unknown codes.
std::string dtype_name(DType t);
std::string dtype_name(int32_t onnx_code);
// Size in bytes of one element; 0 for unsupported types.
size_t dtype_size(DType t);
// True for the types Tactician computes with (all of the above but string and complex).
bool dtype_supported(int32_t onnx_code);
bool dtype_is_float(DType t);    // float16, bfloat16, float32, float64
bool dtype_is_signed_int(DType t);
bool dtype_is_unsigned_int(DType t);  // includes bool

// IEEE half and bfloat16 storage types; arithmetic goes through float.
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float f);
  operator float() const;  // NOLINT: implicit widening is the point
};
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f);  // round to nearest even, NaN preserved
  operator float() const;      // NOLINT
};

using Shape = std::vector<int64_t>;
// Product of dims; -1 when it overflows int64 or a dim is negative.
int64_t shape_numel(const Shape& s);
std::string shape_to_string(const Shape& s);  // "[1,3,224,224]"
// The largest buffer this process may hold: the machine's physical memory, or the address-space
// limit (RLIMIT_AS) when lower. Sizes read from files are checked against it before allocating.
uint64_t max_tensor_bytes();
std::string bytes_to_string(uint64_t bytes);  // "1.5 GiB", "3.0 MiB", "512 bytes"

// A dense, row-major host tensor. Copies share storage (cheap); code that creates a tensor
// owns its contents until it hands the tensor on, and never writes into a tensor it received.
class Tensor {
 public:
  Tensor() = default;
  // Zero-filled. Fails (as Result, out_of_memory) when the size overflows, exceeds
  // max_tensor_bytes() or cannot be allocated: never throws std::bad_alloc.
  static Result<Tensor> create(DType dtype, Shape shape);
  // A tensor over memory owned by someone else (the engine's arena, a caller's buffer). The
  // memory must outlive the tensor and every copy of it.
  static Tensor wrap(void* data, DType dtype, Shape shape);
  // A tensor owning `bytes` as its storage, without a copy (a model's weights as the protobuf
  // parser read them); fails when the size does not match dtype and shape.
  static Result<Tensor> adopt(std::unique_ptr<std::string> bytes, DType dtype, Shape shape);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[static_cast<size_t>(i)]; }
  int64_t numel() const { return numel_; }
  size_t bytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  bool empty() const { return dtype_ == DType::undefined; }

  void* raw() { return data_ ? data_.get() : nullptr; }
  const void* raw() const { return data_ ? data_.get() : nullptr; }
  template <class T> T* data() { return static_cast<T*>(raw()); }
  template <class T> const T* data() const { return static_cast<const T*>(raw()); }

  // Element access through double / int64 for generic (slow but exact enough) code.
  double get_f64(int64_t i) const;
  void set_f64(int64_t i, double v);
  int64_t get_i64(int64_t i) const;
  void set_i64(int64_t i, int64_t v);

  // Same storage, new shape (numel must match; checked by the caller).
  Tensor reshaped(Shape shape) const;
  // Deep copy.
  Tensor clone() const;

 private:
  DType dtype_ = DType::undefined;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<std::byte[]> data_;
};

}  // namespace tac
