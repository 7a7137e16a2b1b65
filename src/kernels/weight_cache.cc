#include "kernels/weight_cache.h"

#include <utility>

#include "core/tensor_cache.h"
#include "kernels/onednn_common.h"

namespace tac::kernels {

namespace {

// Keyed by the source's description and the primitive's format.
using Formats = std::pair<dnnl::memory::desc, dnnl::memory::desc>;

TensorCache<Formats, dnnl::memory>& cache() {
  static TensorCache<Formats, dnnl::memory> c;
  return c;
}

TensorCache<std::string, std::shared_ptr<const DerivedWeights>>& derived() {
  static TensorCache<std::string, std::shared_ptr<const DerivedWeights>> c;
  return c;
}

}  // namespace

void set_weight_cache_bytes(size_t bytes) {
  cache().set_limit(bytes);
  derived().set_limit(bytes);
}

WeightCacheStats weight_cache_stats() {
  const auto a = cache().stats();
  const auto b = derived().stats();
  return {a.hits + b.hits, a.misses + b.misses, a.bytes + b.bytes, a.entries + b.entries};
}

std::shared_ptr<const DerivedWeights> derived_weights(const Tensor& src, const std::string& how,
                                                      const std::function<DerivedWeights()>& make) {
  return derived().get(
      src, how, [&] { return std::make_shared<const DerivedWeights>(make()); },
      [](const std::shared_ptr<const DerivedWeights>& d) { return d->bytes.size(); });
}

dnnl::memory reordered_weights(const Tensor& src, const dnnl::memory::desc& from, const dnnl::memory::desc& to, dnnl::stream& s) {
  auto reorder = [&] {
    dnnl::memory out(to, cpu_engine());
    dnnl::memory user(from, cpu_engine(), const_cast<void*>(src.raw()));
    dnnl::reorder(user, out).execute(s, user, out);
    s.wait();
    return out;
  };
  return cache().get(src, Formats{from, to}, reorder, [](const dnnl::memory& m) { return m.get_desc().get_size(); });
}

}  // namespace tac::kernels
