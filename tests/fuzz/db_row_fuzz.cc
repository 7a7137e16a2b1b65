// Fuzz target: arbitrary bytes as the text columns of a tuning-database row, a route (also what a
// route file holds) and the accuracy metrics JSON, split at the first NUL byte -> the checks every
// row read back from a database goes through (tuner::validate_candidate: Route::parse, the
// canonical form, parse_metrics_json) and the route's canonical round trip. Errors are fine; a
// crash, sanitizer report or uncaught exception is a finding, and so is a canonical route text that
// does not parse back to itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "builder/knobs.h"
#include "tuner/accuracy.h"
#include "tuner/database.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const size_t nul = bytes.find('\0');
  tac::tuner::CandidateRecord r;
  r.route = bytes.substr(0, nul);
  r.metrics_json = nul == std::string::npos ? std::string() : bytes.substr(nul + 1);
  r.status = "ok";
  r.median_ms = r.p10_ms = r.p90_ms = 1.0;
  r.runs = 10;
  r.threads = 1;
  r.unix_time = 1.8e9;
  (void)tac::tuner::validate_candidate(r);
  (void)tac::tuner::parse_metrics_json(r.metrics_json);
  auto route = tac::builder::Route::parse(r.route);
  if (!route) return 0;
  const std::string text = route->to_string();
  auto again = tac::builder::Route::parse(text);
  if (!again || again->to_string() != text) std::abort();  // the canonical form must round-trip
  return 0;
}
