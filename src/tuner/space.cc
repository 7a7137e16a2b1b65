// The search space: point counting, the route a point stands for, the default point.
#include "tuner/space.h"

#include <algorithm>
#include <limits>

namespace tac::tuner {

uint64_t SearchSpace::size() const {
  uint64_t n = 1;
  for (const Dimension& d : dims) {
    const uint64_t k = d.values.size();
    if (k == 0) return 0;
    if (n > std::numeric_limits<uint64_t>::max() / k) return std::numeric_limits<uint64_t>::max();
    n *= k;
  }
  return n;
}

// A dimension without route knobs stands for the knob of its own name. Indices outside a
// dimension's values (a point from another space) set nothing.
builder::Route route_of(const SearchSpace& space, const Point& p) {
  builder::Route r = space.base;
  for (size_t d = 0; d < space.dims.size() && d < p.size(); ++d) {
    const Dimension& dim = space.dims[d];
    const int v = p[d];
    if (v == dim.default_index || v < 0 || static_cast<size_t>(v) >= dim.values.size()) continue;
    if (dim.knobs.empty()) {
      r.values[dim.name] = dim.values[v];
    } else {
      for (const std::string& k : dim.knobs) r.values[k] = dim.values[v];
    }
  }
  return r;
}

Point default_point(const SearchSpace& space) {
  Point p(space.dims.size());
  for (size_t d = 0; d < space.dims.size(); ++d) p[d] = space.dims[d].default_index;
  return p;
}

void weigh_by_time(SearchSpace& space, const std::map<std::string, double>& node_ms) {
  std::vector<double> w(space.dims.size(), -1);  // -1: no node of the profile (a global knob)
  double sum = 0;
  int n = 0;
  for (size_t d = 0; d < space.dims.size(); ++d) {
    const Dimension& dim = space.dims[d];
    for (const std::string& k : dim.knobs.empty() ? std::vector<std::string>{dim.name} : dim.knobs) {
      const auto dot = k.find('.');
      auto it = dot == std::string::npos ? node_ms.end() : node_ms.find(k.substr(dot + 1));
      if (it != node_ms.end()) w[d] = std::max(0.0, w[d]) + it->second;
    }
    if (w[d] >= 0) {
      sum += w[d];
      ++n;
    }
  }
  if (n == 0 || !(sum > 0)) return;
  const double mean = sum / n;
  double total = 0;
  for (double& x : w) total += x = x < 0 ? mean : std::max(x, 0.1 * mean);
  for (size_t d = 0; d < space.dims.size(); ++d)
    space.dims[d].weight = w[d] * static_cast<double>(w.size()) / total;
}

}  // namespace tac::tuner
