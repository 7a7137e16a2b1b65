// Where the tuner's evaluations run (DESIGN.md section 3, "Evaluator"; issue 6): a pool of
// evaluators that each run one job at a time, a job being one or more EvalRequests executed in
// order, each in its own child process (evaluate_in_child). The tuner submits jobs to idle
// evaluators and collects whichever finishes first, so a free evaluator never waits for the
// slowest one.
//
// Two pools exist: the local one (this process, one evaluator, jobs run at submission: the
// single-process tune) and the MPI one (tuner/distributed.h: one evaluator per worker rank).
// This header and dispatch.cc need no MPI: the wire format and the dispatch bookkeeping are
// tested without it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tactician/status.h"
#include "tuner/evaluator.h"

namespace tac::tuner {

// One unit of work for one evaluator: requests run in order, on the same device (an interleaved
// A/B acceptance test is one job, so both sides are timed on the same core or GPU).
struct EvalJob {
  std::vector<EvalRequest> requests;
  EvalLimits limits;
};

struct JobDone {
  uint64_t ticket = 0;
  std::vector<EvalResult> results;  // one per request; on a lost evaluator all "crashed", the reason naming the rank
  int rank = 0;                      // the evaluator that ran it (0: the local pool)
  bool lost = false;                 // the evaluator missed its deadline: no result came back
  std::string evaluator;             // "rank N (host)"; "" for the local pool (recorded in the database)
};

class Evaluators {
 public:
  virtual ~Evaluators() = default;
  virtual size_t live() const = 0;  // evaluators not lost
  virtual size_t idle() const = 0;  // live evaluators without a job
  virtual size_t busy() const = 0;  // jobs in flight
  // Makes the reference data (input_K.pb, expected_K.pb under `data_dir`) available to every
  // evaluator (MPI: a copy is sent to each worker, which may run on another host).
  virtual Status share_data(const std::string& data_dir) = 0;
  // Starts `job` on an idle evaluator; with `reference`, on the reference evaluator (the first
  // live one: the default's measurements and the final comparison all run there, on one device),
  // which must then be idle. Precondition: idle() > 0.
  virtual Status submit(uint64_t ticket, const EvalJob& job, bool reference) = 0;
  // The next finished (or lost) job; nullopt when nothing is in flight. Never waits past the
  // deadline of the jobs in flight: an evaluator past it is declared lost and gets no more work.
  virtual std::optional<JobDone> next() = 0;
  // One line about the pool, for the progress output ("3 evaluator ranks ...").
  virtual std::string describe() const = 0;
};

// The single-process pool: one evaluator, this process; submit() runs the job at once.
std::unique_ptr<Evaluators> local_evaluators();

// Runs one job on the reference evaluator and waits for it (nothing else may be in flight).
// `evaluator`, if given, receives the JobDone's evaluator.
std::vector<EvalResult> run_on_reference(Evaluators& pool, const EvalJob& job, std::string* evaluator = nullptr);

// Seconds a job may take before its evaluator is declared lost: each request's child time limit
// plus a margin for the exec, the model load and the transfers.
double job_deadline_s(const EvalJob& job);

// Which evaluator rank runs what, and until when (the MPI pool's bookkeeping, kept free of MPI
// so it is unit-tested). Idle ranks queue in the order they became idle: the rank that reported
// first gets the next job.
class DispatchQueue {
 public:
  explicit DispatchQueue(std::vector<int> ranks);  // the evaluator ranks, the first one the reference
  // Gives `ticket` (due by `deadline`) to the longest-idle rank, or with `reference` to the
  // reference rank (nullopt when it is busy); nullopt when no rank is idle.
  std::optional<int> assign(uint64_t ticket, double deadline, bool reference = false);
  // `rank` reported a result: frees it and returns its ticket; nullopt for a rank that was not
  // busy (a late answer from a rank already declared lost, or a stray message).
  std::optional<uint64_t> complete(int rank);
  // Busy ranks whose deadline is before `now`: declared lost (never given work again), with the
  // tickets they held.
  std::vector<std::pair<int, uint64_t>> expire(double now);
  // Declares `rank` lost now (it failed, or never said hello); returns the ticket it held, if any.
  std::optional<uint64_t> declare_lost(int rank);
  // The earliest deadline of the jobs in flight (nullopt when none).
  std::optional<double> next_deadline() const;
  size_t live() const;
  size_t idle() const { return idle_.size(); }
  size_t busy() const;
  std::optional<int> reference() const;  // the first live rank
  bool is_lost(int rank) const;
  const std::vector<int>& ranks() const { return ranks_; }
  std::vector<int> lost_ranks() const;

 private:
  struct Slot {
    int rank = 0;
    bool busy = false, lost = false;
    uint64_t ticket = 0;
    double deadline = 0;
  };
  Slot* find(int rank);
  const Slot* find(int rank) const;
  std::vector<int> ranks_;
  std::vector<Slot> slots_;
  std::deque<int> idle_;
};

// The wire format between rank 0 and the workers (and a stable text form for tests): fields
// "key <length>\n<bytes>\n", repeated keys for lists, nested fields inside a value. Doubles are
// written with 17 significant digits, so a round trip is exact.
std::string encode_request(const EvalRequest& r);
Result<EvalRequest> decode_request(const std::string& text);
std::string encode_result(const EvalResult& r);
Result<EvalResult> decode_result(const std::string& text);
std::string encode_job(const EvalJob& job);
Result<EvalJob> decode_job(const std::string& text);
std::string encode_results(const std::vector<EvalResult>& results);
Result<std::vector<EvalResult>> decode_results(const std::string& text);

// The field codec underneath (also used for the data files sent to workers).
class FieldWriter {
 public:
  void put(const std::string& key, const std::string& value);
  void put(const std::string& key, double value);
  void put(const std::string& key, int64_t value);
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};
// Parses "key <length>\n<bytes>\n" fields in order; an error names the offset of a malformed field.
Result<std::vector<std::pair<std::string, std::string>>> read_fields(const std::string& text);

}  // namespace tac::tuner
