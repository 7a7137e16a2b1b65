// The tuning report: a self-contained HTML page (inline SVG, no scripts, no network) from the
// database: best-so-far against time, latency against accuracy for every candidate, default vs
// isolated selection vs best, and the per-knob effect.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "tactician/status.h"

namespace tac::tuner {

// Writes the report of every model/device/version found in the database at `db_path` (opened
// read-only: it must exist). Rows that cannot be read or make no sense (Database,
// validate_candidate) are left out, listed in the report and described in `skipped`.
// What `tune` concluded, for the report it writes beside its summary: its verdict heads the model's
// section (the candidates' single cheap measurements are not the answer: the final interleaved
// comparison is), with the tolerance, drawn on the latency/accuracy plot where it bounds l2.
struct ReportVerdict {
  std::string model_hash;  // the section it belongs to
  std::string tolerance;   // Tolerance::to_string()
  double l2_bound = NAN;   // the tolerance's l2 bound (NaN: none)
  std::string verdict;     // TuneSummary::verdict
  std::vector<std::string> warnings;
  std::string time;  // where this run's wall time went, in words ("" = not shown)
};
Status write_report(const std::string& db_path, const std::string& html_path, std::vector<std::string>* skipped,
                    const ReportVerdict* verdict = nullptr);

}  // namespace tac::tuner
