// The tuning report: a self-contained HTML page (inline SVG, no scripts, no network) from the
// database: best-so-far against time, latency against accuracy for every candidate, default vs
// isolated selection vs best, and the per-knob effect.
#pragma once

#include <string>
#include <vector>

#include "tactician/status.h"

namespace tac::tuner {

// Writes the report of every model/device/version found in the database at `db_path` (opened
// read-only: it must exist). Rows that cannot be read or make no sense (Database,
// validate_candidate) are left out, listed in the report and described in `skipped`.
Status write_report(const std::string& db_path, const std::string& html_path, std::vector<std::string>* skipped);

}  // namespace tac::tuner
