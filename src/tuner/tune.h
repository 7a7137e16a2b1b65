// The tuning loop (DESIGN.md section 3 "The tuner"): strategy -> route -> evaluator (child
// process) -> database, with the accuracy gate, noise-aware acceptance, the budget, and the
// final interleaved default-vs-best comparison.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "builder/knobs.h"
#include "builder/plan.h"
#include "kernels/tactic.h"
#include "tuner/accuracy.h"
#include "tuner/evaluator.h"
#include "tuner/space.h"

namespace tac::tuner {

class Evaluators;  // tuner/dispatch.h

struct TuneOptions {
  std::string model_path;
  std::string strategy = "tpe";
  double budget_s = 600;        // wall time
  int64_t max_candidates = -1;  // evaluated candidates (resumed ones excluded); -1: no limit
  double max_build_s = -1;      // summed build time of evaluated candidates; -1: no limit
  Tolerance tolerance = Tolerance::default_fp32();
  std::string inputs_dir;       // test_data_set layout (input_K.pb [+ output_K.pb]); "" = random inputs
  std::string calibration_dir;  // int8 calibration inputs for the candidates ("": the builder's default)
  int threads = 1;
  kernels::Backend backend = kernels::Backend::cpu;  // where candidates are built, checked and timed
  std::string db_path = "tuning.db";
  std::string out_dir;          // best.plan, best.route, summary.json ("" = none)
  uint64_t seed = 0;
  std::vector<std::string> knob_globs;  // only knobs matching one of these (fnmatch); empty = all
  // Settings every candidate keeps (--route, e.g. "precision.default=fp16"): their knobs are not
  // searched, and the default route of the comparison is this route.
  builder::Route fixed;
  std::map<std::string, int64_t> dims;
  // Shape ranges (--shapes): candidates are built, checked and timed at the opt sizes; best.plan
  // carries the ranges and runs every size inside them (builder/plan.h, DimRange).
  builder::ShapeRanges ranges;
  size_t batch = 4;             // points asked from the strategy at a time
  EvalLimits limits;
  double cheap_seconds = 0.3;   // measurement of every candidate ...
  double careful_seconds = 1.0; // ... and of challengers and the final comparison
  int final_rounds = 3;         // A/B rounds of the final default-vs-best comparison
  bool planted_faults = false;  // search the planted-fault tactics too (tests of fault handling)
  // Group, then refine (random, coordinate, evolution and tpe only): after `refine_after` of the
  // budget, the `refine_groups` node groups carrying the most time in the incumbent are searched
  // per node.
  bool refine = true;
  double refine_after = 0.5;
  size_t refine_groups = 4;
  // Seed (random, coordinate, evolution and tpe only): right after the default, the engine a
  // classic profiling builder would pick (every tactic timed alone on its layer,
  // builder.selection=isolated) is evaluated as a whole engine, as exact per-node pins and as the
  // nearest point of the grouped space, so the search starts from the better of the two answers.
  bool seed_isolated = true;
  // Where candidates are evaluated: nullptr = in this process, one at a time; else a pool of
  // evaluators (the MPI worker ranks of a distributed tune, tuner/distributed.h), kept busy
  // asynchronously. The default's measurements and the final comparison run on its reference
  // evaluator; best.plan is built here.
  Evaluators* evaluators = nullptr;
};

struct TuneSummary {
  double default_ms = 0, best_ms = 0, speedup = 1;
  double speedup_low = 1, speedup_high = 1;  // min and max over the final A/B rounds
  int candidates = 0, failed = 0, rejected = 0, resumed = 0;
  std::string best_route;
  bool best_is_default = true;  // no candidate beat the default route (best_route is the default's)
  std::string best_metrics_json = "[]";
  double wall_s = 0, build_s = 0;
  std::string stop_reason;
  size_t dimensions = 0;
  uint64_t space_size = 0;
  size_t refined_knobs = 0;  // per-node knobs of the refinement phase (0: none)
  // Candidates of the search loop each evaluator evaluated, by MPI rank (0: this process); lost
  // ones included (recorded as crashed).
  std::map<int, int> candidates_by_rank;
  // With several evaluators: each one's time for the default route (one cheap measurement at the
  // start, all at once) over the reference evaluator's. Candidates' and rungs' times from rank r
  // are divided by rank_speed[r] before they are ranked (the acceptance test and the final
  // comparison are paired on one device and need no correction).
  std::map<int, double> rank_speed;
  // What the tuner concluded, in words (the report's headline says the same), the tolerance every
  // accepted candidate met, and warnings about the measurements (timings that drifted or varied
  // too much to trust; each also sent to the progress callback as a "warning: " line).
  std::string verdict;
  std::string tolerance;
  std::vector<std::string> warnings;
  // Where the wall time went: computing the reference outputs (and loading the model), and every
  // evaluation (candidates, re-measurements, inspections, the final comparison, saving the best):
  // their wall time, split into build, check and timing as the evaluator measured them; the rest
  // of it is the evaluator's own cost (process start, loading, transfers).
  struct Time {
    double reference_s = 0, evaluations_s = 0, build_s = 0, check_s = 0, measure_s = 0;
    int evaluations = 0;
  } time;
  // `time` in words: per evaluation and in total, the tuner's own time, candidates per minute.
  std::string time_text() const;
  std::string to_json() const;
};

// The search space of a knob space: one dimension per global knob with more than one value
// (threads excluded: it is fixed by the caller), and per-node tactic knobs grouped by their
// signature (Knob::group), values common to the group. Only knobs matching `globs` (fnmatch,
// empty = all) take part; a glob matching nothing is an error naming it. Knobs `fixed` sets are
// not searched: they are the space's base. builder.* knobs take part only when a glob names them;
// precision.* knobs when a glob names them or `with_precision` (the tune's tolerance is the
// user's, not the fp32 default, which rejects every lower precision).
Result<SearchSpace> make_search_space(const builder::KnobSpace& knobs, const std::vector<std::string>& globs,
                                      const builder::Route& fixed = {}, bool with_precision = false);

// The refinement space around `incumbent` (a route of `grouped`'s knobs): for the (at most
// `max_groups`) node groups of `grouped` that carry the most time by `node_ms` (ms per node
// name, from a profile of the incumbent), one dimension per node knob with all its values,
// defaulting to the incumbent's; every other knob stays as the incumbent sets it (the base).
Result<SearchSpace> make_refine_space(const SearchSpace& grouped, const builder::KnobSpace& knobs,
                                     const builder::Route& incumbent, const std::map<std::string, double>& node_ms,
                                     size_t max_groups);

// The isolated-selection seed: `exact` pins tactic.<node> to what isolated timing chose wherever
// that differs from the default build's choice (`fixed` kept); `grouped` is the point of `space`
// nearest to it: each tactic dimension takes the value most of its nodes have in `exact` (their
// default where not pinned; ties keep the default), every other dimension its default.
struct IsolatedSeed {
  builder::Route exact;
  Point grouped;
  size_t pinned = 0;  // nodes whose isolated choice differs from the default build's
};
IsolatedSeed isolated_seed(const SearchSpace& space, const builder::KnobSpace& knobs, const builder::Route& fixed,
                           const std::map<std::string, std::string>& default_tactics,
                           const std::map<std::string, std::string>& isolated_tactics);

// Fills sum.verdict (what the tuner kept and why, from sum's final comparison) and sum.warnings:
// the default's first measurement `first_default_ms` and its final one (sum.default_ms) more than
// 1.5x apart, its runs' coefficient of variation above 0.25, or the final rounds' speed-ups more
// than 1.5x apart. `same`: the best is the default; `unconfirmed` > 0: the final comparison's ratio
// that overturned the search's winner.
void describe_outcome(TuneSummary& sum, double first_default_ms, double default_cv, bool same, double unconfirmed,
                      int rounds);

// Durations: "90s", "10m", "1h", "1h30m", "45" (seconds). Errors name the text.
Result<double> parse_duration(const std::string& text);

// Progress lines start with "[tune] "; a line starting with "warning: " is a warning (a database
// row left out as unreadable), to show even where progress is not.
using Progress = std::function<void(const std::string& line)>;
// Stops early, as if its budget ran out, when interrupted (tuner/interrupt.h): the candidate
// running is killed and not recorded, the final comparison is skipped (or cut short), the outputs
// of what was measured are written and stop_reason says "interrupted (SIGINT)". Interrupted before
// the default route was measured, it writes nothing and returns an error saying so.
Result<TuneSummary> tune(const TuneOptions& opts, const Progress& progress);

// `tactician explain`: which knob changes carry the gain of the best recorded route, by ablation
// from the winner back toward the default. Each knob the winner sets is reverted alone and the
// result timed interleaved with the winner and the default (careful measurements in children).
struct KnobShare {
  std::string knob;      // "k=v" as the winner sets it
  double without_ms = 0; // the winner with this knob back at its default
  double share = 0;      // (without - best) / (default - best): this change's share of the gain
};
struct Explanation {
  std::string best_route;
  double default_ms = 0, best_ms = 0;
  std::vector<KnobShare> knobs;  // largest share first
  std::vector<std::string> warnings;  // database rows left out as unreadable (Database, validate_candidate)
};
// Uses the database's best `ok` record for this model on this device and tool version (the
// database opened read-only: it must exist); opts supplies the model, threads, data, limits and
// measurement settings.
Result<Explanation> explain(const TuneOptions& opts);

}  // namespace tac::tuner
