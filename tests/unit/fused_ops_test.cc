// The internal fused ops compute exactly what the unfused subgraph computes (reference kernels).
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/tactic_check.h"
#include "model_builder.h"
#include "reference/interpreter.h"

namespace tac {
namespace {

using test::ModelBuilder;

void add_float_attr(onnx::NodeProto* n, const std::string& k, float v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
void add_string_attr(onnx::NodeProto* n, const std::string& k, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

double max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) d = std::max(d, std::fabs(a.get_f64(i) - b.get_f64(i)));
  return d;
}

TEST(FusedOps, FusedConvEqualsConvAddClip) {
  std::vector<float> w(6 * 4 * 9), b(6);
  Tensor wt = kernels::random_tensor(DType::float32, {6, 4, 3, 3}, 5), bt = kernels::random_tensor(DType::float32, {6}, 6);
  for (size_t i = 0; i < w.size(); ++i) w[i] = wt.data<float>()[i];
  for (size_t i = 0; i < b.size(); ++i) b[i] = bt.data<float>()[i];
  auto make = [&](bool fused) {
    ModelBuilder m(17);
    m.import_domain("tactician", 1);
    m.input("x", 1, {"1", "4", "8", "8"});
    m.input("r", 1, {"1", "6", "8", "8"});
    m.initializer("w", {6, 4, 3, 3}, w);
    m.initializer("b", {6}, b);
    if (fused) {
      auto* n = m.node("FusedConv", {"x", "w", "b", "r"}, {"y"});
      n->set_domain("tactician");
      auto* p = n->add_attribute();
      p->set_name("pads");
      p->set_type(onnx::AttributeProto::INTS);
      for (int i = 0; i < 4; ++i) p->add_ints(1);
      add_string_attr(n, "activation", "Clip");
      add_float_attr(n, "act_alpha", 0.0f);
      add_float_attr(n, "act_beta", 1.5f);
    } else {
      auto* n = m.node("Conv", {"x", "w", "b"}, {"c"});
      auto* p = n->add_attribute();
      p->set_name("pads");
      p->set_type(onnx::AttributeProto::INTS);
      for (int i = 0; i < 4; ++i) p->add_ints(1);
      m.node("Add", {"c", "r"}, {"s"});
      m.node("Relu", {"s"}, {"y"});  // Clip(0, 1.5) as Relu then Min with 1.5
      m.initializer("hi", {}, {1.5f});
      m.node("Min", {"y", "hi"}, {"z"});
    }
    m.output(fused ? "y" : "z", 1, {});
    return m.load();
  };
  auto fm = make(true), pm = make(false);
  ASSERT_TRUE(fm.is_ok()) << fm.status().to_string();
  ASSERT_TRUE(pm.is_ok()) << pm.status().to_string();
  std::vector<Datum> in = {Datum(kernels::random_tensor(DType::float32, {1, 4, 8, 8}, 1)),
                           Datum(kernels::random_tensor(DType::float32, {1, 6, 8, 8}, 2))};
  auto fy = ref::run_model(*fm, in);
  auto py = ref::run_model(*pm, in);
  ASSERT_TRUE(fy.is_ok()) << fy.status().to_string();
  ASSERT_TRUE(py.is_ok()) << py.status().to_string();
  EXPECT_LT(max_diff((*fy)[0].tensor, (*py)[0].tensor), 1e-5);
}

TEST(FusedOps, FusedMatMulTransBBiasGelu) {
  Tensor bt = kernels::random_tensor(DType::float32, {5, 7}, 3);  // B^T: [N=5, K=7]
  std::vector<float> bv(bt.data<float>(), bt.data<float>() + 35);
  std::vector<float> bias = {0.1f, -0.2f, 0.3f, 0.0f, 1.0f};
  ModelBuilder f(17);
  f.import_domain("tactician", 1);
  f.input("a", 1, {"2", "3", "7"});
  f.initializer("bt", {5, 7}, bv);
  f.initializer("bias", {5}, bias);
  auto* n = f.node("FusedMatMul", {"a", "bt", "bias"}, {"y"});
  n->set_domain("tactician");
  auto* t = n->add_attribute();
  t->set_name("transB");
  t->set_type(onnx::AttributeProto::INT);
  t->set_i(1);
  add_string_attr(n, "activation", "Gelu");
  f.output("y", 1, {});
  auto fm = f.load();
  ASSERT_TRUE(fm.is_ok()) << fm.status().to_string();
  Tensor a = kernels::random_tensor(DType::float32, {2, 3, 7}, 4);
  auto y = ref::run_model(*fm, {Datum(a)});
  ASSERT_TRUE(y.is_ok()) << y.status().to_string();
  const Tensor& out = (*y)[0].tensor;
  ASSERT_EQ(out.shape(), (Shape{2, 3, 5}));
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t j = 0; j < 5; ++j) {
      double s = bias[static_cast<size_t>(j)];
      for (int64_t k = 0; k < 7; ++k) s += a.data<float>()[r * 7 + k] * static_cast<double>(bv[static_cast<size_t>(j * 7 + k)]);
      double want = 0.5 * s * (1 + std::erf(s / std::sqrt(2.0)));
      EXPECT_NEAR(out.data<float>()[r * 5 + j], want, 1e-5);
    }
}

}  // namespace
}  // namespace tac
