// Every conv-family tactic against the reference kernel: odd sizes, batch > 1, strides, pads
// (asymmetric, auto_pad), dilations, groups, depthwise, 1x1, first-layer-like 7x7, and each
// epilogue activation with bias and residual present / absent.
//
// Tolerance: |got - want| <= 1e-4 * sqrt(K) (K = Cg*KH*KW, the reduction length). Inputs and
// weights are N(0, 1), so an output's standard deviation is sqrt(K): the bound is a relative error
// of 1e-4 of the output scale (float accumulation and Winograd transforms vs the float64 reference).
#include <gtest/gtest.h>

#include <cmath>

#include "ir/epilogue.h"
#include "kernels/tactic_check.h"

namespace tac::kernels {
namespace {

struct Case {
  const char* what;
  Shape x, w;
  std::vector<int64_t> strides, pads, dil;
  int64_t group = 1;
  const char* auto_pad = nullptr;
};

std::vector<Case> cases() {
  return {
      {"3x3 s2 p1 tiny", {1, 3, 9, 7}, {4, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}},
      {"3x3 s1 p1 batch2", {2, 5, 11, 13}, {7, 5, 3, 3}, {}, {1, 1, 1, 1}, {}},
      {"3x3 asym pads", {1, 16, 10, 10}, {35, 16, 3, 3}, {}, {0, 1, 2, 1}, {}},
      {"3x3 p0", {1, 4, 8, 9}, {5, 4, 3, 3}, {}, {}, {}},
      {"1x1", {1, 8, 12, 9}, {8, 8, 1, 1}, {}, {}, {}},
      {"1x1 s2 batch2", {2, 8, 13, 11}, {12, 8, 1, 1}, {2, 2}, {}, {}},
      {"group3 dil2", {1, 6, 15, 14}, {9, 2, 3, 3}, {}, {2, 2, 2, 2}, {2, 2}, 3},
      {"7x7 s2 p3 first layer", {1, 3, 23, 21}, {33, 3, 7, 7}, {2, 2}, {3, 3, 3, 3}, {}},
      {"depthwise 3x3 s1", {2, 12, 17, 19}, {12, 1, 3, 3}, {}, {1, 1, 1, 1}, {}, 12},
      {"depthwise 3x3 s2", {1, 20, 16, 15}, {20, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 20},
      {"depthwise 5x5 s2 dil", {1, 10, 20, 37}, {10, 1, 5, 5}, {2, 1}, {2, 3, 2, 1}, {1, 2}, 10},
      {"same_upper s2", {1, 4, 10, 11}, {6, 4, 3, 3}, {2, 2}, {}, {}, 1, "SAME_UPPER"},
      {"3x3 64ch", {1, 64, 14, 14}, {64, 64, 3, 3}, {}, {1, 1, 1, 1}, {}},
      {"5x3 kernel s(1,2)", {1, 7, 12, 30}, {40, 7, 5, 3}, {1, 2}, {2, 1, 2, 1}, {}},
      // GEMM-tiling edges for the packed-sgemm convs: K over one kc=256 block, Mg not a multiple
      // of any row tile, P not a multiple of 32, grouped 1x1.
      {"1x1 K300 M37", {1, 300, 7, 9}, {37, 300, 1, 1}, {}, {}, {}},
      {"1x1 s2 M100 batch2", {2, 40, 15, 17}, {100, 40, 1, 1}, {2, 2}, {}, {}},
      {"3x3 K288 M20", {1, 32, 9, 11}, {20, 32, 3, 3}, {}, {1, 1, 1, 1}, {}},
      {"1x1 group2", {1, 24, 6, 7}, {30, 12, 1, 1}, {}, {}, {}, 2},
      // Wide rows with few input channels (direct_rows_avx512: OW >= 16, C <= 16): M not a
      // multiple of its 12-channel tile, OW not a multiple of 32 (and exactly 32), stride 2,
      // 7x7, dilation with asymmetric pads, batch 2.
      {"first layer 3x3 s2 wide", {1, 3, 41, 75}, {20, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}},
      {"7x7 s2 p3 wide batch2", {2, 3, 30, 70}, {13, 3, 7, 7}, {2, 2}, {3, 3, 3, 3}, {}},
      {"3x3 dil2 asym OW32", {1, 5, 9, 33}, {7, 5, 3, 3}, {}, {1, 2, 0, 1}, {2, 2}},
  };
}

ir::Node conv_node(const Case& c, bool fused, ir::Epilogue ep) {
  ir::Node n = make_node(fused ? "FusedConv" : "Conv", fused ? 4 : 3, 1);
  if (fused) n.domain = "tactician";
  if (!c.strides.empty()) set_attr(n, "strides", c.strides);
  if (!c.pads.empty()) set_attr(n, "pads", c.pads);
  if (!c.dil.empty()) set_attr(n, "dilations", c.dil);
  if (c.group != 1) set_attr(n, "group", c.group);
  if (c.auto_pad) set_attr(n, "auto_pad", std::string(c.auto_pad));
  if (fused) ir::set_epilogue(n, ep);
  return n;
}

// Output shape through the reference: run the reference tactic once.
Shape out_shape(const ir::Node& plain, const std::vector<Tensor>& ins) {
  auto r = check_tactic(*find_tactic(ir::OpKind::Conv, "reference"), plain, ins, {false, true, true});
  return r.expected.at(0).shape();
}

std::vector<ir::Epilogue> epilogues() {
  using A = ir::Epilogue::Act;
  return {{A::none, 0, 0},       {A::relu, 0, 0},         {A::clip, -0.5f, 0.7f}, {A::leaky_relu, 0.1f, 0},
          {A::sigmoid, 0, 0},    {A::tanh, 0, 0},         {A::hard_sigmoid, 0.2f, 0.5f},
          {A::gelu, 0, 0},       {A::silu, 0, 0},         {A::hard_swish, 0, 0}};
}

std::vector<const Tactic*> conv_family(ir::OpKind op) {
  std::vector<const Tactic*> out;
  // The fp32 tactics: the bf16 / int8 rows (onednn_bf16, onednn_int8) apply only to the steps the
  // precision rewrite makes and are checked in precision_test.cc.
  for (const Tactic& t : conv_tactics()) {
    const std::string name = t.name;
    if (t.op == op && name.find("_bf16") == std::string::npos && name.find("_int8") == std::string::npos) out.push_back(&t);
  }
  return out;
}

TEST(ConvTactics, TableListsEveryTacticForBothOps) {
  const char* names[] = {"im2col_gemm",      "conv1x1_gemm",   "im2col_openblas", "conv1x1_openblas",
                         "im2col_gemm_inb",  "conv1x1_gemm_inb", "direct_avx512", "direct_avx2", "winograd_f2x3",
                         "winograd_f4x3",    "depthwise_avx512", "depthwise_avx2", "direct_rows_avx512", "onednn",    "onednn_nchw",
                         "onednn_winograd"};
  for (const char* name : names) {
    EXPECT_NE(find_tactic(ir::OpKind::Conv, name), nullptr) << name;
    EXPECT_NE(find_tactic(ir::OpKind::FusedConv, name), nullptr) << name;
  }
}

void check_case(const Tactic& t, const Case& c, bool fused, const ir::Epilogue& ep, bool bias, bool res, int seed,
                int& ran) {
  std::vector<Tensor> ins{random_tensor(DType::float32, c.x, seed), random_tensor(DType::float32, c.w, seed + 1),
                          bias ? random_tensor(DType::float32, {c.w[0]}, seed + 2) : Tensor()};
  if (fused) {
    Shape ys = out_shape(conv_node(c, false, {}), ins);
    ins.push_back(res ? random_tensor(DType::float32, ys, seed + 3) : Tensor());
  }
  ir::Node n = conv_node(c, fused, ep);
  auto r = check_tactic(t, n, ins, {false, true, true, false});
  if (r.status.kind() == ErrorKind::not_applicable) return;
  ASSERT_TRUE(r.status.is_ok()) << t.name << " " << c.what << ": " << r.status.to_string();
  const double K = static_cast<double>(c.w[1] * c.w[2] * c.w[3]);
  EXPECT_LE(r.max_abs_diff, 1e-4 * std::sqrt(K))
      << t.name << " on " << c.what << (fused ? " fused act=" : " conv") << (fused ? ir::activation_name(ep.act) : "")
      << " bias=" << bias << " res=" << res;
  ++ran;
}

TEST(ConvTactics, PlainConvMatchesReference) {
  for (const Tactic* t : conv_family(ir::OpKind::Conv)) {
    int ran = 0;
    int seed = 10;
    for (const Case& c : cases()) {
      check_case(*t, c, false, {}, true, false, seed += 4, ran);
      check_case(*t, c, false, {}, false, false, seed += 4, ran);
    }
    EXPECT_GT(ran, 0) << t->name << " applied to no case";
  }
}

TEST(ConvTactics, FusedConvEveryEpilogueMatchesReference) {
  for (const Tactic* t : conv_family(ir::OpKind::FusedConv)) {
    int ran = 0, seed = 1000, k = 0;
    const auto eps = epilogues();
    const auto cs = cases();
    // Each case with a third of the activations (rotating), so every activation meets ~5 cases.
    for (size_t ci = 0; ci < cs.size(); ++ci)
      for (size_t e = 0; e < eps.size(); ++e) {
        if ((ci + e) % 3 != 0) continue;
        const Case& c = cs[ci];
        const ir::Epilogue& ep = eps[e];
        ++k;
        check_case(*t, c, true, ep, k % 2 == 0, true, seed += 4, ran);
        check_case(*t, c, true, ep, k % 2 == 1, false, seed += 4, ran);
      }
    EXPECT_GT(ran, 0) << t->name;
  }
}

// oneDNN's Winograd takes a residual sum and ReLU as post-ops but not SiLU, HardSwish or Sigmoid:
// those run after the convolution (YOLO-style 3x3 Conv + SiLU blocks), still matching the reference.
TEST(ConvTactics, OnednnWinogradRunsActivationsItsPostOpsLack) {
  if (!cpu_features().avx512) GTEST_SKIP() << "no AVX-512";
  const Tactic* t = find_tactic(ir::OpKind::FusedConv, "onednn_winograd");
  ASSERT_NE(t, nullptr);
  const Case c{"3x3 32->48", {1, 32, 20, 20}, {48, 32, 3, 3}, {}, {1, 1, 1, 1}, {}};
  int ran = 0, seed = 70;
  for (ir::Epilogue::Act act : {ir::Epilogue::Act::silu, ir::Epilogue::Act::hard_swish, ir::Epilogue::Act::sigmoid})
    for (bool res : {false, true}) check_case(*t, c, true, {act, 0, 0}, true, res, seed += 4, ran);
  EXPECT_EQ(ran, 6) << "onednn_winograd declined a 3x3 convolution with one of these activations";
}

TEST(ConvTactics, ThreadCountDoesNotChangeResults) {
  for (const Tactic* t : conv_family(ir::OpKind::FusedConv)) {
    for (const Case& c : cases()) {
      std::vector<Tensor> ins{random_tensor(DType::float32, c.x, 1), random_tensor(DType::float32, c.w, 2),
                              random_tensor(DType::float32, {c.w[0]}, 3)};
      ins.push_back(random_tensor(DType::float32, out_shape(conv_node(c, false, {}), ins), 4));
      ir::Node n = conv_node(c, true, {ir::Epilogue::Act::relu, 0, 0});
      auto r1 = check_tactic(*t, n, ins, {false, true, true, false}, 1);
      if (r1.status.kind() == ErrorKind::not_applicable) continue;
      auto r3 = check_tactic(*t, n, ins, {false, true, true, false}, 3);
      ASSERT_TRUE(r1.status.is_ok() && r3.status.is_ok()) << t->name;
      // oneDNN and multi-threaded OpenBLAS sgemm (im2col_openblas, conv1x1_openblas) may block
      // the reduction differently for another thread count: close, not bitwise. Our sgemm
      // (im2col_gemm, conv1x1_gemm) is bitwise deterministic.
      const std::string name = t->name;
      if (name.rfind("onednn", 0) == 0 || name == "im2col_openblas" || name == "conv1x1_openblas") {
        EXPECT_LE(r3.max_abs_diff, 1e-4 * std::sqrt(double(c.w[1] * c.w[2] * c.w[3])));
        continue;
      }
      EXPECT_EQ(std::memcmp(r1.outputs[0].raw(), r3.outputs[0].raw(), r1.outputs[0].bytes()), 0)
          << t->name << " on " << c.what;
    }
  }
}

TEST(ConvTactics, ConstraintsSayNotApplicable) {
  // Runtime (non-constant) weights: the prepacking tactics decline; 1-D conv: all decline.
  Case c{"3x3", {1, 4, 8, 8}, {4, 4, 3, 3}, {}, {1, 1, 1, 1}, {}};
  std::vector<Tensor> ins{random_tensor(DType::float32, c.x, 1), random_tensor(DType::float32, c.w, 2), Tensor()};
  for (const char* name : {"direct_avx512", "direct_avx2", "winograd_f2x3", "winograd_f4x3", "onednn", "onednn_winograd"}) {
    auto r = check_tactic(*find_tactic(ir::OpKind::Conv, name), conv_node(c, false, {}), ins, {false, false, false});
    EXPECT_EQ(r.status.kind(), ErrorKind::not_applicable) << name;
  }
  for (const char* name : {"im2col_gemm", "im2col_gemm_inb", "im2col_openblas"}) {  // im2col reads weights at run time
    auto r = check_tactic(*find_tactic(ir::OpKind::Conv, name), conv_node(c, false, {}), ins, {false, false, false});
    EXPECT_TRUE(r.status.is_ok()) << name << ": " << r.status.to_string();
  }
  for (const char* name : {"depthwise_avx512", "conv1x1_gemm", "conv1x1_gemm_inb", "conv1x1_openblas"}) {
    auto d = check_tactic(*find_tactic(ir::OpKind::Conv, name), conv_node(c, false, {}), ins, {false, true, false});
    EXPECT_EQ(d.status.kind(), ErrorKind::not_applicable) << name;
  }
  ir::Node n1 = make_node("Conv", 2, 1);
  auto one_d = check_tactic(*find_tactic(ir::OpKind::Conv, "im2col_gemm"), n1,
                            {random_tensor(DType::float32, {1, 2, 9}, 1), random_tensor(DType::float32, {3, 2, 3}, 2)},
                            {false, true});
  EXPECT_EQ(one_d.status.kind(), ErrorKind::not_applicable);
}

}  // namespace
}  // namespace tac::kernels
