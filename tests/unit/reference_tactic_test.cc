// The reference fallback tactic reproduces the reference kernel exactly through the tactic API.
#include <gtest/gtest.h>

#include "kernels/tactic_check.h"

namespace tac::kernels {
namespace {

TEST(ReferenceTactic, ConvMatchesExactly) {
  ir::Node n = make_node("Conv", 3, 1);
  set_attr(n, "pads", std::vector<int64_t>{1, 1, 1, 1});
  set_attr(n, "strides", std::vector<int64_t>{2, 2});
  const Tactic* t = find_tactic(ir::OpKind::Conv, "reference");
  ASSERT_NE(t, nullptr);
  auto r = check_tactic(*t, n,
                        {random_tensor(DType::float32, {1, 3, 9, 7}, 1), random_tensor(DType::float32, {4, 3, 3, 3}, 2),
                         random_tensor(DType::float32, {4}, 3)},
                        {false, true, true});
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].shape(), (Shape{1, 4, 5, 4}));
  EXPECT_EQ(r.max_abs_diff, 0.0);
}

TEST(ReferenceTactic, EveryReferenceOpHasTheFallback) {
  EXPECT_GT(reference_tactics().size(), 150u);
  EXPECT_NE(find_tactic(ir::OpKind::Relu, "reference"), nullptr);
  EXPECT_EQ(find_tactic(ir::OpKind::Relu, "no_such_tactic"), nullptr);
}

}  // namespace
}  // namespace tac::kernels
