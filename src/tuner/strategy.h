// Search strategies behind one interface (STYLE.md 4): each proposes the next points to evaluate
// from the history of evaluated candidates. Deterministic for a given seed and history.
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "tactician/status.h"
#include "tuner/space.h"

namespace tac::tuner {

// One evaluated point: its objective is the measured median latency in ms; a failed build or
// run, a crash, a timeout or an accuracy rejection is +infinity (never chosen).
struct Trial {
  Point point;
  double objective_ms = INFINITY;
};

struct History {
  std::vector<Trial> trials;  // in evaluation order (resumed trials first)
  bool contains(const Point& p) const;
  const Trial* best() const;  // lowest finite objective, or nullptr
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual const char* name() const = 0;
  // Up to `n` points not yet in `history` (fewer, or none when the strategy has nothing left to
  // propose: `fast` and `full` are finite). Must not propose the same point twice in one call.
  virtual std::vector<Point> propose(const History& history, size_t n) = 0;
  // Whether the tuner inspects the default before the search (its profile weighs the dimensions,
  // the isolated selection sets value priors) and evaluates its seeds (precision, approximate,
  // isolated) first: worth it for strategies that learn from every trial, not for the fixed
  // enumerations (fast, full, mixed), whose order no trial changes.
  virtual bool takes_seeds() const { return false; }
  // Whether the tuner may, past TuneOptions::refine_after, switch it to the per-node space around
  // the incumbent (group, then refine): a fresh instance of it searches that space.
  virtual bool refines() const { return false; }
};

// Names: fast, full, mixed, random, coordinate, evolution, tpe. Errors name the unknown strategy
// and list the known ones.
Result<std::unique_ptr<Strategy>> make_strategy(const std::string& name, const SearchSpace& space, uint64_t seed);
const std::vector<std::string>& strategy_names();

}  // namespace tac::tuner
