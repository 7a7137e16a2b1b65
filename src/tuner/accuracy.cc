// The accuracy gate: metrics of engine outputs against reference outputs, and tolerances.
#include "tuner/accuracy.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/json.h"

namespace tac::tuner {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Shortest text that reads back to the same double ("1e-05", "0.99999", "3").
std::string format_exact(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// `v` with the fewest significant digits (at least 4) that still show it on the wrong side of
// `bound`, so a violation never reads "0.99999 < 0.99999" or "1 < 0.99999".
std::string format_violation(double v, double bound, bool at_least) {
  char buf[64];
  for (int digits = 4; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    const double shown = std::strtod(buf, nullptr);
    if (std::isnan(v) || (at_least ? shown < bound : shown > bound)) break;
  }
  return buf;
}

// Exact value of an integer or bool element (uint64 does not fit int64).
__int128 int_value(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::uint64) return t.data<uint64_t>()[i];
  return t.get_i64(i);
}

// Sums over the elements that take part in the norms; finished into Metrics by finish().
struct Sums {
  double abs_diff = 0, abs_ref = 0;  // l1
  double sq_diff = 0, sq_ref = 0;    // l2
  double dot = 0, sq_got = 0;        // cos
  int64_t outside = 0;               // l0 numerator
  bool all_equal = true;             // every compared element equal (cos is then exactly 1)
};

void add_finite(Sums& s, Metrics& m, double g, double r, double diff) {
  m.linf = std::max(m.linf, diff);
  s.abs_diff += diff;
  s.abs_ref += std::fabs(r);
  s.sq_diff += diff * diff;
  s.sq_ref += r * r;
  s.sq_got += g * g;
  s.dot += g * r;
  if (diff != 0) s.all_equal = false;
}

// Relative norm: 0 when both are 0, infinite when only the reference is 0.
double relative(double num, double den) {
  if (num == 0) return 0;
  if (den == 0) return kInf;
  return num / den;
}

void finish(const Sums& s, int64_t n, Metrics& m) {
  m.l1 = relative(s.abs_diff, s.abs_ref);
  m.l2 = relative(std::sqrt(s.sq_diff), std::sqrt(s.sq_ref));
  if (s.all_equal) {
    m.cos = 1;
  } else if (s.sq_got == 0 || s.sq_ref == 0) {
    m.cos = 0;  // one side is all zeros, the other not: no direction in common
  } else {
    // sqrt of the product (not the product of sqrts) keeps identical inputs at exactly 1.
    m.cos = std::clamp(s.dot / std::sqrt(s.sq_got * s.sq_ref), -1.0, 1.0);
  }
  m.l0 = n == 0 ? 0 : static_cast<double>(s.outside) / static_cast<double>(n);
}

Metrics float_metrics(const Tensor& got, const Tensor& ref, double atol, double rtol) {
  Metrics m;
  Sums s;
  const int64_t n = got.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double g = got.get_f64(i), r = ref.get_f64(i);
    if (std::isfinite(r) && std::isfinite(g)) {
      const double diff = std::fabs(g - r);
      add_finite(s, m, g, r, diff);
      if (diff > atol + rtol * std::fabs(r)) ++s.outside;
      continue;
    }
    // A non-finite value on either side: equal only for NaN against NaN or the same infinity.
    // Such elements stay out of the norms (they would make every norm NaN or Inf).
    const bool equal = (std::isnan(r) && std::isnan(g)) || (!std::isnan(r) && g == r);
    if (equal) continue;
    m.finite = false;
    m.linf = kInf;
    s.all_equal = false;
    ++s.outside;
  }
  finish(s, n, m);
  return m;
}

Metrics integer_metrics(const Tensor& got, const Tensor& ref) {
  Metrics m;
  Sums s;
  const int64_t n = got.numel();
  for (int64_t i = 0; i < n; ++i) {
    const __int128 gi = int_value(got, i), ri = int_value(ref, i);
    const __int128 d = gi > ri ? gi - ri : ri - gi;  // exact even for int64 extremes
    add_finite(s, m, static_cast<double>(gi), static_cast<double>(ri), static_cast<double>(d));
    if (d != 0) ++s.outside;
  }
  finish(s, n, m);
  return m;
}

Status term_error(std::string_view term, const std::string& why) {
  return invalid_argument("tolerance term '" + std::string(term) + "': " + why);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool parse_number(std::string_view text, double& out) {
  if (text.empty()) return false;
  // from_chars rejects a leading '+', which people write in exponents only; that is fine.
  auto r = std::from_chars(text.data(), text.data() + text.size(), out);
  return r.ec == std::errc() && r.ptr == text.data() + text.size() && std::isfinite(out);
}

constexpr const char* kAllowedTerms =
    "expected linf<=X, l1<=X, l2<=X, l0<=X, cos>=X, atol=X or rtol=X";

}  // namespace

Result<Metrics> compute_metrics(const Tensor& got, const Tensor& ref, double atol, double rtol) {
  const bool dtype_differs = got.dtype() != ref.dtype();
  const bool shape_differs = got.shape() != ref.shape();
  if (dtype_differs || shape_differs) {
    return invalid_argument("output does not match the reference: got " + dtype_name(got.dtype()) +
                            shape_to_string(got.shape()) + ", reference " + dtype_name(ref.dtype()) +
                            shape_to_string(ref.shape()) + " (" +
                            (dtype_differs && shape_differs ? "dtype and shape differ"
                             : dtype_differs               ? "dtype differs"
                                                           : "shape differs") +
                            ")");
  }
  const DType t = got.dtype();
  if (!dtype_supported(static_cast<int32_t>(t)) || t == DType::undefined) {
    return unsupported("accuracy metrics: dtype " + dtype_name(t) + " is not supported");
  }
  if (got.numel() > 0 && (got.raw() == nullptr || ref.raw() == nullptr)) {
    return internal_error("accuracy metrics: tensor of " + shape_to_string(got.shape()) + " has no data");
  }
  if (dtype_is_float(t)) return float_metrics(got, ref, atol, rtol);
  return integer_metrics(got, ref);
}

Result<double> max_relative_diff(const Tensor& got, const Tensor& ref) {
  if (got.dtype() != ref.dtype() || got.shape() != ref.shape())
    return invalid_argument("max relative difference: got " + dtype_name(got.dtype()) + shape_to_string(got.shape()) +
                            ", reference " + dtype_name(ref.dtype()) + shape_to_string(ref.shape()));
  double worst = 0;
  const bool is_float = dtype_is_float(got.dtype());
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = is_float ? got.get_f64(i) : static_cast<double>(int_value(got, i));
    const double r = is_float ? ref.get_f64(i) : static_cast<double>(int_value(ref, i));
    if (r == 0 || !std::isfinite(r) || !std::isfinite(g)) continue;
    worst = std::max(worst, std::fabs(g - r) / std::fabs(r));
  }
  return worst;
}

Tolerance Tolerance::default_fp32() {
  Tolerance tol;
  tol.bounds = {{"l2", false, 1e-5}, {"cos", true, 0.99999}};
  tol.atol = 1e-4;
  tol.rtol = 1e-3;
  return tol;
}

Result<Tolerance> Tolerance::parse(const std::string& text) {
  Tolerance tol;
  tol.bounds.clear();
  if (trim(text).empty()) {
    return invalid_argument("empty tolerance: " + std::string(kAllowedTerms) + ", separated by commas");
  }
  bool seen_atol = false, seen_rtol = false;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view term = trim(rest.substr(0, comma));
    if (term.empty()) {
      return invalid_argument("tolerance '" + text + "' has an empty term (a stray comma); " +
                              kAllowedTerms);
    }
    // Split at the operator: the first of '<', '>', '='.
    const size_t op_at = term.find_first_of("<>=");
    if (op_at == std::string_view::npos) return term_error(term, std::string("no comparison; ") + kAllowedTerms);
    const std::string_view name = trim(term.substr(0, op_at));
    std::string_view after = term.substr(op_at);
    std::string_view op;
    if (after.starts_with("<=") || after.starts_with(">=")) {
      op = after.substr(0, 2);
    } else if (after.starts_with("=")) {
      op = "=";
    } else {
      return term_error(term, "comparison '" + std::string(1, after[0]) +
                                  "' is not allowed: use <= or >= (bounds include the value)");
    }
    const std::string_view value_text = trim(after.substr(op.size()));
    double value = 0;
    if (!parse_number(value_text, value)) {
      return term_error(term, "'" + std::string(value_text) + "' is not a finite number");
    }

    if (name == "atol" || name == "rtol") {
      if (op != "=") return term_error(term, std::string(name) + " is a setting: write " + std::string(name) + "=X");
      if (value < 0) return term_error(term, std::string(name) + " must be >= 0");
      bool& seen = name == "atol" ? seen_atol : seen_rtol;
      if (seen) return term_error(term, std::string(name) + " is given twice");
      seen = true;
      (name == "atol" ? tol.atol : tol.rtol) = value;
    } else if (name == "linf" || name == "l1" || name == "l2" || name == "l0" || name == "cos") {
      const bool at_least = name == "cos";
      if (op == "=") {
        return term_error(term, std::string(name) + " is a bound: write " + std::string(name) +
                                    (at_least ? ">=X" : "<=X"));
      }
      if (at_least && op != ">=") return term_error(term, "cos takes a lower bound only: write cos>=X");
      if (!at_least && op != "<=") {
        return term_error(term, std::string(name) + " takes an upper bound only: write " + std::string(name) + "<=X");
      }
      if (at_least && (value < -1 || value > 1)) return term_error(term, "a cos bound must lie in [-1, 1]");
      if (name == "l0" && (value < 0 || value > 1)) {
        return term_error(term, "an l0 bound is a fraction of elements and must lie in [0, 1]");
      }
      if (!at_least && value < 0) return term_error(term, std::string(name) + " bound must be >= 0");
      for (const Bound& b : tol.bounds) {
        if (b.metric == name) return term_error(term, "metric " + std::string(name) + " is bounded twice");
      }
      tol.bounds.push_back({std::string(name), at_least, value});
    } else {
      return term_error(term, "unknown name '" + std::string(name) + "'; " + kAllowedTerms);
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return tol;
}

std::string Tolerance::to_string() const {
  std::string out;
  for (const Bound& b : bounds) {
    out += b.metric + (b.at_least ? ">=" : "<=") + format_exact(b.value) + ",";
  }
  out += "atol=" + format_exact(atol) + ",rtol=" + format_exact(rtol);
  return out;
}

std::string check_tolerance(const Tolerance& tol, const std::vector<Metrics>& per_output) {
  for (size_t i = 0; i < per_output.size(); ++i) {
    const Metrics& m = per_output[i];
    const std::string where = "output " + std::to_string(i) + ": ";
    if (!m.finite) return where + "NaN or Inf where the reference has a different value";
    for (const Bound& b : tol.bounds) {
      double v;
      if (b.metric == "linf") v = m.linf;
      else if (b.metric == "l1") v = m.l1;
      else if (b.metric == "l2") v = m.l2;
      else if (b.metric == "cos") v = m.cos;
      else if (b.metric == "l0") v = m.l0;
      else return where + "unknown metric '" + b.metric + "' in the tolerance";
      // Written so that a NaN metric fails.
      const bool holds = b.at_least ? v >= b.value : v <= b.value;
      if (holds) continue;
      std::string line = where + b.metric + " " + format_violation(v, b.value, b.at_least) +
                         (b.at_least ? " < " : " > ") + format_exact(b.value);
      if (b.metric == "l0") {
        line += " (elements outside atol " + format_exact(tol.atol) + " + rtol " + format_exact(tol.rtol) + " * |ref|)";
      }
      return line;
    }
  }
  return "";
}

std::string metrics_json(const std::vector<Metrics>& per_output) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Metrics& m : per_output)
    list.push_back({{"linf", m.linf}, {"l1", m.l1}, {"l2", m.l2}, {"cos", m.cos}, {"l0", m.l0}, {"finite", m.finite}});
  return dump_json(list);
}

namespace {

using Json = nlohmann::ordered_json;

// Where (the byte, from 0, that the parser stopped at) and why nlohmann's parser stopped, for the
// error message (parse without exceptions says only that it did). Other events are dropped.
class SyntaxError final : public nlohmann::json_sax<Json> {
 public:
  size_t byte = 0;
  std::string why;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&, const Json::exception& e) override {
    // e.what(): "[json.exception.parse_error.101] parse error at line 1, column 9: syntax error ..."
    // or "[json.exception.out_of_range.406] number overflow parsing '1e999'"; the byte says where.
    std::string_view w = e.what();
    if (size_t p = w.find("] "); p != std::string_view::npos) w.remove_prefix(p + 2);
    if (w.rfind("parse error", 0) == 0)
      if (size_t p = w.find(": "); p != std::string_view::npos) w.remove_prefix(p + 2);
    byte = position > 0 ? position - 1 : 0;  // nlohmann counts the bytes read, the last one included
    why = w;
    return false;
  }
};

Status metrics_error(const std::string& where, const std::string& what) {
  return invalid_argument("metrics JSON" + where + ": " + what);
}

}  // namespace

Result<std::vector<Metrics>> parse_metrics_json(std::string_view text) {
  std::vector<Metrics> out;
  if (text.find_first_not_of(" \t\n\r") == std::string_view::npos) return out;
  // nlohmann keeps the last of an output's repeated keys; here a repeat is an error, so the parse
  // notes the first one (the keys of the list's objects, depth 2) and which object it is in.
  std::vector<std::vector<std::string>> keys;  // of each open object
  int objects = 0;                             // of the list's objects started so far
  std::string repeated;
  int repeated_in = -1;
  auto note_keys = [&](int depth, Json::parse_event_t event, Json& v) {
    using E = Json::parse_event_t;
    if (event == E::object_start) {
      keys.emplace_back();
      if (depth == 1) ++objects;
    } else if (event == E::object_end) {
      keys.pop_back();
    } else if (event == E::key && depth == 2 && repeated_in < 0 && !keys.empty()) {
      std::string k = v.get<std::string>();
      if (std::find(keys.back().begin(), keys.back().end(), k) != keys.back().end()) {
        repeated = k;
        repeated_in = objects - 1;
      }
      keys.back().push_back(std::move(k));
    }
    return true;
  };
  const Json doc = Json::parse(text, note_keys, false);
  if (doc.is_discarded()) {
    SyntaxError e;
    (void)Json::sax_parse(text, &e);
    return metrics_error(" at byte " + std::to_string(e.byte), e.why);
  }
  if (!doc.is_array()) return metrics_error("", "expected a list of per-output metrics");
  for (size_t i = 0; i < doc.size(); ++i) {
    const std::string where = ", output " + std::to_string(i);
    const Json& o = doc[i];
    if (!o.is_object()) return metrics_error(where, "expected an object (one output's metrics)");
    if (static_cast<int>(i) == repeated_in) return metrics_error(where, "metric '" + repeated + "' given twice");
    Metrics m;
    for (const auto& [key, v] : o.items()) {
      if (key == "finite") {
        if (!v.is_boolean()) return metrics_error(where, "'finite' must be true or false");
        m.finite = v.get<bool>();
        continue;
      }
      double* d = key == "linf"  ? &m.linf
                  : key == "l1"  ? &m.l1
                  : key == "l2"  ? &m.l2
                  : key == "cos" ? &m.cos
                  : key == "l0"  ? &m.l0
                                 : nullptr;
      if (!d) return metrics_error(where, "unknown metric '" + key + "' (linf, l1, l2, cos, l0, finite)");
      if (v.is_null()) {
        *d = std::numeric_limits<double>::quiet_NaN();
        continue;
      }
      if (!v.is_number()) return metrics_error(where, "metric '" + key + "' is not a number");
      *d = v.get<double>();  // finite: the parser refuses numbers out of a double's range
      if (key != "cos" && *d < 0) return metrics_error(where, "metric '" + key + "' is negative");
    }
    out.push_back(m);
  }
  return out;
}

}  // namespace tac::tuner
