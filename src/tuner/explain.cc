// `tactician explain` (tune.h): the ablation of the best recorded route.
#include <algorithm>
#include <cmath>

#include "builder/builder.h"
#include "io/onnx_import.h"
#include "runtime/measure.h"
#include "tuner/session.h"

#ifndef TAC_VERSION
#define TAC_VERSION "dev"
#endif

namespace tac::tuner {

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
  TAC_ASSIGN_OR_RETURN(const std::string work, detail::make_temp_dir("tactician-explain-"));
  const detail::RemoveOnExit cleanup(work);
  std::map<std::string, int64_t> dims = opts.dims;
  TAC_RETURN_IF_ERROR(detail::prepare_reference(model, opts, work + "/data", dims));
  std::vector<std::string> dim_flags;
  for (const auto& [k, v] : dims) dim_flags.push_back(k + "=" + std::to_string(v));
  // Median over `rounds` careful measurements of a route, interleaved by the caller's order.
  auto time_route = [&](builder::Route r) -> double {
    r.values["threads"] = std::to_string(opts.threads);
    EvalRequest rq = detail::eval_request(opts, work, dim_flags, r.to_string(), opts.careful_seconds);
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
