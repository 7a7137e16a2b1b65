#include "tuner/evaluator.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>

#include "builder/builder.h"
#include "builder/plan_file.h"
#include "builder/precision.h"
#include "io/onnx_import.h"
#include "io/tensor_io.h"
#include "kernels/weight_cache.h"
#include "runtime/engine.h"
#include "runtime/measure.h"
#include "tuner/accuracy.h"
#include "tuner/dispatch.h"
#include "tuner/halving.h"
#include "tuner/interrupt.h"

namespace tac::tuner {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif

namespace {

// The child reports "key value" lines on stdout; values run to the end of the line.
void report(const char* key, const std::string& value) {
  std::string v = value;
  for (char& c : v)
    if (c == '\n' || c == '\r') c = ' ';
  std::printf("%s %s\n", key, v.c_str());
}

// Timing rotates among four input sets (DESIGN.md section 3, as `tactician bench` does): the
// reference inputs and three copies whose floating-point inputs are rotated by a quarter, a half
// and three quarters of their elements (the same values, other data in the caches). Integer and
// boolean inputs (ids, indices, masks, shapes) stay as given: their values can decide what runs.
std::vector<std::vector<Tensor>> timing_sets(const std::vector<Tensor>& inputs) {
  std::vector<std::vector<Tensor>> sets = {inputs};
  for (size_t q = 1; q < 4; ++q) {
    std::vector<Tensor> set;
    for (const Tensor& t : inputs) {
      Tensor c = t.clone();
      const size_t e = dtype_size(t.dtype()), n = static_cast<size_t>(t.numel()), k = n * q / 4;
      if (dtype_is_float(t.dtype()) && e > 0 && k > 0 && t.raw()) {
        const auto* src = static_cast<const std::byte*>(t.raw());
        auto* dst = static_cast<std::byte*>(c.raw());
        std::memcpy(dst, src + k * e, (n - k) * e);
        std::memcpy(dst + (n - k) * e, src, k * e);
      }
      set.push_back(std::move(c));
    }
    sets.push_back(std::move(set));
  }
  return sets;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int child_fail(const char* status, const std::string& reason) {
  report("status", status);
  report("reason", reason);
  std::fflush(stdout);
  return 0;
}

// Reads the child's flags (`tactician evaluate`, as child_args writes them); false on an unknown one.
bool parse_request(int argc, char** argv, EvalRequest& req) {
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") req.model_path = v;
    else if (k == "--data") req.data_dir = v;
    else if (k == "--route") req.route = v;
    else if (k == "--tolerance") req.tolerance = v;
    else if (k == "--dim") req.dims.push_back(v);
    else if (k == "--min-seconds") req.min_seconds = std::strtod(v.c_str(), nullptr);
    else if (k == "--min-runs") req.min_runs = std::atoi(v.c_str());
    else if (k == "--save-plan") req.save_plan = v;
    else if (k == "--shapes") req.shapes = v;
    else if (k == "--check") req.check = v == "1";
    else if (k == "--measure") req.measure = v == "1";
    else if (k == "--plant-faults") req.planted_faults = v == "1";
    else if (k == "--profile") req.profile = v == "1";
    else if (k == "--calibration") req.calibration_dir = v;
    else if (k == "--calibration-cache") req.calibration_cache = v;
    else if (k == "--backend") req.backend = v;
    else if (k == "--compare-route") req.compare_route = v;
    else if (k == "--compare-rounds") req.compare_rounds = std::max(1, std::atoi(v.c_str()));
    else {
      std::fprintf(stderr, "tactician evaluate: unknown flag %s\n", k.c_str());
      return false;
    }
  }
  return true;
}

// Why a child's evaluation stopped: its status ("build_failed", "run_failed", ...) and reason.
struct Failure {
  const char* status;
  std::string reason;
};

// The paired measurement of `engine` against req.compare_route's engine, built here: rounds of
// alternating blocks; reports both medians and the rounds' ratios.
std::optional<Failure> measure_paired(const ir::Model& model, runtime::Engine& engine, const builder::BuildOptions& opts,
                                      const std::vector<Tensor>& inputs, const EvalRequest& req) {
  auto croute = builder::Route::parse(req.compare_route);
  if (!croute) return Failure{"build_failed", "compare route: " + croute.status().to_string()};
  auto cplan = builder::build_plan(model, *croute, opts);
  if (!cplan) return Failure{"build_failed", "compare route: " + cplan.status().to_string()};
  auto cengine = runtime::Engine::create(std::move(cplan).value());
  if (!cengine) return Failure{"build_failed", "compare route: " + cengine.status().to_string()};
  const int rounds = std::max(1, req.compare_rounds);
  const int block_runs = std::max(3, req.min_runs / rounds);
  size_t failed = 0;
  auto blocks = runtime::measure_interleaved({&engine, cengine->get()}, timing_sets(inputs), rounds, block_runs,
                                             req.min_seconds / rounds, false, &failed);
  if (!blocks) return Failure{"run_failed", (failed ? "compare route: " : "") + blocks.status().to_string()};
  std::vector<double> a_ms, b_ms, ratios, cvs;
  for (int r = 0; r < rounds; ++r) {
    const runtime::Latency &a = (*blocks)[0][static_cast<size_t>(r)], &b = (*blocks)[1][static_cast<size_t>(r)];
    a_ms.push_back(a.median_ms);
    b_ms.push_back(b.median_ms);
    ratios.push_back(a.median_ms / b.median_ms);
    cvs.push_back(a.cv);
  }
  using runtime::median;
  report("median_ms", std::to_string(median(a_ms)));
  report("cv", std::to_string(median(cvs)));
  report("runs", std::to_string(rounds * block_runs));
  report("compare_median_ms", std::to_string(median(b_ms)));
  report("paired_ratio", std::to_string(median(ratios)));
  report("paired_low", std::to_string(*std::min_element(ratios.begin(), ratios.end())));
  report("paired_high", std::to_string(*std::max_element(ratios.begin(), ratios.end())));
  report("paired_noise", std::to_string(paired_noise(ratios)));
  return std::nullopt;
}

// One line per node: "node_ms <ms> <name>" (names hold no spaces), medians over profiled runs.
std::optional<Failure> report_profile(runtime::Engine& engine, const std::vector<Tensor>& inputs, const EvalRequest& req) {
  const builder::Plan& plan = engine.plan();
  std::vector<std::vector<double>> per_step(plan.steps.size());
  for (int k = 0; k < std::max(5, req.min_runs); ++k) {
    std::vector<double> ns;
    auto o = engine.run_profiled(inputs, ns);
    if (!o) return Failure{"run_failed", o.status().to_string()};
    for (size_t i = 0; i < ns.size() && i < per_step.size(); ++i) per_step[i].push_back(ns[i]);
  }
  std::map<std::string, double> node_ms;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    std::vector<double>& v = per_step[i];
    if (v.empty()) continue;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    node_ms[plan.model.graph.nodes[static_cast<size_t>(plan.steps[i].node)].name] += v[v.size() / 2] / 1e6;
  }
  for (const auto& [name, ms] : node_ms) std::printf("node_ms %.6f %s\n", ms, name.c_str());
  return std::nullopt;
}

// What a persistent worker keeps between requests: the model and the reference data it loaded last.
struct ChildCache {
  std::string model_path;
  std::optional<ir::Model> model;
  std::string data_dir;
  std::optional<std::pair<std::vector<Tensor>, std::vector<Tensor>>> data;  // inputs, expected outputs
  // The model's knob space under the build options of `knobs_key` (what every build of a route
  // computes first, six graph preparations: once per worker instead).
  std::string knobs_key;
  std::shared_ptr<const builder::KnobSpace> knobs;
};

// The knob space for `opts` from the cache, computed on a miss; null when it fails (build_plan
// then computes it again and reports the error).
std::shared_ptr<const builder::KnobSpace> cached_knobs(ChildCache& cache, const ir::Model& m, const EvalRequest& req,
                                                       const builder::BuildOptions& opts) {
  std::string key = req.model_path + "\n" + req.backend + "\n" + req.shapes + "\n" + (req.planted_faults ? "1" : "0");
  for (const std::string& d : req.dims) key += "\n" + d;
  if (cache.knobs && cache.knobs_key == key) return cache.knobs;
  cache.knobs.reset();
  builder::BuildOptions o = opts;
  if (!builder::apply_shape_ranges(m, o).is_ok()) return nullptr;
  auto space = builder::knob_space(m, o);
  if (!space) return nullptr;
  cache.knobs = std::make_shared<const builder::KnobSpace>(std::move(space).value());
  cache.knobs_key = std::move(key);
  return cache.knobs;
}

// Builds, checks, times and profiles one request, reporting on stdout; the model and the
// reference data come from `cache` when it holds them (a persistent worker's earlier requests).
int evaluate_request(const EvalRequest& req, ChildCache& cache) {
  if (!cache.model || cache.model_path != req.model_path) {
    cache.model.reset();
    auto loaded = io::load_model(req.model_path);
    if (!loaded) return child_fail("build_failed", loaded.status().to_string());
    cache.model = std::move(loaded).value();
    cache.model_path = req.model_path;
  }
  const ir::Model* model = &*cache.model;
  auto route = builder::Route::parse(req.route);
  if (!route) return child_fail("build_failed", route.status().to_string());
  builder::BuildOptions opts;
  opts.planted_faults = req.planted_faults;
  opts.calibration_dir = req.calibration_dir;
  opts.calibration_cache = req.calibration_cache;
  auto backend = kernels::backend_from_name(req.backend);
  if (!backend) return child_fail("build_failed", backend.status().to_string());
  opts.backend = *backend;
  for (const std::string& d : req.dims) {
    auto eq = d.find('=');
    if (eq != std::string::npos) opts.dims[d.substr(0, eq)] = std::strtoll(d.c_str() + eq + 1, nullptr, 10);
  }
  auto ranges = builder::parse_shape_ranges(req.shapes);
  if (!ranges) return child_fail("build_failed", ranges.status().to_string());
  opts.ranges = std::move(ranges).value();
  auto t0 = std::chrono::steady_clock::now();
  opts.knobs = cached_knobs(cache, *model, req, opts);
  auto plan = builder::build_plan(*model, *route, opts);
  if (!plan) return child_fail("build_failed", plan.status().to_string());
  auto engine = runtime::Engine::create(std::move(plan).value());
  if (!engine) return child_fail("build_failed", engine.status().to_string());
  report("build_ms", std::to_string(ms_since(t0)));
  // "tactic <tactic> <node>": tactic names hold no spaces, node names run to the end of the line.
  // "costs <tactic>=<ns>,... <node>": the candidates in ranked order with their costs (estimates,
  // or times with builder.selection=isolated).
  for (const builder::TacticRanking& rk : (*engine)->plan().report.rankings) {
    std::printf("tactic %s %s\n", rk.chosen.c_str(), rk.node.c_str());
    std::string costs;
    for (const auto& [t, cost] : rk.candidates) costs += (costs.empty() ? "" : ",") + t + "=" + std::to_string(cost);
    if (!costs.empty()) std::printf("costs %s %s\n", costs.c_str(), rk.node.c_str());
  }
  if (!req.save_plan.empty()) {
    Status st = builder::save_plan((*engine)->plan(), req.save_plan);
    if (!st) return child_fail("build_failed", st.to_string());
  }
  if (!cache.data || cache.data_dir != req.data_dir) {
    cache.data.reset();
    std::vector<Tensor> in, ex;
    for (auto [prefix, list] : {std::pair{"/input_", &in}, std::pair{"/expected_", &ex}})
      for (size_t k = 0;; ++k) {
        std::string p = req.data_dir + prefix + std::to_string(k) + ".pb";
        if (!std::filesystem::exists(p)) break;
        auto t = io::load_tensor_pb(p);
        if (!t) return child_fail("run_failed", t.status().to_string());
        list->push_back(std::move(t).value());
      }
    cache.data = std::make_pair(std::move(in), std::move(ex));
    cache.data_dir = req.data_dir;
  }
  const std::vector<Tensor>& inputs = cache.data->first;
  const std::vector<Tensor>& expected = cache.data->second;
  const auto t_check = std::chrono::steady_clock::now();
  auto outs = (*engine)->run(inputs);
  if (!outs) return child_fail("run_failed", outs.status().to_string());
  if (req.check) {
    auto tol = Tolerance::parse(req.tolerance);
    if (!tol) return child_fail("run_failed", tol.status().to_string());
    if (outs->size() < expected.size()) return child_fail("run_failed", "fewer outputs than the reference");
    std::vector<Metrics> metrics;
    for (size_t k = 0; k < expected.size(); ++k) {
      auto m = compute_metrics((*outs)[k], expected[k], tol->atol, tol->rtol);
      if (!m) return child_fail("rejected", m.status().to_string());
      metrics.push_back(*m);
    }
    report("metrics", metrics_json(metrics));
    std::string violation = check_tolerance(*tol, metrics);
    report("check_ms", std::to_string(ms_since(t_check)));
    if (!violation.empty()) return child_fail("rejected", violation);
  }
  const auto t_measure = std::chrono::steady_clock::now();
  if (req.measure && !req.compare_route.empty()) {
    if (auto f = measure_paired(*model, *engine->get(), opts, inputs, req)) return child_fail(f->status, f->reason);
  } else if (req.measure) {
    auto lat = runtime::measure(**engine, timing_sets(inputs), req.min_runs, req.min_seconds, /*warmup=*/2);
    if (!lat) return child_fail("run_failed", lat.status().to_string());
    report("median_ms", std::to_string(lat->median_ms));
    report("p10_ms", std::to_string(lat->p10_ms));
    report("p90_ms", std::to_string(lat->p90_ms));
    report("cv", std::to_string(lat->cv));
    report("runs", std::to_string(lat->runs));
  }
  if (req.profile)
    if (auto f = report_profile(*engine->get(), inputs, req)) return child_fail(f->status, f->reason);
  if (req.measure || req.profile) report("measure_ms", std::to_string(ms_since(t_measure)));
  report("status", "ok");
  std::fflush(stdout);
  return 0;
}

// A persistent worker (`tactician evaluate --serve`): requests on stdin, each "<length>\n" and
// encode_request's text; each answered with its report lines and "end". Returns at the end of
// stdin (the tuner is done or gone).
int serve_requests() {
  ChildCache cache;
  // oneDNN's reordered weights and the precision rewrite's converted ones kept across requests
  // (kernels/weight_cache.h, builder/precision.h): each up to an eighth of the worker's
  // address-space limit, 1 GiB at most.
  size_t cache_bytes = size_t{1} << 30;
  if (rlimit lim{}; getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    cache_bytes = std::min<size_t>(cache_bytes, static_cast<size_t>(lim.rlim_cur / 8));
  kernels::set_weight_cache_bytes(cache_bytes);
  builder::set_derived_constant_cache_bytes(cache_bytes);  // bf16 / fp16 / int8 weights, made once
  while (true) {
    size_t n = 0;
    if (std::scanf("%zu", &n) != 1 || std::getchar() != '\n') return 0;
    std::string text(n, '\0');
    if (std::fread(text.data(), 1, n, stdin) != n) return 0;
    if (auto req = decode_request(text)) evaluate_request(*req, cache);
    else child_fail("build_failed", "the worker could not read the request: " + req.status().message());
    std::printf("end\n");
    std::fflush(stdout);
  }
}

}  // namespace

int run_evaluate_command(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[2]) == "--serve") return serve_requests();  // argv[3]: informational
  EvalRequest req;
  if (!parse_request(argc, argv, req)) return 2;
  ChildCache fresh;
  return evaluate_request(req, fresh);
}

namespace {

// The `tactician evaluate` command line of a request.
std::vector<std::string> child_args(const EvalRequest& req) {
  std::vector<std::string> args = {"tactician", "evaluate", "--model", req.model_path, "--data", req.data_dir,
                                   "--route", req.route, "--tolerance", req.tolerance,
                                   "--min-seconds", std::to_string(req.min_seconds), "--min-runs",
                                   std::to_string(req.min_runs), "--check", req.check ? "1" : "0",
                                   "--measure", req.measure ? "1" : "0", "--profile", req.profile ? "1" : "0",
                                   "--plant-faults",
                                   req.planted_faults ? "1" : "0"};
  for (const std::string& d : req.dims) {
    args.push_back("--dim");
    args.push_back(d);
  }
  if (!req.compare_route.empty()) {
    args.push_back("--compare-rounds");
    args.push_back(std::to_string(req.compare_rounds));
  }
  for (const auto& [flag, v] : {std::pair<const char*, const std::string&>{"--save-plan", req.save_plan},
                                {"--shapes", req.shapes},
                                {"--calibration", req.calibration_dir},
                                {"--calibration-cache", req.calibration_cache},
                                {"--backend", req.backend},
                                {"--compare-route", req.compare_route}})
    if (!v.empty()) {
      args.push_back(flag);
      args.push_back(v);
    }
  return args;
}

// Reads the child's report (one "key value" line per field) into `r`; true when it had a status.
bool parse_report(const std::string& out, EvalResult& r) {
  std::istringstream is(out);
  std::string line;
  bool have_status = false;
  while (std::getline(is, line)) {
    auto sp = line.find(' ');
    std::string k = line.substr(0, sp), v = sp == std::string::npos ? std::string() : line.substr(sp + 1);
    if (k == "status") {
      r.status = v;
      have_status = true;
    } else if (k == "reason") r.reason = v;
    else if (k == "build_ms") r.build_ms = std::strtod(v.c_str(), nullptr);
    else if (k == "check_ms") r.check_ms = std::strtod(v.c_str(), nullptr);
    else if (k == "measure_ms") r.measure_ms = std::strtod(v.c_str(), nullptr);
    else if (k == "metrics") r.metrics_json = v;
    else if (k == "median_ms") r.median_ms = std::strtod(v.c_str(), nullptr);
    else if (k == "p10_ms") r.p10_ms = std::strtod(v.c_str(), nullptr);
    else if (k == "p90_ms") r.p90_ms = std::strtod(v.c_str(), nullptr);
    else if (k == "cv") r.cv = std::strtod(v.c_str(), nullptr);
    else if (k == "runs") r.runs = std::atoi(v.c_str());
    else if (k == "compare_median_ms") r.compare_median_ms = std::strtod(v.c_str(), nullptr);
    else if (k == "paired_ratio") r.paired_ratio = std::strtod(v.c_str(), nullptr);
    else if (k == "paired_low") r.paired_low = std::strtod(v.c_str(), nullptr);
    else if (k == "paired_high") r.paired_high = std::strtod(v.c_str(), nullptr);
    else if (k == "paired_noise") r.paired_noise = std::strtod(v.c_str(), nullptr);
    else if (k == "costs") {
      auto sp2 = v.find(' ');
      if (sp2 == std::string::npos) continue;
      auto& list = r.costs[v.substr(sp2 + 1)];
      std::stringstream items(v.substr(0, sp2));
      for (std::string item; std::getline(items, item, ',');)
        if (auto eq = item.find('='); eq != std::string::npos)
          list.emplace_back(item.substr(0, eq), std::strtod(item.c_str() + eq + 1, nullptr));
    } else if (k == "tactic") {
      auto sp2 = v.find(' ');
      if (sp2 != std::string::npos) r.tactics[v.substr(sp2 + 1)] = v.substr(0, sp2);
    } else if (k == "node_ms") {
      auto sp2 = v.find(' ');
      if (sp2 != std::string::npos) r.node_ms[v.substr(sp2 + 1)] = std::strtod(v.c_str(), nullptr);
    }
  }
  return have_status;
}

// A child process of the tuner: its pid and this side of the socket that is its stdout (and, for
// a persistent worker, its stdin).
struct Child {
  pid_t pid = -1;
  int fd = -1;
};

// Starts `tactician ARGS...` (limits.binary). The child dies with this process (PR_SET_PDEATHSIG
// SIGKILL) and runs in its own process group; its stderr goes to /dev/null. A socket rather than
// a pipe: writing to a worker that died fails with EPIPE (send, MSG_NOSIGNAL) instead of raising
// SIGPIPE in the tuner.
Result<Child> spawn(std::vector<std::string> args, const EvalLimits& limits, const std::string& backend, bool duplex) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return io_error(std::string("socketpair: ") + std::strerror(errno));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    return io_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Die with the tuner, however it ends (an orphaned candidate would go on loading the machine
    // and timing nothing). The signal survives the exec below. If the tuner died before prctl,
    // this process was already reparented: getppid() is no longer the pid saved before fork.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    // Its own process group: a Ctrl-C at the terminal goes to the tuner's group only, and the
    // tuner decides (it kills a search candidate, lets the final save of the best plan finish).
    setpgid(0, 0);
    dup2(sv[1], STDOUT_FILENO);
    if (duplex) dup2(sv[1], STDIN_FILENO);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDERR_FILENO);
    // The memory limit caps the address space; a CUDA child cannot take one: the driver reserves
    // virtual address space far beyond physical memory at initialisation (an H200 run failed
    // cudaGetDeviceCount with "out of memory" under the 8 GiB cap). It keeps the time limit.
    // AddressSanitizer's shadow memory is terabytes of address space: no cap in an ASan build
    // (scripts/sanitize.sh), where tensors are still held to the machine's memory.
    if (backend != "cuda" && !kAddressSanitizer) {
      rlimit lim{static_cast<rlim_t>(limits.memory_bytes), static_cast<rlim_t>(limits.memory_bytes)};
      setrlimit(RLIMIT_AS, &lim);
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(limits.binary.c_str(), argv.data());  // the sockets' other ends close on exec
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so no signal to our group reaches the child before its own call
  close(sv[1]);
  return Child{pid, sv[0]};
}

// How reading a child's report ended.
enum class ReadEnd { marker, eof, timeout, interrupted };

// Appends what the child writes to `out` until `marker` ends it (a worker's "end" line; "" = read
// to the end), or EOF. The child is killed past `timeout_s` since `t0`, or on an interrupt when
// `stop_on_interrupt`; its output is then read to EOF.
ReadEnd read_child(const Child& c, double timeout_s, bool stop_on_interrupt, std::chrono::steady_clock::time_point t0,
                   const std::string& marker, std::string& out) {
  ReadEnd end = ReadEnd::eof;
  while (true) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (end == ReadEnd::eof && elapsed > timeout_s) {
      kill(c.pid, SIGKILL);
      end = ReadEnd::timeout;
    }
    // A signal interrupts poll() (EINTR), so the child is killed as soon as the handler ran.
    if (end == ReadEnd::eof && stop_on_interrupt && interrupt_signal() != 0) {
      kill(c.pid, SIGKILL);
      end = ReadEnd::interrupted;
    }
    pollfd pfd{c.fd, POLLIN, 0};
    if (poll(&pfd, 1, 200) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(c.fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      if (end == ReadEnd::eof && !marker.empty() && out.size() >= marker.size() &&
          out.compare(out.size() - marker.size(), marker.size(), marker) == 0 &&
          (out.size() == marker.size() || out[out.size() - marker.size() - 1] == '\n')) {
        out.resize(out.size() - marker.size());
        return ReadEnd::marker;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return end;  // EOF (or a broken socket: the child is gone either way)
  }
}

// Waits for a child that has ended (or was killed) and closes our side; its wait status.
int reap(Child& c) {
  int ws = 0;
  while (waitpid(c.pid, &ws, 0) < 0 && errno == EINTR) {
  }
  close(c.fd);
  c = Child{};
  return ws;
}

// The outcome of an evaluation whose reading ended with `end` (`ws`: the child's wait status once
// reaped). The child's report stands when it had a status, also one that raced an interrupt, but
// not one that raced the time limit; otherwise the child was interrupted, timed out or died.
void settle(EvalResult& r, ReadEnd end, int ws, bool have_status, const EvalLimits& limits) {
  if (have_status && end != ReadEnd::timeout) return;
  if (end == ReadEnd::interrupted) {
    r.status = "interrupted";
    r.reason = interrupt_reason() + ": the child was killed";
  } else if (end == ReadEnd::timeout) {
    r.status = "timeout";
    r.reason = "killed after " + std::to_string(static_cast<int>(limits.timeout_s)) + " s";
  } else {
    r.status = "crashed";
    if (WIFSIGNALED(ws)) r.reason = std::string("signal ") + strsignal(WTERMSIG(ws));
    else r.reason = "exit code " + std::to_string(WEXITSTATUS(ws)) + " without a result";
    if (WIFSIGNALED(ws) && (WTERMSIG(ws) == SIGKILL || WTERMSIG(ws) == SIGABRT))
      r.reason += " (out of memory with the " + std::to_string(limits.memory_bytes >> 20) + " MiB limit?)";
  }
}

bool interrupted_before(EvalResult& r, OnInterrupt on_interrupt) {
  if (on_interrupt != OnInterrupt::stop || interrupt_signal() == 0) return false;
  r.status = "interrupted";
  r.reason = interrupt_reason() + " before it started";
  return true;
}

}  // namespace

EvalResult evaluate_in_child(const EvalRequest& req, const EvalLimits& limits, OnInterrupt on_interrupt) {
  EvalResult r;
  if (interrupted_before(r, on_interrupt)) return r;
  const auto t0 = std::chrono::steady_clock::now();
  auto child = spawn(child_args(req), limits, req.backend, false);
  if (!child) {
    r.reason = child.status().message();
    return r;
  }
  std::string out;
  const ReadEnd end = read_child(*child, limits.timeout_s, on_interrupt == OnInterrupt::stop, t0, "", out);
  const int ws = reap(*child);
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  settle(r, end, ws, parse_report(out, r), limits);
  return r;
}

EvalWorker::~EvalWorker() { stop(); }

void EvalWorker::stop() {
  if (pid_ < 0) return;
  kill(pid_, SIGKILL);
  Child c{pid_, fd_};
  reap(c);
  pid_ = fd_ = -1;
}

EvalResult EvalWorker::evaluate(const EvalRequest& req, const EvalLimits& limits, OnInterrupt on_interrupt) {
  if (!limits.persistent) return evaluate_in_child(req, limits, on_interrupt);
  EvalResult r;
  if (interrupted_before(r, on_interrupt)) return r;
  const auto t0 = std::chrono::steady_clock::now();
  // One worker per binary, backend and memory limit: another combination gets a fresh one.
  const std::string key = limits.binary + "\n" + req.backend + "\n" + std::to_string(limits.memory_bytes);
  if (pid_ >= 0 && key != key_) stop();
  if (pid_ < 0) {
    // The data folder in its argv says whose worker it is (ps; the hostile tests find it there).
    auto c = spawn({"tactician", "evaluate", "--serve", req.data_dir}, limits, req.backend, true);
    if (!c) {
      r.reason = c.status().message();
      return r;
    }
    pid_ = c->pid;
    fd_ = c->fd;
    key_ = key;
  }
  const std::string text = encode_request(req);
  const std::string msg = std::to_string(text.size()) + "\n" + text;
  for (size_t sent = 0; sent < msg.size();) {
    const ssize_t n = send(fd_, msg.data() + sent, msg.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the worker is gone: reading below finds EOF
    sent += static_cast<size_t>(n);
  }
  Child c{pid_, fd_};
  std::string out;
  const ReadEnd end = read_child(c, limits.timeout_s, on_interrupt == OnInterrupt::stop, t0, "end\n", out);
  int ws = 0;
  if (end != ReadEnd::marker) {  // killed or dead: the next request starts a fresh worker
    ws = reap(c);
    pid_ = fd_ = -1;
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bool have_status = parse_report(out, r);
  if (end != ReadEnd::marker) {
    settle(r, end, ws, have_status, limits);
  } else if (!have_status) {
    r.status = "crashed";
    r.reason = "the worker answered without a result";
  }
  // Anything but a pass or an accuracy rejection may have left the worker in a bad state (a
  // sticky CUDA error, a half-built engine's memory): the next request gets a fresh one.
  if (pid_ >= 0 && r.status != "ok" && r.status != "rejected") stop();
  return r;
}

}  // namespace tac::tuner
