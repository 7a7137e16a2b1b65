// The MPI side of distributed tuning (tuner/distributed.h). Protocol, all on MPI_COMM_WORLD:
//   worker -> 0   kHello   fields: host, placement, error ("" when the worker can serve)
//   0 -> worker   kData    the reference data files (names and bytes) and rank 0's folder name
//   0 -> worker   kJob     encode_job(): requests run in order, each in a child process
//   worker -> 0   kResult  encode_results(), one per request
//   0 -> worker   kStop    empty: the worker finalizes and exits
// Rank 0 never blocks in MPI: it polls (MPI_Iprobe, 2 ms sleeps, so an idle coordinator costs no
// core) and enforces each job's deadline; a worker that misses it is declared lost, its job's
// results are recorded as crashed with a reason naming the rank, and it gets no more work.
//
// Rank 0 coordinates only and evaluates nothing: its polling, database writes and strategy
// updates would otherwise share a core with a timed engine, and the default's measurements and
// the final default-vs-best comparison must run on one fixed device anyway (the reference
// evaluator, rank 1). Launch N = evaluators + 1 ranks.
#include "tuner/distributed.h"

#include "tuner/interrupt.h"

// The C API only: without these, OpenMPI's mpi.h drags in its deprecated C++ bindings (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

namespace tac::tuner {

namespace {

constexpr int kHello = 1, kData = 2, kJob = 3, kResult = 4, kStop = 5;
bool g_rank_lost = false;  // rank 0: a worker was declared lost (MPI_Finalize could wait for it forever)
int g_node_slot = 0;       // this rank's evaluator index on its host (mpi_start)

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
void nap() { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }

std::string mpi_error_text(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, static_cast<size_t>(len));
}

// Receives the message `st` announced (its size from MPI_Get_count).
Result<std::string> receive(const MPI_Status& probed) {
  int count = 0;
  MPI_Get_count(&probed, MPI_CHAR, &count);
  std::string buf(static_cast<size_t>(count), '\0');
  MPI_Status st;
  int rc = MPI_Recv(buf.data(), count, MPI_CHAR, probed.MPI_SOURCE, probed.MPI_TAG, MPI_COMM_WORLD, &st);
  if (rc != MPI_SUCCESS) return internal_error("MPI_Recv from rank " + std::to_string(probed.MPI_SOURCE) + ": " + mpi_error_text(rc));
  return buf;
}

// Sends without blocking past `limit_s` (a peer that stopped receiving must not hang us).
Status send_within(const std::string& msg, int dest, int tag, double limit_s) {
  MPI_Request rq;
  int rc = MPI_Isend(msg.data(), static_cast<int>(msg.size()), MPI_CHAR, dest, tag, MPI_COMM_WORLD, &rq);
  if (rc != MPI_SUCCESS) return internal_error("MPI_Isend to rank " + std::to_string(dest) + ": " + mpi_error_text(rc));
  const double until = now_s() + limit_s;
  while (true) {
    int done = 0;
    rc = MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return internal_error("MPI_Test on a send to rank " + std::to_string(dest) + ": " + mpi_error_text(rc));
    if (done) return Status::ok();
    if (now_s() > until) {
      MPI_Cancel(&rq);
      MPI_Request_free(&rq);
      return internal_error("rank " + std::to_string(dest) + " did not take a message within " +
                            std::to_string(static_cast<int>(limit_s)) + " s");
    }
    nap();
  }
}

std::string host_name() {
  char h[256] = {0};
  gethostname(h, sizeof h - 1);
  return h;
}

// This worker's place on its host: the index among the evaluators of the host (rank 0, which
// evaluates nothing, takes no slot on its host).
int node_slot() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local = 0, world = 0, min_world = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_rank(MPI_COMM_WORLD, &world);
  MPI_Allreduce(&world, &min_world, 1, MPI_INT, MPI_MIN, node);
  MPI_Comm_free(&node);
  return min_world == 0 ? local - 1 : local;
}

// Pins this process (and so its children) to its evaluator's cores, or points its children at
// its GPU. Returns a line describing the placement.
std::string place(int slot, const WorkerOptions& o) {
  if (o.backend == "cuda") {
    // The children are fresh processes: CUDA_VISIBLE_DEVICES set here is read by their CUDA
    // initialisation. A list the user set is indexed, not replaced.
    std::string dev = std::to_string(slot);
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) {
      std::vector<std::string> list;
      std::stringstream ss(v);
      for (std::string item; std::getline(ss, item, ',');) list.push_back(item);
      if (static_cast<size_t>(slot) >= list.size()) {
        const std::string given = v;  // read before setenv replaces it
        dev = list[static_cast<size_t>(slot) % list.size()];
        setenv("CUDA_VISIBLE_DEVICES", dev.c_str(), 1);
        return "SHARING GPU " + dev + ": evaluator slot " + std::to_string(slot) + " but CUDA_VISIBLE_DEVICES=" + given +
               " lists " + std::to_string(list.size()) + " (use fewer ranks)";
      }
      dev = list[static_cast<size_t>(slot)];
    } else {
      // The NVIDIA driver lists one folder per GPU here (no CUDA call needed); 0 when unknown.
      std::error_code ec;
      long gpus = 0;
      for (fs::directory_iterator it("/proc/driver/nvidia/gpus", ec), end; !ec && it != end; it.increment(ec)) ++gpus;
      if (gpus > 0 && slot >= gpus) {
        dev = std::to_string(slot % gpus);
        setenv("CUDA_VISIBLE_DEVICES", dev.c_str(), 1);
        return "SHARING GPU " + dev + ": evaluator slot " + std::to_string(slot) + " but the host has " + std::to_string(gpus) +
               " GPUs (use fewer ranks)";
      }
    }
    setenv("CUDA_VISIBLE_DEVICES", dev.c_str(), 1);
    return "GPU " + dev;
  }
  // The CPUs this process may run on (a `taskset` or cgroup mask of the launcher, inherited with
  // `mpirun --bind-to none`), in order: evaluator slot k takes the k-th group of --threads of them,
  // so ranks never pin themselves onto CPUs the user kept for other work.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    return std::string("NOT PINNED: sched_getaffinity failed: ") + std::strerror(errno);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  const size_t first = static_cast<size_t>(slot) * static_cast<size_t>(o.threads), last = first + static_cast<size_t>(o.threads);
  if (last > cpus.size())
    return "NOT PINNED: evaluator slot " + std::to_string(slot) + " needs CPUs " + std::to_string(first) + "-" +
           std::to_string(last - 1) + " of the " + std::to_string(cpus.size()) +
           " this process may use (evaluators share cores: their timings disturb each other; use fewer ranks or --threads)";
  cpu_set_t set;
  CPU_ZERO(&set);
  std::string names;
  for (size_t i = first; i < last; ++i) {
    CPU_SET(cpus[i], &set);
    names += (names.empty() ? "" : ",") + std::to_string(cpus[i]);
  }
  if (sched_setaffinity(0, sizeof set, &set) != 0)
    return "NOT PINNED: sched_setaffinity to cores " + names + " failed: " + std::strerror(errno);
  return "cores " + names;
}

class MpiEvaluators final : public Evaluators {
 public:
  explicit MpiEvaluators(std::vector<int> ranks) : queue_(std::move(ranks)) {}
  ~MpiEvaluators() override { stop_workers(); }

  size_t live() const override { return queue_.live(); }
  size_t idle() const override { return queue_.idle(); }
  size_t busy() const override { return queue_.busy(); }

  Status share_data(const std::string& data_dir) override {
    FieldWriter w;
    w.put("dir", data_dir);
    for (const auto& entry : fs::directory_iterator(data_dir)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::stringstream bytes;
      bytes << in.rdbuf();
      FieldWriter f;
      f.put("name", entry.path().filename().string());
      f.put("bytes", bytes.str());
      w.put("file", f.text());
    }
    for (int r : queue_.ranks())
      if (!queue_.is_lost(r)) TAC_RETURN_IF_ERROR(send_within(w.text(), r, kData, 120));
    return Status::ok();
  }

  Status submit(uint64_t ticket, const EvalJob& job, bool reference) override {
    std::optional<int> rank = queue_.assign(ticket, now_s() + job_deadline_s(job), reference);
    if (!rank) return internal_error(reference ? "the reference evaluator is busy" : "no evaluator is idle");
    jobs_[*rank] = {job.requests.size(), job_deadline_s(job)};
    // A job is a few kilobytes: the send completes at once unless the worker is gone.
    if (Status st = send_within(encode_job(job), *rank, kJob, 30); !st.is_ok())
      if (auto t = queue_.declare_lost(*rank)) add_lost(*rank, *t, "could not send it the job: " + st.message());
    return Status::ok();
  }

  std::optional<JobDone> next() override {
    while (true) {
      // Interrupted (tuner/interrupt.h): the jobs in flight are given up at once, as interrupted
      // (not recorded); their ranks get no more work, and mpi_finish ends the MPI job, which
      // kills the workers and so their candidates (PR_SET_PDEATHSIG).
      if (interrupt_signal() != 0 && queue_.busy() > 0)
        for (int rank : queue_.ranks())
          if (!queue_.is_lost(rank))
            if (std::optional<uint64_t> ticket = queue_.declare_lost(rank)) {
              JobDone d;
              d.ticket = *ticket;
              d.rank = rank;
              d.evaluator = evaluator_name(rank);
              d.results.resize(jobs_[rank].first);
              for (EvalResult& r : d.results) {
                r.status = "interrupted";
                r.reason = interrupt_reason() + ": rank " + std::to_string(rank) + "'s job given up";
              }
              lost_.push_back(std::move(d));
            }
      if (!lost_.empty()) {
        JobDone d = std::move(lost_.front());
        lost_.erase(lost_.begin());
        return d;
      }
      if (queue_.busy() == 0) return std::nullopt;
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, kResult, MPI_COMM_WORLD, &flag, &st);
      if (flag) {
        auto msg = receive(st);
        std::optional<uint64_t> ticket = queue_.complete(st.MPI_SOURCE);
        if (!ticket) continue;  // a late answer from a rank declared lost
        JobDone d;
        d.ticket = *ticket;
        d.rank = st.MPI_SOURCE;
        d.evaluator = evaluator_name(d.rank);
        auto results = msg ? decode_results(*msg) : Result<std::vector<EvalResult>>(msg.status());
        if (results && results->size() == jobs_[d.rank].first) {
          d.results = std::move(results).value();
        } else {
          d.results.resize(jobs_[d.rank].first);
          for (EvalResult& r : d.results)
            r.reason = "rank " + std::to_string(d.rank) + " sent an unreadable result: " +
                       (results ? std::string("wrong count") : results.status().message());
        }
        return d;
      }
      for (const auto& [rank, ticket] : queue_.expire(now_s()))
        add_lost(rank, ticket, "no result within the job's deadline of " + std::to_string(static_cast<int>(jobs_[rank].second)) +
                                   " s (dead or hung)");
      if (!lost_.empty()) continue;
      nap();
    }
  }

  std::string describe() const override {
    return std::to_string(queue_.live()) + " evaluator rank" + (queue_.live() == 1 ? "" : "s") + " over MPI";
  }

  bool any_lost() const { return !queue_.lost_ranks().empty(); }

  void stop_workers() {
    if (stopped_) return;
    stopped_ = true;
    for (int r : queue_.ranks())
      if (!queue_.is_lost(r)) (void)send_within("", r, kStop, 10);
  }

  void add_lost(int rank, uint64_t ticket, const std::string& why) {
    g_rank_lost = true;
    // A hung rank on this host is killed: under mpirun --enable-recovery a dead rank is
    // forgotten, while a hung one would keep mpirun waiting after the search (even after
    // MPI_Abort). A rank on another host is left to its own idle limit.
    std::string killed;
    if (auto w = where_.find(rank); w != where_.end() && w->second.first == host_name() && w->second.second > 0 &&
                                    kill(w->second.second, SIGKILL) == 0)
      killed = " (killed its pid " + std::to_string(w->second.second) + ")";
    JobDone d;
    d.ticket = ticket;
    d.rank = rank;
    d.evaluator = evaluator_name(rank);
    d.lost = true;
    d.results.resize(jobs_[rank].first);
    for (EvalResult& r : d.results)
      r.reason = "evaluator rank " + std::to_string(rank) + " lost: " + why + "; it gets no more work" + killed;
    lost_.push_back(std::move(d));
  }

  DispatchQueue& queue() { return queue_; }
  void set_where(int rank, const std::string& host, long pid) { where_[rank] = {host, pid}; }
  std::string evaluator_name(int rank) const {
    auto w = where_.find(rank);
    return "rank " + std::to_string(rank) + (w == where_.end() ? std::string() : " (" + w->second.first + ")");
  }

 private:
  DispatchQueue queue_;
  std::map<int, std::pair<size_t, double>> jobs_;  // each rank's current job: requests, deadline (s)
  std::vector<JobDone> lost_;
  std::map<int, std::pair<std::string, long>> where_;  // rank -> host, pid (from its hello)
  bool stopped_ = false;
};

}  // namespace

bool mpi_compiled() { return true; }

int mpi_world_size_from_env() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(name); v && *v) return std::max(1, std::atoi(v));
  return 1;
}

Result<MpiWorld> mpi_start() {
  // Children are fork+exec'd per candidate: fine with the shared-memory and TCP transports;
  // silence OpenMPI's warning meant for InfiniBand memory registration.
  setenv("OMPI_MCA_mpi_warn_on_fork", "0", 0);
  int rc = MPI_Init(nullptr, nullptr);
  if (rc != MPI_SUCCESS) return internal_error("MPI_Init failed: " + mpi_error_text(rc));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MpiWorld w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  g_node_slot = node_slot();  // collective: every rank calls it here
  return w;
}

int run_mpi_worker(const WorkerOptions& o) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string placement = place(g_node_slot, o);
  std::string error;
  if (std::ifstream probe(o.model_path, std::ios::binary); !probe)
    error = "cannot read the model " + o.model_path + " on host " + host_name() + ": " + std::strerror(errno);
  const fs::path work = fs::temp_directory_path() / ("tactician-worker-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::create_directories(work / "data", ec);
  if (ec && error.empty()) error = "cannot create " + (work / "data").string() + ": " + ec.message();
  FieldWriter hello;
  hello.put("host", host_name());
  hello.put("placement", placement);
  hello.put("pid", static_cast<int64_t>(::getpid()));
  hello.put("error", error);
  int code = 0;
  if (!send_within(hello.text(), 0, kHello, 60).is_ok()) code = 1;
  std::string rank0_data;  // rank 0's data folder, replaced by this worker's copy in requests
  double last_word = now_s();
  int jobs = 0;
  EvalWorker worker;  // this rank's evaluator process, kept across jobs (limits.persistent)
  while (code == 0) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    if (!flag) {
      if (now_s() - last_word > o.idle_limit_s) {
        std::fprintf(stderr, "tactician tune: rank %d: no word from rank 0 in %.0f s; giving up\n", rank, o.idle_limit_s);
        code = 1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    auto msg = receive(st);
    last_word = now_s();
    if (!msg) {
      std::fprintf(stderr, "tactician tune: rank %d: %s\n", rank, msg.status().to_string().c_str());
      code = 1;
      break;
    }
    if (st.MPI_TAG == kStop) break;
    if (st.MPI_TAG == kData) {
      auto fields = read_fields(*msg);
      if (!fields) continue;
      for (const auto& [k, v] : *fields) {
        if (k == "dir") rank0_data = v;
        if (k != "file") continue;
        auto f = read_fields(v);
        if (!f || f->size() != 2) continue;
        std::ofstream(work / "data" / fs::path((*f)[0].second).filename(), std::ios::binary) << (*f)[1].second;
      }
      continue;
    }
    if (st.MPI_TAG != kJob) continue;
    auto job = decode_job(*msg);
    std::vector<EvalResult> results;
    if (!job) {
      results.resize(1);
      results[0].reason = "rank " + std::to_string(rank) + " could not read the job: " + job.status().message();
    } else {
      if (rank == o.lose_rank && jobs == 1) {  // tests of fault handling (job 0: the speed calibration)
        if (!o.lose_by_hanging) _exit(3);
        const double until = now_s() + o.idle_limit_s;
        while (now_s() < until) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        _exit(4);
      }
      for (EvalRequest& r : job->requests) {
        if (!rank0_data.empty() && r.data_dir == rank0_data) r.data_dir = (work / "data").string();
        if (!r.calibration_cache.empty()) r.calibration_cache = (work / "calibration").string();
        results.push_back(worker.evaluate(r, job->limits));
      }
    }
    ++jobs;
    if (Status s = send_within(encode_results(results), 0, kResult, 120); !s.is_ok()) {
      std::fprintf(stderr, "tactician tune: rank %d: %s\n", rank, s.to_string().c_str());
      code = 1;
    }
    last_word = now_s();
  }
  fs::remove_all(work, ec);
  MPI_Finalize();
  return code;
}

Result<std::unique_ptr<Evaluators>> mpi_evaluators(const WorkerOptions& o, std::string& placement) {
  (void)o;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<int> ranks;
  for (int r = 1; r < size; ++r) ranks.push_back(r);
  auto pool = std::make_unique<MpiEvaluators>(ranks);
  // Hellos, within a deadline: a rank that never says hello is lost from the start.
  std::map<int, std::string> hellos;
  const double until = now_s() + 120;
  std::string errors;
  while (hellos.size() < ranks.size() && now_s() < until) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kHello, MPI_COMM_WORLD, &flag, &st);
    if (!flag) {
      nap();
      continue;
    }
    auto msg = receive(st);
    if (!msg) return msg.status();
    auto fields = read_fields(*msg);
    if (!fields) return internal_error("rank " + std::to_string(st.MPI_SOURCE) + " sent an unreadable hello");
    std::string host, where, error;
    long pid = 0;
    for (const auto& [k, v] : *fields) {
      if (k == "pid") pid = std::atol(v.c_str());
      else if (k == "host") host = v;
      else if (k == "placement") where = v;
      else if (k == "error") error = v;
    }
    hellos[st.MPI_SOURCE] = host + ": " + where;
    pool->set_where(st.MPI_SOURCE, host, pid);
    if (!error.empty()) errors += (errors.empty() ? "" : "; ") + std::string("rank ") + std::to_string(st.MPI_SOURCE) + ": " + error;
  }
  placement.clear();
  for (int r : ranks) {
    auto it = hellos.find(r);
    placement += "rank " + std::to_string(r) + (r == ranks.front() ? " (reference)" : "") + ": " +
                 (it == hellos.end() ? std::string("no hello within 120 s: lost") : it->second) + "\n";
    if (it == hellos.end()) {
      pool->queue().declare_lost(r);
      g_rank_lost = true;
    }
  }
  // OpenMPI's mpirun ends the whole job when a rank dies, unless --enable-recovery (which it
  // announces to the ranks as OMPI_MCA_orte_enable_recovery=1).
  if (std::getenv("OMPI_COMM_WORLD_SIZE")) {
    const char* recovery = std::getenv("OMPI_MCA_orte_enable_recovery");
    if (!recovery || std::string(recovery) != "1")
      placement += "note: without `mpirun --enable-recovery` a rank that dies ends the whole job (the database keeps "
                   "what was evaluated: rerun to resume)\n";
  }
  if (!errors.empty()) return invalid_argument("worker ranks cannot evaluate: " + errors);
  if (pool->live() == 0) return internal_error("no worker rank said hello within 120 s");
  return std::unique_ptr<Evaluators>(std::move(pool));
}

int mpi_finish(std::unique_ptr<Evaluators> pool, int exit_code) {
  auto* mpi = dynamic_cast<MpiEvaluators*>(pool.get());
  // Interrupted, workers may still be running a candidate they were given: MPI_Abort ends them
  // (and their children die with them) instead of MPI_Finalize waiting for them.
  const bool lost = g_rank_lost || (mpi && mpi->any_lost()) || interrupt_signal() != 0;
  if (mpi) mpi->stop_workers();
  pool.reset();
  std::fflush(stdout);
  std::fflush(stderr);
  if (lost) {
    // A lost worker may be hung: MPI_Finalize could wait for it forever.
    std::fprintf(stderr, "tactician tune: %s; ending the MPI job with MPI_Abort (exit code %d)\n",
                 interrupt_signal() != 0 ? "interrupted" : "evaluator ranks were lost", exit_code);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
  MPI_Finalize();
  return exit_code;
}

}  // namespace tac::tuner
