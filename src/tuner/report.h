// The tuning report: a self-contained HTML page (inline SVG, no scripts, no network) from the
// database: best-so-far against time, latency against accuracy for every candidate, default vs
// isolated selection vs best, and the per-knob effect.
#pragma once

#include <string>

#include "tactician/status.h"

namespace tac::tuner {

// Writes the report of every model/device/version found in the database at `db_path`.
Status write_report(const std::string& db_path, const std::string& html_path);

}  // namespace tac::tuner
