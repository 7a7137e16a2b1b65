#include "builder/knobs.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/json.h"

namespace tac::builder {

const char* scope_name(KnobScope s) {
  switch (s) {
    case KnobScope::global: return "global";
    case KnobScope::node: return "node";
    case KnobScope::fusion: return "fusion";
  }
  return "?";
}

void KnobSpace::add(Knob k) {
  auto it = index_.find(k.name);
  if (it != index_.end()) {
    knobs_[it->second] = std::move(k);
    return;
  }
  index_.emplace(k.name, knobs_.size());
  knobs_.push_back(std::move(k));
}

const Knob* KnobSpace::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &knobs_[it->second];
}

const char* searched_name(Searched s) {
  switch (s) {
    case Searched::by_default: return "by_default";
    case Searched::when_named: return "when_named";
    case Searched::with_user_tolerance: return "with_user_tolerance";
    case Searched::never: return "never";
  }
  return "?";
}

std::string KnobSpace::to_json() const {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Knob& k : knobs_) {
    nlohmann::ordered_json j = {{"name", k.name}, {"values", k.values},           {"default", k.default_value},
                                {"help", k.help}, {"scope", scope_name(k.scope)}, {"searched", searched_name(k.searched)}};
    if (!k.group.empty()) j["group"] = k.group;
    if (!k.value_precisions.empty()) j["conditions"] = k.value_precisions;
    list.push_back(std::move(j));
  }
  return dump_json(list, 2);
}

Result<Route> Route::parse(const std::string& text) {
  Route r;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string w;
    while (words >> w) {
      auto eq = w.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == w.size())
        return invalid_argument("route: '" + w + "' is not of the form knob=value");
      std::string k = w.substr(0, eq), v = w.substr(eq + 1);
      auto [it, fresh] = r.values.emplace(k, v);
      if (!fresh && it->second != v)
        return invalid_argument("route: knob '" + k + "' is set twice ('" + it->second + "' and '" + v + "')");
    }
  }
  return r;
}

std::string Route::to_string() const {
  std::string s;
  for (const auto& [k, v] : values) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

namespace {

// Levenshtein distance (insertions, deletions, substitutions).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

Status validate_route(const Route& route, const KnobSpace& space) {
  for (const auto& [k, v] : route.values) {
    const Knob* knob = space.find(k);
    if (!knob) {
      // Suggest the five knobs sharing the prefix before the first dot (the usual typo is in the
      // suffix) closest to the name by edit distance.
      const std::string prefix = k.substr(0, k.find('.') + 1);
      std::vector<std::pair<size_t, std::string>> like;
      for (const Knob& c : space.knobs())
        if (!prefix.empty() && c.name.rfind(prefix, 0) == 0) like.emplace_back(edit_distance(k, c.name), c.name);
      std::stable_sort(like.begin(), like.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      std::string near;
      for (size_t i = 0; i < like.size() && i < 5; ++i) near += (near.empty() ? "" : ", ") + like[i].second;
      return invalid_argument("route: unknown knob '" + k + "'" + (near.empty() ? "" : " (knobs like it: " + near + ")") +
                              "; `tactician knobs MODEL` lists them");
    }
    bool ok = false;
    for (const std::string& allowed : knob->values) ok |= allowed == v;
    if (!ok) {
      std::string list;
      for (const std::string& allowed : knob->values) list += (list.empty() ? "" : ", ") + allowed;
      return invalid_argument("route: knob '" + k + "' cannot be '" + v + "'; allowed: " + list);
    }
  }
  return Status::ok();
}

std::string node_precision(const Route& route, const KnobSpace& space, const std::string& node) {
  const Knob* pk = space.find("precision." + node);
  if (!pk) return "fp32";
  auto it = route.values.find(pk->name);
  std::string p = it == route.values.end() ? pk->default_value : it->second;
  if (p.empty() || p == "default") {
    it = route.values.find("precision.default");
    const Knob* dk = space.find("precision.default");
    p = it != route.values.end() ? it->second : dk ? dk->default_value : "fp32";
    // The default applies where the node can take it (int8 needs constant weights).
    if (std::find(pk->values.begin(), pk->values.end(), p) == pk->values.end()) p = "fp32";
  }
  return p;
}

Route active_route(const Route& route, const KnobSpace& space, std::vector<std::string>* inactive) {
  Route out;
  for (const auto& [k, v] : route.values) {
    const Knob* knob = space.find(k);
    if (knob) {
      if (auto cond = knob->value_precisions.find(v); cond != knob->value_precisions.end()) {
        const std::string node = k.substr(k.find('.') + 1);
        const std::string p = node_precision(route, space, node);
        // tf32 is fp32 data under a math mode (CUDA): the fp32 tactics apply.
        const std::string data = p == "tf32" ? "fp32" : p;
        if (std::find(cond->second.begin(), cond->second.end(), data) == cond->second.end()) {
          if (inactive) inactive->push_back(k + "=" + v + " (" + node + " computes in " + p + ")");
          continue;
        }
      }
    }
    out.values.emplace(k, v);
  }
  return out;
}

std::string RouteView::get(const std::string& name) const {
  const Knob* k = space_.find(name);
  if (!k) {
    if (std::find(undeclared_.begin(), undeclared_.end(), name) == undeclared_.end()) undeclared_.push_back(name);
    return std::string();
  }
  auto it = route_.values.find(name);
  return it != route_.values.end() ? it->second : k->default_value;
}

std::string RouteView::get_node(const char* family, const std::string& node) const {
  const std::string name = family + node;
  auto it = route_.values.find(name);
  if (it != route_.values.end()) return it->second;
  const Knob* k = space_.find(name);
  return k ? k->default_value : std::string();
}

Status RouteView::check_declared() const {
  if (undeclared_.empty()) return Status::ok();
  std::string names;
  for (const std::string& n : undeclared_) names += (names.empty() ? "'" : ", '") + n + "'";
  return internal_error("the builder read knobs its knob space does not declare: " + names);
}

int64_t RouteView::get_int(const std::string& name) const { return std::strtoll(get(name).c_str(), nullptr, 10); }

}  // namespace tac::builder
