// Knobs and routes (DESIGN.md section 2): every build decision is a declared, typed knob; a route
// assigns values to some of them, the rest take their defaults.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tactician/status.h"

namespace tac::builder {

enum class KnobScope { global, node, fusion };
const char* scope_name(KnobScope s);

// Whether the tuner searches a knob when --knobs does not name it: a field of the knob, set where
// it is declared (not a rule on its name).
enum class Searched {
  by_default,
  when_named,           // only when --knobs names it (builder.selection, builder.prune: the classic
                        // builder's failure modes the tuner exists to avoid)
  with_user_tolerance,  // also when the user gave the tolerance (precision.*: the fp32 default
                        // tolerance rejects every lower precision)
  never,                // fixed by the caller (threads)
};
const char* searched_name(Searched s);

struct Knob {
  std::string name;                 // "pass.fold_batchnorm", "tactic.conv_17", "threads"
  std::vector<std::string> values;  // the typed domain, spelled as text ("off","on"; "1","2"; tactic names)
  std::string default_value;        // the built-in heuristic
  std::string help;
  KnobScope scope = KnobScope::global;
  // For node knobs: the node's signature (op, input shapes, attributes). Nodes with equal
  // signatures are the same problem; the tuner first searches them as one group.
  std::string group = {};
  // For node knobs: the values worth searching, i.e. "auto" and the tactics that apply to the node
  // in the graph the default passes produce (`values` also holds tactics that only apply when a
  // route turns a fusion off). Empty: search `values`.
  std::vector<std::string> search_values = {};
  // Conditional values (tactic knobs of nodes with a precision knob): the precisions under which
  // a value applies. A tactic computing in bf16 applies only while its node computes in bf16, so
  // a route pinning it on an fp32 node pins nothing: the pin is inactive (see active_route).
  // A value absent here applies under every precision.
  std::map<std::string, std::vector<std::string>> value_precisions = {};
  // Values that compute an approximation of the node's op (kernels::Tactic::approximate):
  // searched, never a default; the tuner tries them together in one seed.
  std::vector<std::string> approximate = {};
  Searched searched = Searched::by_default;
};
// `k` with its search policy: space.add(searched(Searched::when_named, {...})).
inline Knob searched(Searched s, Knob k) {
  k.searched = s;
  return k;
}

class KnobSpace {
 public:
  void add(Knob k);
  const Knob* find(const std::string& name) const;
  const std::vector<Knob>& knobs() const { return knobs_; }
  // [{"name", "values", "default", "help", "scope", "searched"[, "group"][, "conditions"]}, ...],
  // two spaces per level
  std::string to_json() const;

 private:
  std::vector<Knob> knobs_;
  std::map<std::string, size_t> index_;
};

// An assignment of values to knobs. Text form: "k=v k2=v2" (whitespace or newlines between
// pairs, '#' starts a comment to the end of the line).
struct Route {
  std::map<std::string, std::string> values;

  static Result<Route> parse(const std::string& text);
  std::string to_string() const;  // canonical: sorted, space separated
  bool empty() const { return values.empty(); }
};

// Every knob of `route` exists in `space` and has a value in its domain; errors name the knob
// and list the allowed values.
Status validate_route(const Route& route, const KnobSpace& space);

// The precision node `node` computes in under `route`: precision.<node>, else precision.default
// where the node can take it, else fp32 (the rule of precision.cc's chosen_precisions, read from
// the knobs alone). Nodes without a precision knob compute in fp32.
std::string node_precision(const Route& route, const KnobSpace& space, const std::string& node);

// `route` without its inactive settings: conditional values (Knob::value_precisions) whose
// condition the route's precisions do not meet. Routes that differ only in inactive settings
// build the same engine; the builder builds the active route and the tuner keys candidates by
// it. `inactive` (optional) receives "knob=value (node computes in P)" per dropped setting.
Route active_route(const Route& route, const KnobSpace& space, std::vector<std::string>* inactive = nullptr);

// The global knobs' names, written once: knob_space declares each knob with its constant and the
// builder reads it through the same constant, so a misspelt name does not compile. Per-node knobs
// are a family prefix and the node's name; pass knobs are "pass." and the pass table's name.
namespace knob {
inline constexpr char kThreads[] = "threads";
inline constexpr char kSelection[] = "builder.selection";
inline constexpr char kPrune[] = "builder.prune";
inline constexpr char kPlanner[] = "memory.planner";
inline constexpr char kInplace[] = "memory.inplace";
inline constexpr char kConcatAlias[] = "memory.concat_alias";
inline constexpr char kViewAlias[] = "memory.view_alias";
inline constexpr char kPrecisionDefault[] = "precision.default";
inline constexpr char kCalibration[] = "precision.calibration";
inline constexpr char kCudaGraphs[] = "cuda.graphs";
inline constexpr char kCudaWorkspaceMb[] = "cuda.workspace_mb";
inline constexpr char kLayoutDefault[] = "layout.default";
inline constexpr char kTactic[] = "tactic.";        // tactic.<node>
inline constexpr char kPrecision[] = "precision.";  // precision.<node>
inline constexpr char kLayout[] = "layout.";        // layout.<node>
inline constexpr char kPass[] = "pass.";            // pass.<Pass::name>
}  // namespace knob

// Reading a route against its knob space: unset knobs give their default.
class RouteView {
 public:
  RouteView(const Route& r, const KnobSpace& s) : route_(r), space_(s) {}
  // A global or pass knob. Reading one the space does not declare is a bug (a removed or misspelt
  // name would silently read as ""): the name is recorded, and check_declared() reports it.
  std::string get(const std::string& name) const;
  bool on(const std::string& name) const { return get(name) == "on"; }
  int64_t get_int(const std::string& name) const;
  // A per-node knob (`family` knob::kTactic, kPrecision or kLayout): "" where the node has none.
  std::string get_node(const char* family, const std::string& node) const;
  // internal_error naming every undeclared knob read through get() so far (the builder calls it
  // after each build, so every test that builds checks every read).
  Status check_declared() const;

 private:
  const Route& route_;
  const KnobSpace& space_;
  mutable std::vector<std::string> undeclared_;
};

}  // namespace tac::builder
