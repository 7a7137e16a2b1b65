// The weight cache (kernels/weight_cache.h): a second engine of the same model reuses the oneDNN
// kernels' reordered weights, computes the same outputs bit for bit, and the cache keeps to its
// limit.
#include "kernels/weight_cache.h"

#include <gtest/gtest.h>

#include <cstring>

#include "builder/precision.h"
#include "builder_test_util.h"

namespace tac {
namespace {

using test::ModelBuilder;

// Conv -> Relu -> MatMul (both weighted steps pinned to oneDNN by run()); the weights drawn from
// `seed` and the next seed.
ir::Model conv_matmul_model(uint64_t seed = 31) {
  ModelBuilder m(17);
  m.input("x", 1, {"2", "8", "10", "10"});
  test::initializer_random(m, "w", {16, 8, 3, 3}, seed, 0.3f);
  auto* c = m.node("Conv", {"x", "w"}, {"c"}, "conv0");
  test::attr_ints(c, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"}, "relu0");
  test::initializer_random(m, "b", {10, 24}, seed + 1);
  m.node("MatMul", {"r", "b"}, {"y"}, "mm0");
  m.output("y", 1, {});
  auto model = m.load();
  EXPECT_TRUE(model.is_ok()) << model.status().to_string();
  return std::move(model).value();
}

std::vector<Tensor> run(const ir::Model& m, const std::vector<Tensor>* in, std::vector<Tensor>* inputs_out) {
  auto e = test::build_engine(m, "tactic.conv0=onednn tactic.mm0=onednn threads=1");
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  if (!e.is_ok()) return {};
  std::vector<Tensor> inputs = in ? *in : test::random_inputs(**e, 5);
  if (inputs_out) *inputs_out = inputs;
  auto out = (*e)->run(inputs);
  EXPECT_TRUE(out.is_ok()) << out.status().to_string();
  return out.is_ok() ? *out : std::vector<Tensor>{};
}

bool same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size() || a.empty()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].bytes() != b[i].bytes() || std::memcmp(a[i].raw(), b[i].raw(), a[i].bytes()) != 0) return false;
  return true;
}

struct CacheOff {
  ~CacheOff() { kernels::set_weight_cache_bytes(0); }
};

TEST(WeightCache, ASecondEngineReusesTheReorderedWeightsAndComputesTheSame) {
  CacheOff off;
  const ir::Model m = conv_matmul_model();
  std::vector<Tensor> inputs;
  kernels::set_weight_cache_bytes(0);
  const std::vector<Tensor> uncached = run(m, nullptr, &inputs);
  const auto before = kernels::weight_cache_stats();
  ASSERT_EQ(before.entries, 0u);

  kernels::set_weight_cache_bytes(size_t{64} << 20);
  const std::vector<Tensor> first = run(m, &inputs, nullptr);
  const auto s1 = kernels::weight_cache_stats();
  EXPECT_EQ(s1.misses - before.misses, 2u);  // the conv's and the matmul's weights
  EXPECT_EQ(s1.hits, before.hits);
  EXPECT_EQ(s1.entries, 2u);
  const std::vector<Tensor> second = run(m, &inputs, nullptr);
  const auto s2 = kernels::weight_cache_stats();
  EXPECT_EQ(s2.hits - s1.hits, 2u);
  EXPECT_EQ(s2.misses, s1.misses);
  EXPECT_TRUE(same_bits(uncached, first));
  EXPECT_TRUE(same_bits(uncached, second));
  // The reference interpreter agrees (the cached weights are the model's).
  auto want = test::reference_outputs(m, inputs);
  ASSERT_TRUE(want.is_ok()) << want.status().to_string();
  EXPECT_EQ(test::compare_outputs(second, *want, 1e-4, 1e-4), "");

  // Another model's weights (other values, same shapes) are other entries, never a hit.
  const ir::Model other = conv_matmul_model(41);
  const std::vector<Tensor> theirs = run(other, &inputs, nullptr);
  const auto s3 = kernels::weight_cache_stats();
  EXPECT_EQ(s3.hits, s2.hits);
  EXPECT_EQ(s3.misses - s2.misses, 2u);
  EXPECT_FALSE(same_bits(theirs, second));
  auto want_other = test::reference_outputs(other, inputs);
  ASSERT_TRUE(want_other.is_ok());
  EXPECT_EQ(test::compare_outputs(theirs, *want_other, 1e-4, 1e-4), "");
}

TEST(WeightCache, KeepsToItsLimitAndEmptiesWhenTurnedOff) {
  CacheOff off;
  const ir::Model m = conv_matmul_model();
  kernels::set_weight_cache_bytes(size_t{64} << 20);
  run(m, nullptr, nullptr);
  EXPECT_GT(kernels::weight_cache_stats().entries, 0u);
  // Smaller than the conv's reordered weights (16x8x3x3 floats): nothing is kept.
  kernels::set_weight_cache_bytes(256);
  EXPECT_EQ(kernels::weight_cache_stats().entries, 0u);
  run(m, nullptr, nullptr);
  EXPECT_LE(kernels::weight_cache_stats().bytes, 256u);
  kernels::set_weight_cache_bytes(0);
  EXPECT_EQ(kernels::weight_cache_stats().entries, 0u);
  EXPECT_EQ(kernels::weight_cache_stats().bytes, 0u);
}

// The precision rewrite's derived constants (builder/precision.h): with the cache on, a second
// bf16 build reuses the first's converted weights (the same tensors), so the oneDNN kernels' weight
// cache hits for bf16 routes too, and the outputs are the same bits as without any cache.
TEST(WeightCache, ABf16RouteReusesItsConvertedWeightsAcrossBuilds) {
  CacheOff off;
  struct DerivedOff {
    ~DerivedOff() { builder::set_derived_constant_cache_bytes(0); }
  } derived_off;
  const ir::Model m = conv_matmul_model();
  const std::string route = "precision.default=bf16 threads=1";
  auto plain = test::build_engine(m, route);
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  const std::vector<Tensor> inputs = test::random_inputs(**plain, 9);
  auto want = (*plain)->run(inputs);
  ASSERT_TRUE(want.is_ok());
  auto low_weights = [](const runtime::Engine& e) {
    std::vector<const void*> p;
    for (const ir::Value& v : e.plan().model.graph.values)
      if (v.initializer && v.initializer->dtype() == DType::bfloat16) p.push_back(v.initializer->raw());
    return p;
  };
  ASSERT_FALSE(low_weights(**plain).empty());

  builder::set_derived_constant_cache_bytes(size_t{64} << 20);
  kernels::set_weight_cache_bytes(size_t{64} << 20);
  auto first = test::build_engine(m, route);
  ASSERT_TRUE(first.is_ok());
  const auto s1 = kernels::weight_cache_stats();
  auto second = test::build_engine(m, route);
  ASSERT_TRUE(second.is_ok());
  const auto s2 = kernels::weight_cache_stats();
  EXPECT_EQ(low_weights(**first), low_weights(**second));  // the same converted tensors
  EXPECT_NE(low_weights(**first), low_weights(**plain));
  EXPECT_GT(s2.hits, s1.hits);
  EXPECT_EQ(s2.misses, s1.misses);
  for (auto* e : {&*first, &*second}) {
    auto got = (**e).run(inputs);
    ASSERT_TRUE(got.is_ok());
    EXPECT_TRUE(same_bits(*got, *want));
  }
}

// Host bytes a kernel derives from a weight (the fp8 GEMMs' quantized weights) are made once per
// source and derivation while the cache is on, again for another derivation or another tensor
// with the same values, and every time while it is off.
TEST(WeightCache, DerivedHostWeightsAreMadeOncePerSourceAndDerivation) {
  CacheOff off;
  const Tensor w = kernels::random_tensor(DType::float16, {32, 16}, 3);
  const Tensor same_values = kernels::random_tensor(DType::float16, {32, 16}, 3);
  int made = 0;
  auto make = [&] {
    ++made;
    kernels::DerivedWeights d;
    d.bytes.assign(static_cast<size_t>(w.numel()), static_cast<uint8_t>(made));
    d.scale = static_cast<float>(made);
    return d;
  };
  kernels::set_weight_cache_bytes(size_t{1} << 20);
  auto a = kernels::derived_weights(w, "fp8 [N,K]", make);
  auto b = kernels::derived_weights(w, "fp8 [N,K]", make);
  EXPECT_EQ(made, 1);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(b->scale, 1.0f);
  kernels::derived_weights(w, "fp8 [K,N]", make);
  kernels::derived_weights(same_values, "fp8 [N,K]", make);
  EXPECT_EQ(made, 3);
  kernels::set_weight_cache_bytes(0);
  kernels::derived_weights(w, "fp8 [N,K]", make);
  kernels::derived_weights(w, "fp8 [N,K]", make);
  EXPECT_EQ(made, 5);
}

}  // namespace
}  // namespace tac
