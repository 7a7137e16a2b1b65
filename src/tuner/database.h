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

// Why `r` cannot be used as a candidate of a tune, a report or an explanation: an unknown status,
// a route that does not parse or is not in the canonical form the tuner writes, a number out of
// its range (a negative or non-finite time, no runs for an `ok`, threads below 1), metrics that
// are not the accuracy gate's JSON list (tuner/accuracy.h). OK for any record the tuner writes.
Status validate_candidate(const CandidateRecord& r);

// The records of `records` that validate_candidate accepts; each other one is left out and
// described in `skipped` as describe_row does, `db_path` naming the file.
std::vector<CandidateRecord> usable_candidates(std::vector<CandidateRecord> records, const std::string& db_path,
                                               std::vector<std::string>& skipped);

// "<db_path>: row <id> (route '<route>'): <why>", the route shortened and its control bytes escaped.
std::string describe_row(const std::string& db_path, int64_t id, const std::string& route, const std::string& why);

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

// Reading: every value read back is input (the file may have been edited, or damaged). A row
// whose columns do not hold what insert() writes there (text in a number column, an integer out
// of its range) is never returned: given `skipped`, a read leaves it out and describes it there
// (describe_row); without, it is an error. Whether the values make sense as a candidate is
// validate_candidate's question, asked by the readers that use them.
class Database {
 public:
  enum class Mode {
    read_write,  // created if missing (tune)
    read_only,   // must exist; never created or modified (report, explain)
  };
  // Opens the database at `path`: WAL journal, busy timeout, schema version check. A file that is
  // not a Tactician database, or is locked beyond the timeout, is a clear error naming the path;
  // read_only: a missing file is "<path>: no such tuning database".
  static Result<std::unique_ptr<Database>> open(const std::string& path, Mode mode = Mode::read_write);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Inserts one candidate (committed before it returns: a kill -9 afterwards loses nothing).
  Result<int64_t> insert(const CandidateRecord& r);
  // Records a later measurement of candidate `m.candidate_id` (committed before it returns).
  Status add_measurement(const Measurement& m);
  // Every measurement of the file, in insertion order.
  Result<std::vector<Measurement>> measurements(std::vector<std::string>* skipped = nullptr);
  // The record of `route` for this model/device/version, if any.
  Result<std::optional<CandidateRecord>> find(const std::string& model_hash, const std::string& device,
                                              const std::string& tool_version, const std::string& route);
  // Every record for this model/device/version, in insertion order.
  Result<std::vector<CandidateRecord>> all(const std::string& model_hash, const std::string& device,
                                           const std::string& tool_version, std::vector<std::string>* skipped = nullptr);
  // Every record of the file, in insertion order (report, explain).
  Result<std::vector<CandidateRecord>> everything(std::vector<std::string>* skipped = nullptr);
  // One JSON object per line, every record.
  Status export_jsonl(const std::string& path, std::vector<std::string>* skipped = nullptr);
  const std::string& path() const { return path_; }

 private:
  Database() = default;
  sqlite3* db_ = nullptr;
  std::string path_;
  // A read-only file of the first layout may lack these (read_write adds them on open).
  bool has_evaluator_ = true, has_measurements_ = true;
};

}  // namespace tac::tuner
