// The default ranking's cost model (src/kernels/cost_model.h): the fitted table names real
// tactics, steps fall into the regimes the table is keyed by, and estimates are the formula times
// the table's factor.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cost_model.h"
#include "kernels/tactic_check.h"

namespace tac::kernels {
namespace {

// A Conv step X [1, C, H, W] * W [M, C/group, k, k] (stride s, pad k/2), weights constant.
struct ConvStep {
  ir::Node node;
  Tensor w;
  StepDesc desc;
  ConvStep(int64_t C, int64_t M, int64_t H, int64_t k, int64_t s, int64_t group)
      : node(make_node("Conv", 2, 1)), w(random_tensor(DType::float32, {M, C / group, k, k}, 3)) {
    set_attr(node, "strides", std::vector<int64_t>{s, s});
    set_attr(node, "pads", std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2});
    set_attr(node, "group", group);
    const int64_t OH = (H + 2 * (k / 2) - k) / s + 1;
    desc.node = &node;
    desc.in_dtypes = {DType::float32, DType::float32};
    desc.out_dtypes = {DType::float32};
    desc.in_shapes = {{1, C, H, H}, {M, C / group, k, k}};
    desc.out_shapes = {{1, M, OH, OH}};
    desc.constants = {nullptr, &w};
  }
};

TEST(CostModel, TableNamesExistingTactics) {
  const std::vector<std::string> problems = cost_table_problems();
  std::string all;
  for (const std::string& p : problems) all += p + "; ";
  EXPECT_TRUE(problems.empty()) << "rows naming no tactic (refit with bench/fit_costs.py): " << all;
}

TEST(CostModel, RegimesOfConvolutionsAndMatMuls) {
  ConvStep dw(32, 32, 56, 3, 2, 32);
  CostRegime r = cost_regime(dw.desc);
  EXPECT_EQ(r.family, "conv");
  EXPECT_EQ(r.levels, (std::vector<std::string>{"dw_s2/nchw/none", "dw_s2/nchw", "dw_s2", "*"}));
  EXPECT_DOUBLE_EQ(r.sizes[0], 28.0 * 28.0 / 1024.0);  // output plane
  EXPECT_DOUBLE_EQ(r.sizes[1], 9.0 / 64.0);            // reduction C/G * KH * KW
  EXPECT_DOUBLE_EQ(r.sizes[2], 1.0 / 64.0);            // output channels per group

  ConvStep w3(64, 64, 28, 3, 1, 1);
  EXPECT_EQ(cost_regime(w3.desc).levels.front(), "w3x3/nchw/none");
  ConvStep one(64, 128, 28, 1, 1, 1);
  EXPECT_EQ(cost_regime(one.desc).levels.front(), "1x1/nchw/none");

  ir::Node mm = make_node("MatMul", 2, 1);
  Tensor b = random_tensor(DType::float32, {96, 384}, 5);
  StepDesc s;
  s.node = &mm;
  s.in_dtypes = {DType::float32, DType::float32};
  s.out_dtypes = {DType::float32};
  s.in_shapes = {{3136, 96}, {96, 384}};
  s.out_shapes = {{3136, 384}};
  s.constants = {nullptr, &b};
  r = cost_regime(s);
  EXPECT_EQ(r.family, "matmul");
  EXPECT_EQ(r.levels, (std::vector<std::string>{"smallk/none", "smallk", "*"}));
  EXPECT_DOUBLE_EQ(r.sizes[0], 3136.0 / 64.0);
  s.constants = {nullptr, nullptr};  // activations x activations (attention)
  EXPECT_EQ(cost_regime(s).levels.front(), "dyn/none");
}

TEST(CostModel, EstimateIsTheFormulaTimesTheFactor) {
  ConvStep w3(64, 64, 28, 3, 1, 1);
  const Tactic* onednn = find_tactic(ir::OpKind::Conv, "onednn");
  const Tactic* winograd = find_tactic(ir::OpKind::Conv, "onednn_winograd");
  const Tactic* reference = find_tactic(ir::OpKind::Conv, "reference");
  ASSERT_TRUE(onednn && winograd && reference);
  const double f = onednn->cost(w3.desc), e = estimated_cost(*onednn, w3.desc);
  ASSERT_GT(f, 0);
  EXPECT_NEAR(cost_factor(*onednn, w3.desc), e / f, 1e-12);
  // The table has a fitted row for onednn on convolutions: its factor is not the neutral 1.
  EXPECT_NE(cost_factor(*onednn, w3.desc), 1.0);
  // oneDNN's Winograd is fitted like every tactic (no rule ties it to onednn): on a mid-sized 3x3
  // convolution it measured 1.3-1.5x faster than onednn's direct kernel, and the table says so.
  if (cpu_features().avx512) {
    ConvStep mid(128, 128, 28, 3, 1, 1);
    EXPECT_NE(cost_factor(*winograd, mid.desc), 1.0);
    EXPECT_LT(estimated_cost(*winograd, mid.desc), estimated_cost(*onednn, mid.desc));
  }
  // No row for the reference kernel (a fallback, never fitted): its formula as is.
  EXPECT_EQ(cost_factor(*reference, w3.desc), 1.0);
}

}  // namespace
}  // namespace tac::kernels
