// Constant weights in a oneDNN primitive's format, kept across engines by a process that builds
// many engines of one model (the tuner's evaluator worker): a candidate's oneDNN kernels then
// reorder only the weights no earlier build reordered the same way (BERT-base's GEMMs: 785 ms of a
// 820 ms build on the 2-core VM). Off (limit 0) unless enabled, so that an engine's memory is
// freed with it everywhere else.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tac::kernels {

// Keeps up to `bytes` of reordered weights (and the source tensors they came from, so that a
// source's address cannot be reused by another tensor while it is a key); least recently used
// first out. 0 turns the cache off and empties it.
void set_weight_cache_bytes(size_t bytes);

struct WeightCacheStats {
  uint64_t hits = 0, misses = 0;
  size_t bytes = 0, entries = 0;
};
WeightCacheStats weight_cache_stats();

}  // namespace tac::kernels
