// tactician check PATH [--json]: run test directories and compare with expected outputs.
//
// Each test runs in a child process (fork) so that a crash or a hang in one test is recorded
// as that test's result and the suite goes on; up to -j tests run at once.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "cli/args.h"
#include "cli/engine_args.h"
#include "core/json.h"
#include "io/onnx_import.h"
#include "io/test_case.h"
#include "reference/compare.h"
#include "reference/interpreter.h"
#include "tuner/accuracy.h"
#include "tuner/tune.h"

namespace tac::cli {

namespace {

enum class Outcome { pass, fail, unsupported, error, crash, timeout };
const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::pass: return "PASS";
    case Outcome::fail: return "FAIL";
    case Outcome::unsupported: return "UNSUPPORTED";
    case Outcome::error: return "ERROR";
    case Outcome::crash: return "CRASH";
    case Outcome::timeout: return "TIMEOUT";
  }
  return "?";
}

struct TestResult {
  std::string name;
  Outcome outcome = Outcome::crash;
  std::string message;
  std::vector<std::string> ops;
};

void collect_ops(const ir::Graph& g, std::set<std::string>& ops) {
  for (const ir::Node& n : g.nodes) {
    ops.insert(n.domain.empty() ? n.op_type : n.domain + "." + n.op_type);
    for (const auto& [key, a] : n.attrs) {
      if (a.g) collect_ops(*a.g, ops);
      for (const auto& sg : a.graphs) collect_ops(*sg, ops);
    }
  }
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

Outcome outcome_of(const Status& s) {
  return s.kind() == ErrorKind::unsupported ? Outcome::unsupported : Outcome::error;
}

// How each test's model runs: the reference interpreter, an engine built for a route, or a saved
// plan (--plan, one test directory: the plan's model hash must be that of its model.onnx).
struct RunMode {
  bool reference = false;
  kernels::Backend backend = kernels::Backend::cpu;
  builder::Route route;
  Args plan_args;  // --plan F [--threads N] [--backend B], for engine_from_args; empty without --plan
  // --tolerance: outputs judged by the tuner's metrics (tuner/accuracy.h) instead of the
  // elementwise rtol/atol test.
  std::optional<tuner::Tolerance> metrics;
};

// Empty when `got` matches `expected` under the mode's tolerance; else one line saying how not.
// With --tolerance, tensors are judged by the tuner's metrics; sequences and optionals (which have
// no metrics) elementwise with the tolerance's atol and rtol.
std::string compare_output(const Datum& got, const Datum& expected, const ref::Tolerance& tol, const RunMode& mode) {
  if (!mode.metrics || got.kind != Datum::Kind::tensor || expected.kind != Datum::Kind::tensor) {
    ref::Tolerance t = tol;
    if (mode.metrics) t = {mode.metrics->rtol, mode.metrics->atol};
    return ref::compare_datum(got, expected, t);
  }
  auto m = tuner::compute_metrics(got.tensor, expected.tensor, mode.metrics->atol, mode.metrics->rtol);
  if (!m) return m.status().message();
  std::string v = tuner::check_tolerance(*mode.metrics, {*m});
  const std::string prefix = "output 0: ";
  if (v.rfind(prefix, 0) == 0) v = v.substr(prefix.size());
  return v;
}

// Runs one data set through an engine built for its input shapes.
Result<std::vector<Datum>> run_engine(const ir::Model& m, const io::TestDataSet& ds, const RunMode& mode) {
  if (mode.plan_args.has("--plan")) {
    TAC_ASSIGN_OR_RETURN(auto engine, engine_from_args(mode.plan_args, &m, {}));
    return engine->run_values(ds.inputs);
  }
  builder::BuildOptions opts;
  opts.backend = mode.backend;
  TAC_RETURN_IF_ERROR(builder::bind_dims(m.graph, ds.inputs, opts));
  TAC_ASSIGN_OR_RETURN(builder::Plan plan, builder::build_plan(m, mode.route, opts));
  TAC_ASSIGN_OR_RETURN(auto engine, runtime::Engine::create(std::move(plan)));
  return engine->run_values(ds.inputs);
}

// Runs one test directory in this process; writes "ops ..." and "result ..." lines to `out`.
void run_one(const std::string& dir, const ref::Tolerance& tol, const RunMode& mode, FILE* out) {
  auto finish = [&](Outcome o, const std::string& msg) {
    std::fprintf(out, "result %s %s\n", outcome_name(o), one_line(msg).c_str());
    std::fflush(out);
  };
  auto model = io::load_model(dir + "/model.onnx");
  if (!model) return finish(outcome_of(model.status()), model.status().to_string());
  std::set<std::string> ops;
  collect_ops(model->graph, ops);
  std::fprintf(out, "ops");
  for (const auto& op : ops) std::fprintf(out, " %s", op.c_str());
  std::fprintf(out, "\n");
  std::fflush(out);
  auto missing = ref::unsupported_nodes(model->graph);
  if (!missing.empty()) return finish(Outcome::unsupported, missing[0]->label() + ": op not supported");
  auto sets = io::load_test_data(*model, dir);
  if (!sets) return finish(outcome_of(sets.status()), sets.status().to_string());
  if (sets->empty()) return finish(Outcome::error, "no test_data_set_* directories");
  for (const io::TestDataSet& ds : *sets) {
    auto outs = mode.reference ? ref::run_model(*model, ds.inputs) : run_engine(*model, ds, mode);
    if (!outs) return finish(outcome_of(outs.status()), outs.status().to_string());
    if (outs->size() < ds.outputs.size())
      return finish(Outcome::fail, "the model computed " + std::to_string(outs->size()) + " outputs, expected " +
                                       std::to_string(ds.outputs.size()));
    for (size_t k = 0; k < ds.outputs.size(); ++k) {
      std::string diff = compare_output((*outs)[k], ds.outputs[k], tol, mode);
      if (!diff.empty()) {
        std::string name = model->graph.values[static_cast<size_t>(model->graph.outputs[k])].name;
        return finish(Outcome::fail, std::filesystem::path(ds.dir).filename().string() + " output '" + name +
                                         "': " + diff);
      }
    }
  }
  finish(Outcome::pass, "");
}

void parse_child_output(const std::string& text, TestResult& r) {
  std::istringstream is(text);
  std::string line;
  bool have_result = false;
  while (std::getline(is, line)) {
    if (line.rfind("ops", 0) == 0) {
      std::istringstream ls(line.substr(3));
      std::string op;
      while (ls >> op) r.ops.push_back(op);
    } else if (line.rfind("result ", 0) == 0) {
      std::string rest = line.substr(7);
      std::string word = rest.substr(0, rest.find(' '));
      r.message = rest.size() > word.size() ? rest.substr(word.size() + 1) : "";
      for (Outcome o : {Outcome::pass, Outcome::fail, Outcome::unsupported, Outcome::error})
        if (word == outcome_name(o)) r.outcome = o;
      have_result = true;
    }
  }
  if (!have_result) r.outcome = Outcome::crash;
}

struct Child {
  pid_t pid;
  int fd;
  size_t index;
  std::string buffer;
  std::chrono::steady_clock::time_point start;
  bool killed = false;
};

std::vector<TestResult> run_all(const std::vector<std::string>& dirs, const ref::Tolerance& tol, const RunMode& mode,
                                int jobs, double timeout_s, bool fork_tests) {
  std::vector<TestResult> results(dirs.size());
  for (size_t i = 0; i < dirs.size(); ++i) results[i].name = std::filesystem::path(dirs[i]).filename().string();
  if (!fork_tests) {
    for (size_t i = 0; i < dirs.size(); ++i) {
      FILE* mem = std::tmpfile();
      run_one(dirs[i], tol, mode, mem);
      std::rewind(mem);
      std::string text;
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, mem)) > 0) text.append(buf, n);
      std::fclose(mem);
      parse_child_output(text, results[i]);
    }
    return results;
  }
  std::vector<Child> running;
  size_t next = 0;
  while (next < dirs.size() || !running.empty()) {
    while (next < dirs.size() && static_cast<int>(running.size()) < jobs) {
      int fds[2];
      if (pipe(fds) != 0) {
        results[next].outcome = Outcome::error;
        results[next].message = "pipe() failed";
        ++next;
        continue;
      }
      std::fflush(stdout);
      pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        FILE* out = fdopen(fds[1], "w");
        run_one(dirs[next], tol, mode, out);
        std::fclose(out);
        _exit(0);
      }
      close(fds[1]);
      running.push_back(Child{pid, fds[0], next, {}, std::chrono::steady_clock::now()});
      ++next;
    }
    std::vector<pollfd> pfds;
    for (const Child& c : running) pfds.push_back(pollfd{c.fd, POLLIN, 0});
    poll(pfds.data(), pfds.size(), 200);
    for (size_t k = 0; k < running.size();) {
      Child& c = running[k];
      bool done = false;
      if (pfds[k].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        ssize_t n = read(c.fd, buf, sizeof buf);
        if (n > 0) c.buffer.append(buf, static_cast<size_t>(n));
        else done = true;
      }
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
      if (!done && !c.killed && elapsed > timeout_s) {
        kill(c.pid, SIGKILL);
        c.killed = true;
      }
      if (done) {
        int wstatus = 0;
        waitpid(c.pid, &wstatus, 0);
        close(c.fd);
        TestResult& r = results[c.index];
        parse_child_output(c.buffer, r);
        if (c.killed) {
          r.outcome = Outcome::timeout;
          r.message = "killed after " + std::to_string(static_cast<int>(timeout_s)) + " s";
        } else if (r.outcome == Outcome::crash) {
          r.message = WIFSIGNALED(wstatus) ? std::string("signal ") + strsignal(WTERMSIG(wstatus))
                                           : "exit code " + std::to_string(WEXITSTATUS(wstatus));
        }
        running.erase(running.begin() + static_cast<long>(k));
        pfds.erase(pfds.begin() + static_cast<long>(k));
      } else {
        ++k;
      }
    }
  }
  return results;
}

std::set<std::string> read_name_list(const std::string& path, bool& ok) {
  std::set<std::string> names;
  std::ifstream in(path);
  ok = static_cast<bool>(in);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    names.insert(line);
  }
  return names;
}

}  // namespace

int cmd_check(int argc, char** argv) {
  Args args;
  std::string err;
  const char* help =
      "usage: tactician check PATH [options]\n"
      "PATH is a test directory (model.onnx + test_data_set_*/input_K.pb, output_K.pb) or a folder of them.\n"
      "Runs each model on each data set and compares every output. The model runs as an engine built\n"
      "for the default route (or --route / --route-file), or with --reference through the reference\n"
      "interpreter.\n"
      "  --rtol X, --atol X     tolerance |got-expected| <= atol + rtol*|expected| (default 1e-3, 1e-7)\n"
      "  --tolerance \"cos>=0.999,linf<=1e-2\"   instead of --rtol/--atol, the tuner's tolerance language:\n"
      "                         bounds on linf, l1, l2 (relative), cos, l0 (fraction outside atol + rtol*|ref|,\n"
      "                         set with atol=X,rtol=X) per output tensor, NaN/Inf never pass; what `tune\n"
      "                         --tolerance` accepts passes here (--tolerance-file F: the same from a file)\n"
      "  --plan F.plan          run a saved plan instead of building an engine (PATH: one test directory,\n"
      "                         whose model.onnx the plan was built from; --threads N overrides its threads)\n"
      "  --json                 the last line of stdout is a JSON summary\n"
      "  --verbose              print every test, not only those that do not pass\n"
      "  --filter SUBSTR        only tests whose name contains SUBSTR\n"
      "  -j N / --jobs N        tests run at once (default: number of CPUs)\n"
      "  --timeout S            seconds per test before it is killed (default 120)\n"
      "  --expect-pass FILE     fail (exit 1) only when a test listed in FILE does not pass\n"
      "  --write-pass FILE      write the names of the passing tests to FILE\n"
      "  --markdown FILE        write the per-op table as Markdown to FILE\n"
      "  --no-fork              run tests in this process (debugging)\n"
      "  --reference            run the reference interpreter instead of a built engine\n"
      "  --route \"k=v ...\", --route-file F, --threads N   the route engines are built for\n"
      "  --backend cuda|cpu     where engines run (default: cuda when this build has CUDA and a GPU is present)\n";
  // Accept make's spellings "-j N" and "-jN" for --jobs.
  std::vector<std::string> words(argv, argv + argc);
  for (std::string& w : words)
    if (w == "-j") w = "--jobs";
    else if (w.size() > 2 && w.rfind("-j", 0) == 0 && std::isdigit(static_cast<unsigned char>(w[2]))) w = "--jobs=" + w.substr(2);
  std::vector<char*> argv2;
  for (std::string& w : words) argv2.push_back(w.data());
  if (!parse_args(argc, argv2.data(), 2,
                  {"--rtol", "--atol", "--filter", "--jobs", "--timeout", "--expect-pass", "--write-pass", "--markdown",
                   "--route", "--route-file", "--threads", "--backend", "--tolerance", "--tolerance-file", "--plan"},
                  {"--json", "--verbose", "--no-fork", "--reference", "--help"}, args, err) ||
      args.positional.size() != 1 || args.has("--help")) {
    if (!err.empty()) std::fprintf(stderr, "tactician check: %s\n", err.c_str());
    std::fprintf(args.has("--help") ? stdout : stderr, "%s", help);
    return args.has("--help") ? 0 : 2;
  }
  ref::Tolerance tol;
  const long hw = sysconf(_SC_NPROCESSORS_ONLN);
  const auto rtol = args.get_double("--rtol", 1e-3, 0);
  if (!rtol) return usage_error("check", rtol.status());
  const auto atol = args.get_double("--atol", 1e-7, 0);
  if (!atol) return usage_error("check", atol.status());
  const auto jobs_n = args.get_int("--jobs", hw > 0 ? hw : 1, 1, 4096);
  if (!jobs_n) return usage_error("check", jobs_n.status());
  double timeout_s = 120;
  if (args.has("--timeout")) {
    auto t = tuner::parse_duration(args.get("--timeout"));
    if (!t) return usage_error("check", t.status().with_context("--timeout: "));
    timeout_s = *t;
  }
  tol.rtol = *rtol;
  tol.atol = *atol;
  const int jobs = static_cast<int>(*jobs_n);
  const std::string path = args.positional[0];
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    std::fprintf(stderr, "tactician check: %s is not a directory\n", path.c_str());
    return 2;
  }
  std::vector<std::string> dirs = io::find_test_dirs(path);
  if (args.has("--filter")) {
    std::string f = args.get("--filter");
    std::erase_if(dirs, [&](const std::string& d) { return std::filesystem::path(d).filename().string().find(f) == std::string::npos; });
  }
  if (dirs.empty()) {
    std::fprintf(stderr, "tactician check: no test directories (model.onnx + test_data_set_*) under %s\n", path.c_str());
    return 2;
  }
  RunMode mode;
  mode.reference = args.has("--reference");
  if (mode.reference && (args.has("--route") || args.has("--route-file") || args.has("--threads") || args.has("--plan"))) {
    std::fprintf(stderr, "tactician check: --reference runs the interpreter: --route/--threads/--plan do not apply\n");
    return 2;
  }
  {
    auto metrics = tolerance_from_args(args);
    if (!metrics) {
      std::fprintf(stderr, "tactician check: %s\n", metrics.status().to_string().c_str());
      return 2;
    }
    if (*metrics && (args.has("--rtol") || args.has("--atol"))) {
      std::fprintf(stderr, "tactician check: --tolerance replaces --rtol/--atol: give one (the tolerance sets l0's with "
                           "atol=X,rtol=X)\n");
      return 2;
    }
    mode.metrics = *metrics;
  }
  if (args.has("--plan")) {
    // A plan belongs to one model: check it here, once, so that a wrong plan is one clear error
    // and not an ERROR line per test.
    if (dirs.size() != 1) {
      std::fprintf(stderr, "tactician check: --plan %s: %s holds %zu test directories; a plan runs the one model it "
                           "was built from (give its test directory, or --filter)\n",
                   args.get("--plan").c_str(), path.c_str(), dirs.size());
      return 2;
    }
    auto model = io::load_model(dirs[0] + "/model.onnx");
    auto plan = model ? plan_from_args(args, &*model) : Result<builder::Plan>(model.status());
    if (!plan) {
      std::fprintf(stderr, "tactician check: %s\n", plan.status().to_string().c_str());
      return 2;
    }
    for (const char* f : {"--plan", "--threads", "--backend"})
      if (args.has(f)) mode.plan_args.values[f] = {args.get(f)};
    std::printf("plan %s (route: %s, %s, %d threads)\n", args.get("--plan").c_str(),
                plan->route.empty() ? "default" : plan->route.c_str(), kernels::backend_name(plan->backend), plan->threads);
  } else if (!mode.reference) {
    auto route = route_from_args(args);
    if (!route) {
      std::fprintf(stderr, "tactician check: %s\n", route.status().to_string().c_str());
      return 2;
    }
    mode.route = *route;
    auto backend = backend_from_args(args);
    if (!backend) {
      std::fprintf(stderr, "tactician check: %s\n", backend.status().to_string().c_str());
      return 2;
    }
    mode.backend = *backend;
  }
  if (mode.metrics) std::printf("tolerance: %s\n", mode.metrics->to_string().c_str());
  auto t0 = std::chrono::steady_clock::now();
  std::vector<TestResult> results = run_all(dirs, tol, mode, jobs, timeout_s, !args.has("--no-fork"));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Per-op table: a test counts for every op type its model uses.
  struct Row { int tests = 0, pass = 0, fail = 0, unsup = 0, error = 0; };
  std::map<std::string, Row> table;
  int n_pass = 0, n_fail = 0, n_unsup = 0, n_error = 0, n_crash = 0;
  for (const TestResult& r : results) {
    switch (r.outcome) {
      case Outcome::pass: ++n_pass; break;
      case Outcome::fail: ++n_fail; break;
      case Outcome::unsupported: ++n_unsup; break;
      case Outcome::error: ++n_error; break;
      case Outcome::crash:
      case Outcome::timeout: ++n_error; ++n_crash; break;
    }
    for (const std::string& op : r.ops) {
      Row& row = table[op];
      ++row.tests;
      if (r.outcome == Outcome::pass) ++row.pass;
      else if (r.outcome == Outcome::fail) ++row.fail;
      else if (r.outcome == Outcome::unsupported) ++row.unsup;
      else ++row.error;
    }
    if (r.outcome != Outcome::pass || args.has("--verbose"))
      std::printf("%-11s %s%s%s\n", outcome_name(r.outcome), r.name.c_str(), r.message.empty() ? "" : "  ",
                  r.message.c_str());
  }
  std::printf("\n%-32s %6s %6s %6s %6s %6s\n", "op", "tests", "pass", "fail", "unsup", "error");
  for (const auto& [op, row] : table)
    std::printf("%-32s %6d %6d %6d %6d %6d\n", op.c_str(), row.tests, row.pass, row.fail, row.unsup, row.error);
  std::printf("\n%zu tests in %.1f s: %d passed, %d failed, %d unsupported, %d errors (%d crashed or timed out)\n",
              results.size(), secs, n_pass, n_fail, n_unsup, n_error, n_crash);

  if (args.has("--markdown")) {
    std::ofstream md(args.get("--markdown"));
    md << "| op | tests | pass | fail | unsupported | error |\n| --- | --- | --- | --- | --- | --- |\n";
    for (const auto& [op, row] : table)
      md << "| " << op << " | " << row.tests << " | " << row.pass << " | " << row.fail << " | " << row.unsup << " | "
         << row.error << " |\n";
  }
  if (args.has("--write-pass")) {
    std::ofstream wp(args.get("--write-pass"));
    wp << "# tests that pass: `tactician check --expect-pass` fails when one of them stops passing\n";
    for (const TestResult& r : results)
      if (r.outcome == Outcome::pass) wp << r.name << "\n";
  }
  int rc = (n_fail + n_error) > 0 ? 1 : 0;
  if (args.has("--expect-pass")) {
    bool ok = false;
    std::set<std::string> expected = read_name_list(args.get("--expect-pass"), ok);
    if (!ok) {
      std::fprintf(stderr, "tactician check: cannot read %s\n", args.get("--expect-pass").c_str());
      return 2;
    }
    std::set<std::string> seen;
    rc = 0;
    for (const TestResult& r : results) {
      seen.insert(r.name);
      if (expected.count(r.name) && r.outcome != Outcome::pass) {
        std::printf("REGRESSION  %s: %s %s\n", r.name.c_str(), outcome_name(r.outcome), r.message.c_str());
        rc = 1;
      }
    }
    if (!args.has("--filter"))
      for (const std::string& name : expected)
        if (!seen.count(name)) {
          std::printf("REGRESSION  %s: listed as passing but not found\n", name.c_str());
          rc = 1;
        }
  }
  if (args.has("--json")) {
    const nlohmann::ordered_json j = {{"passed", n_pass},  {"failed", n_fail},   {"unsupported", n_unsup},
                                      {"errors", n_error}, {"crashed", n_crash}, {"total", results.size()}};
    std::printf("%s\n", dump_json(j).c_str());
  }
  return rc;
}

}  // namespace tac::cli
