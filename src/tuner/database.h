// The tuning database (DESIGN.md section 3): every candidate ever evaluated, in one SQLite file
// (WAL mode), keyed by model hash, device fingerprint, tool version and route. A re-run resumes:
// evaluated routes are not evaluated again; results from another device or tool version are
// never reused (they are simply not matched).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tactician/status.h"

struct sqlite3;

namespace tac::tuner {

struct CandidateRecord {
  int64_t id = 0;  // assigned by insert()
  std::string model_hash, device, tool_version;
  std::string route;     // canonical route text ("" = default route)
  std::string status;    // ok | rejected | build_failed | run_failed | crashed | timeout
  std::string reason;    // why, for anything but ok
  std::string strategy;  // which strategy proposed it ("default", "fast", "tpe", ...)
  uint64_t seed = 0;
  double build_ms = 0;
  std::string metrics_json;  // per-output accuracy metrics (tuner/accuracy.h)
  double median_ms = 0, p10_ms = 0, p90_ms = 0, cv = 0;
  int runs = 0;
  int threads = 0;
  double unix_time = 0;  // when it was recorded
  std::string evaluator;  // who evaluated it: "" in one process, "rank N" (host) in a distributed tune
};

// A later, longer measurement of a recorded candidate (successive halving's upper rungs and the
// interleaved acceptance test): `kind` is "rung1", "accept" (the challenger) or "incumbent" (the
// incumbent timed in the same interleaved round).
struct Measurement {
  int64_t candidate_id = 0;
  std::string kind;
  double median_ms = 0, cv = 0;
  int runs = 0;
  double unix_time = 0;
};

class Database {
 public:
  // Opens (creating if needed) the database at `path`: WAL journal, busy timeout, schema
  // version check. A file that is not a Tactician database, or is locked beyond the timeout,
  // is a clear error naming the path.
  static Result<std::unique_ptr<Database>> open(const std::string& path);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Inserts one candidate (committed before it returns: a kill -9 afterwards loses nothing).
  Result<int64_t> insert(const CandidateRecord& r);
  // Records a later measurement of candidate `m.candidate_id` (committed before it returns).
  Status add_measurement(const Measurement& m);
  // Every measurement of the file, in insertion order.
  Result<std::vector<Measurement>> measurements();
  // The record of `route` for this model/device/version, if any.
  Result<std::optional<CandidateRecord>> find(const std::string& model_hash, const std::string& device,
                                              const std::string& tool_version, const std::string& route);
  // Every record for this model/device/version, in insertion order.
  Result<std::vector<CandidateRecord>> all(const std::string& model_hash, const std::string& device,
                                           const std::string& tool_version);
  // Every record of the file, in insertion order (report, explain).
  Result<std::vector<CandidateRecord>> everything();
  // One JSON object per line, every record.
  Status export_jsonl(const std::string& path);

 private:
  Database() = default;
  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace tac::tuner
