// TuneSession's last phase: the final interleaved default-vs-best comparison, the verdict in words
// (describe_outcome) and the outputs (best.plan, best.route, summary.json, report.html).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "runtime/measure.h"
#include "tuner/interrupt.h"
#include "tuner/report.h"
#include "tuner/session.h"

namespace fs = std::filesystem;

namespace tac::tuner {

using detail::fmt;

// final_rounds paired measurements (default and best in one child, timed in alternating blocks),
// careful, on the reference evaluator (one device). When nothing beat the default, the default is
// timed alone: comparing it with itself would only report the noise as a speed-up. Skipped when
// interrupted; an interrupt during it keeps the rounds already done.
void TuneSession::final_comparison() {
  best_rec_ = entries_[incumbent_].rec;
  std::vector<double> da, db, ratios;
  const bool same = best_rec_.route == def_.route;
  if (interrupt_signal() == 0) {
    EvalRequest a = request(def_.route, same ? opts_.careful_seconds : 2 * opts_.careful_seconds);
    a.check = false;
    if (!same) {
      a.compare_route = best_rec_.route;
      a.compare_rounds = 2;
    }
    const std::vector<EvalResult> res =
        run_on_reference(*pool_, job_of(std::vector<EvalRequest>(static_cast<size_t>(std::max(1, opts_.final_rounds)), a)));
    for (const EvalResult& r : res) {
      account(r);
      if (r.status != "ok") continue;
      da.push_back(r.median_ms);
      db.push_back(same ? r.median_ms : r.compare_median_ms);
      ratios.push_back(same ? 1.0 : r.paired_ratio);
    }
  }
  using runtime::median;
  sum_.default_ms = da.empty() ? def_.median_ms : median(da);
  sum_.best_ms = db.empty() ? incumbent_ms_ : median(db);
  sum_.speedup = sum_.best_ms > 0 ? sum_.default_ms / sum_.best_ms : 1;
  sum_.speedup_low = ratios.empty() ? sum_.speedup : *std::min_element(ratios.begin(), ratios.end());
  sum_.speedup_high = ratios.empty() ? sum_.speedup : *std::max_element(ratios.begin(), ratios.end());
  // The final word is the interleaved comparison: a winner that does not beat the default there
  // (median round ratio below 1) won its acceptance tests on noise, and the default is the answer.
  double unconfirmed = 0;  // the final comparison's ratio when it overturned the search's winner
  if (!same && !ratios.empty() && median(ratios) < 1) {
    unconfirmed = median(ratios);
    line("the final comparison did not confirm the best (" + fmt(median(ratios)) + "x the default): keeping the default");
    best_rec_ = def_;
    sum_.best_ms = sum_.default_ms;
    sum_.speedup = sum_.speedup_low = sum_.speedup_high = 1;
  }
  if (interrupt_signal() != 0 && sum_.stop_reason != interrupt_reason())
    sum_.stop_reason += "; " + interrupt_reason() + " during the final comparison";
  sum_.best_route = best_rec_.route;
  sum_.best_is_default = best_rec_.route == def_.route;
  sum_.tolerance = opts_.tolerance.to_string();
  describe_outcome(sum_, def_.median_ms, def_.cv, same, unconfirmed, opts_.final_rounds);
  for (const std::string& w : sum_.warnings)
    if (progress_) progress_("warning: " + w);
  // Embedded in summary.json as it is: only the accuracy gate's own JSON list (a resumed record's
  // text was validated; a fresh one comes from the child).
  sum_.best_metrics_json =
      parse_metrics_json(best_rec_.metrics_json).is_ok() && !best_rec_.metrics_json.empty() ? best_rec_.metrics_json : "[]";
}

// Saved even when interrupted (the best of what was measured): the child rebuilding the best is
// not killed by the interrupt; a second signal ends everything at once.
Status TuneSession::write_outputs() {
  EvalRequest save = request(best_rec_.route, 0);
  save.measure = false;
  save.save_plan = opts_.out_dir + "/best.plan";
  save.shapes = builder::shape_ranges_to_string(opts_.ranges);
  EvalResult rs = evaluate_in_child(save, opts_.limits, OnInterrupt::finish);
  account(rs);
  if (rs.status != "ok") return internal_error("could not rebuild the best route to save it: " + rs.reason);
  auto write = [](const std::string& path, const std::string& text) -> Status {
    std::ofstream f(path, std::ios::binary);
    f << text;
    f.close();
    return f ? Status::ok() : io_error(path + ": cannot write it");
  };
  TAC_RETURN_IF_ERROR(write(opts_.out_dir + "/best.route",
                            "# tactician tune " + opts_.model_path + ": " + sum_.verdict +
                                "\n# every output within --tolerance \"" + sum_.tolerance +
                                "\"; to check it again: tactician check " + fs::path(opts_.model_path).parent_path().string() +
                                " --route-file best.route --tolerance \"" + sum_.tolerance + "\"\n" + best_rec_.route + "\n"));
  sum_.wall_s = elapsed();
  TAC_RETURN_IF_ERROR(write(opts_.out_dir + "/summary.json", sum_.to_json() + "\n"));
  std::vector<std::string> skipped;  // the report lists them
  ReportVerdict verdict{model_.hash,   sum_.tolerance,
                        NAN,           sum_.verdict,
                        sum_.warnings, "Where this run's " + detail::fmt(sum_.wall_s, 0) + " s went: " + sum_.time_text() + "."};
  for (const Bound& b : opts_.tolerance.bounds)
    if (b.metric == "l2" && !b.at_least) verdict.l2_bound = b.value;
  return write_report(opts_.db_path, opts_.out_dir + "/report.html", &skipped, &verdict);
}

// The summary's verdict in words, and warnings when the measurements cannot be trusted: the
// default route's first (cheap) measurement and its final (careful, interleaved) one disagree by
// more than kDrift, its runs vary by more than kMaxCv, or the final rounds' ratios spread widely.
// (A one-minute tune on a loaded machine once printed a default of 201 ms for a 3 ms engine.)
void describe_outcome(TuneSummary& sum, double first_default_ms, double default_cv, bool same, double unconfirmed, int rounds) {
  constexpr double kDrift = 1.5, kMaxCv = 0.25, kSpread = 1.5;
  const std::string fix =
      "for trustworthy numbers, tune on an otherwise idle machine with --threads below its core count (and "
      "a longer --budget), then check with `tactician bench --compare`";
  if (first_default_ms > 0 && sum.default_ms > 0) {
    const double drift = std::max(first_default_ms / sum.default_ms, sum.default_ms / first_default_ms);
    if (drift > kDrift)
      sum.warnings.push_back("timings are unreliable: the default route measured " + fmt(first_default_ms) +
                             " ms at the start and " + fmt(sum.default_ms) + " ms in the final comparison (" + fmt(drift, 2) +
                             "x apart; the machine's speed changed during the tune); " + fix);
  }
  if (default_cv > kMaxCv)
    sum.warnings.push_back("timings are noisy: the default route's runs vary by " + fmt(100 * default_cv, 0) +
                           "% (coefficient of variation); " + fix);
  if (!same && sum.speedup_low > 0 && sum.speedup_high / sum.speedup_low > kSpread)
    sum.warnings.push_back("the final comparison's rounds disagree: speed-ups from " + fmt(sum.speedup_low, 3) + "x to " +
                           fmt(sum.speedup_high, 3) + "x; " + fix);
  const std::string rounds_text = std::to_string(std::max(1, rounds)) + " interleaved A/B rounds";
  if (unconfirmed > 0)
    sum.verdict = "kept the default route: the search's best did not beat it in the final comparison (" + fmt(unconfirmed, 3) +
                  "x the default over " + rounds_text + ")";
  else if (same)
    sum.verdict = "kept the default route (" + fmt(sum.default_ms) +
                  " ms): no candidate beat it by more than the "
                  "measured noise";
  else
    sum.verdict = "kept " + sum.best_route + ": " + fmt(sum.speedup, 3) + "x the default's speed over " + rounds_text + " (" +
                  fmt(sum.speedup_low, 3) + "x to " + fmt(sum.speedup_high, 3) + "x), " + fmt(sum.best_ms) + " ms against " +
                  fmt(sum.default_ms) + " ms";
}

}  // namespace tac::tuner
