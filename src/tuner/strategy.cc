// The strategy table, the history, the pieces every strategy shares, and the enumerating
// strategies: fast, full and mixed (TensorRT's three), plus random.
#include "tuner/strategy.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>

#include "tuner/strategy_internal.h"

namespace tac::tuner {

bool History::contains(const Point& p) const {
  return std::any_of(trials.begin(), trials.end(), [&](const Trial& t) { return t.point == p; });
}

const Trial* History::best() const {
  const Trial* best = nullptr;
  for (const Trial& t : trials) {
    if (std::isfinite(t.objective_ms) && (best == nullptr || t.objective_ms < best->objective_ms)) best = &t;
  }
  return best;
}

namespace detail {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t s = a ^ (b * 0x9e3779b97f4a7c15ULL);
  return splitmix64(s);
}

}  // namespace

PointHasher::PointHasher(const SearchSpace& space) {
  uint64_t state = 0x7ac71c1a7ULL;
  offset_.reserve(space.dims.size());
  for (const Dimension& d : space.dims) {
    offset_.push_back(words_.size());
    for (size_t v = 0; v < d.values.size(); ++v) words_.push_back(splitmix64(state));
  }
}

uint64_t PointHasher::hash(const Point& p) const {
  uint64_t h = 0;
  for (size_t d = 0; d < p.size(); ++d) h ^= word(d, p[d]);
  return h;
}

bool PointSet::contains(const Point& p, uint64_t h) const {
  auto [lo, hi] = index_.equal_range(h);
  for (auto it = lo; it != hi; ++it) {
    if (points_[it->second] == p) return true;
  }
  return false;
}

bool PointSet::insert(const Point& p, uint64_t h) {
  if (contains(p, h)) return false;
  index_.emplace(h, static_cast<uint32_t>(points_.size()));
  points_.push_back(p);
  return true;
}

bool next_point(const std::vector<int>& radix, Point& p) {
  for (size_t d = radix.size(); d-- > 0;) {
    if (++p[d] < radix[d]) return true;
    p[d] = 0;
  }
  return false;
}

SpaceStrategy::SpaceStrategy(const SearchSpace& space, uint64_t seed)
    : space_(space), size_(space.size()), hasher_(space), seed_(seed), default_(default_point(space)) {
  fast_count_ = 1;
  for (const Dimension& d : space_.dims) {
    radix_.push_back(static_cast<int>(d.values.size()));
    fast_count_ += d.values.size() - 1;
  }
  double total = 0;
  for (const Dimension& d : space_.dims) total += std::max(0.0, d.weight);
  for (const Dimension& d : space_.dims)
    rate_.push_back(space_.dims.size() <= kLocalDims || !(total > 0)
                        ? std::min(1.0, kLocalDims / static_cast<double>(space_.dims.size()))
                        : std::min(1.0, kLocalDims * std::max(0.0, d.weight) / total));
}

bool SpaceStrategy::valid(const Point& p) const {
  if (p.size() != radix_.size()) return false;
  for (size_t d = 0; d < p.size(); ++d) {
    if (p[d] < 0 || p[d] >= radix_[d]) return false;
  }
  return true;
}

SpaceStrategy::Call SpaceStrategy::begin(const History& history, size_t n) const {
  Call c(hasher_);
  c.n = n;
  uint64_t h = mix(seed_, 0x5eed);
  for (const Trial& t : history.trials) {
    if (!valid(t.point)) continue;  // a point of another space: it cannot collide with ours
    c.trials.push_back(&t);
    const uint64_t ph = hasher_.hash(t.point);
    c.seen.insert(t.point, ph);
    h = mix(h, ph ^ std::bit_cast<uint64_t>(t.objective_ms));
  }
  c.rng.seed(h);
  return c;
}

bool SpaceStrategy::emit(Call& c, const Point& p) const { return emit(c, p, hasher_.hash(p)); }

bool SpaceStrategy::emit(Call& c, const Point& p, uint64_t h) const {
  if (c.full() || !c.seen.insert(p, h)) return false;
  c.out.push_back(p);
  return true;
}

Point SpaceStrategy::random_point(Rng& rng) const {
  Point p(radix_.size());
  for (size_t d = 0; d < p.size(); ++d) p[d] = static_cast<int>(uniform_below(rng, radix_[d]));
  return p;
}

std::optional<Point> SpaceStrategy::random_unseen(Call& c) const {
  if (exhausted(c)) return std::nullopt;
  Point p;
  for (int attempt = 0; attempt < 64; ++attempt) {
    p = random_point(c.rng);
    if (!c.seen.contains(p)) return p;
  }
  // Collisions this often mean most of the (then small) space is seen: scan for the rest.
  for (uint64_t i = 0; i < size_; ++i) {
    if (!next_point(radix_, p)) p.assign(radix_.size(), 0);
    if (!c.seen.contains(p)) return p;
  }
  return std::nullopt;
}

int SpaceStrategy::draw_value(Rng& rng, size_t d) const {
  const std::vector<double>& pr = space_.dims[d].prior;
  if (pr.empty()) return static_cast<int>(uniform_below(rng, radix_[d]));
  double u = uniform01(rng);
  for (int v = 0; v + 1 < radix_[d]; ++v)
    if ((u -= pr[static_cast<size_t>(v)]) < 0) return v;
  return radix_[d] - 1;
}

int SpaceStrategy::draw_other_value(Rng& rng, size_t d, int current) const {
  const std::vector<double>& pr = space_.dims[d].prior;
  if (pr.empty() || radix_[d] < 2) {
    const int v = static_cast<int>(uniform_below(rng, radix_[d] - 1));
    return v < current ? v : v + 1;
  }
  double u = uniform01(rng) * (1 - pr[static_cast<size_t>(current)]);
  int last = -1;
  for (int v = 0; v < radix_[d]; ++v) {
    if (v == current) continue;
    last = v;
    if ((u -= pr[static_cast<size_t>(v)]) < 0) return v;
  }
  return last;
}

std::optional<Point> SpaceStrategy::local_unseen(Call& c, const Point& center) const {
  if (exhausted(c) || radix_.empty()) return std::nullopt;
  double total = 0;
  for (double r : rate_) total += r;
  for (int attempt = 0; attempt < 64; ++attempt) {
    Point p = center;
    bool moved = false;
    for (size_t d = 0; d < p.size(); ++d)
      if (radix_[d] > 1 && uniform01(c.rng) < rate_[d]) {
        p[d] = draw_value(c.rng, d);
        moved |= p[d] != center[d];
      }
    if (!moved) {  // one dimension, drawn by its rate
      double u = uniform01(c.rng) * total;
      size_t d = 0;
      while (d + 1 < p.size() && (u -= rate_[d]) >= 0) ++d;
      p[d] = draw_value(c.rng, d);
    }
    if (!c.seen.contains(p)) return p;
  }
  return random_unseen(c);
}

Point SpaceStrategy::fast_point(size_t i) const {
  Point p = default_;
  if (i == 0) return p;
  --i;
  for (size_t d = 0; d < radix_.size(); ++d) {
    const size_t moves = radix_[d] - 1;
    if (i < moves) {
      const int v = static_cast<int>(i);
      p[d] = v < default_[d] ? v : v + 1;  // every value but the default, in order
      return p;
    }
    i -= moves;
  }
  return p;  // unreachable for i < fast_count()
}

namespace {

// fast: the default, then one dimension off its default at a time, over every other value.
class Fast final : public SpaceStrategy {
 public:
  using SpaceStrategy::SpaceStrategy;
  const char* name() const override { return "fast"; }
  std::vector<Point> propose(const History& history, size_t n) override {
    Call c = begin(history, n);
    for (size_t i = 0; i < fast_count() && !c.full(); ++i) emit(c, fast_point(i));
    return std::move(c.out);
  }
};

// full: the cartesian product in mixed-radix order (last dimension fastest), walked lazily
// from index 0; each call skips what the history holds, so a call costs
// O((history + n) * dims) and the product is never materialised.
class Full final : public SpaceStrategy {
 public:
  using SpaceStrategy::SpaceStrategy;
  const char* name() const override { return "full"; }
  std::vector<Point> propose(const History& history, size_t n) override {
    Call c = begin(history, n);
    if (size_ == 0) return {};
    Point p(radix_.size(), 0);
    do {
      emit(c, p);
    } while (!c.full() && next_point(radix_, p));
    return std::move(c.out);
  }
};

// mixed (TensorRT's semantics): run `fast` to the end; then every dimension whose best single
// move beat the default's objective by more than 1% is "helpful", and the product of the
// helpful dimensions (the others at their default) is enumerated in `full` order. Failed
// trials (+inf) never help; a failed default is beaten by any finite move. Nothing of the
// second phase is proposed before every fast point has an objective in the history.
class Mixed final : public SpaceStrategy {
 public:
  using SpaceStrategy::SpaceStrategy;
  const char* name() const override { return "mixed"; }
  static constexpr double kHelpfulGain = 0.01;

  std::vector<Point> propose(const History& history, size_t n) override {
    Call c = begin(history, n);
    for (size_t i = 0; i < fast_count() && !c.full(); ++i) emit(c, fast_point(i));
    if (!c.out.empty()) return std::move(c.out);  // fast phase still running

    std::vector<size_t> helpful = helpful_dims(c);
    if (helpful.empty()) return {};
    std::vector<int> sub_radix;
    for (size_t d : helpful) sub_radix.push_back(radix_[d]);
    Point sub(helpful.size(), 0);
    Point p = default_;
    do {
      for (size_t j = 0; j < helpful.size(); ++j) p[helpful[j]] = sub[j];
      emit(c, p);
    } while (!c.full() && next_point(sub_radix, sub));
    return std::move(c.out);
  }

  // Dimensions whose best single move improved on the default by more than kHelpfulGain.
  std::vector<size_t> helpful_dims(const Call& c) const {
    std::unordered_map<uint64_t, std::vector<const Trial*>> by_hash;
    for (const Trial* t : c.trials) by_hash[hasher_.hash(t->point)].push_back(t);
    auto objective = [&](const Point& p) {  // the best objective recorded for p
      double best = INFINITY;
      auto it = by_hash.find(hasher_.hash(p));
      if (it != by_hash.end()) {
        for (const Trial* t : it->second) {
          if (t->point == p) best = std::min(best, t->objective_ms);
        }
      }
      return best;
    };
    const double base = objective(default_);
    std::vector<size_t> helpful;
    for (size_t d = 0; d < radix_.size(); ++d) {
      Point p = default_;
      double best = INFINITY;
      for (int v = 0; v < radix_[d]; ++v) {
        if (v == default_[d]) continue;
        p[d] = v;
        best = std::min(best, objective(p));
      }
      if (std::isfinite(best) && (!std::isfinite(base) || best < base * (1.0 - kHelpfulGain))) helpful.push_back(d);
    }
    return helpful;
  }
};

// random: uniform points, skipping the seen ones.
class Random final : public SpaceStrategy {
 public:
  using SpaceStrategy::SpaceStrategy;
  const char* name() const override { return "random"; }
  bool takes_seeds() const override { return true; }
  bool refines() const override { return true; }
  std::vector<Point> propose(const History& history, size_t n) override {
    Call c = begin(history, n);
    while (!c.full()) {
      auto p = random_unseen(c);
      if (!p) break;
      emit(c, *p);
    }
    return std::move(c.out);
  }
};

}  // namespace

std::unique_ptr<Strategy> make_fast(const SearchSpace& s, uint64_t seed) { return std::make_unique<Fast>(s, seed); }
std::unique_ptr<Strategy> make_full(const SearchSpace& s, uint64_t seed) { return std::make_unique<Full>(s, seed); }
std::unique_ptr<Strategy> make_mixed(const SearchSpace& s, uint64_t seed) { return std::make_unique<Mixed>(s, seed); }
std::unique_ptr<Strategy> make_random(const SearchSpace& s, uint64_t seed) { return std::make_unique<Random>(s, seed); }

}  // namespace detail

namespace {

struct StrategyEntry {
  const char* name;
  std::unique_ptr<Strategy> (*make)(const SearchSpace&, uint64_t);
};

// The one list of strategies (explicit, no self-registration).
constexpr StrategyEntry kStrategies[] = {
    {"fast", detail::make_fast},           {"full", detail::make_full},
    {"mixed", detail::make_mixed},         {"random", detail::make_random},
    {"coordinate", detail::make_coordinate}, {"evolution", detail::make_evolution},
    {"tpe", detail::make_tpe},
};

}  // namespace

const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const StrategyEntry& e : kStrategies) v.emplace_back(e.name);
    return v;
  }();
  return names;
}

Result<std::unique_ptr<Strategy>> make_strategy(const std::string& name, const SearchSpace& space, uint64_t seed) {
  for (const Dimension& d : space.dims) {
    if (d.values.empty()) return invalid_argument("search space dimension '" + d.name + "' has no values");
    if (d.default_index < 0 || static_cast<size_t>(d.default_index) >= d.values.size()) {
      return invalid_argument("search space dimension '" + d.name + "': default index " +
                              std::to_string(d.default_index) + " is outside its " +
                              std::to_string(d.values.size()) + " values");
    }
  }
  for (const StrategyEntry& e : kStrategies) {
    if (name == e.name) return e.make(space, seed);
  }
  std::string known;
  for (const std::string& n : strategy_names()) known += (known.empty() ? "" : ", ") + n;
  return invalid_argument("unknown strategy '" + name + "' (known: " + known + ")");
}

}  // namespace tac::tuner
