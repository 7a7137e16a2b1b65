#include "tuner/dispatch.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace tac::tuner {

// ---------------------------------------------------------------------------------------------
// Field codec.

void FieldWriter::put(const std::string& key, const std::string& value) {
  out_ += key;
  out_ += ' ';
  out_ += std::to_string(value.size());
  out_ += '\n';
  out_ += value;
  out_ += '\n';
}

void FieldWriter::put(const std::string& key, double value) {
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", value);
  put(key, std::string(b));
}

void FieldWriter::put(const std::string& key, int64_t value) { put(key, std::to_string(value)); }

Result<std::vector<std::pair<std::string, std::string>>> read_fields(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t sp = text.find(' ', i), nl = sp == std::string::npos ? sp : text.find('\n', sp);
    if (sp == std::string::npos || nl == std::string::npos)
      return invalid_argument("malformed field at byte " + std::to_string(i) + ": no 'key length' header");
    const std::string len_text = text.substr(sp + 1, nl - sp - 1);
    char* end = nullptr;
    const unsigned long long len = std::strtoull(len_text.c_str(), &end, 10);
    if (len_text.empty() || (end && *end) || nl + 1 + len + 1 > text.size() || text[nl + 1 + len] != '\n')
      return invalid_argument("malformed field at byte " + std::to_string(i) + ": bad length '" + len_text + "'");
    out.emplace_back(text.substr(i, sp - i), text.substr(nl + 1, len));
    i = nl + 1 + len + 1;
  }
  return out;
}

namespace {

double to_double(const std::string& v) { return std::strtod(v.c_str(), nullptr); }
int64_t to_int(const std::string& v) { return std::strtoll(v.c_str(), nullptr, 10); }

}  // namespace

std::string encode_request(const EvalRequest& r) {
  FieldWriter w;
  w.put("model_path", r.model_path);
  w.put("data_dir", r.data_dir);
  w.put("route", r.route);
  w.put("tolerance", r.tolerance);
  for (const std::string& d : r.dims) w.put("dim", d);
  w.put("min_seconds", r.min_seconds);
  w.put("min_runs", int64_t{r.min_runs});
  w.put("save_plan", r.save_plan);
  w.put("shapes", r.shapes);
  w.put("check", int64_t{r.check});
  w.put("measure", int64_t{r.measure});
  w.put("planted_faults", int64_t{r.planted_faults});
  w.put("profile", int64_t{r.profile});
  w.put("calibration_dir", r.calibration_dir);
  w.put("calibration_cache", r.calibration_cache);
  w.put("backend", r.backend);
  w.put("compare_route", r.compare_route);
  w.put("compare_rounds", int64_t{r.compare_rounds});
  return w.text();
}

Result<EvalRequest> decode_request(const std::string& text) {
  TAC_ASSIGN_OR_RETURN(auto fields, read_fields(text));
  EvalRequest r;
  for (const auto& [k, v] : fields) {
    if (k == "model_path") r.model_path = v;
    else if (k == "data_dir") r.data_dir = v;
    else if (k == "route") r.route = v;
    else if (k == "tolerance") r.tolerance = v;
    else if (k == "dim") r.dims.push_back(v);
    else if (k == "min_seconds") r.min_seconds = to_double(v);
    else if (k == "min_runs") r.min_runs = static_cast<int>(to_int(v));
    else if (k == "save_plan") r.save_plan = v;
    else if (k == "shapes") r.shapes = v;
    else if (k == "check") r.check = v == "1";
    else if (k == "measure") r.measure = v == "1";
    else if (k == "planted_faults") r.planted_faults = v == "1";
    else if (k == "profile") r.profile = v == "1";
    else if (k == "calibration_dir") r.calibration_dir = v;
    else if (k == "calibration_cache") r.calibration_cache = v;
    else if (k == "backend") r.backend = v;
    else if (k == "compare_route") r.compare_route = v;
    else if (k == "compare_rounds") r.compare_rounds = static_cast<int>(to_int(v));
    else return invalid_argument("evaluation request: unknown field '" + k + "'");
  }
  return r;
}

std::string encode_result(const EvalResult& r) {
  FieldWriter w;
  w.put("status", r.status);
  w.put("reason", r.reason);
  w.put("build_ms", r.build_ms);
  w.put("check_ms", r.check_ms);
  w.put("measure_ms", r.measure_ms);
  w.put("metrics_json", r.metrics_json);
  w.put("median_ms", r.median_ms);
  w.put("p10_ms", r.p10_ms);
  w.put("p90_ms", r.p90_ms);
  w.put("cv", r.cv);
  w.put("runs", int64_t{r.runs});
  w.put("wall_s", r.wall_s);
  w.put("compare_median_ms", r.compare_median_ms);
  w.put("paired_ratio", r.paired_ratio);
  w.put("paired_low", r.paired_low);
  w.put("paired_high", r.paired_high);
  w.put("paired_noise", r.paired_noise);
  for (const auto& [node, ms] : r.node_ms) {
    FieldWriter e;
    e.put("node", node);
    e.put("ms", ms);
    w.put("node_ms", e.text());
  }
  for (const auto& [node, tactic] : r.tactics) {
    FieldWriter e;
    e.put("node", node);
    e.put("tactic", tactic);
    w.put("tactic", e.text());
  }
  for (const auto& [node, list] : r.costs) {
    FieldWriter e;
    e.put("node", node);
    for (const auto& [tactic, ns] : list) {
      e.put("tactic", tactic);
      e.put("ns", ns);
    }
    w.put("costs", e.text());
  }
  return w.text();
}

Result<EvalResult> decode_result(const std::string& text) {
  TAC_ASSIGN_OR_RETURN(auto fields, read_fields(text));
  EvalResult r;
  for (const auto& [k, v] : fields) {
    if (k == "status") r.status = v;
    else if (k == "reason") r.reason = v;
    else if (k == "build_ms") r.build_ms = to_double(v);
    else if (k == "check_ms") r.check_ms = to_double(v);
    else if (k == "measure_ms") r.measure_ms = to_double(v);
    else if (k == "metrics_json") r.metrics_json = v;
    else if (k == "median_ms") r.median_ms = to_double(v);
    else if (k == "p10_ms") r.p10_ms = to_double(v);
    else if (k == "p90_ms") r.p90_ms = to_double(v);
    else if (k == "cv") r.cv = to_double(v);
    else if (k == "runs") r.runs = static_cast<int>(to_int(v));
    else if (k == "wall_s") r.wall_s = to_double(v);
    else if (k == "compare_median_ms") r.compare_median_ms = to_double(v);
    else if (k == "paired_ratio") r.paired_ratio = to_double(v);
    else if (k == "paired_low") r.paired_low = to_double(v);
    else if (k == "paired_high") r.paired_high = to_double(v);
    else if (k == "paired_noise") r.paired_noise = to_double(v);
    else if (k == "node_ms" || k == "tactic" || k == "costs") {
      TAC_ASSIGN_OR_RETURN(auto sub, read_fields(v));
      std::string node;
      std::vector<std::pair<std::string, double>> list;
      std::string value;
      double ms = 0;
      for (const auto& [sk, sv] : sub) {
        if (sk == "node") node = sv;
        else if (sk == "ms") ms = to_double(sv);
        else if (sk == "tactic" && k == "tactic") value = sv;
        else if (sk == "tactic") list.emplace_back(sv, 0.0);
        else if (sk == "ns" && !list.empty()) list.back().second = to_double(sv);
        else return invalid_argument("evaluation result: unknown field '" + k + "." + sk + "'");
      }
      if (k == "node_ms") r.node_ms[node] = ms;
      else if (k == "tactic") r.tactics[node] = value;
      else r.costs[node] = std::move(list);
    } else {
      return invalid_argument("evaluation result: unknown field '" + k + "'");
    }
  }
  return r;
}

std::string encode_job(const EvalJob& job) {
  FieldWriter w;
  w.put("timeout_s", job.limits.timeout_s);
  w.put("memory_bytes", job.limits.memory_bytes);
  w.put("binary", job.limits.binary);
  w.put("persistent", int64_t{job.limits.persistent});
  for (const EvalRequest& r : job.requests) w.put("request", encode_request(r));
  return w.text();
}

Result<EvalJob> decode_job(const std::string& text) {
  TAC_ASSIGN_OR_RETURN(auto fields, read_fields(text));
  EvalJob job;
  for (const auto& [k, v] : fields) {
    if (k == "timeout_s") job.limits.timeout_s = to_double(v);
    else if (k == "memory_bytes") job.limits.memory_bytes = to_int(v);
    else if (k == "binary") job.limits.binary = v;
    else if (k == "persistent") job.limits.persistent = to_int(v) != 0;
    else if (k == "request") {
      TAC_ASSIGN_OR_RETURN(EvalRequest r, decode_request(v));
      job.requests.push_back(std::move(r));
    } else {
      return invalid_argument("evaluation job: unknown field '" + k + "'");
    }
  }
  return job;
}

std::string encode_results(const std::vector<EvalResult>& results) {
  FieldWriter w;
  for (const EvalResult& r : results) w.put("result", encode_result(r));
  return w.text();
}

Result<std::vector<EvalResult>> decode_results(const std::string& text) {
  TAC_ASSIGN_OR_RETURN(auto fields, read_fields(text));
  std::vector<EvalResult> out;
  for (const auto& [k, v] : fields) {
    if (k != "result") return invalid_argument("evaluation results: unknown field '" + k + "'");
    TAC_ASSIGN_OR_RETURN(EvalResult r, decode_result(v));
    out.push_back(std::move(r));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Dispatch bookkeeping.

DispatchQueue::DispatchQueue(std::vector<int> ranks) : ranks_(std::move(ranks)) {
  for (int r : ranks_) {
    slots_.push_back({r});
    idle_.push_back(r);
  }
}

DispatchQueue::Slot* DispatchQueue::find(int rank) {
  for (Slot& s : slots_)
    if (s.rank == rank) return &s;
  return nullptr;
}

const DispatchQueue::Slot* DispatchQueue::find(int rank) const {
  for (const Slot& s : slots_)
    if (s.rank == rank) return &s;
  return nullptr;
}

std::optional<int> DispatchQueue::reference() const {
  for (const Slot& s : slots_)
    if (!s.lost) return s.rank;
  return std::nullopt;
}

std::optional<int> DispatchQueue::assign(uint64_t ticket, double deadline, bool reference) {
  if (idle_.empty()) return std::nullopt;
  auto it = idle_.begin();
  if (reference) {
    const std::optional<int> ref = this->reference();
    if (!ref) return std::nullopt;
    it = std::find(idle_.begin(), idle_.end(), *ref);
    if (it == idle_.end()) return std::nullopt;
  }
  const int rank = *it;
  idle_.erase(it);
  Slot* s = find(rank);
  s->busy = true;
  s->ticket = ticket;
  s->deadline = deadline;
  return rank;
}

std::optional<uint64_t> DispatchQueue::complete(int rank) {
  Slot* s = find(rank);
  if (!s || !s->busy || s->lost) return std::nullopt;
  s->busy = false;
  idle_.push_back(rank);
  return s->ticket;
}

std::vector<std::pair<int, uint64_t>> DispatchQueue::expire(double now) {
  std::vector<std::pair<int, uint64_t>> out;
  for (Slot& s : slots_)
    if (s.busy && !s.lost && s.deadline < now) {
      s.busy = false;
      s.lost = true;
      out.emplace_back(s.rank, s.ticket);
    }
  return out;
}

std::optional<uint64_t> DispatchQueue::declare_lost(int rank) {
  Slot* s = find(rank);
  if (!s || s->lost) return std::nullopt;
  s->lost = true;
  idle_.erase(std::remove(idle_.begin(), idle_.end(), rank), idle_.end());
  if (!s->busy) return std::nullopt;
  s->busy = false;
  return s->ticket;
}

std::optional<double> DispatchQueue::next_deadline() const {
  std::optional<double> d;
  for (const Slot& s : slots_)
    if (s.busy && !s.lost && (!d || s.deadline < *d)) d = s.deadline;
  return d;
}

size_t DispatchQueue::live() const {
  return static_cast<size_t>(std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.lost; }));
}

size_t DispatchQueue::busy() const {
  return static_cast<size_t>(std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.busy && !s.lost; }));
}

bool DispatchQueue::is_lost(int rank) const {
  const Slot* s = find(rank);
  return s && s->lost;
}

std::vector<int> DispatchQueue::lost_ranks() const {
  std::vector<int> out;
  for (const Slot& s : slots_)
    if (s.lost) out.push_back(s.rank);
  return out;
}

double job_deadline_s(const EvalJob& job) {
  return static_cast<double>(job.requests.size()) * (job.limits.timeout_s + 5.0) + 10.0;
}

// ---------------------------------------------------------------------------------------------
// The local pool.

namespace {

class LocalEvaluators final : public Evaluators {
 public:
  size_t live() const override { return 1; }
  size_t idle() const override { return done_ ? 0 : 1; }
  size_t busy() const override { return done_ ? 1 : 0; }
  Status share_data(const std::string&) override { return Status::ok(); }
  Status submit(uint64_t ticket, const EvalJob& job, bool) override {
    if (done_) return internal_error("local evaluator: a job is already in flight");
    JobDone d;
    d.ticket = ticket;
    for (const EvalRequest& r : job.requests) d.results.push_back(worker_.evaluate(r, job.limits));
    done_ = std::move(d);
    return Status::ok();
  }
  std::optional<JobDone> next() override {
    std::optional<JobDone> d = std::move(done_);
    done_.reset();
    return d;
  }
  std::string describe() const override { return "1 local evaluator"; }

 private:
  std::optional<JobDone> done_;
  EvalWorker worker_;
};

}  // namespace

std::unique_ptr<Evaluators> local_evaluators() { return std::make_unique<LocalEvaluators>(); }

std::vector<EvalResult> run_on_reference(Evaluators& pool, const EvalJob& job, std::string* evaluator) {
  auto lost = [&](const std::string& why) {
    std::vector<EvalResult> out(job.requests.size());
    for (EvalResult& r : out) r.reason = why;
    return out;
  };
  if (pool.busy() > 0) return lost("internal: run_on_reference with jobs in flight");
  if (pool.live() == 0) return lost("no evaluator left (every evaluator rank was lost)");
  if (Status st = pool.submit(0, job, true); !st.is_ok()) return lost(st.message());
  std::optional<JobDone> d = pool.next();
  if (!d) return lost("internal: the reference evaluator returned nothing");
  if (evaluator) *evaluator = d->evaluator;
  return d->results;
}

}  // namespace tac::tuner
