// The tuner's search space (make_search_space, make_refine_space, isolated_seed), its summary and
// durations; the tune itself is a TuneSession (session.h), explain is in explain.cc.
#include "tuner/tune.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "core/json.h"
#include "tuner/session.h"

namespace tac::tuner {

namespace {

bool matches(const std::vector<std::string>& globs, const std::string& name) {
  if (globs.empty()) return true;
  for (const std::string& g : globs)
    if (fnmatch(g.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

}  // namespace

Result<double> parse_duration(const std::string& text) {
  if (text.empty()) return invalid_argument("empty duration");
  double total = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.')) ++j;
    if (j == i) return invalid_argument("duration '" + text + "': expected a number (e.g. 90s, 10m, 1h)");
    double v = std::strtod(text.substr(i, j - i).c_str(), nullptr);
    double unit = 1;
    if (j < text.size()) {
      char u = text[j];
      if (u == 's') unit = 1;
      else if (u == 'm') unit = 60;
      else if (u == 'h') unit = 3600;
      else return invalid_argument("duration '" + text + "': unknown unit '" + std::string(1, u) + "' (s, m, h)");
      ++j;
    }
    total += v * unit;
    i = j;
  }
  if (!(total > 0)) return invalid_argument("duration '" + text + "' must be positive");
  return total;
}

Result<SearchSpace> make_search_space(const builder::KnobSpace& knobs, const std::vector<std::string>& globs,
                                      const builder::Route& fixed, bool with_precision) {
  for (const std::string& g : globs) {
    bool any = false;
    for (const builder::Knob& k : knobs.knobs()) any |= fnmatch(g.c_str(), k.name.c_str(), 0) == 0;
    if (!any) return invalid_argument("--knobs: '" + g + "' matches no knob of this model (`tactician knobs` lists them)");
  }
  SearchSpace space;
  space.base = fixed;
  space.base.values.erase("threads");  // fixed by the caller (with_threads)
  std::map<std::string, size_t> group_dim;
  for (const builder::Knob& k_in : knobs.knobs()) {
    // Each knob's declaration says when it is searched (builder::Searched): the classic-builder
    // knobs (builder.selection, builder.prune) only when --knobs names them, as they only reproduce
    // the failure modes the tuner exists to avoid; the precision knobs also when the user gave the
    // tolerance (the default fp32 one rejects every bf16/int8 candidate; any other is the user's
    // accuracy contract, and the tolerance, not a rule here, decides which precisions pass).
    // Searched together with tactic knobs, a tactic pinned for another precision than its node's is
    // inactive (builder::active_route), and such points are evaluated once.
    const bool opt_in = k_in.searched == builder::Searched::when_named ||
                        (k_in.searched == builder::Searched::with_user_tolerance && !with_precision);
    if (k_in.searched == builder::Searched::never || fixed.values.count(k_in.name) || (opt_in && globs.empty()) ||
        !matches(globs, k_in.name))
      continue;
    builder::Knob k = k_in;
    if (!k.search_values.empty()) k.values = k.search_values;
    if (k.values.size() < 2) continue;
    if (k.scope == builder::KnobScope::node && !k.group.empty()) {
      auto it = group_dim.find(k.group);
      if (it != group_dim.end()) {
        Dimension& d = space.dims[it->second];
        d.knobs.push_back(k.name);
        // Values common to every node of the group.
        std::vector<std::string> common;
        for (const std::string& v : d.values)
          if (std::find(k.values.begin(), k.values.end(), v) != k.values.end()) common.push_back(v);
        d.values = common;
        continue;
      }
      group_dim[k.group] = space.dims.size();
    }
    Dimension d;
    d.name = k.name;
    d.values = k.values;
    d.default_index = static_cast<int>(std::find(k.values.begin(), k.values.end(), k.default_value) - k.values.begin());
    if (d.default_index >= static_cast<int>(d.values.size())) d.default_index = 0;
    d.knobs = {k.name};
    space.dims.push_back(std::move(d));
  }
  // Name groups after their first node and how many nodes they cover; drop groups whose
  // intersection left a single value.
  std::vector<Dimension> kept;
  for (Dimension& d : space.dims) {
    if (d.knobs.size() > 1) d.name = d.knobs[0] + "+" + std::to_string(d.knobs.size() - 1);
    auto def = std::find(d.values.begin(), d.values.end(), "auto");
    if (d.knobs.size() > 1) d.default_index = def == d.values.end() ? 0 : static_cast<int>(def - d.values.begin());
    if (d.values.size() >= 2) kept.push_back(std::move(d));
  }
  space.dims = std::move(kept);
  return space;
}

Result<SearchSpace> make_refine_space(const SearchSpace& grouped, const builder::KnobSpace& knobs,
                                     const builder::Route& incumbent, const std::map<std::string, double>& node_ms,
                                     size_t max_groups) {
  std::vector<std::pair<double, const Dimension*>> groups;
  for (const Dimension& d : grouped.dims) {
    if (d.knobs.size() < 2) continue;
    double ms = 0;
    for (const std::string& k : d.knobs)
      if (auto it = node_ms.find(node_of(k)); it != node_ms.end()) ms += it->second;
    if (ms > 0) groups.push_back({ms, &d});
  }
  std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (groups.size() > max_groups) groups.resize(max_groups);
  SearchSpace out;
  out.base = incumbent;
  for (const auto& [ms, g] : groups) {
    for (const std::string& name : g->knobs) {
      const builder::Knob* k = knobs.find(name);
      if (!k) return internal_error("refinement: knob '" + name + "' is not in the knob space");
      Dimension d;
      d.name = name;
      d.knobs = {name};
      d.values = k->search_values.empty() ? k->values : k->search_values;
      auto cur = incumbent.values.find(name);
      const std::string& v = cur == incumbent.values.end() ? k->default_value : cur->second;
      auto pos = std::find(d.values.begin(), d.values.end(), v);
      if (pos == d.values.end()) {  // the incumbent's value (from the group) is always offered
        d.values.push_back(v);
        pos = d.values.end() - 1;
      }
      d.default_index = static_cast<int>(pos - d.values.begin());
      if (d.values.size() >= 2) out.dims.push_back(std::move(d));
    }
  }
  return out;
}

IsolatedSeed isolated_seed(const SearchSpace& space, const builder::KnobSpace& knobs, const builder::Route& fixed,
                           const std::map<std::string, std::string>& default_tactics,
                           const std::map<std::string, std::string>& isolated_tactics) {
  IsolatedSeed seed;
  seed.exact = fixed;
  for (const auto& [node, tactic] : isolated_tactics) {
    const std::string name = "tactic." + node;
    const builder::Knob* k = knobs.find(name);
    auto def = default_tactics.find(node);
    if (!k || fixed.values.count(name) || (def != default_tactics.end() && def->second == tactic) ||
        std::find(k->values.begin(), k->values.end(), tactic) == k->values.end())
      continue;
    seed.exact.values[name] = tactic;
    ++seed.pinned;
  }
  seed.grouped = default_point(space);
  for (size_t d = 0; d < space.dims.size(); ++d) {
    const Dimension& dim = space.dims[d];
    const std::string& def_value = dim.values[static_cast<size_t>(dim.default_index)];
    std::map<std::string, int> votes;
    for (const std::string& k : dim.knobs) {
      if (k.rfind("tactic.", 0) != 0) continue;
      auto it = seed.exact.values.find(k);
      ++votes[it == seed.exact.values.end() || fixed.values.count(k) ? def_value : it->second];
    }
    std::string best = def_value;
    for (const auto& [v, n] : votes)
      if (n > (votes.count(best) ? votes.at(best) : 0)) best = v;
    auto pos = std::find(dim.values.begin(), dim.values.end(), best);
    if (pos != dim.values.end()) seed.grouped[d] = static_cast<int>(pos - dim.values.begin());
  }
  return seed;
}

std::string TuneSummary::time_text() const {
  const double per = time.evaluations > 0 ? 1e3 / time.evaluations : 0;
  char b[512];
  std::snprintf(b, sizeof b,
                "reference %.1f s; %d evaluations %.1f s (%.0f ms each: build %.0f, check %.0f, timing %.0f, "
                "evaluator %.0f); the tuner itself %.1f s; %.1f candidates per minute",
                time.reference_s, time.evaluations, time.evaluations_s, time.evaluations_s * per, time.build_s * per,
                time.check_s * per, time.measure_s * per,
                (time.evaluations_s - time.build_s - time.check_s - time.measure_s) * per,
                std::max(0.0, wall_s - time.reference_s - time.evaluations_s), wall_s > 0 ? 60.0 * candidates / wall_s : 0);
  return b;
}

std::string TuneSummary::to_json() const {
  using Json = nlohmann::ordered_json;
  Json by_rank = Json::object(), speed = Json::object();
  for (const auto& [rank, n] : candidates_by_rank) by_rank[std::to_string(rank)] = n;
  for (const auto& [rank, f] : rank_speed) speed[std::to_string(rank)] = rounded(f, 4);
  // best_metrics_json is the accuracy gate's list (final.cc keeps it valid); anything else would
  // make the summary unreadable, so it reads as no outputs.
  Json accuracy = Json::parse(best_metrics_json, nullptr, false);
  if (accuracy.is_discarded()) accuracy = Json::array();
  const Json j = {{"default_ms", rounded(default_ms, 6)},
                  {"best_ms", rounded(best_ms, 6)},
                  {"speedup", rounded(speedup, 4)},
                  {"speedup_low", rounded(speedup_low, 4)},
                  {"speedup_high", rounded(speedup_high, 4)},
                  {"candidates", candidates},
                  {"failed", failed},
                  {"rejected", rejected},
                  {"resumed", resumed},
                  {"best_route", best_route},
                  {"accuracy", accuracy},
                  {"wall_s", rounded(wall_s, 1)},
                  {"build_s", rounded(build_s, 1)},
                  {"stop_reason", stop_reason},
                  {"dimensions", dimensions},
                  {"space_size", space_size},
                  {"refined_knobs", refined_knobs},
                  {"candidates_by_rank", by_rank},
                  {"rank_speed", speed},
                  {"time",
                   {{"reference_s", rounded(time.reference_s, 2)},
                    {"evaluations", time.evaluations},
                    {"evaluations_s", rounded(time.evaluations_s, 2)},
                    {"build_s", rounded(time.build_s, 2)},
                    {"check_s", rounded(time.check_s, 2)},
                    {"measure_s", rounded(time.measure_s, 2)}}},
                  {"verdict", verdict},
                  {"tolerance", tolerance},
                  {"warnings", warnings}};
  return dump_json(j);
}

}  // namespace tac::tuner
