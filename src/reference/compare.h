// Comparing computed outputs with expected ones (conformance and model checks).
#pragma once

#include <string>

#include "core/datum.h"

namespace tac::ref {

struct Tolerance {
  double rtol = 1e-3;  // the ONNX backend runner's defaults
  double atol = 1e-7;
};

// Empty when `actual` matches `expected`: same kind, dtype and shape; floats within
// atol + rtol*|expected| elementwise (NaN matches NaN, infinities must be equal); integers and
// bools exact. Otherwise one line saying where and by how much they differ.
std::string compare_datum(const Datum& actual, const Datum& expected, const Tolerance& tol);

}  // namespace tac::ref
