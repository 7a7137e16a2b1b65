// TuneSession, before the search: the inspections that order it (the default engine's profile,
// the isolated selection) and the seeds evaluated before the strategy's own points. Only for
// strategies that take seeds (Strategy::takes_seeds).
#include <algorithm>

#include "tuner/interrupt.h"
#include "tuner/session.h"

namespace tac::tuner {

// The default engine's profile: node times weigh the dimensions (local search redraws those
// carrying the time more often), and its tactics are what the isolated seed is compared with.
// The classic profiling builder's answer (every applicable tactic timed alone on its layer):
// its times become the tactic dimensions' value priors, its choice the isolated seed.
void TuneSession::inspect_default() {
  if (!takes_seeds_ || interrupt_signal() != 0) return;
  // The inspections only order the search: each may take a share of the budget left, no more (on
  // a large model the isolated selection times every tactic of every node: on the GPU,
  // BERT-base's GEMMs and their cuBLASLt algorithms), and the search goes on without it.
  auto limit = [&](double share) { return std::max(10.0, share * (opts_.budget_s - elapsed())); };
  def_profile_ = eval_now(inspect_request(def_.route, true), limit(0.25));
  if (def_profile_.status == "ok") weigh_by_time(space_, def_profile_.node_ms);
  else if (def_profile_.status != "interrupted")
    line("profiling the default failed (" + def_profile_.reason + "): dimensions unweighted");
  builder::Route iso = space_.base;
  iso.values["builder.selection"] = "isolated";
  isolated_ = eval_now(inspect_request(with_threads(iso), false), limit(0.4));
  if (isolated_.status == "ok") set_value_priors(space_, isolated_.costs);
  else if (isolated_.status != "interrupted")
    line("isolated selection failed (" + isolated_.reason + "): no value priors, no seed");
}

// Seeds, in the order they are evaluated (a seed already in the history is not):
// - precision: precision.default at each of its other values (bf16, int8 on the CPU; fp16, bf16,
//   tf32 on CUDA), everything else at the default. A whole engine in each precision answers
//   first whether it passes the tolerance at all and what it gains; per-node precision (the
//   precision.<node> dimensions) is then the search's to refine. Where the route fixes
//   precision.default (`--route precision.default=fp16`: the default compared against is fp16),
//   the same whole engines come from the per-node dimensions instead: every one that offers a
//   value at it (fp8 on CUDA's MatMuls with constant weights, the rest keeping the fixed value).
// - approximate: every dimension that offers an approximate tactic (cuBLASLt's tanh GELU for the
//   erf GELU) at its first such value, the rest at the default. One candidate answers whether the
//   approximations pass the tolerance at all and what they gain together.
// - isolated: the tactics a profiling builder picks by timing each alone, judged here as a whole
//   engine (exact per-node pins, and the nearest grouped point, which the strategy then learns
//   from). A failure of the seed's builds only skips it.
void TuneSession::plan_seeds() {
  if (!takes_seeds_ || !budget_left().empty()) return;
  for (size_t d = 0; d < space_.dims.size(); ++d) {
    if (space_.dims[d].name != "precision.default") continue;
    for (size_t v = 0; v < space_.dims[d].values.size(); ++v) {
      Point p = default_point(space_);
      if (static_cast<int>(v) == p[d]) continue;
      p[d] = static_cast<int>(v);
      if (!history_.contains(p)) seeds_.push_back({active_text(route_of(space_, p)), "precision", p});
    }
  }
  if (space_.base.values.count("precision.default")) {
    const std::string fixed = space_.base.values.at("precision.default");
    auto is_node_precision = [](const Dimension& dim) {
      for (const std::string& k : dim.knobs)
        if (k.rfind("precision.", 0) != 0 || k == "precision.default" || k == "precision.calibration") return false;
      return !dim.knobs.empty();
    };
    std::vector<std::string> values;  // in the order the dimensions list them
    for (const Dimension& dim : space_.dims)
      if (is_node_precision(dim))
        for (const std::string& v : dim.values)
          if (v != "default" && v != fixed && std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
    for (const std::string& v : values) {
      Point p = default_point(space_);
      for (size_t d = 0; d < space_.dims.size(); ++d)
        if (is_node_precision(space_.dims[d]))
          if (auto it = std::find(space_.dims[d].values.begin(), space_.dims[d].values.end(), v);
              it != space_.dims[d].values.end())
            p[d] = static_cast<int>(it - space_.dims[d].values.begin());
      if (p != default_point(space_) && !history_.contains(p))
        seeds_.push_back({active_text(route_of(space_, p)), "precision", p});
    }
  }
  // The index of the first value of `dim` that one of its knobs lists as approximate, or -1.
  auto first_approximate = [&](const Dimension& dim) {
    for (size_t v = 0; v < dim.values.size(); ++v)
      for (const std::string& name : dim.knobs)
        if (const builder::Knob* k = knobs_.find(name);
            k && std::find(k->approximate.begin(), k->approximate.end(), dim.values[v]) != k->approximate.end())
          return static_cast<int>(v);
    return -1;
  };
  Point ap = default_point(space_);
  int approximate = 0;
  for (size_t d = 0; d < space_.dims.size(); ++d)
    if (const int v = first_approximate(space_.dims[d]); v >= 0) ap[d] = v, ++approximate;
  if (approximate > 0 && !history_.contains(ap)) seeds_.push_back({active_text(route_of(space_, ap)), "approximate", ap});
  if (opts_.seed_isolated && def_profile_.status == "ok" && isolated_.status == "ok") {
    const IsolatedSeed seed = isolated_seed(space_, knobs_, space_.base, def_profile_.tactics, isolated_.tactics);
    line("isolated selection differs from the default on " + std::to_string(seed.pinned) + " nodes");
    if (seed.pinned > 0) {
      seeds_.push_back({active_text(seed.exact), "isolated", std::nullopt});
      seeds_.push_back({active_text(route_of(space_, seed.grouped)), "isolated/grouped", seed.grouped});
    }
  }
}

}  // namespace tac::tuner
