#include "tuner/tune.h"

#include <fnmatch.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "builder/builder.h"
#include "core/json.h"
#include "io/onnx_import.h"
#include "io/tensor_io.h"
#include "io/test_case.h"
#include "kernels/tactic_check.h"
#include "reference/interpreter.h"
#include "runtime/measure.h"
#include "tuner/database.h"
#include "tuner/dispatch.h"
#include "tuner/halving.h"
#include "tuner/interrupt.h"
#include "tuner/report.h"
#include "tuner/strategy.h"

#ifndef TAC_VERSION
#define TAC_VERSION "dev"
#endif

namespace fs = std::filesystem;

namespace tac::tuner {

namespace {

bool matches(const std::vector<std::string>& globs, const std::string& name) {
  if (globs.empty()) return true;
  for (const std::string& g : globs)
    if (fnmatch(g.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

std::string fmt(double v, int prec = 3) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
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

std::string TuneSummary::to_json() const {
  std::string by_rank, speed;
  for (const auto& [rank, n] : candidates_by_rank)
    by_rank += (by_rank.empty() ? "\"" : ", \"") + std::to_string(rank) + "\": " + std::to_string(n);
  for (const auto& [rank, f] : rank_speed)
    speed += (speed.empty() ? "\"" : ", \"") + std::to_string(rank) + "\": " + fmt(f, 4);
  return "{\"default_ms\": " + fmt(default_ms, 6) + ", \"best_ms\": " + fmt(best_ms, 6) + ", \"speedup\": " +
         fmt(speedup, 4) + ", \"speedup_low\": " + fmt(speedup_low, 4) + ", \"speedup_high\": " + fmt(speedup_high, 4) +
         ", \"candidates\": " + std::to_string(candidates) + ", \"failed\": " + std::to_string(failed) +
         ", \"rejected\": " + std::to_string(rejected) + ", \"resumed\": " + std::to_string(resumed) +
         ", \"best_route\": " + json_quote(best_route) + ", \"accuracy\": " + best_metrics_json +
         ", \"wall_s\": " + fmt(wall_s, 1) + ", \"build_s\": " + fmt(build_s, 1) + ", \"stop_reason\": " +
         json_quote(stop_reason) + ", \"dimensions\": " + std::to_string(dimensions) + ", \"space_size\": " +
         std::to_string(space_size) + ", \"refined_knobs\": " + std::to_string(refined_knobs) +
         ", \"candidates_by_rank\": {" + by_rank + "}, \"rank_speed\": {" + speed + "}, \"verdict\": " +
         json_quote(verdict) + ", \"tolerance\": " + json_quote(tolerance) + ", \"warnings\": [" + [&] {
           std::string w;
           for (const std::string& s : warnings) w += (w.empty() ? "" : ", ") + json_quote(s);
           return w;
         }() + "]}";
}

namespace {

// Writes the tuner's reference data: the inputs and the expected outputs (given, or computed
// once with the reference interpreter).
Status prepare_reference(const ir::Model& m, const TuneOptions& opts, const std::string& dir,
                         std::map<std::string, int64_t>& dims) {
  std::vector<Datum> inputs, expected;
  if (!opts.inputs_dir.empty()) {
    TAC_ASSIGN_OR_RETURN(auto sets, io::load_data_sets(m, opts.inputs_dir));
    inputs = sets[0].inputs;
    expected = sets[0].outputs;
  } else {
    for (int v : m.graph.inputs) {
      const ir::ValueType& t = m.graph.values[static_cast<size_t>(v)].type;
      if (t.kind != ir::ValueKind::tensor || !t.has_shape || t.dtype == DType::undefined)
        return invalid_argument("input '" + m.graph.values[static_cast<size_t>(v)].name +
                                "' has no declared type and shape: give data with --inputs");
      Shape s;
      for (const ir::Dim& d : t.dims) {
        if (d.known()) s.push_back(d.value);
        else s.push_back(dims.count(d.symbol) ? dims[d.symbol] : 1);
      }
      Tensor x = kernels::random_tensor(t.dtype, s, 4242 + static_cast<uint64_t>(v));
      if (!dtype_is_float(t.dtype))  // ids and indices: small non-negative values
        for (int64_t i = 0; i < x.numel(); ++i) x.set_i64(i, std::abs(x.get_i64(i)));
      inputs.push_back(Datum(x));
    }
  }
  TAC_RETURN_IF_ERROR(ref::check_inputs(m.graph, inputs));
  builder::BuildOptions bound;  // symbolic dims follow the data
  bound.dims = dims;
  TAC_RETURN_IF_ERROR(builder::bind_dims(m.graph, inputs, bound));
  dims = bound.dims;
  if (expected.empty()) {
    TAC_ASSIGN_OR_RETURN(expected, ref::run_model(m, inputs));
  }
  if (std::error_code ec; !fs::create_directories(dir, ec) && ec)
    return io_error(dir + ": cannot create the tuner's data folder: " + ec.message());
  for (size_t k = 0; k < inputs.size(); ++k)
    TAC_RETURN_IF_ERROR(io::save_tensor_pb(inputs[k].tensor, "", dir + "/input_" + std::to_string(k) + ".pb"));
  for (size_t k = 0; k < expected.size(); ++k) {
    if (!expected[k].is_tensor()) return unsupported("the tuner compares tensor outputs only");
    TAC_RETURN_IF_ERROR(io::save_tensor_pb(expected[k].tensor, "", dir + "/expected_" + std::to_string(k) + ".pb"));
  }
  return Status::ok();
}

// What every child of a tune or explain run is asked, with its route and measuring time: the
// reference data and int8 calibration cache under `work`, the bound dims, the backend.
EvalRequest eval_request(const TuneOptions& opts, const std::string& work, const std::vector<std::string>& dim_flags,
                         const std::string& route_text, double seconds) {
  EvalRequest rq;
  rq.model_path = opts.model_path;
  rq.data_dir = work + "/data";
  rq.route = route_text;
  rq.tolerance = opts.tolerance.to_string();
  rq.dims = dim_flags;
  rq.min_seconds = seconds;
  rq.min_runs = 10;
  rq.planted_faults = opts.planted_faults;
  rq.calibration_dir = opts.calibration_dir;
  rq.calibration_cache = work + "/calibration";  // int8 ranges computed once, by the first int8 candidate
  rq.backend = kernels::backend_name(opts.backend);
  return rq;
}

// The point of a recorded route, or nullopt when the route sets knobs outside the space (or a
// group member differently from its group).
std::optional<Point> point_of(const SearchSpace& space, const builder::Route& r, const std::string& fixed_threads) {
  Point p = default_point(space);
  std::set<std::string> used;
  for (size_t d = 0; d < space.dims.size(); ++d) {
    const Dimension& dim = space.dims[d];
    std::optional<std::string> value;
    for (const std::string& k : dim.knobs) {
      auto it = r.values.find(k);
      std::string v = it == r.values.end() ? dim.values[static_cast<size_t>(dim.default_index)] : it->second;
      if (it != r.values.end()) used.insert(k);
      if (value && *value != v) return std::nullopt;
      value = v;
    }
    auto pos = std::find(dim.values.begin(), dim.values.end(), *value);
    if (pos == dim.values.end()) return std::nullopt;
    p[d] = static_cast<int>(pos - dim.values.begin());
  }
  for (const auto& [k, v] : r.values) {
    auto base = space.base.values.find(k);
    const bool fixed = (k == "threads" && v == fixed_threads) || (base != space.base.values.end() && base->second == v);
    if (!used.count(k) && !fixed) return std::nullopt;
  }
  for (const auto& [k, v] : space.base.values)  // a route without a fixed setting is another search's
    if (!r.values.count(k)) return std::nullopt;
  return p;
}

}  // namespace

namespace {

// A fresh folder of this user's alone under the system's temporary folder (mkdtemp): unique per
// call, also for several tunes at once in one process (the library API), where a name made of the
// pid was shared.
Result<std::string> make_temp_dir(const std::string& prefix) {
  std::error_code ec;
  const fs::path base = fs::temp_directory_path(ec);
  if (ec) return io_error("no temporary folder (TMPDIR): " + ec.message());
  std::string name = (base / (prefix + "XXXXXX")).string();
  if (!::mkdtemp(name.data())) return io_error(name + ": cannot create a temporary folder: " + std::strerror(errno));
  return name;
}

}  // namespace

// The summary's verdict in words, and warnings when the measurements cannot be trusted: the
// default route's first (cheap) measurement and its final (careful, interleaved) one disagree by
// more than kDrift, its runs vary by more than kMaxCv, or the final rounds' ratios spread widely.
// (A one-minute tune on a loaded machine once printed a default of 201 ms for a 3 ms engine.)
void describe_outcome(TuneSummary& sum, double first_default_ms, double default_cv, bool same, double unconfirmed,
                      int rounds) {
  constexpr double kDrift = 1.5, kMaxCv = 0.25, kSpread = 1.5;
  const std::string fix =
      "for trustworthy numbers, tune on an otherwise idle machine with --threads below its core count (and "
      "a longer --budget), then check with `tactician bench --compare`";
  if (first_default_ms > 0 && sum.default_ms > 0) {
    const double drift = std::max(first_default_ms / sum.default_ms, sum.default_ms / first_default_ms);
    if (drift > kDrift)
      sum.warnings.push_back("timings are unreliable: the default route measured " + fmt(first_default_ms) +
                             " ms at the start and " + fmt(sum.default_ms) + " ms in the final comparison (" +
                             fmt(drift, 2) + "x apart; the machine's speed changed during the tune); " + fix);
  }
  if (default_cv > kMaxCv)
    sum.warnings.push_back("timings are noisy: the default route's runs vary by " + fmt(100 * default_cv, 0) +
                           "% (coefficient of variation); " + fix);
  if (!same && sum.speedup_low > 0 && sum.speedup_high / sum.speedup_low > kSpread)
    sum.warnings.push_back("the final comparison's rounds disagree: speed-ups from " + fmt(sum.speedup_low, 3) + "x to " +
                           fmt(sum.speedup_high, 3) + "x; " + fix);
  const std::string rounds_text = std::to_string(std::max(1, rounds)) + " interleaved A/B rounds";
  if (unconfirmed > 0)
    sum.verdict = "kept the default route: the search's best did not beat it in the final comparison (" +
                  fmt(unconfirmed, 3) + "x the default over " + rounds_text + ")";
  else if (same)
    sum.verdict = "kept the default route (" + fmt(sum.default_ms) + " ms): no candidate beat it by more than the "
                  "measured noise";
  else
    sum.verdict = "kept " + sum.best_route + ": " + fmt(sum.speedup, 3) + "x the default's speed over " + rounds_text +
                  " (" + fmt(sum.speedup_low, 3) + "x to " + fmt(sum.speedup_high, 3) + "x), " + fmt(sum.best_ms) +
                  " ms against " + fmt(sum.default_ms) + " ms";
}

Result<TuneSummary> tune(const TuneOptions& opts, const Progress& progress) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  TuneSummary sum;
  TAC_ASSIGN_OR_RETURN(ir::Model model, io::load_model(opts.model_path));
  // Open the database first (creating its folder, as --out does): a locked or foreign file is
  // refused before any work is done.
  if (fs::path parent = fs::path(opts.db_path).parent_path(); !parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
  }
  TAC_ASSIGN_OR_RETURN(auto db, Database::open(opts.db_path));
  std::map<std::string, int64_t> dims = opts.dims;
  if (!opts.ranges.empty()) {  // tuned at the opt sizes
    builder::BuildOptions at_opt;
    at_opt.dims = dims;
    at_opt.ranges = opts.ranges;
    TAC_RETURN_IF_ERROR(builder::apply_shape_ranges(model, at_opt));
    dims = at_opt.dims;
  }
  std::string work = opts.out_dir;
  if (work.empty()) {
    TAC_ASSIGN_OR_RETURN(work, make_temp_dir("tactician-tune-"));
  }
  // Without --out the reference data lives in a temporary folder, removed however tune() returns.
  struct RemoveOnExit {
    std::string dir;
    ~RemoveOnExit() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } cleanup{opts.out_dir.empty() ? work : std::string()};
  TAC_RETURN_IF_ERROR(prepare_reference(model, opts, work + "/data", dims));
  // An interrupt (tuner/interrupt.h) stops the tune as if its budget ran out; before the default
  // route is measured there is nothing to write.
  auto interrupted = [] { return interrupt_signal() != 0; };
  auto nothing_measured = [] {
    return invalid_argument(interrupt_reason() + " before the default route was measured: nothing written");
  };
  if (interrupted()) return nothing_measured();
  const double setup_s = elapsed();  // loading the model and computing the reference outputs
  std::error_code ec;
  fs::remove_all(work + "/calibration", ec);  // the cache lives for one run: the data may have changed since
  builder::BuildOptions bopts;
  bopts.dims = dims;
  bopts.planted_faults = opts.planted_faults;
  bopts.backend = opts.backend;
  TAC_ASSIGN_OR_RETURN(builder::KnobSpace knobs, builder::knob_space(model, bopts));
  const std::string threads = std::to_string(opts.threads);
  if (const builder::Knob* t = knobs.find("threads");
      !t || std::find(t->values.begin(), t->values.end(), threads) == t->values.end())
    return invalid_argument("--threads " + threads + " is not allowed on this machine");
  if (opts.fixed.values.count("threads") && opts.fixed.values.at("threads") != threads)
    return invalid_argument("--route sets threads=" + opts.fixed.values.at("threads") + ", --threads " + threads);
  if (Status st = builder::validate_route(opts.fixed, knobs); !st.is_ok())
    return invalid_argument("--route: " + st.message());
  const bool user_tolerance = opts.tolerance.to_string() != Tolerance::default_fp32().to_string();
  TAC_ASSIGN_OR_RETURN(SearchSpace space, make_search_space(knobs, opts.knob_globs, opts.fixed, user_tolerance));
  sum.dimensions = space.dims.size();
  sum.space_size = space.size();
  TAC_ASSIGN_OR_RETURN(const std::string device, builder::device_fingerprint(opts.backend));
  const std::string version = TAC_VERSION;

  std::vector<std::string> dim_flags;
  for (const auto& [k, v] : dims) dim_flags.push_back(k + "=" + std::to_string(v));
  auto request = [&](const std::string& route_text, double seconds) {
    return eval_request(opts, work, dim_flags, route_text, seconds);
  };
  auto with_threads = [&](builder::Route r) {
    r.values["threads"] = threads;
    return r.to_string();
  };

  // Resume: what this model/device/version already has in the database. Rows are input: a row
  // that cannot be read or makes no sense (the file was edited or damaged) is left out with a
  // warning naming it, not trusted and not fatal: its route is simply evaluated again if the
  // search proposes it, and the fresh record (the latest row of a route wins) replaces it. Failing
  // the whole tune would leave the user to repair an SQLite file by hand or lose every good row.
  History history;
  std::map<std::string, CandidateRecord> by_route;
  std::vector<CandidateRecord> previous;
  {
    std::vector<std::string> skipped;
    TAC_ASSIGN_OR_RETURN(auto rows, db->all(model.hash, device, version, &skipped));
    previous = usable_candidates(std::move(rows), opts.db_path, skipped);
    for (const std::string& why : skipped)
      if (progress) progress("warning: " + why + "; row ignored (its route is evaluated again if proposed)");
  }
  for (const CandidateRecord& rec : previous) {
    by_route[rec.route] = rec;
    auto route = builder::Route::parse(rec.route);
    if (!route) continue;
    auto p = point_of(space, *route, threads);
    if (!p || history.contains(*p)) continue;
    history.trials.push_back({*p, rec.status == "ok" ? rec.median_ms : INFINITY});
    ++sum.resumed;
  }

  // Where the children run: this process, one at a time, or the evaluator ranks of an MPI job
  // (tuner/distributed.h), several at a time. Either way the loop below is the same: it keeps
  // every idle evaluator busy and handles results in the order they come back.
  std::unique_ptr<Evaluators> own_pool;
  Evaluators* pool = opts.evaluators;
  if (!pool) {
    own_pool = local_evaluators();
    pool = own_pool.get();
  }
  TAC_RETURN_IF_ERROR(pool->share_data(work + "/data"));
  // A search candidate's time limit: --timeout, but at most 10x what evaluating the default route
  // took (30 s at least), set once that is measured. A point whose engine is far slower (a host
  // fallback on every GEMM, say) is known to lose long before it finishes timing, and on a large
  // model one such point could otherwise hold an evaluator for minutes, past the whole budget.
  double candidate_timeout_s = opts.limits.timeout_s;
  auto job_of = [&](std::vector<EvalRequest> requests, bool candidate = false) {
    EvalJob job;
    job.requests = std::move(requests);
    job.limits = opts.limits;
    if (candidate) job.limits.timeout_s = candidate_timeout_s;
    return job;
  };
  // One evaluation on the reference evaluator, nothing else in flight (before and after the search).
  std::string reference_evaluator;  // who ran the last eval_now
  // timeout_s > 0: a tighter limit than the job's (the inspections before the search).
  auto eval_now = [&](const EvalRequest& rq, double timeout_s = 0) {
    EvalJob job = job_of({rq});
    if (timeout_s > 0) job.limits.timeout_s = std::min(job.limits.timeout_s, timeout_s);
    return run_on_reference(*pool, job, &reference_evaluator)[0];
  };

  // Records a candidate's evaluation in the database and the counters.
  auto record_candidate = [&](const std::string& text, const std::string& who, const EvalResult& r,
                              const std::string& evaluator) -> Result<CandidateRecord> {
    CandidateRecord rec;
    rec.model_hash = model.hash;
    rec.device = device;
    rec.tool_version = version;
    rec.route = text;
    rec.status = r.status;
    rec.reason = r.reason;
    rec.strategy = who;
    rec.seed = opts.seed;
    rec.build_ms = r.build_ms;
    rec.metrics_json = r.metrics_json;
    rec.median_ms = r.median_ms;
    rec.p10_ms = r.p10_ms;
    rec.p90_ms = r.p90_ms;
    rec.cv = r.cv;
    rec.runs = r.runs;
    rec.threads = opts.threads;
    rec.evaluator = evaluator;
    rec.unix_time = static_cast<double>(std::chrono::duration_cast<std::chrono::seconds>(
                                            std::chrono::system_clock::now().time_since_epoch()).count());
    TAC_ASSIGN_OR_RETURN(rec.id, db->insert(rec));
    by_route[text] = rec;
    ++sum.candidates;
    sum.build_s += r.build_ms / 1e3;
    if (r.status == "rejected") ++sum.rejected;
    else if (r.status != "ok") ++sum.failed;
    return rec;
  };
  // The active route of a route, as recorded (keyed by the active route: routes differing only in
  // inactive settings, such as a tactic pinned on a node another knob lowers to bf16, build the
  // same engine and are evaluated once).
  auto active_text = [&](const builder::Route& route) { return with_threads(builder::active_route(route, knobs)); };
  // Evaluates a route now unless the database has it; records it and returns the record.
  auto evaluate_route = [&](const builder::Route& route, const std::string& who) -> Result<CandidateRecord> {
    const std::string text = active_text(route);
    if (auto it = by_route.find(text); it != by_route.end()) return it->second;
    const EvalResult r = eval_now(request(text, opts.cheap_seconds));
    if (r.status == "interrupted") return nothing_measured();  // used for the default route only
    return record_candidate(text, who, r, reference_evaluator);
  };
  auto objective = [](const CandidateRecord& rec) { return rec.status == "ok" ? rec.median_ms : INFINITY; };
  // Evaluates the point `p` of `sp` now and adds it to `hist` (the history of the strategy searching `sp`).
  auto evaluate = [&](const SearchSpace& sp, History& hist, const Point& p,
                      const std::string& who) -> Result<CandidateRecord> {
    TAC_ASSIGN_OR_RETURN(CandidateRecord rec, evaluate_route(route_of(sp, p), who));
    if (!hist.contains(p)) hist.trials.push_back({p, objective(rec)});
    return rec;
  };

  auto now_unix = [] {
    return static_cast<double>(
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  };
  auto remeasure_request = [&](const std::string& route, double seconds) {
    EvalRequest rq = request(route, seconds);
    rq.check = false;
    return rq;
  };
  auto record = [&](int64_t id, const std::string& kind, const EvalResult& r) -> Status {
    Measurement m;
    m.candidate_id = id;
    m.kind = kind;
    m.median_ms = r.median_ms;
    m.cv = r.cv;
    m.runs = r.runs;
    m.unix_time = now_unix();
    return db->add_measurement(m);
  };

  // Successive halving, asynchronous (ASHA): rung 0 is the cheap measurement every candidate
  // gets; a candidate in the top 1/kEta of rung 0 that is within the noise of the incumbent (or
  // clearly faster than it) is promoted to rung 1, a kEta times longer measurement; the same rule
  // promotes from rung 1 to rung 2, the acceptance test: careful measurements interleaved with
  // the incumbent, A/B/A/B, where the challenger wins only by more than the measured noise.
  constexpr int kEta = 3, kAccept = 2, kAcceptRounds = 4;
  struct Entry {
    CandidateRecord rec;
    std::vector<double> score;  // measured median per rung reached
    bool busy = false;          // a re-measurement of it is in flight
  };
  std::vector<Entry> entries;  // successful candidates, this run's and resumed ones
  std::map<std::string, size_t> entry_of;
  auto add_entry = [&](const CandidateRecord& rec) {
    if (rec.status != "ok" || entry_of.count(rec.route)) return;
    entry_of[rec.route] = entries.size();
    entries.push_back({rec, {rec.median_ms}});
  };
  const double rung1_seconds = std::min(opts.careful_seconds, opts.cheap_seconds * kEta);

  // The default route first: it is the baseline and the answer if nothing beats it.
  const Point p0 = default_point(space);
  TAC_ASSIGN_OR_RETURN(CandidateRecord def, evaluate(space, history, p0, "default"));
  if (def.status != "ok")
    return Status(def.status == "rejected" ? ErrorKind::invalid_argument : ErrorKind::unsupported,
                  "the default route did not pass (" + def.status + ": " + def.reason + ")");
  for (const auto& [text, rec] : by_route)
    if (auto route = builder::Route::parse(rec.route); route && point_of(space, *route, threads)) add_entry(rec);
  add_entry(def);
  // The incumbent starts as the default, measured at rung 1 too, so that promotions to rung 1
  // compare like with like; a better resumed candidate has to win its acceptance test again.
  size_t incumbent = entry_of.at(def.route);
  if (!interrupted()) {
    EvalResult r = eval_now(remeasure_request(def.route, rung1_seconds));
    if (r.status != "interrupted") {  // an interrupted measurement is not recorded; the search will not start
      if (r.status != "ok") return internal_error("re-measuring the default route failed: " + r.reason);
      TAC_RETURN_IF_ERROR(record(def.id, "rung1", r));
      entries[incumbent].score.push_back(r.median_ms);
      candidate_timeout_s = std::min(opts.limits.timeout_s, std::max(30.0, 10.0 * r.wall_s));
    }
  }
  // Several evaluators (MPI ranks, one GPU or core set each) need not run at one speed: each
  // times the default once, all at the same time, and their cheap and rung times are scaled to
  // the reference evaluator's before they are ranked.
  std::map<int, double> speed;  // by rank; absent: 1
  if (pool->live() > 1 && !interrupted()) {
    for (uint64_t t = 1; pool->idle() > 0; ++t) TAC_RETURN_IF_ERROR(pool->submit(t, job_of({remeasure_request(def.route, opts.cheap_seconds)}), false));
    std::map<int, double> ms;
    double ref_ms = 0;
    while (std::optional<JobDone> d = pool->next()) {
      if (d->lost || d->results.empty() || d->results[0].status != "ok") continue;
      ms[d->rank] = d->results[0].median_ms;
      if (d->evaluator == reference_evaluator) ref_ms = d->results[0].median_ms;
    }
    if (ref_ms > 0)
      for (const auto& [rank, m] : ms) speed[rank] = m / ref_ms;
    sum.rank_speed = speed;
  }
  auto speed_of = [&](int rank) {
    auto it = speed.find(rank);
    return it == speed.end() ? 1.0 : it->second;
  };
  // Latency of the incumbent in the units of the default's cheap measurement (for the progress
  // line and the strategies' scale).
  double incumbent_ms = def.median_ms;
  if (elapsed() >= opts.budget_s && !interrupted())
    return invalid_argument("--budget " + fmt(opts.budget_s, 0) + " s is too small: loading the model and computing the "
                            "reference outputs took " + fmt(setup_s, 1) + " s and evaluating the default route " +
                            fmt(elapsed() - setup_s, 1) + " s (give at least several times their sum)");

  int candidates_in_flight = 0;  // dispatched, not yet recorded: counted against the candidate budget
  auto budget_left = [&]() -> std::string {
    if (interrupted()) return interrupt_reason();
    if (elapsed() >= opts.budget_s) return "time budget";
    if (opts.max_candidates >= 0 && sum.candidates + candidates_in_flight >= opts.max_candidates) return "candidate budget";
    if (opts.max_build_s >= 0 && sum.build_s >= opts.max_build_s) return "build-time budget";
    return {};
  };
  int promoted[kAccept + 1] = {0, 0, 0};
  auto line = [&](const std::string& what) {
    if (!progress) return;
    progress("[tune] " + std::to_string(sum.candidates) + " evaluated (" + std::to_string(sum.failed) + " failed, " +
             std::to_string(sum.rejected) + " rejected, " + std::to_string(sum.resumed) + " resumed; promoted " +
             std::to_string(promoted[1]) + "/" + std::to_string(promoted[2]) + ")  best " + fmt(incumbent_ms) +
             " ms = " + fmt(def.median_ms / incumbent_ms, 2) + "x default  " +
             fmt(std::max(0.0, opts.budget_s - elapsed()), 0) + " s left  " + what);
  };
  line("default " + fmt(def.median_ms) + " ms");
  // The default engine's profile: node times weigh the dimensions (local search redraws those
  // carrying the time more often), and its tactics are what the isolated seed is compared with.
  const std::set<std::string> searching = {"random", "coordinate", "evolution", "tpe"};
  // A build without check or timing: the child reports its tactics and costs (and node times).
  auto inspect_request = [&](const std::string& route, bool with_profile) {
    EvalRequest rq = request(route, 0);
    rq.check = rq.measure = false;
    rq.profile = with_profile;
    return rq;
  };
  EvalResult def_profile, isolated;
  // The inspections below only order the search: each may take a share of the budget left, no
  // more (on a large model the isolated selection times every tactic of every node: on the GPU,
  // BERT-base's GEMMs and their cuBLASLt algorithms), and the search goes on without it.
  auto inspection_limit = [&](double share) { return std::max(10.0, share * (opts.budget_s - elapsed())); };
  if (searching.count(opts.strategy) && !interrupted()) {
    def_profile = eval_now(inspect_request(def.route, true), inspection_limit(0.25));
    if (def_profile.status == "ok") weigh_by_time(space, def_profile.node_ms);
    else if (def_profile.status != "interrupted") line("profiling the default failed (" + def_profile.reason + "): dimensions unweighted");
    // The classic profiling builder's answer: every applicable tactic timed alone on its layer.
    // Its times become the tactic dimensions' value priors, its choice the seed (below).
    builder::Route iso = space.base;
    iso.values["builder.selection"] = "isolated";
    isolated = eval_now(inspect_request(with_threads(iso), false), inspection_limit(0.4));
    if (isolated.status == "ok") set_value_priors(space, isolated.costs);
    else if (isolated.status != "interrupted") line("isolated selection failed (" + isolated.reason + "): no value priors, no seed");
  }
  TAC_ASSIGN_OR_RETURN(auto strategy, make_strategy(opts.strategy, space, opts.seed));

  auto next = [&]() {
    std::vector<std::vector<double>> scores;
    std::vector<bool> busy;
    for (const Entry& e : entries) {
      scores.push_back(e.score);
      busy.push_back(e.busy);
    }
    // Promotion only decides who is re-measured: the incumbent's per-run cv, bounded (a few
    // interrupted runs must not make "within the noise" mean "within 2x").
    return next_promotion(scores, incumbent, kEta, kAccept, std::clamp(entries[incumbent].rec.cv, 0.02, 0.10), busy);
  };

  // Group, then refine (DESIGN.md section 3, "Structure of the search space"): the strategy first
  // searches the space where same-signature nodes share one knob; once `refine_after` of the
  // budget is spent (or that space is exhausted), the incumbent is profiled and the groups that
  // carry the most time are split into one knob per node, searched by a fresh instance of the
  // same strategy around the incumbent. Profiles order the work; the verdict stays end to end.
  bool can_refine = opts.refine && searching.count(opts.strategy) &&
                    std::any_of(space.dims.begin(), space.dims.end(), [](const Dimension& d) { return d.knobs.size() > 1; });
  const SearchSpace* cur_space = &space;
  History* cur_history = &history;
  Strategy* cur = strategy.get();
  std::string who = opts.strategy;
  SearchSpace refined;
  History refined_history;
  std::unique_ptr<Strategy> refiner;
  auto spent = [&] {
    double f = elapsed() / opts.budget_s;
    if (opts.max_candidates > 0) f = std::max(f, static_cast<double>(sum.candidates) / static_cast<double>(opts.max_candidates));
    if (opts.max_build_s > 0) f = std::max(f, sum.build_s / opts.max_build_s);
    return f;
  };
  std::deque<Point> proposals;  // proposed by `cur`, not yet dispatched
  bool exhausted = false;       // `cur` has nothing left to propose
  // With the incumbent's profile (`prof`, of route `inc_text`): the refinement space and its strategy.
  auto start_refining = [&](const EvalResult& prof, const std::string& inc_text) -> Status {
    if (prof.status != "ok") {
      line("refinement skipped: profiling the incumbent failed (" + prof.reason + ")");
      return Status::ok();
    }
    TAC_ASSIGN_OR_RETURN(builder::Route inc_route, builder::Route::parse(inc_text));
    inc_route.values.erase("threads");
    TAC_ASSIGN_OR_RETURN(refined, make_refine_space(space, knobs, inc_route, prof.node_ms, opts.refine_groups));
    if (refined.dims.empty()) return Status::ok();
    weigh_by_time(refined, prof.node_ms);
    if (isolated.status == "ok") set_value_priors(refined, isolated.costs);
    TAC_ASSIGN_OR_RETURN(refiner, make_strategy(opts.strategy, refined, opts.seed + 1));
    cur_space = &refined;
    cur_history = &refined_history;
    cur = refiner.get();
    who = opts.strategy + "/refine";
    proposals.clear();
    exhausted = false;
    sum.refined_knobs = refined.dims.size();
    line("refining per node: " + std::to_string(refined.dims.size()) + " knobs of the groups carrying the most time");
    return Status::ok();
  };

  // The jobs in flight, by ticket. Rank 0 (or the single process) keeps every idle evaluator
  // busy: whenever one is idle it gets the most urgent work, in this order: a promotion (a
  // re-measurement deciding the incumbent), the isolated seed, the incumbent's profile when
  // refinement is due, the next point the strategy proposed. Results are handled in the order
  // they come back, so a free evaluator never waits for the slowest. With one evaluator this is
  // the single-process tuner's order exactly.
  enum class JobKind { candidate, rung, accept, profile };
  struct InFlight {
    JobKind kind = JobKind::candidate;
    std::string route;  // candidate: the active route text; profile: the incumbent's route
    std::string who;
    size_t entry = 0, incumbent_at = 0;  // rung, accept: the entry measured, the incumbent when dispatched
    int rung = 0;
  };
  std::map<uint64_t, InFlight> inflight;
  uint64_t next_ticket = 1;
  struct Waiter {
    History* hist;
    Point point;
  };
  std::map<std::string, std::vector<Waiter>> waiting;  // candidate route in flight -> the points that map to it
  std::set<std::pair<const History*, Point>> points_in_flight;
  bool refine_pending = false;
  auto submit = [&](InFlight f, std::vector<EvalRequest> requests) -> Status {
    const uint64_t t = next_ticket++;
    const bool candidate = f.kind == JobKind::candidate;
    if (candidate) ++candidates_in_flight;
    inflight[t] = std::move(f);
    return pool->submit(t, job_of(std::move(requests), candidate), false);
  };
  // Dispatches the evaluation of a route (and of the point `p` of `hist`'s space mapping to it),
  // unless the database has it or it is in flight already.
  auto dispatch_route = [&](const std::string& text, const std::string& by, History* hist,
                            const std::optional<Point>& p) -> Status {
    if (auto it = by_route.find(text); it != by_route.end()) {
      if (hist && p && !hist->contains(*p)) hist->trials.push_back({*p, objective(it->second)});
      add_entry(it->second);
      return Status::ok();
    }
    const bool running = waiting.count(text) > 0;
    std::vector<Waiter>& w = waiting[text];
    if (hist && p) {
      w.push_back({hist, *p});
      points_in_flight.insert({hist, *p});
    }
    if (running) return Status::ok();
    InFlight f;
    f.kind = JobKind::candidate;
    f.route = text;
    f.who = by;
    return submit(std::move(f), {request(text, opts.cheap_seconds)});
  };
  auto dispatch_promotion = [&](size_t i, int rung) -> Status {
    ++promoted[rung];
    entries[i].busy = true;
    InFlight f;
    f.kind = rung < kAccept ? JobKind::rung : JobKind::accept;
    f.entry = i;
    f.rung = rung;
    f.incumbent_at = incumbent;
    if (rung < kAccept) return submit(std::move(f), {remeasure_request(entries[i].rec.route, rung1_seconds)});
    // The acceptance test: incumbent and challenger built in one child and timed there in
    // alternating blocks, 4 rounds (paired: a slow spell of the machine falls on both; separate
    // children per side disagreed by up to 30% on a shared 2-core VM).
    EvalRequest a = remeasure_request(entries[incumbent].rec.route, 2 * opts.careful_seconds);
    a.compare_route = entries[i].rec.route;
    a.compare_rounds = kAcceptRounds;
    return submit(std::move(f), {a});
  };
  auto handle = [&](JobDone& d) -> Status {
    auto it = inflight.find(d.ticket);
    if (it == inflight.end()) return internal_error("a result for an unknown job came back");
    InFlight f = std::move(it->second);
    inflight.erase(it);
    if (d.lost) line(d.results.empty() ? std::string("an evaluator was lost") : d.results[0].reason);
    // An interrupted job measured nothing: nothing is recorded (a resume evaluates the candidate
    // again), and the search is stopping (budget_left).
    const bool cut = std::any_of(d.results.begin(), d.results.end(), [](const EvalResult& r) { return r.status == "interrupted"; });
    if (cut) {
      if (f.kind == JobKind::candidate) {
        --candidates_in_flight;
        for (const Waiter& w : waiting[f.route]) points_in_flight.erase({w.hist, w.point});
        waiting.erase(f.route);
      } else if (f.kind == JobKind::profile) {
        refine_pending = false;
      } else {
        entries[f.entry].busy = false;
      }
      return Status::ok();
    }
    if (f.kind == JobKind::candidate) {
      --candidates_in_flight;
      ++sum.candidates_by_rank[d.rank];
      TAC_ASSIGN_OR_RETURN(CandidateRecord rec, record_candidate(f.route, f.who, d.results.at(0), d.evaluator));
      rec.median_ms /= speed_of(d.rank);  // ranked in the reference evaluator's units (the database keeps the raw time)
      by_route[f.route] = rec;
      for (const Waiter& w : waiting[f.route]) {
        if (!w.hist->contains(w.point)) w.hist->trials.push_back({w.point, objective(rec)});
        points_in_flight.erase({w.hist, w.point});
      }
      waiting.erase(f.route);
      add_entry(rec);
      line(f.who.rfind("isolated", 0) == 0 || f.who == "approximate" || f.who == "precision"
               ? f.who + " seed: " + rec.status + " " + fmt(rec.median_ms) + " ms" : "");
      return Status::ok();
    }
    if (f.kind == JobKind::profile) {
      refine_pending = false;
      return start_refining(d.results.at(0), f.route);
    }
    Entry& e = entries[f.entry];
    e.busy = false;
    if (f.kind == JobKind::rung) {
      const EvalResult& r = d.results.at(0);
      TAC_RETURN_IF_ERROR(record(e.rec.id, "rung" + std::to_string(f.rung), r));
      e.score.push_back(r.status == "ok" ? r.median_ms / speed_of(d.rank) : INFINITY);
      return Status::ok();
    }
    Entry& inc = entries[f.incumbent_at];
    const EvalResult& r = d.results.at(0);
    EvalResult rc = r;  // the challenger's side of the paired measurement
    rc.median_ms = r.compare_median_ms;
    TAC_RETURN_IF_ERROR(record(inc.rec.id, "incumbent", r));
    TAC_RETURN_IF_ERROR(record(e.rec.id, "accept", rc));
    if (r.status != "ok") {
      e.score.push_back(INFINITY);
      return Status::ok();
    }
    // Another challenger won while this test ran: this one stays on its rung, to be tested
    // against the new incumbent.
    if (f.incumbent_at != incumbent) return Status::ok();
    const double mi = r.median_ms, mc = r.compare_median_ms;
    e.score.push_back(mc / speed_of(d.rank));
    // The challenger wins when it is faster in every round and by more than the rounds' own
    // noise (halving.h challenger_wins): the paired rounds are the measurement being judged, so
    // their spread is the noise, not the per-run spread of an earlier cheap measurement (a few
    // interrupted runs gave a cv of 0.5 to 2.4 on a shared 2-core machine and blocked every
    // challenger, a 1.74x faster one included).
    if (challenger_wins(r.paired_low, r.paired_ratio, r.paired_noise)) {
      incumbent_ms = mc * (incumbent_ms / mi);
      incumbent = f.entry;
      line("new best: " + (e.rec.route.empty() ? std::string("(default)") : e.rec.route));
    }
    return Status::ok();
  };

  // The isolated-selection seed: the tactics a profiling builder picks by timing each alone,
  // judged here as a whole engine (exact per-node pins, and the nearest grouped point, which the
  // strategy then learns from). A failure of the seed's builds only skips it.
  struct Seed {
    std::string route, who;
    std::optional<Point> point;
  };
  std::deque<Seed> seeds;
  // The precision seeds: precision.default at each of its other values (bf16, int8 on the CPU;
  // fp16, bf16, tf32 on CUDA), everything else at the default. A whole engine in each precision
  // answers first whether it passes the tolerance at all and what it gains; per-node precision
  // (the precision.<node> dimensions) is then the search's to refine.
  if (searching.count(opts.strategy) && budget_left().empty())
    for (size_t d = 0; d < space.dims.size(); ++d) {
      if (space.dims[d].name != "precision.default") continue;
      for (size_t v = 0; v < space.dims[d].values.size(); ++v) {
        Point p = default_point(space);
        if (static_cast<int>(v) == p[d]) continue;
        p[d] = static_cast<int>(v);
        if (!history.contains(p)) seeds.push_back({active_text(route_of(space, p)), "precision", p});
      }
    }
  // The approximate seed: every dimension that offers an approximate tactic (cuBLASLt's tanh GELU
  // for the erf GELU) at its first such value, the rest at the default. One candidate answers
  // whether the approximations pass the tolerance at all and what they gain together; the
  // strategy learns from it as from any point.
  if (searching.count(opts.strategy) && budget_left().empty()) {
    // The index of the first value of `dim` that one of its knobs lists as approximate, or -1.
    auto first_approximate = [&](const Dimension& dim) {
      for (size_t v = 0; v < dim.values.size(); ++v)
        for (const std::string& name : dim.knobs)
          if (const builder::Knob* k = knobs.find(name);
              k && std::find(k->approximate.begin(), k->approximate.end(), dim.values[v]) != k->approximate.end())
            return static_cast<int>(v);
      return -1;
    };
    Point ap = default_point(space);
    int approximate = 0;
    for (size_t d = 0; d < space.dims.size(); ++d)
      if (const int v = first_approximate(space.dims[d]); v >= 0) ap[d] = v, ++approximate;
    if (approximate > 0 && !history.contains(ap)) seeds.push_back({active_text(route_of(space, ap)), "approximate", ap});
  }
  if (opts.seed_isolated && def_profile.status == "ok" && isolated.status == "ok" && budget_left().empty()) {
    const IsolatedSeed seed = isolated_seed(space, knobs, space.base, def_profile.tactics, isolated.tactics);
    line("isolated selection differs from the default on " + std::to_string(seed.pinned) + " nodes");
    if (seed.pinned > 0) {
      seeds.push_back({active_text(seed.exact), "isolated", std::nullopt});
      seeds.push_back({active_text(route_of(space, seed.grouped)), "isolated/grouped", seed.grouped});
    }
  }

  while (true) {
    // Fill every idle evaluator.
    while (pool->idle() > 0) {
      if (elapsed() < opts.budget_s && !interrupted())
        if (auto up = next()) {
          TAC_RETURN_IF_ERROR(dispatch_promotion(up->first, up->second));
          continue;
        }
      if (!budget_left().empty()) break;
      if (!seeds.empty()) {
        Seed s = seeds.front();
        seeds.pop_front();
        TAC_RETURN_IF_ERROR(dispatch_route(s.route, s.who, s.point ? &history : nullptr, s.point));
        continue;
      }
      if (can_refine && (spent() >= opts.refine_after || exhausted)) {
        can_refine = false;
        refine_pending = true;
        InFlight f;
        f.kind = JobKind::profile;
        f.route = entries[incumbent].rec.route;
        TAC_RETURN_IF_ERROR(submit(std::move(f), {inspect_request(entries[incumbent].rec.route, true)}));
        continue;
      }
      if (proposals.empty() && !exhausted) {
        // Points in flight are not in the history yet: ask for that many more and skip them.
        size_t pending = 0;
        for (const auto& [h, p] : points_in_flight) pending += h == cur_history;
        std::vector<Point> batch = cur->propose(*cur_history, opts.batch + pending);
        exhausted = batch.empty();
        for (Point& p : batch)
          if (!points_in_flight.count({cur_history, p}) && std::find(proposals.begin(), proposals.end(), p) == proposals.end())
            proposals.push_back(std::move(p));
      }
      if (proposals.empty()) break;  // nothing to start now: wait for results
      const Point p = proposals.front();
      proposals.pop_front();
      TAC_RETURN_IF_ERROR(dispatch_route(active_text(route_of(*cur_space, p)), who, cur_history, p));
    }
    if (pool->busy() == 0) break;  // nothing in flight and nothing to start: the search is over
    std::optional<JobDone> d = pool->next();
    if (!d) break;
    TAC_RETURN_IF_ERROR(handle(*d));
  }
  if (pool->live() == 0 && !interrupted())
    return internal_error("every evaluator rank was lost: the search cannot go on");
  if (std::string why = budget_left(); !why.empty()) sum.stop_reason = why;
  else sum.stop_reason = "search space exhausted by " + who;
  CandidateRecord best_rec = entries[incumbent].rec;

  // Final comparison: final_rounds paired measurements (default and best in one child, timed in
  // alternating blocks), careful, on the reference evaluator (one device). When nothing beat the
  // default, the default is timed alone: comparing it with itself would only report the noise as a
  // speed-up. Skipped when interrupted; an interrupt during it keeps the rounds already done.
  std::vector<double> da, db_;
  std::vector<double> ratios;
  const bool same = best_rec.route == def.route;
  if (!interrupted()) {
    // Each round one child builds both and times them in alternating blocks (paired).
    EvalRequest a = request(def.route, same ? opts.careful_seconds : 2 * opts.careful_seconds);
    a.check = false;
    if (!same) {
      a.compare_route = best_rec.route;
      a.compare_rounds = 2;
    }
    const std::vector<EvalResult> res =
        run_on_reference(*pool, job_of(std::vector<EvalRequest>(static_cast<size_t>(std::max(1, opts.final_rounds)), a)));
    for (const EvalResult& r : res) {
      if (r.status != "ok") continue;
      da.push_back(r.median_ms);
      db_.push_back(same ? r.median_ms : r.compare_median_ms);
      ratios.push_back(same ? 1.0 : r.paired_ratio);
    }
  }
  using runtime::median;
  sum.default_ms = da.empty() ? def.median_ms : median(da);
  sum.best_ms = db_.empty() ? incumbent_ms : median(db_);
  sum.speedup = sum.best_ms > 0 ? sum.default_ms / sum.best_ms : 1;
  sum.speedup_low = ratios.empty() ? sum.speedup : *std::min_element(ratios.begin(), ratios.end());
  sum.speedup_high = ratios.empty() ? sum.speedup : *std::max_element(ratios.begin(), ratios.end());
  // The final word is the interleaved comparison: a winner that does not beat the default there
  // (median round ratio below 1) won its acceptance tests on noise, and the default is the answer.
  double unconfirmed = 0;  // the final comparison's ratio when it overturned the search's winner
  if (!same && !ratios.empty() && median(ratios) < 1) {
    unconfirmed = median(ratios);
    line("the final comparison did not confirm the best (" + fmt(median(ratios)) + "x the default): keeping the default");
    best_rec = def;
    sum.best_ms = sum.default_ms;
    sum.speedup = sum.speedup_low = sum.speedup_high = 1;
  }
  if (interrupted() && sum.stop_reason != interrupt_reason())
    sum.stop_reason += "; " + interrupt_reason() + " during the final comparison";
  sum.best_route = best_rec.route;
  sum.best_is_default = best_rec.route == def.route;
  sum.tolerance = opts.tolerance.to_string();
  describe_outcome(sum, def.median_ms, def.cv, same, unconfirmed, opts.final_rounds);
  for (const std::string& w : sum.warnings)
    if (progress) progress("warning: " + w);
  // Embedded in summary.json as it is: only the accuracy gate's own JSON list (a resumed record's
  // text was validated; a fresh one comes from the child).
  sum.best_metrics_json = parse_metrics_json(best_rec.metrics_json).is_ok() && !best_rec.metrics_json.empty()
                              ? best_rec.metrics_json
                              : "[]";

  if (!opts.out_dir.empty()) {
    // Saved even when interrupted (the best of what was measured): this child is not killed by
    // the interrupt; a second signal ends everything at once.
    EvalRequest save = request(best_rec.route, 0);
    save.measure = false;
    save.save_plan = opts.out_dir + "/best.plan";
    save.shapes = builder::shape_ranges_to_string(opts.ranges);
    EvalResult rs = evaluate_in_child(save, opts.limits, OnInterrupt::finish);
    if (rs.status != "ok") return internal_error("could not rebuild the best route to save it: " + rs.reason);
    auto write = [](const std::string& path, const std::string& text) -> Status {
      std::ofstream f(path, std::ios::binary);
      f << text;
      f.close();
      return f ? Status::ok() : io_error(path + ": cannot write it");
    };
    TAC_RETURN_IF_ERROR(write(opts.out_dir + "/best.route",
                              "# tactician tune " + opts.model_path + ": " + sum.verdict + "\n# every output within --tolerance \"" +
                                  sum.tolerance + "\"; to check it again: tactician check " +
                                  fs::path(opts.model_path).parent_path().string() +
                                  " --route-file best.route --tolerance \"" + sum.tolerance + "\"\n" + best_rec.route + "\n"));
    sum.wall_s = elapsed();
    TAC_RETURN_IF_ERROR(write(opts.out_dir + "/summary.json", sum.to_json() + "\n"));
    std::vector<std::string> skipped;  // the report lists them
    ReportVerdict verdict{model.hash, sum.tolerance, NAN, sum.verdict, sum.warnings};
    for (const Bound& b : opts.tolerance.bounds)
      if (b.metric == "l2" && !b.at_least) verdict.l2_bound = b.value;
    TAC_RETURN_IF_ERROR(write_report(opts.db_path, opts.out_dir + "/report.html", &skipped, &verdict));
  }
  sum.wall_s = elapsed();
  return sum;
}

Result<Explanation> explain(const TuneOptions& opts) {
  TAC_ASSIGN_OR_RETURN(ir::Model model, io::load_model(opts.model_path));
  TAC_ASSIGN_OR_RETURN(auto db, Database::open(opts.db_path, Database::Mode::read_only));
  TAC_ASSIGN_OR_RETURN(const std::string device, builder::device_fingerprint(opts.backend));
  Explanation ex;
  TAC_ASSIGN_OR_RETURN(auto rows, db->all(model.hash, device, TAC_VERSION, &ex.warnings));
  const std::vector<CandidateRecord> records = usable_candidates(std::move(rows), opts.db_path, ex.warnings);
  for (std::string& w : ex.warnings) w += "; row ignored";
  const CandidateRecord* best = nullptr;
  const std::string threads = "threads=" + std::to_string(opts.threads);
  for (const CandidateRecord& r : records)  // same thread count only: otherwise not comparable
    if (r.status == "ok" && r.threads == opts.threads && (!best || r.median_ms < best->median_ms)) best = &r;
  if (!best)
    return invalid_argument(opts.db_path + ": no successful candidate for " + opts.model_path + " at " + threads +
                            " on this device and tool version; run `tactician tune` first");
  ex.best_route = best->route;
  TAC_ASSIGN_OR_RETURN(builder::Route win, builder::Route::parse(best->route));
  win.values.erase("threads");
  TAC_ASSIGN_OR_RETURN(const std::string work, make_temp_dir("tactician-explain-"));
  struct RemoveOnExit {
    std::string dir;
    ~RemoveOnExit() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{work};
  std::map<std::string, int64_t> dims = opts.dims;
  TAC_RETURN_IF_ERROR(prepare_reference(model, opts, work + "/data", dims));
  std::vector<std::string> dim_flags;
  for (const auto& [k, v] : dims) dim_flags.push_back(k + "=" + std::to_string(v));
  // Median over `rounds` careful measurements of a route, interleaved by the caller's order.
  auto time_route = [&](builder::Route r) -> double {
    r.values["threads"] = std::to_string(opts.threads);
    EvalRequest rq = eval_request(opts, work, dim_flags, r.to_string(), opts.careful_seconds);
    rq.check = false;
    EvalResult res = evaluate_in_child(rq, opts.limits);
    return res.status == "ok" ? res.median_ms : INFINITY;
  };
  std::vector<builder::Route> variants = {builder::Route{}, win};
  for (const auto& [k, v] : win.values) {
    builder::Route without = win;
    without.values.erase(k);
    variants.push_back(without);
  }
  std::vector<std::vector<double>> t(variants.size());
  for (int round = 0; round < std::max(1, opts.final_rounds); ++round)  // interleaved rounds
    for (size_t i = 0; i < variants.size(); ++i) t[i].push_back(time_route(variants[i]));
  using runtime::median;
  ex.default_ms = median(t[0]);
  ex.best_ms = median(t[1]);
  const double gain = ex.default_ms - ex.best_ms;
  size_t i = 2;
  for (const auto& [k, v] : win.values) {
    KnobShare ks;
    ks.knob = k + "=" + v;
    ks.without_ms = median(t[i++]);
    ks.share = gain > 0 ? (ks.without_ms - ex.best_ms) / gain : 0;
    ex.knobs.push_back(ks);
  }
  std::sort(ex.knobs.begin(), ex.knobs.end(), [](const KnobShare& a, const KnobShare& b) { return a.share > b.share; });
  return ex;
}

}  // namespace tac::tuner
