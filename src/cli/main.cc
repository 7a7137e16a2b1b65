// `tactician <command> ...`: one binary, one file per subcommand.
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "cli/args.h"
#include "tuner/evaluator.h"

namespace tac::cli {

namespace {

Status bad_number(const std::string& f, const std::string& text, const std::string& want) {
  return invalid_argument(f + " " + (text.empty() ? "''" : text) + ": expected " + want);
}

std::string range_text(double min, double max) {
  auto num = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return std::string(b);
  };
  if (std::isinf(max)) return "at least " + num(min);
  if (std::isinf(min)) return "at most " + num(max);
  return "between " + num(min) + " and " + num(max);
}

}  // namespace

int usage_error(const char* cmd, const Status& st) {
  std::fprintf(stderr, "tactician %s: %s\n", cmd, st.message().c_str());
  return 2;
}

Result<int64_t> Args::get_int(const std::string& f, int64_t def, int64_t min, int64_t max) const {
  if (!values.count(f)) return def;
  const std::string text = get(f);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return bad_number(f, text, "an integer");
  if (v < min || v > max)
    return bad_number(f, text,
                      "an integer " + range_text(min == std::numeric_limits<int64_t>::min() ? -INFINITY : double(min),
                                                 max == std::numeric_limits<int64_t>::max() ? INFINITY : double(max)));
  return v;
}

Result<uint64_t> Args::get_uint(const std::string& f, uint64_t def) const {
  if (!values.count(f)) return def;
  const std::string text = get(f);
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return bad_number(f, text, "a non-negative integer");
  return v;
}

Result<double> Args::get_double(const std::string& f, double def, double min, double max) const {
  if (!values.count(f)) return def;
  const std::string text = get(f);
  char* end = nullptr;
  errno = 0;
  const double v = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  if (text.empty() || errno == ERANGE || end != text.c_str() + text.size() || !std::isfinite(v))
    return bad_number(f, text, "a number");
  if (v < min || v > max) return bad_number(f, text, "a number " + range_text(min, max));
  return v;
}

bool parse_args(int argc, char** argv, int first, const std::set<std::string>& with_value,
                const std::set<std::string>& booleans, Args& out, std::string& error) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      std::string key = a, val;
      bool has_val = false;
      if (auto eq = a.find('='); eq != std::string::npos) {
        key = a.substr(0, eq);
        val = a.substr(eq + 1);
        has_val = true;
      }
      if (booleans.count(key) && !has_val) {
        out.switches.insert(key);
      } else if (with_value.count(key)) {
        if (!has_val) {
          if (i + 1 >= argc) {
            error = "flag " + key + " needs a value";
            return false;
          }
          val = argv[++i];
        }
        out.values[key].push_back(val);
      } else {
        error = "unknown flag " + key;
        return false;
      }
    } else {
      out.positional.push_back(a);
    }
  }
  return true;
}

}  // namespace tac::cli

namespace {
void usage(FILE* f) {
  std::fprintf(f,
               "tactician " TAC_VERSION " - an ONNX inference compiler with a global performance tuner\n\n"
               "usage: tactician <command> [options]\n\n"
               "commands:\n"
               "  info MODEL.onnx|F.plan      inputs, outputs, opsets, ops, parameters, unsupported ops (a plan:\n"
               "                              its route, backend, dims, steps, tactics)\n"
               "  knobs MODEL.onnx            the knob space: every build decision, its values and default\n"
               "  build MODEL.onnx [-o F]     build an engine plan for a route (default: the default route)\n"
               "  run MODEL.onnx|F.plan       run an engine (or --reference), write its outputs (.pb or .npy)\n"
               "  check PATH [--json]         run test directories (model.onnx + test_data_set_*) and\n"
               "                              compare with their expected outputs (--plan F, --tolerance)\n"
               "  compare MODEL.onnx --a E --b E  run two engines (routes, plans, backends, the reference)\n"
               "                              on the same inputs and compare their outputs\n"
               "  bench MODEL.onnx|F.plan     end-to-end latency (median, p10, p90, cv; --export-times F)\n"
               "  profile MODEL.onnx|F.plan   per-step times in the engine vs the same tactics timed alone (--json)\n"
               "  tune MODEL.onnx --budget 10m  search whole engines for the fastest within the tolerance\n"
               "  report TUNING.db -o F.html  HTML report of a tuning database (and --jsonl export)\n"
               "  explain MODEL.onnx --db F   which knob changes carry the tuned speed-up (ablation)\n\n"
               "`tactician <command> --help` describes a command's options.\n");
}
}  // namespace

namespace {
int dispatch(int argc, char** argv) {
  std::string cmd = argv[1];
  if (cmd == "info") return tac::cli::cmd_info(argc, argv);
  if (cmd == "run") return tac::cli::cmd_run(argc, argv);
  if (cmd == "check") return tac::cli::cmd_check(argc, argv);
  if (cmd == "knobs") return tac::cli::cmd_knobs(argc, argv);
  if (cmd == "build") return tac::cli::cmd_build(argc, argv);
  if (cmd == "bench") return tac::cli::cmd_bench(argc, argv);
  if (cmd == "profile") return tac::cli::cmd_profile(argc, argv);
  if (cmd == "tune") return tac::cli::cmd_tune(argc, argv);
  if (cmd == "report") return tac::cli::cmd_report(argc, argv);
  if (cmd == "explain") return tac::cli::cmd_explain(argc, argv);
  if (cmd == "compare") return tac::cli::cmd_compare(argc, argv);
  if (cmd == "evaluate") return tac::tuner::run_evaluate_command(argc, argv);  // internal: the tuner's child
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    usage(stdout);
    return 0;
  }
  if (cmd == "--version") {
    std::printf("tactician %s\n", TAC_VERSION);
    return 0;
  }
  std::fprintf(stderr, "tactician: unknown command '%s'\n\n", cmd.c_str());
  usage(stderr);
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  // Errors are Status values; an exception reaching here is a size nobody checked (bad_alloc) or
  // a bug. Either way one clear line and a clean exit code, never std::terminate's abort.
  try {
    return dispatch(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tactician %s: out_of_memory: an allocation failed (the model or input asks for more "
                         "memory than this machine gives)\n", argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tactician %s: internal: uncaught exception: %s\n", argv[1], e.what());
  }
  return 1;
}
