// Constant weights in a oneDNN primitive's format, kept across engines by a process that builds
// many engines of one model (the tuner's evaluator worker): a candidate's oneDNN kernels then
// reorder only the weights no earlier build reordered the same way (BERT-base's GEMMs: 785 ms of a
// 820 ms build on the 2-core VM). Off (limit 0) unless enabled, so that an engine's memory is
// freed with it everywhere else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tactician/tensor.h"

namespace tac::kernels {

// Keeps up to `bytes` of reordered weights (and the source tensors they came from, so that a
// source's address cannot be reused by another tensor while it is a key); least recently used
// first out. 0 turns the cache off and empties it.
void set_weight_cache_bytes(size_t bytes);

struct WeightCacheStats {
  uint64_t hits = 0, misses = 0;
  size_t bytes = 0, entries = 0;
};
WeightCacheStats weight_cache_stats();  // over both kinds of entries

// Host bytes a kernel derives from a constant tensor (cuBLASLt's fp8 weights: quantized and
// transposed, with their scale), kept under the same limit: `make` runs on a miss; `how` names the
// derivation (it is part of the key with the source).
struct DerivedWeights {
  std::vector<uint8_t> bytes;
  float scale = 1;
};
std::shared_ptr<const DerivedWeights> derived_weights(const Tensor& src, const std::string& how,
                                                      const std::function<DerivedWeights()>& make);

}  // namespace tac::kernels
