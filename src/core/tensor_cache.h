// A cache of what a process derives from constant tensors (a weight's bf16 copy, its reordering into
// a oneDNN primitive's format), for a process that builds many engines of one model (the tuner's
// evaluator worker). An entry is keyed by its source tensor's bytes (their address and size) and a
// key saying how it was derived; it holds the source, so that the address cannot be reused by another
// tensor while it is a key. Least recently used out past a byte limit; 0 (the default) is off.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>

#include "tactician/tensor.h"

namespace tac {

template <class Key, class Value>
class TensorCache {
 public:
  struct Stats {
    uint64_t hits = 0, misses = 0;
    size_t bytes = 0, entries = 0;
  };

  // Up to `bytes` of derived values; 0 turns the cache off and empties it.
  void set_limit(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    limit_ = bytes;
    trim();
  }

  // The value derived from `src` as `key` says: cached, or make() (size(value): its bytes). make
  // runs outside the lock, so builds on other threads go on meanwhile.
  template <class Make, class Size>
  Value get(const Tensor& src, const Key& key, Make make, Size size) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (limit_ == 0) return make();
      for (auto it = lru_.begin(); it != lru_.end(); ++it)
        if (it->source.raw() == src.raw() && it->source.bytes() == src.bytes() && it->key == key) {
          lru_.splice(lru_.begin(), lru_, it);
          ++stats_.hits;
          return lru_.front().value;
        }
      ++stats_.misses;
    }
    Value v = make();
    const size_t bytes = size(v);
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes <= limit_) {
      lru_.push_front({src, key, v, bytes});
      bytes_ += bytes;
      trim();
    }
    return v;
  }

  Stats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    Stats s = stats_;
    s.bytes = bytes_;
    s.entries = lru_.size();
    return s;
  }

 private:
  struct Entry {
    Tensor source;  // shares the source's bytes: their address stays this tensor's while cached
    Key key;
    Value value;
    size_t bytes = 0;
  };
  void trim() {
    while (bytes_ > limit_ && !lru_.empty()) {
      bytes_ -= lru_.back().bytes;
      lru_.pop_back();
    }
  }
  std::mutex mu_;
  size_t limit_ = 0, bytes_ = 0;
  std::list<Entry> lru_;  // most recently used first
  Stats stats_;
};

}  // namespace tac
