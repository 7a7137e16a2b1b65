// Fuzz target: arbitrary bytes as an ONNX model file -> import -> shape inference.
// Any crash, sanitizer report, hang or uncaught exception is a finding; errors are fine.
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/onnx_import.h"
#include "ir/shape_inference.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto model = tac::io::load_model_from_bytes(bytes, "fuzz.onnx", "");
  if (!model) return 0;
  (void)tac::ir::infer_shapes(*model);
  return 0;
}
