// The search space: point counting, the route a point stands for, the default point.
#include "tuner/space.h"

#include <algorithm>
#include <cmath>
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

std::string node_of(const std::string& knob) {
  const auto dot = knob.find('.');
  return dot == std::string::npos ? knob : knob.substr(dot + 1);
}

namespace {
// The route knobs a dimension sets (see route_of).
std::vector<std::string> knobs_of(const Dimension& d) { return d.knobs.empty() ? std::vector<std::string>{d.name} : d.knobs; }
}  // namespace

void weigh_by_time(SearchSpace& space, const std::map<std::string, double>& node_ms) {
  std::vector<double> w(space.dims.size(), -1);  // -1: no node of the profile (a global knob)
  double sum = 0;
  int n = 0;
  for (size_t d = 0; d < space.dims.size(); ++d) {
    const Dimension& dim = space.dims[d];
    for (const std::string& k : knobs_of(dim))
      if (auto it = k.find('.') == std::string::npos ? node_ms.end() : node_ms.find(node_of(k)); it != node_ms.end())
        w[d] = std::max(0.0, w[d]) + it->second;
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

void set_value_priors(SearchSpace& space, const NodeCosts& costs) {
  for (Dimension& dim : space.dims) {
    const size_t k = dim.values.size();
    std::vector<double> cost(k, 0);
    std::vector<bool> known(k, true);
    bool any = false;
    for (const std::string& name : knobs_of(dim)) {
      if (name.rfind("tactic.", 0) != 0) continue;
      auto it = costs.find(node_of(name));
      if (it == costs.end() || it->second.empty()) continue;
      any = true;
      for (size_t v = 0; v < k; ++v) {
        const std::string& value = dim.values[v] == "auto" ? it->second[0].first : dim.values[v];
        auto c = std::find_if(it->second.begin(), it->second.end(), [&](const auto& tc) { return tc.first == value; });
        if (c == it->second.end() || !(c->second > 0) || !std::isfinite(c->second)) known[v] = false;
        else cost[v] += c->second;
      }
    }
    dim.prior.clear();
    if (!any) continue;
    double cheapest = INFINITY;
    for (size_t v = 0; v < k; ++v)
      if (known[v]) cheapest = std::min(cheapest, cost[v]);
    if (!std::isfinite(cheapest)) continue;
    std::vector<double> w(k);
    double total = 0;
    for (size_t v = 0; v < k; ++v) total += w[v] = known[v] ? std::pow(cheapest / cost[v], 4) : 0;
    const double floor = 1.0 / (4.0 * static_cast<double>(k));
    // Scale the measured part into (1 - k*floor) of the mass, every value keeping the floor.
    for (size_t v = 0; v < k; ++v) w[v] = floor + (1 - floor * static_cast<double>(k)) * w[v] / total;
    dim.prior = std::move(w);
  }
}

}  // namespace tac::tuner
