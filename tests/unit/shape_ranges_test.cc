// Shape ranges (builder/plan.h, DimRange; issue 29): one plan built at the opt sizes runs every size
// inside its ranges (other sizes specialized from its source model with its route), matches the
// reference interpreter at each, keeps doing so after a save/load round trip, and refuses sizes
// outside a range naming the input, the dim and the range.
#include <filesystem>
#include <random>

#include "builder/plan_file.h"
#include "builder_test_util.h"
#include "io/onnx_import.h"
#include "reference/interpreter.h"

namespace tac {
namespace {

TEST(ShapeRanges, Parse) {
  auto r = builder::parse_shape_ranges("batch=1..8:4,seq=16..512:128");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->at("batch"), (builder::DimRange{1, 4, 8}));
  EXPECT_EQ(r->at("seq"), (builder::DimRange{16, 128, 512}));
  EXPECT_EQ(builder::shape_ranges_to_string(*r), "batch=1..8:4 seq=16..512:128");
  auto no_opt = builder::parse_shape_ranges("n=2..6 m=3");
  ASSERT_TRUE(no_opt.is_ok());
  EXPECT_EQ(no_opt->at("n"), (builder::DimRange{2, 6, 6}));  // opt defaults to max
  EXPECT_EQ(no_opt->at("m"), (builder::DimRange{3, 3, 3}));
  EXPECT_TRUE(builder::parse_shape_ranges("")->empty());
  for (const char* bad : {"batch", "=1..2", "batch=0..4", "batch=4..2", "batch=1..4:5", "batch=1..4:0", "batch=a..4",
                          "batch=1..99999999999999999999", "batch=1..4,batch=2..3", "batch=1..-4"}) {
    auto e = builder::parse_shape_ranges(bad);
    EXPECT_FALSE(e.is_ok()) << bad;
    EXPECT_EQ(e.status().kind(), ErrorKind::invalid_argument);
  }
}

class ShapeRangesBert : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = std::string(TAC_MODELS_DIR) + "/bert-toy";
    if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no model zoo at " << TAC_MODELS_DIR;
    auto m = io::load_model(dir + "/model.onnx");
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    model_ = std::move(m).value();
  }
  // input_ids in the vocabulary, token types 0/1, a mask with a padded tail.
  std::vector<Datum> inputs(int64_t batch, int64_t seq, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<Datum> out;
    for (int k = 0; k < 3; ++k) {
      Tensor t = Tensor::create(DType::int64, {batch, seq}).value();
      for (int64_t i = 0; i < t.numel(); ++i)
        t.set_i64(i, k == 0 ? static_cast<int64_t>(rng() % 99) : k == 1 ? static_cast<int64_t>(rng() % 2)
                                                                        : (i % seq) < seq - seq / 4 ? 1 : 0);
      out.emplace_back(t);
    }
    return out;
  }
  std::string matches_reference(runtime::Engine& e, const std::vector<Datum>& in) {
    auto got = e.run_values(in);
    if (!got) return "engine: " + got.status().to_string();
    auto want = ref::run_model(model_, in);
    if (!want) return "reference: " + want.status().to_string();
    std::vector<Tensor> g, w;
    for (size_t i = 0; i < got->size(); ++i) {
      g.push_back((*got)[i].tensor);
      w.push_back((*want)[i].tensor);
    }
    return test::compare_outputs(g, w, 1e-4, 1e-4);
  }
  ir::Model model_;
};

TEST_F(ShapeRangesBert, EverySizeInsideRunsAndMatchesTheReference) {
  builder::BuildOptions opts;
  opts.ranges = builder::parse_shape_ranges("batch=1..8:4,max_seq_len_in_batch=16..256:128").value();
  auto plan = builder::build_plan(model_, builder::Route::parse("threads=1").value(), opts);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_EQ(plan->dims.at("batch"), 4);
  EXPECT_EQ(plan->dims.at("max_seq_len_in_batch"), 128);
  EXPECT_FALSE(plan->source_model.empty());
  const std::string path = testing::TempDir() + "/ranges-" + std::to_string(::getpid()) + ".plan";
  ASSERT_TRUE(builder::save_plan(*plan, path).is_ok());
  auto e = runtime::Engine::create(std::move(plan).value());
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  auto loaded = builder::load_plan(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded->ranges, (*e)->plan().ranges);
  auto e2 = runtime::Engine::create(std::move(loaded).value());
  ASSERT_TRUE(e2.is_ok());
  std::filesystem::remove(path);
  uint64_t seed = 1;
  for (int64_t batch : {1, 3, 8})
    for (int64_t seq : {16, 100, 256}) {
      SCOPED_TRACE("batch " + std::to_string(batch) + " seq " + std::to_string(seq));
      const auto in = inputs(batch, seq, seed++);
      EXPECT_EQ(matches_reference(**e, in), "");
      EXPECT_EQ(matches_reference(**e2, in), "");
    }
  // The opt size runs on the plan itself, and sizes run again after others (the cache).
  EXPECT_EQ(matches_reference(**e, inputs(4, 128, 99)), "");
  EXPECT_EQ(matches_reference(**e, inputs(1, 16, 100)), "");
}

TEST_F(ShapeRangesBert, OutsideARangeIsRefusedNamingIt) {
  builder::BuildOptions opts;
  opts.ranges = builder::parse_shape_ranges("batch=1..8:4,max_seq_len_in_batch=16..256:128").value();
  auto e = runtime::Engine::create(builder::build_plan(model_, {}, opts).value());
  ASSERT_TRUE(e.is_ok());
  auto big = (*e)->run_values(inputs(2, 300, 1));
  ASSERT_FALSE(big.is_ok());
  EXPECT_NE(big.status().message().find("input 'input_ids' dim 1 (max_seq_len_in_batch): 300 is outside the plan's "
                                        "range 16..256"), std::string::npos)
      << big.status().message();
  auto mixed = (*e)->run_values({inputs(2, 32, 1)[0], inputs(2, 48, 1)[1], inputs(2, 32, 1)[2]});
  ASSERT_FALSE(mixed.is_ok());
  EXPECT_NE(mixed.status().message().find("max_seq_len_in_batch"), std::string::npos) << mixed.status().message();
}

TEST_F(ShapeRangesBert, RangesMustNameSymbolicDims) {
  builder::BuildOptions opts;
  opts.ranges = builder::parse_shape_ranges("sequence=1..8").value();
  auto p = builder::build_plan(model_, {}, opts);
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("no dim named so"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("max_seq_len_in_batch"), std::string::npos);
  opts.ranges = builder::parse_shape_ranges("batch=1..8:4").value();
  opts.dims["batch"] = 2;
  auto conflict = builder::build_plan(model_, {}, opts);
  ASSERT_FALSE(conflict.is_ok());
  EXPECT_NE(conflict.status().message().find("conflicts"), std::string::npos);
}

}  // namespace
}  // namespace tac

namespace tac {
namespace {

// prepare() builds a size's engine ahead: the run after it matches the reference; sizes outside a
// range, dims that are not ranges and plans without ranges are refused naming them.
TEST_F(ShapeRangesBert, PrepareBuildsASizeAhead) {
  builder::BuildOptions opts;
  opts.ranges = builder::parse_shape_ranges("batch=1..8:4,max_seq_len_in_batch=16..256:128").value();
  auto e = runtime::Engine::create(builder::build_plan(model_, {}, opts).value());
  ASSERT_TRUE(e.is_ok());
  ASSERT_TRUE((*e)->prepare({{"batch", 3}, {"max_seq_len_in_batch", 40}}).is_ok());
  EXPECT_EQ(matches_reference(**e, inputs(3, 40, 5)), "");
  auto outside = (*e)->prepare({{"batch", 9}});
  ASSERT_FALSE(outside.is_ok());
  EXPECT_NE(outside.message().find("batch=9 is outside the plan's range 1..8"), std::string::npos) << outside.message();
  auto unknown = (*e)->prepare({{"seq", 3}});
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.message().find("'seq' is not one of the plan's ranges"), std::string::npos);
  builder::BuildOptions fixed;
  auto plain = runtime::Engine::create(builder::build_plan(model_, {}, fixed).value());
  ASSERT_TRUE(plain.is_ok());
  EXPECT_FALSE((*plain)->prepare({{"batch", 1}}).is_ok());
}

}  // namespace
}  // namespace tac
