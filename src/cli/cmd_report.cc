// tactician report tuning.db -o report.html [--jsonl out.jsonl]
#include <cstdio>
#include <string>
#include <vector>

#include "cli/args.h"
#include "tuner/database.h"
#include "tuner/report.h"

namespace tac::cli {

int cmd_report(int argc, char** argv) {
  Args args;
  std::string err;
  std::vector<std::string> words(argv, argv + argc);
  for (std::string& w : words)
    if (w == "-o") w = "--output";
  std::vector<char*> argv2;
  for (std::string& w : words) argv2.push_back(w.data());
  if (!parse_args(argc, argv2.data(), 2, {"--output", "--jsonl"}, {"--help"}, args, err) || args.positional.size() != 1 ||
      args.has("--help") || (!args.has("--output") && !args.has("--jsonl"))) {
    if (!err.empty()) std::fprintf(stderr, "tactician report: %s\n", err.c_str());
    std::fprintf(args.has("--help") ? stdout : stderr,
                 "usage: tactician report TUNING.db [-o report.html] [--jsonl candidates.jsonl]\n"
                 "A self-contained HTML report (inline SVG: best-so-far against time, latency against\n"
                 "accuracy, default vs isolated vs tuned, per-knob effect) and/or every candidate as JSONL.\n");
    return args.has("--help") ? 0 : 2;
  }
  // The database is only read (opened read-only: a missing file is an error, never created).
  // Unreadable rows are left out with a warning each (the report lists them too).
  auto warn = [](const std::vector<std::string>& skipped) {
    for (const std::string& why : skipped) std::fprintf(stderr, "tactician report: warning: %s; row left out\n", why.c_str());
  };
  if (args.has("--output")) {
    std::vector<std::string> skipped;
    Status st = tuner::write_report(args.positional[0], args.get("--output"), &skipped);
    warn(skipped);
    if (!st) {
      std::fprintf(stderr, "tactician report: %s\n", st.to_string().c_str());
      return 1;
    }
    std::printf("wrote %s\n", args.get("--output").c_str());
  }
  if (args.has("--jsonl")) {
    auto db = tuner::Database::open(args.positional[0], tuner::Database::Mode::read_only);
    if (!db) {
      std::fprintf(stderr, "tactician report: %s\n", db.status().to_string().c_str());
      return 1;
    }
    std::vector<std::string> skipped;
    Status st = (*db)->export_jsonl(args.get("--jsonl"), &skipped);
    if (!args.has("--output")) warn(skipped);  // else already said
    if (!st) {
      std::fprintf(stderr, "tactician report: %s\n", st.to_string().c_str());
      return 1;
    }
    std::printf("wrote %s\n", args.get("--jsonl").c_str());
  }
  return 0;
}

}  // namespace tac::cli
