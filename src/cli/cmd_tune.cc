// tactician tune MODEL.onnx --budget 10m [--strategy S] [--tolerance "..."] ... [--json]
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli/args.h"
#include "cli/engine_args.h"
#include "tuner/distributed.h"
#include "tuner/interrupt.h"
#include "tuner/strategy.h"
#include "tuner/tune.h"

namespace tac::cli {

int cmd_tune(int argc, char** argv) {
  Args args;
  std::string err;
  std::string strategies;  // as declared (tuner/strategy.cc)
  for (const std::string& n : tuner::strategy_names()) strategies += (strategies.empty() ? "" : "|") + n;
  const std::string help =
      "usage: tactician tune MODEL.onnx [--budget 10m] [--max-candidates N] [--max-build-time 5m]\n"
      "         [--strategy " +
      strategies +
      "] [--seed S]\n"
      "         [--tolerance \"cos>=0.9999,linf<=1e-3\" | --tolerance-file F] [--inputs DIR] [--backend cuda|cpu] [--threads N]\n"
      "         [--db tuning.db] [--out DIR] [--knobs \"glob,...\"] [--route \"k=v ...\" | --route-file F]\n"
      "         [--dim S=N] [--shapes S=MIN..MAX:OPT,...] [--timeout 300s] [--evaluator persistent|fresh] [--json]\n"
      "Searches whole engines: every candidate route is built, checked against the reference outputs\n"
      "and timed end to end in a child process; the fastest that passes the tolerance wins. Re-running\n"
      "resumes from the database. --out DIR gets best.plan, best.route and summary.json.\n"
      "  --budget         wall time (90s, 10m, 1h); the tuner stops cleanly and keeps the best so far\n"
      "  --inputs DIR     input_K.pb (and output_K.pb as the reference; else the reference interpreter)\n"
      "  --backend cuda|cpu  where candidates run (default: cuda when this build has CUDA and a GPU is present)\n"
      "  --calibration DIR  int8 / fp8 calibration inputs (test_data_set_*/ or input_K.pb; default: the model's\n"
      "                   test data, else seeded random inputs); computed once per run, before the candidates\n"
      "  --tolerance      the accuracy every candidate must keep (default \"l2<=1e-5,cos>=0.99999\", fp32);\n"
      "                   a tolerance given here also searches the precision.* knobs (bf16/int8 on the CPU,\n"
      "                   fp16/bf16/tf32 on CUDA, fp8 from sm_89), first as one whole-engine seed per value\n"
      "                   (of precision.default, or of the per-node knobs when --route fixes it)\n"
      "  --knobs          only knobs matching these globs, e.g. \"tactic.*,pass.fuse_*\"\n"
      "  --route \"k=v ...\", --route-file F  settings every candidate keeps, not searched (e.g.\n"
      "                   \"precision.default=fp16\"); the default route compared against is this route\n"
      "  --shapes batch=1..8:4,seq=16..512:128  tune at the opt sizes; best.plan runs every size in the\n"
      "                   ranges (as `build --shapes`)\n"
      "  --timeout        a candidate's time limit (default 300s); search candidates get at most 10x the\n"
      "                   default route's evaluation time (30 s at least): a far slower engine is killed\n"
      "                   and recorded as a timeout\n"
      "  --evaluator persistent|fresh  candidates are built, checked and timed in one worker process\n"
      "                   (persistent, the default: restarted after a crash, hang or failure) or in a\n"
      "                   fresh child process each (as before issue 28; slower, the same isolation)\n"
      "  --no-refine      keep same-signature nodes grouped (by default the learning strategies\n"
      "                   spend the second half of the budget refining the costliest groups per node)\n"
      "  --plant-faults   (tests) also offer tactics that crash, hang or compute wrong numbers\n"
      "Distributed: `mpirun -np N tactician tune ...` runs one search over N-1 evaluator ranks (rank 0\n"
      "coordinates and owns the database and outputs; CPU ranks pinned to --threads cores each, CUDA\n"
      "ranks one GPU each by local rank). A rank that dies or hangs is dropped after its job's deadline;\n"
      "launch with `mpirun --enable-recovery --bind-to none`: without recovery OpenMPI ends the whole job\n"
      "when a rank dies (the database keeps what was evaluated: rerun to resume).\n"
      "  --mpi-test-lose RANK[:hang]  (tests) that worker rank dies (or hangs) on its first candidate\n";
  if (!parse_args(
          argc, argv, 2,
          {"--budget",       "--max-candidates", "--max-build-time", "--strategy",  "--seed",  "--tolerance", "--tolerance-file",
           "--inputs",       "--calibration",    "--backend",        "--threads",   "--db",    "--out",       "--knobs",
           "--dim",          "--shapes",         "--timeout",        "--evaluator", "--batch", "--route",     "--route-file",
           "--mpi-test-lose"},
          {"--json", "--help", "--quiet", "--plant-faults", "--no-refine"}, args, err) ||
      args.positional.size() != 1 || args.has("--help")) {
    if (!err.empty()) std::fprintf(stderr, "tactician tune: %s\n", err.c_str());
    std::fprintf(args.has("--help") ? stdout : stderr, "%s", help.c_str());
    return args.has("--help") ? 0 : 2;
  }
  auto fail = [](const Status& st, int code) {
    std::fprintf(stderr, "tactician tune: %s\n", st.to_string().c_str());
    return code;
  };
  tuner::TuneOptions o;
  o.model_path = args.positional[0];
  o.strategy = args.get("--strategy", "tpe");
  if (args.has("--budget")) {
    auto b = tuner::parse_duration(args.get("--budget"));
    if (!b) return fail(b.status(), 2);
    o.budget_s = *b;
  }
  if (args.has("--max-build-time")) {
    auto b = tuner::parse_duration(args.get("--max-build-time"));
    if (!b) return fail(b.status(), 2);
    o.max_build_s = *b;
  }
  if (args.has("--timeout")) {
    auto b = tuner::parse_duration(args.get("--timeout"));
    if (!b) return fail(b.status(), 2);
    o.limits.timeout_s = *b;
  }
  o.refine = !args.has("--no-refine");
  if (const std::string e = args.get("--evaluator", "persistent"); e == "fresh" || e == "persistent")
    o.limits.persistent = e == "persistent";
  else return fail(invalid_argument("--evaluator " + e + ": expected persistent or fresh"), 2);
  const long hw = sysconf(_SC_NPROCESSORS_ONLN);
  const auto max_candidates = args.get_int("--max-candidates", -1, 0);
  const auto batch = args.get_int("--batch", static_cast<int64_t>(o.batch), 1, 4096);
  const auto seed = args.get_uint("--seed", 0);
  const auto threads = args.get_int("--threads", hw > 0 ? hw : 1, 1, 4096);
  for (const Status& st : {max_candidates.status(), batch.status(), seed.status(), threads.status()})
    if (!st.is_ok()) return fail(st, 2);
  if (args.has("--max-candidates")) o.max_candidates = *max_candidates;
  o.batch = static_cast<size_t>(*batch);
  o.seed = *seed;
  o.threads = static_cast<int>(*threads);
  {  // the same reader as check and compare: a file ending in a newline, read with io::read_file
    auto tol = tolerance_from_args(args);
    if (!tol) return fail(tol.status(), 2);
    if (*tol) o.tolerance = **tol;
  }
  o.inputs_dir = args.get("--inputs");
  o.calibration_dir = args.get("--calibration");
  {
    auto backend = backend_from_args(args);
    if (!backend) return fail(backend.status(), 2);
    o.backend = *backend;
  }
  o.planted_faults = args.has("--plant-faults");  // tests only: crashing, hanging, wrong tactics
  o.db_path = args.get("--db", "tuning.db");
  o.out_dir = args.get("--out");
  std::string globs = args.get("--knobs");
  for (size_t i = 0; i < globs.size();) {
    size_t j = globs.find(',', i);
    std::string g = globs.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (!g.empty()) o.knob_globs.push_back(g);
    if (j == std::string::npos) break;
    i = j + 1;
  }
  {
    auto dims = dims_from_args(args);
    if (!dims) return fail(dims.status(), 2);
    o.dims = std::move(dims).value();
    auto ranges = shapes_from_args(args);
    if (!ranges) return fail(ranges.status(), 2);
    o.ranges = std::move(ranges).value();
  }
  {
    auto fixed = route_from_args(args);
    if (!fixed) return fail(fixed.status(), 2);
    o.fixed = *fixed;
  }
  const bool quiet = args.has("--quiet");
  const bool tty = isatty(STDERR_FILENO);
  // Under mpirun (more than one rank): every rank parsed the same command line above; ranks > 0
  // become evaluators, rank 0 runs the search over them. Every return from here on goes through
  // mpi_finish, which stops the workers and ends MPI.
  std::unique_ptr<tuner::Evaluators> pool;
  const bool distributed = tuner::mpi_world_size_from_env() > 1;
  if (distributed) {
    auto world = tuner::mpi_start();
    if (!world) return fail(world.status(), 2);
    tuner::WorkerOptions w;
    w.model_path = o.model_path;
    w.threads = o.threads;
    w.backend = kernels::backend_name(o.backend);
    w.idle_limit_s = o.budget_s + 10 * o.limits.timeout_s + 600;
    if (args.has("--mpi-test-lose")) {
      const std::string v = args.get("--mpi-test-lose");
      w.lose_rank = std::atoi(v.c_str());
      w.lose_by_hanging = v.find(":hang") != std::string::npos;
    }
    if (world->rank > 0) return tuner::run_mpi_worker(w);
    std::string placement;
    auto p = tuner::mpi_evaluators(w, placement);
    if (!p) return tuner::mpi_finish(nullptr, fail(p.status(), p.status().kind() == ErrorKind::internal ? 1 : 2));
    pool = std::move(p).value();
    o.evaluators = pool.get();
    if (!quiet) std::fprintf(stderr, "[tune] distributed: %s, rank 0 coordinates\n%s", pool->describe().c_str(), placement.c_str());
  }
  auto finish = [&](int code) { return distributed ? tuner::mpi_finish(std::move(pool), code) : code; };
  if (!o.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.out_dir, ec);
    std::ofstream probe(o.out_dir + "/.write-test");
    if (ec || !probe) return finish(fail(io_error(o.out_dir + ": cannot write there"), 2));
    probe.close();
    std::filesystem::remove(o.out_dir + "/.write-test", ec);
  }
  // SIGINT and SIGTERM stop the search cleanly (tuner/interrupt.h): the running candidate is
  // killed and not recorded, the outputs of what was measured are written, and the exit code is
  // the shell's for that signal (130, 143). A second signal ends the process at once.
  tuner::install_interrupt_handlers();
  auto progress = [&](const std::string& line) {
    if (line.rfind("warning: ", 0) == 0) {  // shown even with --quiet, on a line of its own
      std::fprintf(stderr, "%stactician tune: %s\n", tty && !quiet ? "\r\033[K" : "", line.c_str());
      return;
    }
    if (quiet) return;
    if (tty) std::fprintf(stderr, "\r\033[K%s", line.c_str());
    else std::fprintf(stderr, "%s\n", line.c_str());
  };
  Result<tuner::TuneSummary> summary = internal_error("tune did not run");
  try {  // the tuner returns errors as values; this only guarantees its cleanup runs (stack unwinding)
    summary = tuner::tune(o, progress);
  } catch (const std::exception& e) {
    summary = internal_error(std::string("uncaught exception: ") + e.what());
  }
  if (tty && !quiet) std::fprintf(stderr, "\n");
  const int signal_code = tuner::interrupt_signal() ? 128 + tuner::interrupt_signal() : 0;
  if (!summary)
    return finish(fail(summary.status(), signal_code ? signal_code : summary.status().kind() == ErrorKind::invalid_argument ? 2 : 1));
  const tuner::TuneSummary& s = *summary;
  std::printf("tuned %s with %s: %d candidates evaluated (%d failed, %d rejected, %d resumed) in %.0f s; stopped: %s\n",
              o.model_path.c_str(), o.strategy.c_str(), s.candidates, s.failed, s.rejected, s.resumed, s.wall_s,
              s.stop_reason.c_str());
  if (s.space_size == UINT64_MAX) std::printf("search space: %zu dimensions, more than 1.8e19 points\n", s.dimensions);
  else std::printf("search space: %zu dimensions, %llu points\n", s.dimensions, static_cast<unsigned long long>(s.space_size));
  std::printf("default route  %.3f ms\nbest route     %.3f ms\nspeed-up       %.3fx (over %d interleaved A/B rounds: %.3f to %.3f)\n",
              s.default_ms, s.best_ms, s.speedup, o.final_rounds, s.speedup_low, s.speedup_high);
  const bool is_default = s.best_is_default;
  std::printf("best route: %s%s\n", s.best_route.c_str(),
              is_default ? "  (the default route: no candidate beat it by more than the measured noise)" : "");
  std::printf("verdict: %s\n", s.verdict.c_str());
  // The accuracy as a line per output, against the tolerance every accepted candidate met.
  if (auto metrics = tuner::parse_metrics_json(s.best_metrics_json); metrics && !metrics->empty()) {
    std::printf("accuracy of the best against the reference (tolerance %s):\n", s.tolerance.c_str());
    for (size_t i = 0; i < metrics->size(); ++i) {
      const tuner::Metrics& m = (*metrics)[i];
      std::printf("  output %zu: cos %.6f  l2 %.3g  linf %.3g  l1 %.3g  l0 %.3g%s\n", i, m.cos, m.l2, m.linf, m.l1, m.l0,
                  m.finite ? "" : "  (non-finite values)");
    }
  }
  for (const std::string& w : s.warnings) std::fprintf(stderr, "tactician tune: warning: %s\n", w.c_str());
  std::printf("time: %s\n", s.time_text().c_str());  // where the time went (issue 28)
  double saved_ms = s.default_ms - s.best_ms;
  if (saved_ms > 0 && !is_default)
    std::printf("tuning cost %.0f s of wall time; it pays back after %.0f inferences\n", s.wall_s,
                s.wall_s * 1e3 / saved_ms);
  if (distributed) {
    std::printf("candidates per evaluator rank:");
    for (const auto& [rank, n] : s.candidates_by_rank) std::printf(" %d: %d", rank, n);
    std::printf("\n");
    if (!s.rank_speed.empty()) {
      std::printf("default route's time per rank / the reference rank's (candidate times scaled by it):");
      for (const auto& [rank, f] : s.rank_speed) std::printf(" %d: %.3f", rank, f);
      std::printf("\n");
    }
  }
  if (!o.out_dir.empty())
    std::printf("wrote %s/best.plan, best.route, summary.json, report.html; database %s\n", o.out_dir.c_str(),
                o.db_path.c_str());
  if (args.has("--json")) std::printf("%s\n", s.to_json().c_str());
  if (signal_code) {
    std::fflush(stdout);
    const std::string where = o.out_dir.empty() ? std::string() : ", " + o.out_dir + " has the best of them";
    std::fprintf(stderr, "tactician tune: %s: stopped early; the database keeps every finished candidate%s\n",
                 tuner::interrupt_reason().c_str(), where.c_str());
    return finish(signal_code);
  }
  return finish(0);
}

}  // namespace tac::cli
