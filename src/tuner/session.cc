// TuneSession: setup, resume, the default route, and the bookkeeping every phase shares
// (session.h lists the phases and their files).
#include "tuner/session.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "builder/builder.h"
#include "io/onnx_import.h"
#include "io/tensor_io.h"
#include "io/test_case.h"
#include "kernels/tactic_check.h"
#include "reference/interpreter.h"
#include "runtime/engine.h"
#include "tuner/accuracy.h"
#include "tuner/interrupt.h"

#ifndef TAC_VERSION
#define TAC_VERSION "dev"
#endif

namespace fs = std::filesystem;

namespace tac::tuner {

namespace detail {

namespace {

// Seeded random inputs of the model's declared types, symbolic dims from `dims` (else 1).
Result<std::vector<Datum>> random_inputs(const ir::Model& m, const std::map<std::string, int64_t>& dims) {
  std::vector<Datum> inputs;
  for (int v : m.graph.inputs) {
    const ir::ValueType& t = m.graph.values[static_cast<size_t>(v)].type;
    if (t.kind != ir::ValueKind::tensor || !t.has_shape || t.dtype == DType::undefined)
      return invalid_argument("input '" + m.graph.values[static_cast<size_t>(v)].name +
                              "' has no declared type and shape: give data with --inputs");
    Shape s;
    for (const ir::Dim& d : t.dims) {
      if (d.known()) s.push_back(d.value);
      else s.push_back(dims.count(d.symbol) ? dims.at(d.symbol) : 1);
    }
    Tensor x = kernels::random_tensor(t.dtype, s, 4242 + static_cast<uint64_t>(v));
    if (!dtype_is_float(t.dtype))  // ids and indices: small non-negative values
      for (int64_t i = 0; i < x.numel(); ++i) x.set_i64(i, std::abs(x.get_i64(i)));
    inputs.push_back(Datum(x));
  }
  return inputs;
}

// The outputs of the fp32 default route on the CPU, every core.
Result<std::vector<Datum>> engine_outputs(const ir::Model& m, const std::vector<Datum>& inputs,
                                          const std::map<std::string, int64_t>& dims) {
  builder::BuildOptions o;
  o.dims = dims;
  o.backend = kernels::Backend::cpu;
  builder::Route route;
  route.values["threads"] = std::to_string(builder::hardware_threads());
  TAC_ASSIGN_OR_RETURN(builder::Plan plan, builder::build_plan(m, route, o));
  TAC_ASSIGN_OR_RETURN(auto engine, runtime::Engine::create(std::move(plan)));
  std::vector<Tensor> in;
  for (const Datum& d : inputs) in.push_back(d.tensor);
  TAC_ASSIGN_OR_RETURN(std::vector<Tensor> out, engine->run(in));
  std::vector<Datum> r;
  for (Tensor& t : out) r.push_back(Datum(std::move(t)));
  return r;
}

// The expected outputs of `inputs`: the reference interpreter's (float64 accumulation), unless it
// would take long and the tolerance is the user's. When the inputs' symbolic dims are above 1, the
// interpreter first runs at 1 (random inputs): if its time there, scaled by the inputs' size, says
// over kSlow seconds (an underestimate: ResNet-50 took 0.3 s at batch 1 and 67 s at batch 32 on two
// cores, issue 28), and the fp32 default route on the CPU matches it there within
// l2<=1e-4,cos>=0.99999, that engine computes the expected outputs. Not under the default fp32 tolerance
// itself: candidates would then be judged against the default engine, whose own error at a larger
// size can exceed that tolerance (ResNet-50's default route at batch 16: l2 2.1e-5 > 1e-5); a
// user's tolerance (cos>=0.999, say) is orders of magnitude looser than an fp32 engine's error.
// `how` says which computed them.
Result<std::vector<Datum>> expected_outputs(const ir::Model& m, const std::vector<Datum>& inputs,
                                            const std::map<std::string, int64_t>& dims, bool users_tolerance, std::string& how) {
  constexpr double kSlow = 2;
  how = "the reference interpreter";
  if (!users_tolerance) return ref::run_model(m, inputs);
  std::map<std::string, int64_t> ones;
  for (const auto& [sym, n] : dims) ones[sym] = 1;
  int64_t full = 0, small = 0;
  auto small_in = ones.empty() ? Result<std::vector<Datum>>(std::vector<Datum>{}) : random_inputs(m, ones);
  if (small_in) {
    for (const Datum& d : inputs) full += d.is_tensor() ? d.tensor.numel() : 0;
    for (const Datum& d : *small_in) small += d.is_tensor() ? d.tensor.numel() : 0;
  }
  if (!small_in || small <= 0 || full <= small) return ref::run_model(m, inputs);
  const auto t0 = std::chrono::steady_clock::now();
  auto ref_small_r = ref::run_model(m, *small_in);  // a model that refuses size 1: the interpreter, as always
  if (!ref_small_r) return ref::run_model(m, inputs);
  const std::vector<Datum>& ref_small = *ref_small_r;
  const double t_small = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double estimate = t_small * static_cast<double>(full) / static_cast<double>(small);
  if (estimate <= kSlow) return ref::run_model(m, inputs);
  auto eng_small = engine_outputs(m, *small_in, ones);
  if (!eng_small || eng_small->size() != ref_small.size()) return ref::run_model(m, inputs);
  // An fp32 engine's error, far inside any tolerance a user gives for lower precisions.
  TAC_ASSIGN_OR_RETURN(const Tolerance tol, Tolerance::parse("l2<=1e-4,cos>=0.99999"));
  std::vector<Metrics> metrics;
  for (size_t k = 0; k < ref_small.size(); ++k) {
    if (!ref_small[k].is_tensor() || !(*eng_small)[k].is_tensor()) return ref::run_model(m, inputs);
    auto mk = compute_metrics((*eng_small)[k].tensor, ref_small[k].tensor, tol.atol, tol.rtol);
    if (!mk) return ref::run_model(m, inputs);
    metrics.push_back(*mk);
  }
  if (std::string why = check_tolerance(tol, metrics); !why.empty()) {
    how += " (the fp32 engine that would be faster differs from it at size 1: " + why + ")";
    return ref::run_model(m, inputs);
  }
  auto out = engine_outputs(m, inputs, dims);
  if (!out) return ref::run_model(m, inputs);
  char b[200];
  std::snprintf(b, sizeof b,
                "the fp32 default route on the CPU (the interpreter would take ~%.0f s; the engine matched it within "
                "%s at size 1)",
                estimate, tol.to_string().c_str());
  how = b;
  return out;
}

}  // namespace

Status prepare_reference(const ir::Model& m, const TuneOptions& opts, const std::string& dir,
                         std::map<std::string, int64_t>& dims, std::string* how) {
  std::vector<Datum> inputs, expected;
  if (!opts.inputs_dir.empty()) {
    TAC_ASSIGN_OR_RETURN(auto sets, io::load_data_sets(m, opts.inputs_dir));
    inputs = sets[0].inputs;
    expected = sets[0].outputs;
  } else {
    TAC_ASSIGN_OR_RETURN(inputs, random_inputs(m, dims));
  }
  TAC_RETURN_IF_ERROR(ref::check_inputs(m.graph, inputs));
  builder::BuildOptions bound;  // symbolic dims follow the data
  bound.dims = dims;
  TAC_RETURN_IF_ERROR(builder::bind_dims(m.graph, inputs, bound));
  dims = bound.dims;
  std::string source = "the given outputs (--inputs)";
  if (expected.empty()) {
    TAC_ASSIGN_OR_RETURN(expected, expected_outputs(m, inputs, dims, user_tolerance(opts), source));
  }
  if (how) *how = source;
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

// Unique per call, also for several tunes at once in one process (the library API), where a name
// made of the pid was shared.
Result<std::string> make_temp_dir(const std::string& prefix) {
  std::error_code ec;
  const fs::path base = fs::temp_directory_path(ec);
  if (ec) return io_error("no temporary folder (TMPDIR): " + ec.message());
  std::string name = (base / (prefix + "XXXXXX")).string();
  if (!::mkdtemp(name.data())) return io_error(name + ": cannot create a temporary folder: " + std::strerror(errno));
  return name;
}

bool user_tolerance(const TuneOptions& opts) { return opts.tolerance.to_string() != Tolerance::default_fp32().to_string(); }

RemoveOnExit::~RemoveOnExit() {
  std::error_code ec;
  if (!dir.empty()) fs::remove_all(dir, ec);
}

std::string fmt(double v, int prec) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

}  // namespace detail

using detail::fmt;

namespace {

// An interrupt (tuner/interrupt.h) stops the tune as if its budget ran out; before the default
// route is measured there is nothing to write.
bool interrupted() { return interrupt_signal() != 0; }
Status nothing_measured() {
  return invalid_argument(interrupt_reason() + " before the default route was measured: nothing written");
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

double now_unix() {
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

}  // namespace

TuneSession::TuneSession(const TuneOptions& opts, const Progress& progress) : opts_(opts), progress_(progress) {}

Result<TuneSummary> TuneSession::run() {
  TAC_RETURN_IF_ERROR(set_up());
  TAC_RETURN_IF_ERROR(resume());
  TAC_RETURN_IF_ERROR(measure_default());
  TAC_RETURN_IF_ERROR(measure_rank_speeds());
  incumbent_ms_ = def_.median_ms;
  if (elapsed() >= opts_.budget_s && !interrupted())
    return invalid_argument("--budget " + fmt(opts_.budget_s, 0) +
                            " s is too small: loading the model and computing the "
                            "reference outputs took " +
                            fmt(setup_s_, 1) + " s and evaluating the default route " + fmt(elapsed() - setup_s_, 1) +
                            " s (give at least several times their sum)");
  line("default " + fmt(def_.median_ms) + " ms");
  inspect_default();
  TAC_ASSIGN_OR_RETURN(strategy_, make_strategy(opts_.strategy, space_, opts_.seed));  // with the inspections' weights
  cur_space_ = &space_;
  cur_history_ = &history_;
  cur_ = strategy_.get();
  who_ = opts_.strategy;
  can_refine_ = opts_.refine && strategy_->refines() &&
                std::any_of(space_.dims.begin(), space_.dims.end(), [](const Dimension& d) { return d.knobs.size() > 1; });
  plan_seeds();
  TAC_RETURN_IF_ERROR(search());
  final_comparison();
  if (!opts_.out_dir.empty()) TAC_RETURN_IF_ERROR(write_outputs());
  sum_.wall_s = elapsed();
  return sum_;
}

// Model, database, reference data, knob space and search space; refuses a bad --threads, --route
// or strategy before anything is measured.
Status TuneSession::set_up() {
  TAC_ASSIGN_OR_RETURN(model_, io::load_model(opts_.model_path));
  // Open the database first (creating its folder, as --out does): a locked or foreign file is
  // refused before any work is done.
  if (fs::path parent = fs::path(opts_.db_path).parent_path(); !parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
  }
  TAC_ASSIGN_OR_RETURN(db_, Database::open(opts_.db_path));
  dims_ = opts_.dims;
  if (!opts_.ranges.empty()) {  // tuned at the opt sizes
    builder::BuildOptions at_opt;
    at_opt.dims = dims_;
    at_opt.ranges = opts_.ranges;
    TAC_RETURN_IF_ERROR(builder::apply_shape_ranges(model_, at_opt));
    dims_ = at_opt.dims;
  }
  work_ = opts_.out_dir;
  if (work_.empty()) {
    TAC_ASSIGN_OR_RETURN(work_, detail::make_temp_dir("tactician-tune-"));
    cleanup_.dir = work_;  // removed however the tune ends
  }
  std::string how;
  TAC_RETURN_IF_ERROR(detail::prepare_reference(model_, opts_, work_ + "/data", dims_, &how));
  if (interrupted()) return nothing_measured();
  if (progress_) progress_("[tune] expected outputs from " + how);
  for (const auto& [k, v] : dims_) dim_flags_.push_back(k + "=" + std::to_string(v));
  setup_s_ = elapsed();
  sum_.time.reference_s = setup_s_;
  std::error_code ec;
  fs::remove_all(work_ + "/calibration", ec);  // the cache lives for one run: the data may have changed since
  builder::BuildOptions bopts;
  bopts.dims = dims_;
  bopts.planted_faults = opts_.planted_faults;
  bopts.backend = opts_.backend;
  TAC_ASSIGN_OR_RETURN(knobs_, builder::knob_space(model_, bopts));
  threads_ = std::to_string(opts_.threads);
  if (const builder::Knob* t = knobs_.find("threads");
      !t || std::find(t->values.begin(), t->values.end(), threads_) == t->values.end())
    return invalid_argument("--threads " + threads_ + " is not allowed on this machine");
  if (opts_.fixed.values.count("threads") && opts_.fixed.values.at("threads") != threads_)
    return invalid_argument("--route sets threads=" + opts_.fixed.values.at("threads") + ", --threads " + threads_);
  if (Status st = builder::validate_route(opts_.fixed, knobs_); !st.is_ok()) return invalid_argument("--route: " + st.message());
  TAC_ASSIGN_OR_RETURN(space_, make_search_space(knobs_, opts_.knob_globs, opts_.fixed, detail::user_tolerance(opts_)));
  TAC_RETURN_IF_ERROR(calibrate_once(bopts));
  sum_.dimensions = space_.dims.size();
  sum_.space_size = space_.size();
  // The strategy's capabilities decide the phases; it is made again once the inspections have
  // weighed the space.
  TAC_ASSIGN_OR_RETURN(strategy_, make_strategy(opts_.strategy, space_, opts_.seed));
  takes_seeds_ = strategy_->takes_seeds();
  TAC_ASSIGN_OR_RETURN(device_, builder::device_fingerprint(opts_.backend));
  // Where the children run: this process, one at a time, or the evaluator ranks of an MPI job
  // (tuner/distributed.h), several at a time. Either way the search loop is the same: it keeps
  // every idle evaluator busy and handles results in the order they come back.
  pool_ = opts_.evaluators;
  if (!pool_) {
    own_pool_ = local_evaluators();
    pool_ = own_pool_.get();
  }
  // A search candidate's time limit: --timeout, but at most 10x what evaluating the default route
  // took (30 s at least), set once that is measured. A point whose engine is far slower (a host
  // fallback on every GEMM, say) is known to lose long before it finishes timing, and on a large
  // model one such point could otherwise hold an evaluator for minutes, past the whole budget.
  candidate_timeout_s_ = opts_.limits.timeout_s;
  rung1_seconds_ = std::min(opts_.careful_seconds, opts_.cheap_seconds * kEta);
  return pool_->share_data(work_ + "/data");
}

// The int8 / fp8 calibration ranges, computed here once when the search offers a quantized
// precision, into the cache the candidates read (a candidate that computed them paid the reference
// interpreter's run inside its own time limit: ~45 s for BERT-base at batch 8 on the 2-core VM,
// past the 30 s a search candidate may get). Counted as reference time.
Status TuneSession::calibrate_once(const builder::BuildOptions& bopts) {
  std::string quantized;
  for (const Dimension& dim : space_.dims) {
    if (dim.knobs.empty() || dim.knobs[0].rfind("precision.", 0) != 0) continue;
    for (const char* q : {"fp8", "int8"})
      if (quantized.empty() && std::find(dim.values.begin(), dim.values.end(), q) != dim.values.end()) quantized = q;
  }
  if (quantized.empty() || interrupted()) return Status::ok();
  builder::Route route = opts_.fixed;
  route.values["precision.default"] = quantized;
  builder::BuildOptions o = bopts;
  o.knobs = std::make_shared<const builder::KnobSpace>(knobs_);
  o.calibration_dir = opts_.calibration_dir;
  o.calibration_cache = work_ + "/calibration";
  const double t0 = elapsed();
  if (Status st = builder::calibrate(model_, route, o); !st.is_ok()) {
    line("calibrating the " + quantized + " ranges failed (" + st.message() + "): each candidate calibrates");
    return Status::ok();
  }
  sum_.time.reference_s += elapsed() - t0;
  if (progress_)
    progress_("[tune] " + quantized + " calibration ranges computed once (" + detail::fmt(elapsed() - t0, 1) + " s)");
  return Status::ok();
}

// What this model/device/version already has in the database. Rows are input: a row that cannot
// be read or makes no sense (the file was edited or damaged) is left out with a warning naming
// it, not trusted and not fatal: its route is simply evaluated again if the search proposes it,
// and the fresh record (the latest row of a route wins) replaces it. Failing the whole tune would
// leave the user to repair an SQLite file by hand or lose every good row.
Status TuneSession::resume() {
  std::vector<std::string> skipped;
  TAC_ASSIGN_OR_RETURN(auto rows, db_->all(model_.hash, device_, TAC_VERSION, &skipped));
  const std::vector<CandidateRecord> previous = usable_candidates(std::move(rows), opts_.db_path, skipped);
  for (const std::string& why : skipped)
    if (progress_) progress_("warning: " + why + "; row ignored (its route is evaluated again if proposed)");
  for (const CandidateRecord& rec : previous) {
    by_route_[rec.route] = rec;
    auto route = builder::Route::parse(rec.route);
    if (!route) continue;
    auto p = point_of(space_, *route, threads_);
    if (!p || history_.contains(*p)) continue;
    history_.trials.push_back({*p, detail::objective(rec)});
    ++sum_.resumed;
  }
  return Status::ok();
}

// The default route first: it is the baseline and the answer if nothing beats it. The incumbent
// starts as the default, measured at rung 1 too, so that promotions to rung 1 compare like with
// like; a better resumed candidate has to win its acceptance test again.
Status TuneSession::measure_default() {
  TAC_ASSIGN_OR_RETURN(def_, evaluate(space_, history_, default_point(space_), "default"));
  if (def_.status != "ok")
    return Status(def_.status == "rejected" ? ErrorKind::invalid_argument : ErrorKind::unsupported,
                  "the default route did not pass (" + def_.status + ": " + def_.reason + ")");
  for (const auto& [text, rec] : by_route_)
    if (auto route = builder::Route::parse(rec.route); route && point_of(space_, *route, threads_)) add_entry(rec);
  add_entry(def_);
  incumbent_ = entry_of_.at(def_.route);
  if (interrupted()) return Status::ok();
  EvalResult r = eval_now(remeasure_request(def_.route, rung1_seconds_));
  if (r.status == "interrupted") return Status::ok();  // not recorded; the search will not start
  if (r.status != "ok") return internal_error("re-measuring the default route failed: " + r.reason);
  TAC_RETURN_IF_ERROR(record(def_.id, "rung1", r));
  entries_[incumbent_].score.push_back(r.median_ms);
  candidate_timeout_s_ = std::min(opts_.limits.timeout_s, std::max(30.0, 10.0 * r.wall_s));
  return Status::ok();
}

// Several evaluators (MPI ranks, one GPU or core set each) need not run at one speed: each times
// the default once, all at the same time, and their cheap and rung times are scaled to the
// reference evaluator's before they are ranked.
Status TuneSession::measure_rank_speeds() {
  if (pool_->live() <= 1 || interrupted()) return Status::ok();
  for (uint64_t t = 1; pool_->idle() > 0; ++t)
    TAC_RETURN_IF_ERROR(pool_->submit(t, job_of({remeasure_request(def_.route, opts_.cheap_seconds)}), false));
  std::map<int, double> ms;
  double ref_ms = 0;
  while (std::optional<JobDone> d = pool_->next()) {
    for (const EvalResult& r : d->results) account(r);
    if (d->lost || d->results.empty() || d->results[0].status != "ok") continue;
    ms[d->rank] = d->results[0].median_ms;
    if (d->evaluator == reference_evaluator_) ref_ms = d->results[0].median_ms;
  }
  if (ref_ms > 0)
    for (const auto& [rank, m] : ms) speed_[rank] = m / ref_ms;
  sum_.rank_speed = speed_;
  return Status::ok();
}

double TuneSession::elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

double TuneSession::spent() const {
  double f = elapsed() / opts_.budget_s;
  if (opts_.max_candidates > 0) f = std::max(f, static_cast<double>(sum_.candidates) / static_cast<double>(opts_.max_candidates));
  if (opts_.max_build_s > 0) f = std::max(f, sum_.build_s / opts_.max_build_s);
  return f;
}

std::string TuneSession::budget_left() const {
  if (interrupted()) return interrupt_reason();
  if (elapsed() >= opts_.budget_s) return "time budget";
  if (opts_.max_candidates >= 0 && sum_.candidates + candidates_in_flight_ >= opts_.max_candidates) return "candidate budget";
  if (opts_.max_build_s >= 0 && sum_.build_s >= opts_.max_build_s) return "build-time budget";
  return {};
}

void TuneSession::line(const std::string& what) const {
  if (!progress_) return;
  progress_("[tune] " + std::to_string(sum_.candidates) + " evaluated (" + std::to_string(sum_.failed) + " failed, " +
            std::to_string(sum_.rejected) + " rejected, " + std::to_string(sum_.resumed) + " resumed; promoted " +
            std::to_string(promoted_[1]) + "/" + std::to_string(promoted_[2]) + ")  best " + fmt(incumbent_ms_) +
            " ms = " + fmt(def_.median_ms / incumbent_ms_, 2) + "x default  " +
            fmt(std::max(0.0, opts_.budget_s - elapsed()), 0) + " s left  " + what);
}

EvalRequest TuneSession::request(const std::string& route_text, double seconds) const {
  return detail::eval_request(opts_, work_, dim_flags_, route_text, seconds);
}

EvalRequest TuneSession::remeasure_request(const std::string& route, double seconds) const {
  EvalRequest rq = request(route, seconds);
  rq.check = false;
  return rq;
}

// A build without check or timing: the child reports its tactics and costs (and node times).
EvalRequest TuneSession::inspect_request(const std::string& route, bool with_profile) const {
  EvalRequest rq = request(route, 0);
  rq.check = rq.measure = false;
  rq.profile = with_profile;
  return rq;
}

std::string TuneSession::with_threads(builder::Route r) const {
  r.values["threads"] = threads_;
  return r.to_string();
}

// The active route of a route, as recorded (keyed by the active route: routes differing only in
// inactive settings, such as a tactic pinned on a node another knob lowers to bf16, build the
// same engine and are evaluated once).
std::string TuneSession::active_text(const builder::Route& route) const {
  return with_threads(builder::active_route(route, knobs_));
}

EvalJob TuneSession::job_of(std::vector<EvalRequest> requests, bool candidate) const {
  EvalJob job;
  job.requests = std::move(requests);
  job.limits = opts_.limits;
  if (candidate) job.limits.timeout_s = candidate_timeout_s_;
  return job;
}

// One evaluation on the reference evaluator, nothing else in flight (before and after the
// search); timeout_s > 0: a tighter limit than the job's (the inspections before the search).
EvalResult TuneSession::eval_now(const EvalRequest& rq, double timeout_s) {
  EvalJob job = job_of({rq});
  if (timeout_s > 0) job.limits.timeout_s = std::min(job.limits.timeout_s, timeout_s);
  EvalResult r = run_on_reference(*pool_, job, &reference_evaluator_)[0];
  account(r);
  return r;
}

Status TuneSession::submit(InFlight f, std::vector<EvalRequest> requests) {
  const uint64_t t = next_ticket_++;
  const bool candidate = f.kind == JobKind::candidate;
  if (candidate) ++candidates_in_flight_;
  inflight_[t] = std::move(f);
  return pool_->submit(t, job_of(std::move(requests), candidate), false);
}

// Records a candidate's evaluation in the database and the counters.
Result<CandidateRecord> TuneSession::record_candidate(const std::string& text, const std::string& who, const EvalResult& r,
                                                      const std::string& evaluator) {
  CandidateRecord rec;
  rec.model_hash = model_.hash;
  rec.device = device_;
  rec.tool_version = TAC_VERSION;
  rec.route = text;
  rec.status = r.status;
  rec.reason = r.reason;
  rec.strategy = who;
  rec.seed = opts_.seed;
  rec.build_ms = r.build_ms;
  rec.metrics_json = r.metrics_json;
  rec.median_ms = r.median_ms;
  rec.p10_ms = r.p10_ms;
  rec.p90_ms = r.p90_ms;
  rec.cv = r.cv;
  rec.runs = r.runs;
  rec.threads = opts_.threads;
  rec.evaluator = evaluator;
  rec.unix_time = now_unix();
  TAC_ASSIGN_OR_RETURN(rec.id, db_->insert(rec));
  by_route_[text] = rec;
  ++sum_.candidates;
  sum_.build_s += r.build_ms / 1e3;
  if (r.status == "rejected") ++sum_.rejected;
  else if (r.status != "ok") ++sum_.failed;
  return rec;
}

Status TuneSession::record(int64_t id, const std::string& kind, const EvalResult& r) {
  Measurement m;
  m.candidate_id = id;
  m.kind = kind;
  m.median_ms = r.median_ms;
  m.cv = r.cv;
  m.runs = r.runs;
  m.unix_time = now_unix();
  return db_->add_measurement(m);
}

// Evaluates the point `p` of `sp` now unless the database has its route, records it and adds it
// to `hist` (the history of the strategy searching `sp`). Used for the default route only.
Result<CandidateRecord> TuneSession::evaluate(const SearchSpace& sp, History& hist, const Point& p, const std::string& who) {
  const std::string text = active_text(route_of(sp, p));
  CandidateRecord rec;
  if (auto it = by_route_.find(text); it != by_route_.end()) {
    rec = it->second;
  } else {
    const EvalResult r = eval_now(request(text, opts_.cheap_seconds));
    if (r.status == "interrupted") return nothing_measured();
    TAC_ASSIGN_OR_RETURN(rec, record_candidate(text, who, r, reference_evaluator_));
  }
  if (!hist.contains(p)) hist.trials.push_back({p, detail::objective(rec)});
  return rec;
}

void TuneSession::add_entry(const CandidateRecord& rec) {
  if (rec.status != "ok" || entry_of_.count(rec.route)) return;
  entry_of_[rec.route] = entries_.size();
  entries_.push_back({rec, {rec.median_ms}});
}

void TuneSession::account(const EvalResult& r) {
  ++sum_.time.evaluations;
  sum_.time.evaluations_s += r.wall_s;
  sum_.time.build_s += r.build_ms / 1e3;
  sum_.time.check_s += r.check_ms / 1e3;
  sum_.time.measure_s += r.measure_ms / 1e3;
}

double TuneSession::speed_of(int rank) const {
  auto it = speed_.find(rank);
  return it == speed_.end() ? 1.0 : it->second;
}

Result<TuneSummary> tune(const TuneOptions& opts, const Progress& progress) { return TuneSession(opts, progress).run(); }

}  // namespace tac::tuner
