// The search space the tuner's strategies see (DESIGN.md section 3, "Structure of the search
// space"): a list of dimensions, each a knob (or a group of per-node knobs sharing one
// signature) with a finite list of values. A point assigns one value index per dimension; the
// default point (every dimension at its default) is the default route.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "builder/knobs.h"

namespace tac::tuner {

struct Dimension {
  std::string name;                  // the knob name, or "group:<signature>" for a node group
  std::vector<std::string> values;   // candidate values (the knob's domain, or the values
                                     // common to every knob of the group)
  int default_index = 0;             // index of the default value in `values`
  std::vector<std::string> knobs;    // the route knobs this dimension sets (one, or the group)
  // How often local search redraws this dimension, relative to the others (1: as often as any).
  // The tuner weighs node dimensions by the time their nodes carry in a profile (weigh_by_time).
  double weight = 1;
  // How likely each value is drawn when this dimension is redrawn (per value, summing to 1;
  // empty: uniform). The tuner derives it from isolated timings (set_value_priors).
  std::vector<double> prior;
};

struct SearchSpace {
  std::vector<Dimension> dims;
  // Knobs every route of this space sets, unless a dimension off its default overrides them
  // (the refinement phase searches around the incumbent: its route is the base).
  builder::Route base;
  // Number of points (product of the value counts), saturating at UINT64_MAX.
  uint64_t size() const;
};

using Point = std::vector<int>;  // one value index per dimension

// Route of a point: the base, then the dimensions off their default (the default point of a
// space without a base gives the empty route).
builder::Route route_of(const SearchSpace& space, const Point& p);
Point default_point(const SearchSpace& space);

// The node a per-node knob names ("tactic.conv_3" -> "conv_3"); a knob without a dot names itself.
std::string node_of(const std::string& knob);

// Profiles order the work (DESIGN.md section 3): each dimension's weight becomes the time its
// nodes carry by `node_ms` (ms per node name; a knob "<family>.<node>" names its node), global
// dimensions (no node in the profile) the mean node weight, and every weight at least a tenth of
// that mean, so that no dimension is starved; weights are scaled to mean 1. Without any node
// time, nothing changes.
void weigh_by_time(SearchSpace& space, const std::map<std::string, double>& node_ms);

// Per node, the cost of each tactic the builder considered, the heuristic's choice first (a
// ranking of `builder.selection=isolated`: measured alone on the layer, in ns).
using NodeCosts = std::map<std::string, std::vector<std::pair<std::string, double>>>;

// Isolated timings order the work, they never decide it (DESIGN.md section 3): for each tactic
// dimension, a value's cost is the sum over the dimension's nodes of its cost there ("auto": the
// heuristic's choice), and its prior is proportional to (cheapest / cost)^4, with every value
// (also one without a cost on some node) keeping at least 1/(4k) of the mass, k the value count.
// Dimensions whose nodes have no costs keep a uniform prior.
void set_value_priors(SearchSpace& space, const NodeCosts& costs);

}  // namespace tac::tuner
