// A small command-line parser shared by the subcommands: `--flag value`, `--flag=value`,
// boolean `--flag`, repeated flags, positionals. Unknown flags are errors naming the flag.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tactician/status.h"

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
  // The flag's value (its last occurrence) as a number in [min, max], `def` when the flag is absent.
  // Anything else is an error naming the flag and the text ("--runs abc: expected an integer"):
  // no junk read as 0, no value silently clamped.
  Result<int64_t> get_int(const std::string& f, int64_t def, int64_t min = std::numeric_limits<int64_t>::min(),
                          int64_t max = std::numeric_limits<int64_t>::max()) const;
  Result<uint64_t> get_uint(const std::string& f, uint64_t def) const;
  Result<double> get_double(const std::string& f, double def, double min = -std::numeric_limits<double>::infinity(),
                            double max = std::numeric_limits<double>::infinity()) const;
  const std::vector<std::string>& all(const std::string& f) const {
    static const std::vector<std::string> none;
    auto it = values.find(f);
    return it == values.end() ? none : it->second;
  }
};

// Prints "tactician CMD: MESSAGE" on stderr and returns 2, the exit code of a usage error.
int usage_error(const char* cmd, const Status& st);

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
