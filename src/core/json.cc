#include "core/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace tac {

std::string dump_json(const nlohmann::ordered_json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

double rounded(double v, int decimals) {
  if (!std::isfinite(v)) return v;
  // Printed with the digits kept and read back: the double nearest that decimal text, whose
  // shortest form is that text (up to 15 significant digits).
  char buf[400];  // "%.*f" of 1e308 needs 309 digits before the point
  if (decimals < 0) std::snprintf(buf, sizeof buf, "%.9g", v);
  else std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return std::strtod(buf, nullptr);
}

}  // namespace tac
