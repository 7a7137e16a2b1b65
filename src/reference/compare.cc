#include "reference/compare.h"

#include <cmath>
#include <sstream>

namespace tac::ref {

namespace {

std::string compare_tensor(const Tensor& a, const Tensor& e, const Tolerance& tol) {
  if (a.dtype() != e.dtype()) return "type " + dtype_name(a.dtype()) + ", expected " + dtype_name(e.dtype());
  if (a.shape() != e.shape()) return "shape " + shape_to_string(a.shape()) + ", expected " + shape_to_string(e.shape());
  const bool is_float = dtype_is_float(a.dtype());
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    bool ok;
    if (is_float) {
      double x = a.get_f64(i), y = e.get_f64(i);
      if (std::isnan(y)) ok = std::isnan(x);
      else if (std::isinf(y)) ok = x == y;
      else {
        double diff = std::fabs(x - y);
        ok = diff <= tol.atol + tol.rtol * std::fabs(y);  // NaN diff fails here
        if (!std::isnan(diff)) worst = std::max(worst, diff);
        else worst = INFINITY;
      }
    } else {
      ok = a.get_i64(i) == e.get_i64(i);
    }
    if (!ok) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  if (bad == 0) return {};
  std::ostringstream os;
  os.precision(7);
  os << bad << " of " << a.numel() << " elements differ; first at " << first << ": got " << a.get_f64(first)
     << ", expected " << e.get_f64(first);
  if (is_float) os << "; max abs diff " << worst;
  return os.str();
}

const char* kind_name(Datum::Kind k) {
  switch (k) {
    case Datum::Kind::tensor: return "tensor";
    case Datum::Kind::sequence: return "sequence";
    case Datum::Kind::none: return "empty optional";
  }
  return "?";
}

}  // namespace

std::string compare_datum(const Datum& actual, const Datum& expected, const Tolerance& tol) {
  if (actual.kind != expected.kind)
    return std::string("got a ") + kind_name(actual.kind) + ", expected a " + kind_name(expected.kind);
  switch (expected.kind) {
    case Datum::Kind::tensor: return compare_tensor(actual.tensor, expected.tensor, tol);
    case Datum::Kind::none: return {};
    case Datum::Kind::sequence:
      if (actual.sequence.size() != expected.sequence.size())
        return "sequence of " + std::to_string(actual.sequence.size()) + " tensors, expected " +
               std::to_string(expected.sequence.size());
      for (size_t i = 0; i < expected.sequence.size(); ++i) {
        std::string m = compare_tensor(actual.sequence[i], expected.sequence[i], tol);
        if (!m.empty()) return "sequence item " + std::to_string(i) + ": " + m;
      }
      return {};
  }
  return {};
}

}  // namespace tac::ref
