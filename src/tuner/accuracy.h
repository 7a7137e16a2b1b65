// The accuracy gate (DESIGN.md section 2 "tolerance"): metrics of an engine's outputs against the
// reference outputs, and tolerances over them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tactician/status.h"
#include "tactician/tensor.h"

namespace tac::tuner {

// Per-output metrics, computed in double. Float outputs are compared as values. Integer and
// bool outputs are compared exactly: linf/l1/l2/cos on the values, l0 the fraction of unequal
// elements (atol and rtol do not apply). A NaN in got matching a NaN in ref, or the same
// infinity on both sides, counts as equal; such elements stay out of linf/l1/l2/cos.
struct Metrics {
  double linf = 0;  // max |got - ref|; +Inf when some element breaks `finite`
  double l1 = 0;    // mean |got - ref| / mean |ref|  (relative; 0 when both are 0, +Inf when only ref is)
  double l2 = 0;    // ||got - ref||_2 / ||ref||_2     (relative; 0 when both are 0, +Inf when only ref is)
  double cos = 1;   // cosine similarity of got and ref (1 when equal, 0 when exactly one is all 0)
  double l0 = 0;    // fraction of elements with |got - ref| > atol + rtol * |ref|
  // false when got has a NaN or Inf where ref is finite, or ref has a NaN/Inf that got does
  // not match exactly (never passes).
  bool finite = true;
};

// One bound: metric, comparison, value, e.g. "cos>=0.9999", "linf<=1e-3", "l0<=0.001".
struct Bound {
  std::string metric;  // linf | l1 | l2 | cos | l0
  bool at_least = false;  // true for >= (cos), false for <=
  double value = 0;
};

struct Tolerance {
  std::vector<Bound> bounds;
  double atol = 1e-4, rtol = 1e-3;  // used by l0; set with "atol=..,rtol=.." in the string
  // The default: l2 <= 1e-5 and cos >= 0.99999 (fp32 routes), atol 1e-4, rtol 1e-3.
  static Tolerance default_fp32();
  // "cos>=0.9999,linf<=1e-3,l0<=0.01,atol=1e-4,rtol=1e-3"; errors name the bad term.
  static Result<Tolerance> parse(const std::string& text);
  std::string to_string() const;
};

// Metrics of `got` against `ref` (same dtype and shape, else an error naming the difference).
Result<Metrics> compute_metrics(const Tensor& got, const Tensor& ref, double atol, double rtol);
// max |got - ref| / |ref| over the elements where ref is not 0 and both are finite (where ref is 0,
// linf says it); 0 when there are none. Not a tolerance metric (one tiny reference element
// dominates it): `compare` prints it beside them, as polygraphy does. Same dtype and shape as
// compute_metrics asks, else an error.
Result<double> max_relative_diff(const Tensor& got, const Tensor& ref);
// Empty when every bound holds for every output (and all are finite); else the first violation,
// e.g. "output 0: cos 0.9991 < 0.9999".
std::string check_tolerance(const Tolerance& tol, const std::vector<Metrics>& per_output);
// {"linf": .., "l1": .., "l2": .., "cos": .., "l0": .., "finite": ..} per output, as a JSON list;
// a non-finite metric (JSON has no Inf/NaN) is written as null.
std::string metrics_json(const std::vector<Metrics>& per_output);
// The inverse of metrics_json, for text read back from a tuning database (input: it may have been
// edited): a JSON list of objects whose keys are among linf, l1, l2, cos, l0 (a number, or null,
// which reads back as NaN) and finite (true or false), each at most once; linf, l1, l2 and l0 not
// negative. "" reads as no outputs. Errors say what is wrong and where: the byte where the text
// stops being JSON, else the output whose object is wrong.
Result<std::vector<Metrics>> parse_metrics_json(std::string_view text);

}  // namespace tac::tuner
