// Search efficiency of the tuner's strategies, replayed on a fully enumerated space.
//
//   build/search_efficiency MODEL.onnx DB --knobs "glob,..." [--threads N] [--fraction 0.1]
//                           [--seeds 5] [--strategies random,coordinate,evolution,tpe,fast,mixed]
//                           [--prior on|off]
//
// First run `tactician tune MODEL --strategy full --knobs "glob,..." --threads N --db DB` so that
// the database holds every route of the (small) space. This tool then replays each strategy
// against that table: a strategy's proposals are "evaluated" by looking up the latency `full`
// measured for them, so every strategy and seed sees the same numbers and the comparison is of
// the search alone, free of measurement noise. Each run starts from the default route (as the
// tuner does) and gets `fraction` of the space's size in evaluations. It prints, per strategy,
// the median over seeds of the best found speed-up as a percentage of the optimum's speed-up
// (100% = found the optimum), the worst seed, and how many seeds found the optimum itself.
// DB may be a comma-separated list of independent enumerations: each route's latency is then
// the median over them.
// With --prior on (the default, as in the tuner) the tactic dimensions get value priors from the
// isolated timings of a `builder.selection=isolated` build made here (set_value_priors).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "builder/builder.h"
#include "io/onnx_import.h"
#include "runtime/measure.h"
#include "tuner/database.h"
#include "tuner/strategy.h"
#include "tuner/tune.h"

using namespace tac;

namespace {

int fail(const std::string& why) {
  std::fprintf(stderr, "search_efficiency: %s\n", why.c_str());
  return 1;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: search_efficiency MODEL.onnx DB --knobs \"glob,...\" [--threads N] [--fraction 0.1] "
                         "[--seeds 5] [--strategies a,b,...] [--prior on|off]\n");
    return 2;
  }
  std::string model_path = argv[1], db_path = argv[2], knobs_arg, threads = "1";
  double fraction = 0.1;
  int seeds = 5;
  bool use_prior = true;
  std::vector<std::string> strategies = {"random", "coordinate", "evolution", "tpe", "fast", "mixed"};
  for (int i = 3; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--knobs") knobs_arg = v;
    else if (k == "--threads") threads = v;
    else if (k == "--fraction") fraction = std::atof(v.c_str());
    else if (k == "--seeds") seeds = std::atoi(v.c_str());
    else if (k == "--strategies") strategies = split(v);
    else if (k == "--prior" && (v == "on" || v == "off")) use_prior = v == "on";
    else return fail("unknown flag " + k);
  }
  auto model = io::load_model(model_path);
  if (!model) return fail(model.status().to_string());
  auto ks = builder::knob_space(*model, {});
  if (!ks) return fail(ks.status().to_string());
  auto space = tuner::make_search_space(*ks, split(knobs_arg));
  if (!space) return fail(space.status().to_string());
  if (use_prior) {
    auto route = builder::Route::parse("builder.selection=isolated threads=" + threads);
    if (!route) return fail(route.status().to_string());
    auto plan = builder::build_plan(*model, *route, {});
    if (!plan) return fail("the isolated build for the value priors: " + plan.status().to_string());
    tuner::NodeCosts costs;
    for (const builder::TacticRanking& rk : plan->report.rankings) costs[rk.node] = rk.candidates;
    tuner::set_value_priors(*space, costs);
  }
  const uint64_t size = space->size();
  if (size > 100000) return fail("the space has " + std::to_string(size) + " points: restrict --knobs to enumerate it");
  // DB may list several databases (a.db,b.db,...), each an independent enumeration of the same
  // space: a route's latency is then the median over them (a failed evaluation counts as
  // infinitely slow), so the optimum is less a winner of one measurement's noise.
  const std::vector<std::string> db_paths = split(db_path);
  std::map<std::string, std::vector<double>> samples;
  for (const std::string& path : db_paths) {
    auto db = tuner::Database::open(path);
    if (!db) return fail(db.status().to_string());
    auto records = (*db)->all(model->hash, builder::device_fingerprint(), TAC_VERSION);
    if (!records) return fail(records.status().to_string());
    std::map<std::string, double> one;  // the last record of a route in this database
    for (const tuner::CandidateRecord& r : *records) one[r.route] = r.status == "ok" ? r.median_ms : INFINITY;
    for (const auto& [route, ms] : one) samples[route].push_back(ms);
  }
  std::map<std::string, double> table;
  for (const auto& [route, v] : samples)
    if (v.size() == db_paths.size()) table[route] = runtime::median(v);  // else reported as missing below

  auto route_text = [&](const tuner::Point& p) {
    builder::Route r = tuner::route_of(*space, p);
    r.values["threads"] = threads;
    return r.to_string();
  };
  // Every point of the space, by mixed-radix index: the table must hold them all.
  double optimum = INFINITY;
  std::string optimum_route;
  for (uint64_t idx = 0; idx < size; ++idx) {
    tuner::Point p(space->dims.size());
    uint64_t rest = idx;
    for (size_t d = 0; d < p.size(); ++d) {
      p[d] = static_cast<int>(rest % space->dims[d].values.size());
      rest /= space->dims[d].values.size();
    }
    auto it = table.find(route_text(p));
    if (it == table.end())
      return fail(db_path + " lacks route '" + route_text(p) + "': run `tactician tune " + model_path +
                  " --strategy full --knobs \"" + knobs_arg + "\" --threads " + threads + " --db " + db_path + "` first");
    if (it->second < optimum) {
      optimum = it->second;
      optimum_route = it->first;
    }
  }
  const tuner::Point p0 = tuner::default_point(*space);
  const double def = table.at(route_text(p0));
  const int budget = std::max(1, static_cast<int>(std::lround(fraction * static_cast<double>(size))));
  std::printf("model %s, space %llu points (%zu dimensions), budget %d evaluations (%.0f%%), %d seeds, value priors %s\n",
              model_path.c_str(), static_cast<unsigned long long>(size), space->dims.size(), budget, fraction * 100, seeds,
              use_prior ? "from isolated timings" : "off");
  std::printf("default %.3f ms, optimum %.3f ms (speed-up %.3fx): %s\n\n", def, optimum, def / optimum,
              optimum_route.c_str());
  std::printf("| strategy | median %% of the optimum's speed-up | worst seed | seeds that found the optimum |\n");
  std::printf("| --- | --- | --- | --- |\n");
  for (const std::string& name : strategies) {
    std::vector<double> pct;
    int hits = 0;
    for (int seed = 0; seed < seeds; ++seed) {
      auto strat = tuner::make_strategy(name, *space, static_cast<uint64_t>(seed));
      if (!strat) return fail(strat.status().to_string());
      tuner::History h;
      h.trials.push_back({p0, def});  // the tuner evaluates the default first
      int used = 1;
      while (used < budget) {
        auto batch = (*strat)->propose(h, static_cast<size_t>(std::min(4, budget - used)));
        if (batch.empty()) break;
        for (const tuner::Point& p : batch) {
          h.trials.push_back({p, table.at(route_text(p))});
          ++used;
        }
      }
      const double best = h.best() ? h.best()->objective_ms : def;
      pct.push_back(100.0 * (def / best) / (def / optimum));
      hits += best <= optimum;
    }
    std::vector<double> sorted = pct;
    std::sort(sorted.begin(), sorted.end());
    std::printf("| %s | %.1f%% | %.1f%% | %d/%d |\n", name.c_str(), sorted[sorted.size() / 2], sorted.front(), hits, seeds);
  }
  return 0;
}
