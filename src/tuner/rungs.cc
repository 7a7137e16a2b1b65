// TuneSession's search loop: the jobs in flight, by ticket. This process keeps every idle
// evaluator busy: whenever one is idle it gets the most urgent work, in this order: a promotion
// (a re-measurement deciding the incumbent), a seed, the incumbent's profile when refinement is
// due, the next point the strategy proposed. Results are handled in the order they come back, so
// a free evaluator never waits for the slowest. With one evaluator this is the single-process
// tuner's order exactly.
#include <algorithm>
#include <cmath>

#include "tuner/halving.h"
#include "tuner/interrupt.h"
#include "tuner/session.h"

namespace tac::tuner {

Status TuneSession::search() {
  while (true) {
    while (pool_->idle() > 0) {  // fill every idle evaluator
      if (elapsed() < opts_.budget_s && interrupt_signal() == 0)
        if (auto up = next_promotion()) {
          TAC_RETURN_IF_ERROR(dispatch_promotion(up->first, up->second));
          continue;
        }
      if (!budget_left().empty()) break;
      if (!seeds_.empty()) {
        Seed s = seeds_.front();
        seeds_.pop_front();
        TAC_RETURN_IF_ERROR(dispatch_route(s.route, s.who, s.point ? &history_ : nullptr, s.point));
        continue;
      }
      if (refine_due()) {
        can_refine_ = false;
        InFlight f;
        f.kind = JobKind::profile;
        f.route = entries_[incumbent_].rec.route;
        TAC_RETURN_IF_ERROR(submit(std::move(f), {inspect_request(entries_[incumbent_].rec.route, true)}));
        continue;
      }
      if (proposals_.empty() && !exhausted_) {
        // Points in flight are not in the history yet: ask for that many more and skip them.
        size_t pending = 0;
        for (const auto& [h, p] : points_in_flight_) pending += h == cur_history_;
        std::vector<Point> batch = cur_->propose(*cur_history_, opts_.batch + pending);
        exhausted_ = batch.empty();
        for (Point& p : batch)
          if (!points_in_flight_.count({cur_history_, p}) &&
              std::find(proposals_.begin(), proposals_.end(), p) == proposals_.end())
            proposals_.push_back(std::move(p));
      }
      if (proposals_.empty()) break;  // nothing to start now: wait for results
      const Point p = proposals_.front();
      proposals_.pop_front();
      TAC_RETURN_IF_ERROR(dispatch_route(active_text(route_of(*cur_space_, p)), who_, cur_history_, p));
    }
    if (pool_->busy() == 0) break;  // nothing in flight and nothing to start: the search is over
    std::optional<JobDone> d = pool_->next();
    if (!d) break;
    TAC_RETURN_IF_ERROR(handle(*d));
  }
  if (pool_->live() == 0 && interrupt_signal() == 0)
    return internal_error("every evaluator rank was lost: the search cannot go on");
  if (std::string why = budget_left(); !why.empty()) sum_.stop_reason = why;
  else sum_.stop_reason = "search space exhausted by " + who_;
  return Status::ok();
}

// Promotion only decides who is re-measured: the incumbent's per-run cv, bounded (a few
// interrupted runs must not make "within the noise" mean "within 2x").
std::optional<std::pair<size_t, int>> TuneSession::next_promotion() const {
  std::vector<std::vector<double>> scores;
  std::vector<bool> busy;
  for (const Entry& e : entries_) {
    scores.push_back(e.score);
    busy.push_back(e.busy);
  }
  return tuner::next_promotion(scores, incumbent_, kEta, kAccept, std::clamp(entries_[incumbent_].rec.cv, 0.02, 0.10), busy);
}

// Dispatches the evaluation of a route (and of the point `p` of `hist`'s space mapping to it),
// unless the database has it or it is in flight already.
Status TuneSession::dispatch_route(const std::string& text, const std::string& by, History* hist, const std::optional<Point>& p) {
  if (auto it = by_route_.find(text); it != by_route_.end()) {
    if (hist && p && !hist->contains(*p)) hist->trials.push_back({*p, detail::objective(it->second)});
    add_entry(it->second);
    return Status::ok();
  }
  const bool running = waiting_.count(text) > 0;
  std::vector<Waiter>& w = waiting_[text];
  if (hist && p) {
    w.push_back({hist, *p});
    points_in_flight_.insert({hist, *p});
  }
  if (running) return Status::ok();
  InFlight f;
  f.kind = JobKind::candidate;
  f.route = text;
  f.who = by;
  return submit(std::move(f), {request(text, opts_.cheap_seconds)});
}

Status TuneSession::dispatch_promotion(size_t i, int rung) {
  ++promoted_[rung];
  entries_[i].busy = true;
  InFlight f;
  f.kind = rung < kAccept ? JobKind::rung : JobKind::accept;
  f.entry = i;
  f.rung = rung;
  f.incumbent_at = incumbent_;
  if (rung < kAccept) return submit(std::move(f), {remeasure_request(entries_[i].rec.route, rung1_seconds_)});
  // The acceptance test: incumbent and challenger built in one child and timed there in
  // alternating blocks, 4 rounds (paired: a slow spell of the machine falls on both; separate
  // children per side disagreed by up to 30% on a shared 2-core VM).
  EvalRequest a = remeasure_request(entries_[incumbent_].rec.route, 2 * opts_.careful_seconds);
  a.compare_route = entries_[i].rec.route;
  a.compare_rounds = kAcceptRounds;
  return submit(std::move(f), {a});
}

Status TuneSession::handle(JobDone& d) {
  auto it = inflight_.find(d.ticket);
  if (it == inflight_.end()) return internal_error("a result for an unknown job came back");
  const InFlight f = std::move(it->second);
  inflight_.erase(it);
  if (d.lost) line(d.results.empty() ? std::string("an evaluator was lost") : d.results[0].reason);
  for (const EvalResult& r : d.results) account(r);
  // An interrupted job measured nothing: nothing is recorded (a resume evaluates the candidate
  // again), and the search is stopping (budget_left).
  const bool cut = std::any_of(d.results.begin(), d.results.end(), [](const EvalResult& r) { return r.status == "interrupted"; });
  if (cut) {
    if (f.kind == JobKind::candidate) {
      --candidates_in_flight_;
      for (const Waiter& w : waiting_[f.route]) points_in_flight_.erase({w.hist, w.point});
      waiting_.erase(f.route);
    } else if (f.kind != JobKind::profile) {
      entries_[f.entry].busy = false;
    }
    return Status::ok();
  }
  switch (f.kind) {
    case JobKind::candidate: return handle_candidate(f, d);
    case JobKind::profile: return start_refining(d.results.at(0), f.route);
    case JobKind::rung: {
      Entry& e = entries_[f.entry];
      e.busy = false;
      const EvalResult& r = d.results.at(0);
      TAC_RETURN_IF_ERROR(record(e.rec.id, "rung" + std::to_string(f.rung), r));
      e.score.push_back(r.status == "ok" ? r.median_ms / speed_of(d.rank) : INFINITY);
      return Status::ok();
    }
    case JobKind::accept: return handle_accept(f, d);
  }
  return internal_error("a job of an unknown kind came back");
}

Status TuneSession::handle_candidate(const InFlight& f, const JobDone& d) {
  --candidates_in_flight_;
  ++sum_.candidates_by_rank[d.rank];
  TAC_ASSIGN_OR_RETURN(CandidateRecord rec, record_candidate(f.route, f.who, d.results.at(0), d.evaluator));
  rec.median_ms /= speed_of(d.rank);  // ranked in the reference evaluator's units (the database keeps the raw time)
  by_route_[f.route] = rec;
  for (const Waiter& w : waiting_[f.route]) {
    if (!w.hist->contains(w.point)) w.hist->trials.push_back({w.point, detail::objective(rec)});
    points_in_flight_.erase({w.hist, w.point});
  }
  waiting_.erase(f.route);
  add_entry(rec);
  const bool seed = f.who.rfind("isolated", 0) == 0 || f.who == "approximate" || f.who == "precision";
  line(seed ? f.who + " seed: " + rec.status + " " + detail::fmt(rec.median_ms) + " ms" : "");
  return Status::ok();
}

// The acceptance test's result: the incumbent's and the challenger's sides of one paired
// measurement.
Status TuneSession::handle_accept(const InFlight& f, const JobDone& d) {
  Entry& e = entries_[f.entry];
  e.busy = false;
  Entry& inc = entries_[f.incumbent_at];
  const EvalResult& r = d.results.at(0);
  EvalResult rc = r;  // the challenger's side of the paired measurement
  rc.median_ms = r.compare_median_ms;
  TAC_RETURN_IF_ERROR(record(inc.rec.id, "incumbent", r));
  TAC_RETURN_IF_ERROR(record(e.rec.id, "accept", rc));
  if (r.status != "ok") {
    e.score.push_back(INFINITY);
    return Status::ok();
  }
  // Another challenger won while this test ran: this one stays on its rung, to be tested against
  // the new incumbent.
  if (f.incumbent_at != incumbent_) return Status::ok();
  const double mi = r.median_ms, mc = r.compare_median_ms;
  e.score.push_back(mc / speed_of(d.rank));
  // The challenger wins when it is faster in every round and by more than the rounds' own noise
  // (halving.h challenger_wins): the paired rounds are the measurement being judged, so their
  // spread is the noise, not the per-run spread of an earlier cheap measurement (a few
  // interrupted runs gave a cv of 0.5 to 2.4 on a shared 2-core machine and blocked every
  // challenger, a 1.74x faster one included).
  if (challenger_wins(r.paired_low, r.paired_ratio, r.paired_noise)) {
    incumbent_ms_ = mc * (incumbent_ms_ / mi);
    incumbent_ = f.entry;
    line("new best: " + (e.rec.route.empty() ? std::string("(default)") : e.rec.route));
  }
  return Status::ok();
}

}  // namespace tac::tuner
