// Shape ranges (builder/plan.h, DimRange): parsing, and checking a range against a model.
#include <cerrno>
#include <cstdlib>
#include <set>

#include "builder/builder.h"

namespace tac::builder {

namespace {

// A size: digits only, >= 1, no overflow.
bool parse_size(const std::string& s, int64_t& out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno == ERANGE || *end || v < 1) return false;
  out = v;
  return true;
}

}  // namespace

Result<ShapeRanges> parse_shape_ranges(const std::string& text) {
  ShapeRanges out;
  std::string term;
  auto take = [&](const std::string& t) -> Status {
    if (t.empty()) return Status::ok();
    const auto bad = [&](const std::string& why) {
      return invalid_argument("shape range '" + t + "': " + why + " (the form is NAME=MIN..MAX:OPT, e.g. batch=1..8:4)");
    };
    const size_t eq = t.find('=');
    if (eq == std::string::npos || eq == 0) return bad("no NAME=");
    const std::string name = t.substr(0, eq), spec = t.substr(eq + 1);
    DimRange r;
    const size_t dots = spec.find(".."), colon = spec.find(':');
    const std::string lo = spec.substr(0, std::min(dots, colon));
    const std::string hi = dots == std::string::npos ? lo : spec.substr(dots + 2, colon == std::string::npos ? std::string::npos : colon - dots - 2);
    if (!parse_size(lo, r.min) || !parse_size(hi, r.max)) return bad("sizes are integers >= 1");
    r.opt = r.max;
    if (colon != std::string::npos && !parse_size(spec.substr(colon + 1), r.opt)) return bad("the opt size is an integer >= 1");
    if (r.min > r.max) return bad("min is larger than max");
    if (r.opt < r.min || r.opt > r.max) return bad("opt is outside min..max");
    if (!out.emplace(name, r).second) return bad("'" + name + "' is given twice");
    return Status::ok();
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\n' || c == '\t') {
      TAC_RETURN_IF_ERROR(take(term));
      term.clear();
    } else {
      term += c;
    }
  }
  TAC_RETURN_IF_ERROR(take(term));
  return out;
}

std::string shape_ranges_to_string(const ShapeRanges& ranges) {
  std::string s;
  for (const auto& [name, r] : ranges) {
    s += (s.empty() ? "" : " ") + name + "=" + std::to_string(r.min);
    if (r.max != r.min) s += ".." + std::to_string(r.max) + ":" + std::to_string(r.opt);
  }
  return s;
}

// Every range names a symbolic dim of the model's inputs, and agrees with the dims bound beside it;
// the dims are set to the ranges' opt sizes.
Status apply_shape_ranges(const ir::Model& m, BuildOptions& opts) {
  std::set<std::string> symbols;
  for (int v : m.graph.inputs)
    for (const ir::Dim& d : m.graph.values[static_cast<size_t>(v)].type.dims)
      if (!d.known() && !d.symbol.empty()) symbols.insert(d.symbol);
  for (const auto& [name, r] : opts.ranges) {
    if (!symbols.count(name)) {
      std::string known;
      for (const std::string& s : symbols) known += (known.empty() ? "" : ", ") + s;
      return invalid_argument("shape range '" + name + "': the model's inputs have no dim named so (" +
                              (known.empty() ? "they have no symbolic dims" : "theirs: " + known) + ")");
    }
    auto it = opts.dims.find(name);
    if (it != opts.dims.end() && it->second != r.opt)
      return invalid_argument("dim " + name + "=" + std::to_string(it->second) + " conflicts with the shape range " +
                              name + "=" + std::to_string(r.min) + ".." + std::to_string(r.max) + ":" +
                              std::to_string(r.opt) + " (the plan is built at the opt size)");
    opts.dims[name] = r.opt;
  }
  return Status::ok();
}

}  // namespace tac::builder
