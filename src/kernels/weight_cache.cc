#include "kernels/weight_cache.h"

#include <list>
#include <mutex>

#include "kernels/onednn_common.h"

namespace tac::kernels {

namespace {

struct Entry {
  Tensor source;  // shares the source's bytes: their address stays this tensor's while cached
  dnnl::memory::desc from, to;
  dnnl::memory weights;
  size_t bytes = 0;  // the reordered weights' (the sources are the model's own, or a pass's)
};

struct Cache {
  std::mutex mu;
  size_t limit = 0, bytes = 0;
  std::list<Entry> lru;  // most recently used first
  WeightCacheStats stats;

  void trim() {
    while (bytes > limit && !lru.empty()) {
      bytes -= lru.back().bytes;
      lru.pop_back();
    }
  }
};

Cache& cache() {
  static Cache c;
  return c;
}

dnnl::memory reorder(const Tensor& src, const dnnl::memory::desc& from, const dnnl::memory::desc& to, dnnl::stream& s) {
  dnnl::memory out(to, cpu_engine());
  dnnl::memory user(from, cpu_engine(), const_cast<void*>(src.raw()));
  dnnl::reorder(user, out).execute(s, user, out);
  s.wait();
  return out;
}

}  // namespace

void set_weight_cache_bytes(size_t bytes) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.limit = bytes;
  c.trim();
}

WeightCacheStats weight_cache_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  WeightCacheStats s = c.stats;
  s.bytes = c.bytes;
  s.entries = c.lru.size();
  return s;
}

dnnl::memory reordered_weights(const Tensor& src, const dnnl::memory::desc& from, const dnnl::memory::desc& to, dnnl::stream& s) {
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.limit == 0) return reorder(src, from, to, s);
    for (auto it = c.lru.begin(); it != c.lru.end(); ++it)
      if (it->source.raw() == src.raw() && it->source.bytes() == src.bytes() && it->from == from && it->to == to) {
        c.lru.splice(c.lru.begin(), c.lru, it);
        ++c.stats.hits;
        return c.lru.front().weights;
      }
    ++c.stats.misses;
  }
  dnnl::memory w = reorder(src, from, to, s);  // outside the lock: builds on other threads go on
  std::lock_guard<std::mutex> lock(c.mu);
  const size_t bytes = to.get_size();
  if (bytes <= c.limit) {
    c.lru.push_front({src, from, to, w, bytes});
    c.bytes += bytes;
    c.trim();
  }
  return w;
}

}  // namespace tac::kernels
