// One tune as an object (DESIGN.md section 3 "The tuner"): tune() constructs a TuneSession and
// runs its phases in order, each in its own file:
//
//   session.cc  setup (model, database, reference data, knob and search space), resume, the
//               default route and the evaluators' relative speeds; the bookkeeping every phase
//               shares (recording candidates and measurements, the progress line, the budget)
//   seed.cc     the inspections that order the search (the default's profile, the isolated
//               selection) and the seeds evaluated before the strategy's own points
//   rungs.cc    the search loop: dispatching candidates and promotions to the evaluators and
//               handling their results (asynchronous successive halving, the acceptance test)
//   refine.cc   group, then refine: the per-node space around the incumbent
//   final.cc    the final interleaved default-vs-best comparison, the verdict and the outputs
//
// Not a public interface: tune.h is.
#pragma once

#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "builder/builder.h"
#include "builder/knobs.h"
#include "ir/graph.h"
#include "tuner/database.h"
#include "tuner/dispatch.h"
#include "tuner/strategy.h"
#include "tuner/tune.h"

namespace tac::tuner {

namespace detail {

// Writes the tuner's reference data under `dir`: the inputs and the expected outputs (given, or
// computed once: by the reference interpreter, or where that would be slow by an fp32 CPU engine
// checked against it at size 1); `dims` gains the sizes the data binds; `how` says where the
// expected outputs came from.
Status prepare_reference(const ir::Model& m, const TuneOptions& opts, const std::string& dir,
                         std::map<std::string, int64_t>& dims, std::string* how = nullptr);
// What every child of a tune or explain run is asked, with its route and measuring time: the
// reference data and int8 calibration cache under `work`, the bound dims, the backend.
EvalRequest eval_request(const TuneOptions& opts, const std::string& work, const std::vector<std::string>& dim_flags,
                         const std::string& route_text, double seconds);
// Whether the tune's tolerance is the user's (not the default fp32 one, which rejects every lower
// precision): precision knobs are then searched, and large inputs may get their expected outputs
// from an fp32 engine (prepare_reference).
bool user_tolerance(const TuneOptions& opts);
// A fresh folder of this user's alone under the system's temporary folder (mkdtemp).
Result<std::string> make_temp_dir(const std::string& prefix);
// Removes a folder when it goes out of scope ("" = nothing).
struct RemoveOnExit {
  std::string dir;
  RemoveOnExit() = default;
  explicit RemoveOnExit(std::string d) : dir(std::move(d)) {}
  RemoveOnExit(const RemoveOnExit&) = delete;
  RemoveOnExit& operator=(const RemoveOnExit&) = delete;
  ~RemoveOnExit();
};
// What a strategy learns of a candidate: its median, +infinity unless it passed.
inline double objective(const CandidateRecord& rec) { return rec.status == "ok" ? rec.median_ms : INFINITY; }
// `v` with `prec` decimals.
std::string fmt(double v, int prec = 3);

}  // namespace detail

class TuneSession {
 public:
  TuneSession(const TuneOptions& opts, const Progress& progress);
  Result<TuneSummary> run();

 private:
  // Successive halving, asynchronous (ASHA): rung 0 is the cheap measurement every candidate
  // gets; a candidate in the top 1/kEta of rung 0 that is within the noise of the incumbent (or
  // clearly faster than it) is promoted to rung 1, a kEta times longer measurement; the same rule
  // promotes from rung 1 to rung 2, the acceptance test: careful measurements interleaved with
  // the incumbent, A/B/A/B, where the challenger wins only by more than the measured noise.
  static constexpr int kEta = 3, kAccept = 2, kAcceptRounds = 4;
  struct Entry {  // a successful candidate, this run's or resumed
    CandidateRecord rec;
    std::vector<double> score;  // measured median per rung reached
    bool busy = false;          // a re-measurement of it is in flight
  };
  enum class JobKind { candidate, rung, accept, profile };
  struct InFlight {
    JobKind kind = JobKind::candidate;
    std::string route;  // candidate: the active route text; profile: the incumbent's route
    std::string who;
    size_t entry = 0, incumbent_at = 0;  // rung, accept: the entry measured, the incumbent when dispatched
    int rung = 0;
  };
  struct Waiter {  // a point of a strategy's space waiting for the candidate it maps to
    History* hist;
    Point point;
  };
  struct Seed {  // a route evaluated before the strategy's own points (and its point, if any)
    std::string route, who;
    std::optional<Point> point;
  };

  // session.cc: the phases before the search.
  Status set_up();
  Status resume();
  Status measure_default();
  Status measure_rank_speeds();
  // seed.cc
  void inspect_default();
  void plan_seeds();
  Status calibrate_once(const builder::BuildOptions& bopts);
  // rungs.cc
  Status search();
  Status dispatch_route(const std::string& text, const std::string& by, History* hist, const std::optional<Point>& p);
  Status dispatch_promotion(size_t i, int rung);
  Status dispatch_next_proposal();
  Status handle(JobDone& d);
  Status handle_candidate(const InFlight& f, const JobDone& d);
  Status handle_accept(const InFlight& f, const JobDone& d);
  std::optional<std::pair<size_t, int>> next_promotion() const;
  // refine.cc
  bool refine_due() const;
  Status start_refining(const EvalResult& prof, const std::string& inc_text);
  // final.cc
  void final_comparison();
  Status write_outputs();

  // Shared bookkeeping (session.cc).
  double elapsed() const;
  double spent() const;             // the largest share of any budget spent
  std::string budget_left() const;  // "" while every budget lasts, else why it ran out
  void line(const std::string& what) const;
  EvalRequest request(const std::string& route_text, double seconds) const;
  EvalRequest remeasure_request(const std::string& route, double seconds) const;
  EvalRequest inspect_request(const std::string& route, bool with_profile) const;
  std::string with_threads(builder::Route r) const;
  std::string active_text(const builder::Route& route) const;
  EvalJob job_of(std::vector<EvalRequest> requests, bool candidate = false) const;
  EvalResult eval_now(const EvalRequest& rq, double timeout_s = 0);
  Status submit(InFlight f, std::vector<EvalRequest> requests);
  Result<CandidateRecord> record_candidate(const std::string& text, const std::string& who, const EvalResult& r,
                                           const std::string& evaluator);
  Status record(int64_t id, const std::string& kind, const EvalResult& r);
  Result<CandidateRecord> evaluate(const SearchSpace& sp, History& hist, const Point& p, const std::string& who);
  void add_entry(const CandidateRecord& rec);
  double speed_of(int rank) const;
  void account(const EvalResult& r);  // adds an evaluation to sum_.time

  const TuneOptions& opts_;
  const Progress& progress_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  TuneSummary sum_;

  // Set up once.
  ir::Model model_;
  std::unique_ptr<Database> db_;
  std::map<std::string, int64_t> dims_;
  std::vector<std::string> dim_flags_;
  std::string work_;
  detail::RemoveOnExit cleanup_;  // without --out, the reference data's temporary folder
  double setup_s_ = 0;            // loading the model and computing the reference outputs
  builder::KnobSpace knobs_;
  std::string threads_;
  SearchSpace space_;
  std::string device_;
  std::unique_ptr<Strategy> strategy_;  // searches space_
  bool takes_seeds_ = false;            // strategy_->takes_seeds()

  // Evaluations.
  std::unique_ptr<Evaluators> own_pool_;
  Evaluators* pool_ = nullptr;
  double candidate_timeout_s_ = 0;
  std::string reference_evaluator_;                  // who ran the last eval_now
  History history_;                                  // of space_
  std::map<std::string, CandidateRecord> by_route_;  // by active route text
  int candidates_in_flight_ = 0;                     // dispatched, not yet recorded: counted against the candidate budget

  // Halving.
  std::vector<Entry> entries_;
  std::map<std::string, size_t> entry_of_;
  double rung1_seconds_ = 0;
  CandidateRecord def_;
  size_t incumbent_ = 0;
  // Latency of the incumbent in the units of the default's cheap measurement (for the progress
  // line and the strategies' scale).
  double incumbent_ms_ = 0;
  std::map<int, double> speed_;  // by rank; absent: 1
  int promoted_[kAccept + 1] = {0, 0, 0};

  // Seeds and inspections.
  EvalResult def_profile_, isolated_;
  std::deque<Seed> seeds_;

  // The strategy proposing now: strategy_ on space_, then the refiner on the refined space.
  bool can_refine_ = false;
  const SearchSpace* cur_space_ = nullptr;
  History* cur_history_ = nullptr;
  Strategy* cur_ = nullptr;
  std::string who_;
  SearchSpace refined_;
  History refined_history_;
  std::unique_ptr<Strategy> refiner_;
  std::deque<Point> proposals_;  // proposed by cur_, not yet dispatched
  bool exhausted_ = false;       // cur_ has nothing left to propose

  // The jobs in flight, by ticket.
  std::map<uint64_t, InFlight> inflight_;
  uint64_t next_ticket_ = 1;
  std::map<std::string, std::vector<Waiter>> waiting_;  // candidate route in flight -> the points that map to it
  std::set<std::pair<const History*, Point>> points_in_flight_;

  // The final comparison.
  CandidateRecord best_rec_;
};

}  // namespace tac::tuner
