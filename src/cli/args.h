// A small command-line parser shared by the subcommands: `--flag value`, `--flag=value`,
// boolean `--flag`, repeated flags, positionals. Unknown flags are errors naming the flag.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace tac::cli {

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> values;  // "--input" -> {"a=x.pb", ...}
  std::set<std::string> switches;                          // boolean flags present

  bool has(const std::string& f) const { return switches.count(f) || values.count(f); }
  std::string get(const std::string& f, const std::string& def = "") const {
    auto it = values.find(f);
    return it == values.end() || it->second.empty() ? def : it->second.back();
  }
  const std::vector<std::string>& all(const std::string& f) const {
    static const std::vector<std::string> none;
    auto it = values.find(f);
    return it == values.end() ? none : it->second;
  }
};

// `with_value` lists flags that take a value, `booleans` those that do not. Returns false and
// sets `error` on an unknown flag or a missing value.
bool parse_args(int argc, char** argv, int first, const std::set<std::string>& with_value,
                const std::set<std::string>& booleans, Args& out, std::string& error);

// Subcommands: each returns the process exit code.
int cmd_info(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_check(int argc, char** argv);
int cmd_knobs(int argc, char** argv);
int cmd_build(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_profile(int argc, char** argv);
int cmd_tune(int argc, char** argv);
int cmd_report(int argc, char** argv);
int cmd_explain(int argc, char** argv);
int cmd_compare(int argc, char** argv);

}  // namespace tac::cli
