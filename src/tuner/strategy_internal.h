// Pieces the strategies share (not a public interface): point hashing and sets, the seeded
// random source, enumeration order, and what each proposal call derives from the history.
#pragma once

#include <algorithm>

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <unordered_map>
#include <vector>

#include "tuner/strategy.h"

namespace tac::tuner::detail {

// Zobrist hashing: a point's hash is the XOR of one random word per (dimension, value), so a
// point that differs in one dimension rehashes in O(1) (coordinate neighbourhoods, mutation).
// The words come from a fixed generator: hashes depend on the space only, never on the seed.
class PointHasher {
 public:
  explicit PointHasher(const SearchSpace& space);
  uint64_t hash(const Point& p) const;
  uint64_t word(size_t dim, int value) const { return words_[offset_[dim] + value]; }
  uint64_t moved(uint64_t h, size_t dim, int from, int to) const { return h ^ word(dim, from) ^ word(dim, to); }

 private:
  std::vector<size_t> offset_;
  std::vector<uint64_t> words_;
};

// A set of points keyed by their Zobrist hash (equality checked on a hash hit).
class PointSet {
 public:
  explicit PointSet(const PointHasher& hasher) : hasher_(&hasher) {}
  bool contains(const Point& p) const { return contains(p, hasher_->hash(p)); }
  bool contains(const Point& p, uint64_t h) const;
  // True when `p` was not in the set yet.
  bool insert(const Point& p) { return insert(p, hasher_->hash(p)); }
  bool insert(const Point& p, uint64_t h);
  size_t size() const { return points_.size(); }

 private:
  const PointHasher* hasher_;
  std::unordered_multimap<uint64_t, uint32_t> index_;
  std::vector<Point> points_;
};

using Rng = std::mt19937_64;
// Uniform in [0, k), the same on every standard library (std distributions are not).
inline uint64_t uniform_below(Rng& rng, uint64_t k) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(rng()) * k) >> 64);
}
inline double uniform01(Rng& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Mixed-radix successor with the last dimension varying fastest (the order of `full`); false
// after the last point (p wraps to all zeros).
bool next_point(const std::vector<int>& radix, Point& p);

// Base of every strategy: the space (copied), its radices, size and hasher, and the seed.
class SpaceStrategy : public Strategy {
 public:
  SpaceStrategy(const SearchSpace& space, uint64_t seed);

 protected:
  // What one propose() call knows: the valid trials of the history (points of this space, in
  // order), every point seen so far (history plus this call's proposals, never proposed
  // again), the proposals, and a random source seeded from the seed and the whole history,
  // so the same seed and history give the same proposals whatever came before.
  struct Call {
    std::vector<const Trial*> trials;
    PointSet seen;
    std::vector<Point> out;
    Rng rng;
    size_t n;
    explicit Call(const PointHasher& h) : seen(h) {}
    bool full() const { return out.size() >= n; }
  };
  Call begin(const History& history, size_t n) const;
  bool valid(const Point& p) const;
  // Adds `p` to the proposals when unseen; true when added.
  bool emit(Call& c, const Point& p) const;
  bool emit(Call& c, const Point& p, uint64_t h) const;
  bool exhausted(const Call& c) const { return c.seen.size() >= size_; }
  Point random_point(Rng& rng) const;
  // Each dimension is redrawn with this probability, else kept (local_unseen, tpe): with many
  // dimensions (one per op signature and global knob: 40-100 on the zoo models) a uniform random
  // point changes nearly all of them and is nearly always far worse than the default; about
  // kLocalDims changes at a time keep the search near good points. 1 for small spaces.
  // Dimension d is redrawn with probability local_rate(d): kLocalDims times its share of the
  // dimensions' weights (Dimension::weight: the time its nodes carry, when the tuner profiled),
  // at most 1; 1 for every dimension of a space of at most kLocalDims dimensions.
  static constexpr double kLocalDims = 4.0;
  double local_rate(size_t d) const { return rate_[d]; }
  // A value of dimension d drawn by its prior (Dimension::prior; uniformly without one).
  int draw_value(Rng& rng, size_t d) const;
  // A value of dimension d other than `current`, drawn by its prior (uniformly without one).
  int draw_other_value(Rng& rng, size_t d, int current) const;
  // The prior of value v of dimension d (1/k without one).
  double prior(size_t d, int v) const {
    return space_.dims[d].prior.empty() ? 1.0 / radix_[d] : space_.dims[d].prior[static_cast<size_t>(v)];
  }
  // An unseen point that redraws each dimension d of `center` with probability local_rate(d) (at
  // least one, drawn by weight); after repeated collisions, random_unseen.
  std::optional<Point> local_unseen(Call& c, const Point& center) const;
  // A uniformly drawn unseen point; after repeated collisions (a nearly exhausted space) the
  // first unseen point in `full` order from a random start. Nothing when every point is seen.
  std::optional<Point> random_unseen(Call& c) const;
  // The 1 + sum(k_d - 1) points of `fast`: the default, then each dimension moved off its
  // default to each other value, dimension by dimension. i in [0, fast_count()).
  size_t fast_count() const { return fast_count_; }
  Point fast_point(size_t i) const;

  SearchSpace space_;
  std::vector<int> radix_;
  uint64_t size_;
  PointHasher hasher_;
  uint64_t seed_;
  Point default_;
  size_t fast_count_;
  std::vector<double> rate_;  // local_rate per dimension
};

std::unique_ptr<Strategy> make_fast(const SearchSpace& s, uint64_t seed);
std::unique_ptr<Strategy> make_full(const SearchSpace& s, uint64_t seed);
std::unique_ptr<Strategy> make_mixed(const SearchSpace& s, uint64_t seed);
std::unique_ptr<Strategy> make_random(const SearchSpace& s, uint64_t seed);
std::unique_ptr<Strategy> make_coordinate(const SearchSpace& s, uint64_t seed);
std::unique_ptr<Strategy> make_evolution(const SearchSpace& s, uint64_t seed);
std::unique_ptr<Strategy> make_tpe(const SearchSpace& s, uint64_t seed);

}  // namespace tac::tuner::detail
