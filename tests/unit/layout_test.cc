// Activation layouts (ir/layout.h, src/kernels/layout/, builder/layout.cc): the plain conversion
// loops, every layout tactic against the reference kernel in nhwc, nChw16c and nChw8c (odd
// channel counts, strides, padding, groups, depthwise; padded channels must stay zero), and the
// layout rewrite on small graphs (graph changed, reformats counted, outputs equal to the
// reference interpreter on random data, errors naming the knob).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "backends/cuda/device.h"
#include "builder/layout.h"
#include "builder_test_util.h"
#include "ir/epilogue.h"
#include "kernels/tactic_check.h"

namespace tac {
namespace {

using ir::Layout;
using kernels::check_tactic;
using kernels::find_tactic;
using kernels::make_node;
using kernels::random_tensor;
using kernels::set_attr;
using test::ModelBuilder;

const Layout kLayouts[] = {Layout::nhwc, Layout::nchw16c, Layout::nchw8c};

// ---------------------------------------------------------------- conversions

TEST(Layout, ConversionsRoundTripAndPadWithZeros) {
  const Shape s{2, 5, 3, 4};
  Tensor x = random_tensor(DType::float32, s, 1);
  for (Layout l : {Layout::nchw, Layout::nhwc, Layout::nchw16c, Layout::nchw8c}) {
    Tensor p = ir::to_layout(x, l);
    EXPECT_EQ(p.numel(), ir::physical_numel(s, l)) << ir::layout_name(l);
    Tensor back = ir::from_layout(p, s, l);
    ASSERT_EQ(back.shape(), s);
    EXPECT_EQ(std::memcmp(back.raw(), x.raw(), x.bytes()), 0) << ir::layout_name(l);
  }
  EXPECT_EQ(ir::physical_numel(s, Layout::nchw16c), 2 * 16 * 3 * 4);
  EXPECT_EQ(ir::physical_numel(s, Layout::nchw8c), 2 * 8 * 3 * 4);
  // nChw8c: channel 5..7 of each pixel are padding, zero; element (1, 4, 2, 3) at its place.
  Tensor p = ir::to_layout(x, Layout::nchw8c);
  int zeros = 0;
  for (int64_t i = 0; i < p.numel(); ++i) zeros += p.data<float>()[i] == 0.0f;
  EXPECT_EQ(zeros, 2 * 3 * 3 * 4);
  EXPECT_EQ(p.data<float>()[((1 * 1 + 0) * 3 + 2) * 4 * 8 + 3 * 8 + 4], x.data<float>()[((1 * 5 + 4) * 3 + 2) * 4 + 3]);
}

// ---------------------------------------------------------------- tactics

void expect_close(const kernels::TacticCheck& r, double tol, const std::string& what) {
  ASSERT_TRUE(r.status.is_ok()) << what << ": " << r.status.to_string();
  EXPECT_LE(r.max_abs_diff, tol) << what;
}

TEST(LayoutTactics, ReformatEveryPairMatchesAndPadsWithZeros) {
  const Layout all[] = {Layout::nchw, Layout::nhwc, Layout::nchw16c, Layout::nchw8c};
  for (const char* tactic : {"onednn_reorder", "loops"})
    for (DType dt : {DType::float32, DType::bfloat16})  // bf16: the precision rewrite's convolutions
      for (const Shape& s : {Shape{1, 5, 7, 3}, Shape{2, 16, 4, 4}, Shape{1, 37, 5, 6}})
        for (Layout from : all)
          for (Layout to : all) {
            if (from == to) continue;
            ir::Node n = make_node("Reformat", 1, 1);
            n.domain = ir::kInternalDomain;
            auto r = check_tactic(*find_tactic(ir::OpKind::Reformat, tactic), n, {random_tensor(dt, s, 3)}, {false}, 2,
                                  {from}, to);
            expect_close(r, 0, std::string(tactic) + " " + dtype_name(dt) + " " + ir::layout_name(from) + "->" +
                                   ir::layout_name(to) + shape_to_string(s));
            ASSERT_EQ(r.outputs.at(0).dtype(), dt);
          }
}

struct ConvCase {
  const char* what;
  Shape x, w;
  std::vector<int64_t> strides, pads;
  int64_t group = 1;
};

TEST(LayoutTactics, OnednnConvInEveryLayoutMatchesReference) {
  using A = ir::Epilogue::Act;
  const ConvCase cases[] = {
      {"3x3 p1 odd C", {1, 5, 9, 7}, {7, 5, 3, 3}, {}, {1, 1, 1, 1}},
      {"3x3 s2 C24 M40", {2, 24, 10, 11}, {40, 24, 3, 3}, {2, 2}, {1, 1, 1, 1}},
      {"1x1 C32 M16", {1, 32, 6, 6}, {16, 32, 1, 1}, {}, {}},
      {"asym pads C20 M33", {1, 20, 8, 9}, {33, 20, 3, 3}, {}, {0, 1, 2, 1}},
      {"group 3", {1, 6, 8, 8}, {9, 2, 3, 3}, {}, {1, 1, 1, 1}, 3},
      {"group 2 of 16", {1, 32, 7, 7}, {32, 16, 3, 3}, {}, {1, 1, 1, 1}, 2},
      {"depthwise C20 s2", {1, 20, 9, 8}, {20, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, 20},
      {"depthwise C32", {2, 32, 7, 7}, {32, 1, 3, 3}, {}, {1, 1, 1, 1}, 32},
      {"3x3 p1 C32 M48 13x11", {1, 32, 13, 11}, {48, 32, 3, 3}, {}, {1, 1, 1, 1}},
      {"3x3 p1 C64 M64 batch 2", {2, 64, 10, 10}, {64, 64, 3, 3}, {}, {1, 1, 1, 1}},
  };
  const ir::Epilogue eps[] = {{A::none, 0, 0}, {A::relu, 0, 0}, {A::clip, 0.0f, 6.0f}, {A::sigmoid, 0, 0}};
  // onednn applies to every case; onednn_winograd (AVX-512) to the 3x3 stride-1 ungrouped ones
  // whose epilogue oneDNN's Winograd takes, reordering from and to the step's layouts.
  for (const char* name : {"onednn", "onednn_winograd"}) {
    const kernels::Tactic* t = find_tactic(ir::OpKind::FusedConv, name);
    ASSERT_TRUE(t && t->layouts) << name;
    const bool all = std::string(name) == "onednn";
    const kernels::Tactic* plain_t = find_tactic(ir::OpKind::FusedConv, "onednn");
    int seed = 100, k = 0, ran = 0;
    for (const ConvCase& c : cases)
      for (Layout l : kLayouts)
        for (bool res : {false, true}) {
          const ir::Epilogue ep = eps[k++ % 4];  // sigmoid(0) = 0.5: the padding must still be zero
          ir::Node n = make_node("FusedConv", 4, 1);
          n.domain = ir::kInternalDomain;
          if (!c.strides.empty()) set_attr(n, "strides", c.strides);
          if (!c.pads.empty()) set_attr(n, "pads", c.pads);
          if (c.group != 1) set_attr(n, "group", c.group);
          ir::set_epilogue(n, ep);
          std::vector<Tensor> ins{random_tensor(DType::float32, c.x, seed), random_tensor(DType::float32, c.w, seed + 1),
                                  random_tensor(DType::float32, {c.w[0]}, seed + 2), Tensor()};
          if (res) {  // the output shape, from a plain run
            auto plain = check_tactic(*plain_t, n, ins, {false, true, true, false});
            ASSERT_TRUE(plain.status.is_ok()) << plain.status.to_string();
            ins[3] = random_tensor(DType::float32, plain.expected[0].shape(), seed + 3);
          }
          seed += 4;
          const double K = static_cast<double>(c.w[1] * c.w[2] * c.w[3]);
          auto r = check_tactic(*t, n, ins, {false, true, true, false}, 2, {l, Layout::nchw, Layout::nchw, l}, l);
          if (!all && r.status.kind() == ErrorKind::not_applicable) continue;
          ++ran;
          expect_close(r, 1e-4 * std::sqrt(K),
                       std::string(name) + " " + c.what + " in " + ir::layout_name(l) + " act " +
                           ir::activation_name(ep.act) + (res ? " +res" : ""));
          // A first layer reads its plain input and writes the layout.
          auto first =
              check_tactic(*t, n, ins, {false, true, true, false}, 1, {Layout::nchw, Layout::nchw, Layout::nchw, l}, l);
          expect_close(first, 1e-4 * std::sqrt(K), std::string(name) + " " + c.what + " nchw -> " + ir::layout_name(l));
        }
    if (!all && !kernels::cpu_features().avx512) continue;
    // Winograd takes only some epilogues (relu, none; not clip or sigmoid here): 10 of the 60.
    EXPECT_GE(ran, all ? 60 : 8) << name;
  }
  // The plain-only tactics refuse other layouts.
  ir::Node n = make_node("Conv", 2, 1);
  auto r = check_tactic(*find_tactic(ir::OpKind::Conv, "im2col_gemm"), n,
                        {random_tensor(DType::float32, {1, 4, 5, 5}, 1), random_tensor(DType::float32, {4, 4, 3, 3}, 2)},
                        {false, true}, 1, {Layout::nhwc}, Layout::nhwc);
  EXPECT_EQ(r.status.kind(), ErrorKind::not_applicable);
}

TEST(LayoutTactics, OnednnPoolingMatchesReference) {
  struct PoolCase {
    const char* op;
    Shape x;
    std::vector<int64_t> k, s, pads;
    int64_t ceil = 0, include_pad = 0;
    const char* auto_pad = nullptr;
  };
  const PoolCase cases[] = {
      {"MaxPool", {1, 5, 9, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}},
      {"MaxPool", {2, 24, 8, 7}, {2, 2}, {2, 2}, {0, 0, 0, 0}},
      {"MaxPool", {1, 20, 13, 13}, {3, 3}, {2, 2}, {0, 0, 0, 0}, 1},  // squeezenet's ceil_mode
      {"AveragePool", {1, 7, 9, 8}, {3, 3}, {1, 1}, {1, 1, 1, 1}},
      {"AveragePool", {1, 7, 9, 8}, {3, 3}, {2, 2}, {1, 0, 1, 2}, 0, 1},
      {"AveragePool", {1, 17, 10, 10}, {3, 3}, {2, 2}, {0, 0, 0, 0}, 1},
      {"MaxPool", {1, 16, 7, 9}, {3, 3}, {2, 2}, {}, 0, 0, "SAME_UPPER"},
      {"GlobalAveragePool", {2, 37, 7, 7}, {}, {}, {}},
  };
  int seed = 50;
  for (const PoolCase& c : cases)
    for (Layout l : kLayouts) {
      ir::Node n = make_node(c.op, 1, 1, 19);
      if (!c.k.empty()) set_attr(n, "kernel_shape", c.k);
      if (!c.s.empty()) set_attr(n, "strides", c.s);
      if (!c.pads.empty()) set_attr(n, "pads", c.pads);
      if (c.ceil) set_attr(n, "ceil_mode", c.ceil);
      if (c.include_pad) set_attr(n, "count_include_pad", c.include_pad);
      if (c.auto_pad) set_attr(n, "auto_pad", std::string(c.auto_pad));
      auto r = check_tactic(*find_tactic(n.op, "onednn_pool"), n, {random_tensor(DType::float32, c.x, seed++)}, {false}, 2,
                            {l}, l);
      expect_close(r, 1e-5, std::string(c.op) + shape_to_string(c.x) + " in " + ir::layout_name(l));
      // bf16 (the precision rewrite's): max exact, averages within bf16's rounding of the result.
      auto b = check_tactic(*find_tactic(n.op, "onednn_pool"), n, {random_tensor(DType::bfloat16, c.x, seed++)}, {false},
                            1, {l}, l);
      ASSERT_TRUE(b.status.is_ok()) << b.status.to_string();
      ASSERT_EQ(b.outputs.at(0).dtype(), DType::bfloat16);
      for (int64_t i = 0; i < b.outputs[0].numel(); ++i) {
        const double g = b.outputs[0].get_f64(i), w = b.expected[0].get_f64(i);
        ASSERT_LE(std::fabs(g - w), std::string(c.op) == "MaxPool" ? 0.0 : std::ldexp(std::fabs(w), -7) + 1e-6)
            << c.op << shape_to_string(c.x) << " bf16 in " << ir::layout_name(l) << " at " << i;
      }
    }
}

TEST(LayoutTactics, RawBufferElementwiseAndConcat) {
  for (Layout l : kLayouts) {
    const std::string in = std::string(" in ") + ir::layout_name(l);
    const Shape s{1, 24, 5, 7};
    for (const char* op : {"Relu", "Tanh", "Abs"}) {
      ir::Node n = make_node(op, 1, 1);
      expect_close(check_tactic(*find_tactic(n.op, "raw_buffer"), n, {random_tensor(DType::float32, s, 2)}, {false}, 1, {l}, l),
                   1e-6, op + in);
    }
    for (const char* op : {"Add", "Mul", "Sub", "Max"}) {
      ir::Node n = make_node(op, 2, 1);
      expect_close(check_tactic(*find_tactic(n.op, "raw_buffer"), n,
                                {random_tensor(DType::float32, s, 3), random_tensor(DType::float32, s, 4)}, {false, false},
                                2, {l, l}, l),
                   1e-6, op + in);
    }
    // A fused chain keeping zero (x + in1, then Relu) runs too; one adding a constant does not.
    for (const char* second : {"Relu", "Add,x,c0.5"}) {
      ir::Node chain = make_node("FusedElementwise", 2, 1);
      chain.domain = ir::kInternalDomain;
      ir::Attribute ops;
      ops.type = ir::Attribute::Type::strings;
      ops.strings = {"Add,x,in1", second};
      chain.attrs["ops"] = ops;
      auto r = check_tactic(*find_tactic(chain.op, "raw_buffer"), chain,
                            {random_tensor(DType::float32, s, 8), random_tensor(DType::float32, s, 9)}, {false, false}, 1,
                            {l, l}, l);
      if (std::string(second) == "Relu") expect_close(r, 1e-6, "FusedElementwise" + in);
      else EXPECT_EQ(r.status.kind(), ErrorKind::not_applicable) << "chain adding 0.5" << in;
    }
    Tensor lo = Tensor::create(DType::float32, {}).value(), hi = Tensor::create(DType::float32, {}).value();
    lo.set_f64(0, 0.0);
    hi.set_f64(0, 0.5);
    ir::Node clip = make_node("Clip", 3, 1);
    expect_close(check_tactic(*find_tactic(clip.op, "raw_buffer"), clip, {random_tensor(DType::float32, s, 5), lo, hi},
                              {false, true, true}, 1, {l}, l),
                 0, "Clip(0, 0.5)" + in);
    // Clip(0.1, 0.5) would write 0.1 into the padding; Sigmoid has no raw_buffer row at all.
    lo.set_f64(0, 0.1);
    auto bad = check_tactic(*find_tactic(clip.op, "raw_buffer"), clip, {random_tensor(DType::float32, s, 5), lo, hi},
                            {false, true, true}, 1, {l}, l);
    EXPECT_EQ(bad.status.kind(), ErrorKind::not_applicable) << "Clip(0.1, 0.5)" << in;
    EXPECT_EQ(find_tactic(ir::OpKind::Sigmoid, "raw_buffer"), nullptr);
    // Mul by a per-channel scale (squeeze-excitation): the scale [N|1, C, 1, 1] in the output's
    // layout or plain, or a constant of C values; C = 24 is not a multiple of 16 (the blocked
    // padding), so a plain operand applies in blocked layouts only when C is a multiple of 8.
    ir::Node mul = make_node("Mul", 2, 1);
    for (const Shape& ss : {Shape{1, 24, 1, 1}, Shape{24, 1, 1}})
      for (Layout sl : {l, Layout::nchw})
        for (bool constant : {false, true}) {
          if (constant && (sl != Layout::nchw || ss.size() != 3)) continue;
          if (!constant && ss.size() != 4) continue;
          const std::string what = "per-channel Mul, scale " + shape_to_string(ss) + (constant ? " constant" : " in ") +
                                   (constant ? "" : ir::layout_name(sl)) + in;
          auto r = check_tactic(*find_tactic(mul.op, "raw_buffer"), mul,
                                {random_tensor(DType::float32, s, 3), random_tensor(DType::float32, ss, 4)}, {false, constant},
                                2, {l, sl}, l);
          if (l == Layout::nchw) EXPECT_EQ(r.status.kind(), ErrorKind::not_applicable) << what;
          else if (ir::is_blocked(l) && sl == Layout::nchw && 24 % ir::layout_block(l) != 0)
            EXPECT_EQ(r.status.kind(), ErrorKind::not_applicable) << what;
          else expect_close(r, 1e-6, what);
        }
    // The scale first, and a batch of 2 with its own scales per image.
    if (l != Layout::nchw)
      expect_close(check_tactic(*find_tactic(mul.op, "raw_buffer"), mul,
                                {random_tensor(DType::float32, {2, 24, 1, 1}, 4), random_tensor(DType::float32, {2, 24, 5, 7}, 3)},
                                {false, false}, 2, {l, l}, l),
                   1e-6, "per-channel Mul, scale first, batch 2" + in);
    // Broadcasting an operand would touch the padding.
    ir::Node add = make_node("Add", 2, 1);
    auto bc = check_tactic(*find_tactic(add.op, "raw_buffer"), add,
                           {random_tensor(DType::float32, s, 3), random_tensor(DType::float32, {1, 24, 1, 1}, 4)},
                           {false, false}, 1, {l, l}, l);
    EXPECT_EQ(bc.status.kind(), ErrorKind::not_applicable) << "broadcast Add" << in;

    // Concat along channels: blocked needs every C a multiple of the block.
    ir::Node cat = make_node("Concat", 2, 1);
    set_attr(cat, "axis", int64_t{1});
    const int64_t b = ir::is_blocked(l) ? ir::layout_block(l) : 5;
    for (int64_t n : {int64_t{1}, int64_t{2}})
      expect_close(check_tactic(*find_tactic(cat.op, "raw_buffer"), cat,
                                {random_tensor(DType::float32, {n, b, 3, 4}, 6), random_tensor(DType::float32, {n, 2 * b, 3, 4}, 7)},
                                {false, false}, 2, {l, l}, l),
                   0, "Concat" + in);
    if (ir::is_blocked(l)) {
      auto odd = check_tactic(*find_tactic(cat.op, "raw_buffer"), cat,
                              {random_tensor(DType::float32, {1, 5, 3, 4}, 6), random_tensor(DType::float32, {1, 16, 3, 4}, 7)},
                              {false, false}, 1, {l, l}, l);
      EXPECT_EQ(odd.status.kind(), ErrorKind::not_applicable) << "Concat of C=5" << in;
    }
  }
}

// Inference BatchNormalization in nhwc / blocked (channel_affine) against the reference, C = 24
// (blocked: a partial last block whose padding must stay zero), variances positive.
TEST(LayoutTactics, ChannelAffineBatchNormMatchesReference) {
  const kernels::Tactic* t = find_tactic(ir::OpKind::BatchNormalization, "channel_affine");
  ASSERT_NE(t, nullptr);
  ir::Node bn = make_node("BatchNormalization", 5, 1, 15);
  set_attr(bn, "epsilon", 1e-3f);
  Tensor var = random_tensor(DType::float32, {24}, 14);
  for (int64_t i = 0; i < 24; ++i) var.set_f64(i, 0.5 + std::fabs(var.get_f64(i)));
  for (Layout l : kLayouts) {
    const std::string in = std::string(" in ") + ir::layout_name(l);
    for (const Shape& s : {Shape{1, 24, 5, 7}, Shape{2, 24, 3, 1}}) {
      auto r = check_tactic(*t, bn,
                            {random_tensor(DType::float32, s, 10), random_tensor(DType::float32, {24}, 11),
                             random_tensor(DType::float32, {24}, 12), random_tensor(DType::float32, {24}, 13), var},
                            {false, true, true, true, true}, 2, {l}, l);
      if (l == Layout::nchw) EXPECT_EQ(r.status.kind(), ErrorKind::not_applicable) << in;
      else expect_close(r, 1e-5, "BatchNormalization " + shape_to_string(s) + in);
    }
  }
}

// A Gather of channels in nhwc (gather_channels) against the reference: a shuffle, a subset with a
// repeat and a negative index, fp32 and bf16 (a copy: exact); refused in nchw and off axis 1.
TEST(LayoutTactics, GatherChannelsMatchesReference) {
  const kernels::Tactic* t = find_tactic(ir::OpKind::Gather, "gather_channels");
  ASSERT_NE(t, nullptr);
  ir::Node n = make_node("Gather", 2, 1, 13);
  set_attr(n, "axis", int64_t{1});
  Tensor shuffle = Tensor::create(DType::int64, {12}).value(), subset = Tensor::create(DType::int64, {5}).value();
  for (int64_t c = 0; c < 12; ++c) shuffle.set_f64(c, static_cast<double>((c % 2) * 6 + c / 2));
  const std::vector<int64_t> picks = {3, 3, -1, 0, 7};
  for (int64_t i = 0; i < 5; ++i) subset.set_f64(i, static_cast<double>(picks[static_cast<size_t>(i)]));
  for (DType dt : {DType::float32, DType::bfloat16})
    for (const Tensor& idx : {shuffle, subset})
      for (const Shape& s : {Shape{1, 12, 5, 7}, Shape{2, 12, 3, 1}}) {
        const std::string what = "Gather " + shape_to_string(s) + " " + dtype_name(dt) + " of " + std::to_string(idx.numel());
        auto r =
            check_tactic(*t, n, {random_tensor(dt, s, 20), idx}, {false, true}, 2, {Layout::nhwc, Layout::nchw}, Layout::nhwc);
        expect_close(r, 0, what);
        auto plain =
            check_tactic(*t, n, {random_tensor(dt, s, 20), idx}, {false, true}, 2, {Layout::nchw, Layout::nchw}, Layout::nchw);
        EXPECT_EQ(plain.status.kind(), ErrorKind::not_applicable) << what;
      }
  ir::Node a0 = make_node("Gather", 2, 1, 13);
  Tensor rows = Tensor::create(DType::int64, {2}).value();
  rows.set_f64(0, 2);
  auto off_axis = check_tactic(*t, a0, {random_tensor(DType::float32, {3, 12, 2, 2}, 21), rows}, {false, true}, 2,
                               {Layout::nhwc, Layout::nchw}, Layout::nhwc);
  EXPECT_EQ(off_axis.status.kind(), ErrorKind::not_applicable);
}

// ---------------------------------------------------------------- the rewrite

ir::Model load(const ModelBuilder& mb) {
  auto m = mb.load();
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return std::move(m).value();
}

int count_op(const ir::Graph& g, ir::OpKind op) {
  int k = 0;
  for (const ir::Node& n : g.nodes) k += n.op == op;
  return k;
}

// Builds, runs on random inputs, compares with the reference interpreter; returns the plan.
std::unique_ptr<runtime::Engine> build_and_check(const ir::Model& m, const std::string& route) {
  auto e = test::build_engine(m, route);
  EXPECT_TRUE(e.is_ok()) << route << ": " << e.status().to_string();
  if (!e) return nullptr;
  for (uint64_t seed : {1u, 2u}) {
    std::vector<Tensor> in = test::random_inputs(**e, seed);
    auto got = (*e)->run(in);
    EXPECT_TRUE(got.is_ok()) << route << ": " << got.status().to_string();
    auto want = test::reference_outputs(m, in);
    EXPECT_TRUE(want.is_ok());
    if (got && want) {
      EXPECT_EQ(test::compare_outputs(*got, *want, 1e-4, 1e-4), "") << route << ": " << test::op_list((*e)->plan().model.graph);
    }
  }
  return std::move(e).value();
}

// As build_and_check, for routes with a bf16 node: relative l2 within 3e-2 of the reference.
std::unique_ptr<runtime::Engine> build_and_check_lowp(const ir::Model& m, const std::string& route) {
  auto e = test::build_engine(m, route);
  EXPECT_TRUE(e.is_ok()) << route << ": " << e.status().to_string();
  if (!e) return nullptr;
  std::vector<Tensor> in = test::random_inputs(**e, 1);
  auto got = (*e)->run(in);
  auto want = test::reference_outputs(m, in);
  EXPECT_TRUE(got.is_ok() && want.is_ok());
  if (got && want)
    for (size_t o = 0; o < got->size(); ++o) {
      double num = 0, den = 0;
      for (int64_t i = 0; i < (*want)[o].numel(); ++i) {
        const double d = (*got)[o].get_f64(i) - (*want)[o].get_f64(i);
        num += d * d;
        den += (*want)[o].get_f64(i) * (*want)[o].get_f64(i);
      }
      EXPECT_LE(std::sqrt(num / std::max(den, 1e-30)), 3e-2) << route << " output " << o;
    }
  return std::move(e).value();
}

// A small CNN: conv(3->24, s2) relu, maxpool, conv 1x1 (24->16) and conv 3x3 (24->16) side by
// side, Concat (32 channels), residual conv + Add, Relu, GlobalAveragePool, Flatten, Gemm. The
// concat output is also a graph output.
ir::Model small_cnn() {
  ModelBuilder m(17);
  m.input("x", 1, {"1", "3", "20", "20"});
  test::initializer_random(m, "w0", {24, 3, 3, 3}, 1, 0.3f);
  test::initializer_random(m, "b0", {24}, 2);
  auto* c0 = m.node("Conv", {"x", "w0", "b0"}, {"c0"}, "conv0");
  test::attr_ints(c0, "strides", {2, 2});
  test::attr_ints(c0, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c0"}, {"r0"}, "relu0");
  auto* mp = m.node("MaxPool", {"r0"}, {"p0"}, "pool0");
  test::attr_ints(mp, "kernel_shape", {3, 3});
  test::attr_ints(mp, "pads", {1, 1, 1, 1});
  test::initializer_random(m, "wa", {16, 24, 1, 1}, 3, 0.3f);
  test::initializer_random(m, "wb", {16, 24, 3, 3}, 4, 0.1f);
  m.node("Conv", {"p0", "wa"}, {"ca"}, "conva");
  auto* cb = m.node("Conv", {"p0", "wb"}, {"cb"}, "convb");
  test::attr_ints(cb, "pads", {1, 1, 1, 1});
  auto* cat = m.node("Concat", {"ca", "cb"}, {"cat"}, "concat");
  test::attr_i(cat, "axis", 1);
  test::initializer_random(m, "wc", {32, 32, 3, 3}, 5, 0.1f);
  auto* cc = m.node("Conv", {"cat", "wc"}, {"cc"}, "convc");
  test::attr_ints(cc, "pads", {1, 1, 1, 1});
  m.node("Add", {"cc", "cat"}, {"s"}, "add");
  m.node("Relu", {"s"}, {"rs"}, "relu1");
  m.node("GlobalAveragePool", {"rs"}, {"gp"}, "gap");
  m.node("Flatten", {"gp"}, {"f"}, "flatten");
  test::initializer_random(m, "fw", {5, 32}, 6);
  auto* g = m.node("Gemm", {"f", "fw"}, {"y"}, "fc");
  test::attr_i(g, "transB", 1);
  m.output("y", 1, {});
  m.output("cat", 1, {});
  return load(m);
}

// Squeeze-excitation (EfficientNet, MobileNetV3, RegNet): x * Sigmoid(Conv(Relu(Conv(GAP(x))))).
// The scale Mul stays in the convolutions' layout: no Reformat around it (each cost more than the
// Mul itself on efficientnet_b1).
ir::Model se_block(int64_t c) {
  ModelBuilder m(17);
  m.input("x", 1, {"1", std::to_string(c), "9", "9"});
  test::initializer_random(m, "w0", {c, c, 3, 3}, 31, 0.2f);
  auto* c0 = m.node("Conv", {"x", "w0"}, {"a"}, "conv0");
  test::attr_ints(c0, "pads", {1, 1, 1, 1});
  m.node("GlobalAveragePool", {"a"}, {"g"}, "gap");
  test::initializer_random(m, "w1", {8, c, 1, 1}, 32, 0.3f);
  m.node("Conv", {"g", "w1"}, {"h"}, "fc1");
  m.node("Relu", {"h"}, {"hr"}, "relu");
  test::initializer_random(m, "w2", {c, 8, 1, 1}, 33, 0.3f);
  m.node("Conv", {"hr", "w2"}, {"e"}, "fc2");
  m.node("Sigmoid", {"e"}, {"sc"}, "sigmoid");
  m.node("Mul", {"a", "sc"}, {"y0"}, "scale");
  test::initializer_random(m, "w3", {c, c, 1, 1}, 34, 0.2f);
  m.node("Conv", {"y0", "w3"}, {"y"}, "conv3");
  m.output("y", 1, {});
  return load(m);
}

TEST(LayoutRewrite, SqueezeExcitationScaleStaysInTheLayout) {
  for (int64_t c : {32, 24})
    for (const char* l : {"nhwc", "blocked"}) {
      SCOPED_TRACE(std::to_string(c) + " channels, " + l);
      // The scale is read as Sigmoid writes it (plain) where the layout allows: one Reformat less.
      auto e = build_and_check(se_block(c), std::string("layout.default=") + l);
      ASSERT_TRUE(e);
      const builder::Plan& p = e->plan();
      for (const builder::PlanStep& st : p.steps) {
        const ir::Node& n = p.model.graph.nodes[static_cast<size_t>(st.node)];
        if (n.op != ir::OpKind::Mul) continue;
        EXPECT_EQ(std::string(st.tactic->name), "raw_buffer");
        // The activation is read where conv0 wrote it, and the product is written in that
        // layout for conv3, no Reformat on the way.
        const int prod = p.model.graph.values[static_cast<size_t>(n.inputs[0])].producer;
        ASSERT_GE(prod, 0);
        EXPECT_NE(p.model.graph.nodes[static_cast<size_t>(prod)].op, ir::OpKind::Reformat) << test::op_list(p.model.graph);
        EXPECT_NE(p.model.graph.values[static_cast<size_t>(n.outputs[0])].layout, Layout::nchw);
      }
    }
}

// DenseNet's pre-activation: Concat -> BatchNormalization -> Relu -> Conv stays in the layout.
TEST(LayoutRewrite, BatchNormBetweenConvolutionsStaysInTheLayout) {
  ModelBuilder m(17);
  m.input("x", 1, {"1", "16", "8", "8"});
  test::initializer_random(m, "w0", {16, 16, 3, 3}, 51, 0.2f);
  auto* c0 = m.node("Conv", {"x", "w0"}, {"a"}, "conv0");
  test::attr_ints(c0, "pads", {1, 1, 1, 1});
  test::attr_i(m.node("Concat", {"x", "a"}, {"cat"}, "concat"), "axis", 1);
  test::initializer_positive(m, "scale", {32}, 52);
  test::initializer_random(m, "bias", {32}, 53);
  test::initializer_random(m, "mean", {32}, 54);
  test::initializer_positive(m, "var", {32}, 55);
  m.node("BatchNormalization", {"cat", "scale", "bias", "mean", "var"}, {"n"}, "bn");
  m.node("Relu", {"n"}, {"r"}, "relu");
  test::initializer_random(m, "w1", {8, 32, 1, 1}, 56, 0.2f);
  m.node("Conv", {"r", "w1"}, {"y"}, "conv1");
  m.output("y", 1, {});
  const ir::Model model = load(m);
  for (const char* l : {"nhwc", "blocked"}) {
    SCOPED_TRACE(l);
    auto e = build_and_check(model, std::string("layout.default=") + l);
    ASSERT_TRUE(e);
    const builder::Plan& p = e->plan();
    for (const builder::PlanStep& st : p.steps) {
      if (p.model.graph.nodes[static_cast<size_t>(st.node)].op == ir::OpKind::BatchNormalization) {
        EXPECT_EQ(std::string(st.tactic->name), "channel_affine");
      }
    }
    // Only the input's and the output's Reformats remain.
    EXPECT_EQ(count_op(p.model.graph, ir::OpKind::Reformat), 2) << test::op_list(p.model.graph);
  }
}

// ShuffleNet v2's block: Concat, the channel shuffle (Reshape to 5-D, Transpose, Reshape) and the
// next block's two channel Slices. channel_gather makes them two Gathers of the Concat, which
// stay in the convolutions' layout: only the input's and the output's Reformats remain. With
// pass.channel_gather=off the shuffle is still there (and this small graph stays nchw).
TEST(LayoutRewrite, ChannelShuffleIsAGatherInTheLayout) {
  ModelBuilder m(17);
  m.input("x", 1, {"1", "8", "6", "6"});
  test::initializer_random(m, "w0", {8, 8, 3, 3}, 61, 0.2f);
  test::initializer_random(m, "w1", {8, 8, 1, 1}, 62, 0.2f);
  auto* c0 = m.node("Conv", {"x", "w0"}, {"a"}, "conv0");
  test::attr_ints(c0, "pads", {1, 1, 1, 1});
  m.node("Conv", {"x", "w1"}, {"b"}, "conv1");
  test::attr_i(m.node("Concat", {"a", "b"}, {"cat"}, "concat"), "axis", 1);
  test::initializer_i64(m, "s5", {5}, {1, 2, 8, 6, 6});
  test::initializer_i64(m, "s4", {4}, {1, 16, 6, 6});
  m.node("Reshape", {"cat", "s5"}, {"r5"}, "reshape0");
  test::attr_ints(m.node("Transpose", {"r5"}, {"t5"}, "transpose"), "perm", {0, 2, 1, 3, 4});
  m.node("Reshape", {"t5", "s4"}, {"sh"}, "reshape1");
  test::initializer_i64(m, "st0", {1}, {0});
  test::initializer_i64(m, "en0", {1}, {8});
  test::initializer_i64(m, "st1", {1}, {8});
  test::initializer_i64(m, "en1", {1}, {16});
  test::initializer_i64(m, "ax", {1}, {1});
  m.node("Slice", {"sh", "st0", "en0", "ax"}, {"lo"}, "slice0");
  m.node("Slice", {"sh", "st1", "en1", "ax"}, {"hi"}, "slice1");
  test::initializer_random(m, "w2", {8, 8, 1, 1}, 63, 0.2f);
  m.node("Conv", {"hi", "w2"}, {"c"}, "conv2");
  test::attr_i(m.node("Concat", {"lo", "c"}, {"y"}, "concat2"), "axis", 1);
  m.output("y", 1, {});
  const ir::Model model = load(m);
  auto e = build_and_check(model, "");
  ASSERT_TRUE(e);
  const builder::Plan& p = e->plan();
  EXPECT_EQ(count_op(p.model.graph, ir::OpKind::Transpose), 0) << test::op_list(p.model.graph);
  EXPECT_EQ(count_op(p.model.graph, ir::OpKind::Slice), 0) << test::op_list(p.model.graph);
  EXPECT_EQ(count_op(p.model.graph, ir::OpKind::Gather), 2) << test::op_list(p.model.graph);
  for (const builder::PlanStep& st : p.steps) {
    if (p.model.graph.nodes[static_cast<size_t>(st.node)].op == ir::OpKind::Gather) {
      EXPECT_EQ(std::string(st.tactic->name), "gather_channels");
    }
  }
  EXPECT_EQ(count_op(p.model.graph, ir::OpKind::Reformat), 2) << test::op_list(p.model.graph);
  auto off = build_and_check(model, "pass.channel_gather=off");
  ASSERT_TRUE(off);
  EXPECT_EQ(count_op(off->plan().model.graph, ir::OpKind::Transpose), 1) << test::op_list(off->plan().model.graph);
  EXPECT_EQ(count_op(off->plan().model.graph, ir::OpKind::Gather), 0) << test::op_list(off->plan().model.graph);
}

TEST(LayoutRewrite, NchwRouteIsPlain) {
  auto e = build_and_check(small_cnn(), "layout.default=nchw");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->plan().report.reformats, 0);
  EXPECT_EQ(count_op(e->plan().model.graph, ir::OpKind::Reformat), 0);
  for (const ir::Value& v : e->plan().model.graph.values) EXPECT_EQ(v.layout, Layout::nchw) << v.name;
}

// On the CPU the default route runs the convolutions in nhwc (bench/results: nhwc 0.59-0.90 of
// nchw on the zoo CNNs): the same engine as layout.default=nhwc.
TEST(LayoutRewrite, CpuDefaultRouteIsNhwc) {
  const ir::Model m = small_cnn();
  auto def = build_and_check(m, "");
  auto nhwc = build_and_check(m, "layout.default=nhwc");
  ASSERT_TRUE(def && nhwc);
  EXPECT_EQ(def->plan().report.layouts, nhwc->plan().report.layouts);
  EXPECT_EQ(def->plan().report.reformats, 2);
  EXPECT_EQ(test::op_list(def->plan().model.graph), test::op_list(nhwc->plan().model.graph));
}

TEST(LayoutRewrite, RegionsStayInTheLayoutWithFewReformats) {
  const ir::Model m = small_cnn();
  for (const char* l : {"blocked", "nhwc"}) {
    for (const char* extra : {"", " pass.fuse_conv=off", " memory.concat_alias=off threads=1"}) {
      const std::string route = std::string("layout.default=") + l + extra;
      SCOPED_TRACE(route);
      auto e = build_and_check(m, route);
      ASSERT_TRUE(e);
      const builder::Plan& p = e->plan();
      const ir::Graph& g = p.model.graph;
      EXPECT_EQ(p.report.reformats, count_op(g, ir::OpKind::Reformat));
      // conv0 reads x (3 channels) as it is; the region runs to the GlobalAveragePool; out of
      // it: the pooled vector for Flatten and the concat for the graph output. In nhwc a
      // Concat is no slice of buffers, but it still runs in place of the layout.
      EXPECT_EQ(p.report.reformats, 2) << test::op_list(g);
      int moved_convs = 0;
      for (const std::string& s : p.report.layouts) moved_convs += s.rfind("conv", 0) == 0;
      EXPECT_EQ(moved_convs, 4);
      for (int v : g.outputs) EXPECT_EQ(g.values[static_cast<size_t>(v)].layout, Layout::nchw);
      const Layout want = std::string(l) == "nhwc" ? Layout::nhwc : builder::blocked_layout();
      for (const builder::PlanStep& st : p.steps) {
        const ir::Node& n = g.nodes[static_cast<size_t>(st.node)];
        if (n.op == ir::OpKind::MaxPool || n.op == ir::OpKind::Concat || n.op == ir::OpKind::GlobalAveragePool) {
          EXPECT_EQ(p.values[static_cast<size_t>(st.outputs[0])].layout, want) << n.name;
        }
        if (n.op == ir::OpKind::Reformat) {
          EXPECT_EQ(std::string(st.tactic->name), "onednn_reorder");
        }
      }
      // Blocked buffers hold padded channels: c0 (24 channels) takes 32 with 16-blocks.
      for (size_t v = 0; v < g.values.size(); ++v)
        if (p.values[v].kind == builder::PlanValue::Kind::arena) {
          EXPECT_EQ(p.values[v].bytes, 4 * ir::physical_numel(p.values[v].shape, p.values[v].layout)) << g.values[v].name;
        }
    }
  }
}

// A pin on a tactic that reads nchw only keeps a pool / Concat / GlobalAveragePool out of the
// layout (reformats around it), as it does a convolution: the pin is honoured, never a build
// failure (a tune met "tactic.pool0=reference is not a candidate" on blocked routes).
TEST(LayoutRewrite, PinnedPlainTacticsKeepTheirNodeNchw) {
  const ir::Model m = small_cnn();
  for (const char* pins : {"tactic.pool0=reference", "tactic.concat=reference", "tactic.gap=reference"}) {
    const std::string route = std::string("layout.default=blocked ") + pins;
    SCOPED_TRACE(route);
    auto e = build_and_check(m, route);
    ASSERT_TRUE(e);
    const builder::Plan& p = e->plan();
    const ir::Graph& g = p.model.graph;
    const std::string pinned_node = std::string(pins).substr(7, std::string(pins).find('=') - 7);
    bool seen = false;
    for (const builder::PlanStep& st : p.steps) {
      const ir::Node& n = g.nodes[static_cast<size_t>(st.node)];
      if (n.name != pinned_node) continue;
      seen = true;
      EXPECT_EQ(std::string(st.tactic->name), "reference");
      EXPECT_EQ(p.values[static_cast<size_t>(st.outputs[0])].layout, Layout::nchw);
    }
    EXPECT_TRUE(seen) << test::op_list(g);
    EXPECT_EQ(p.report.reformats, count_op(g, ir::OpKind::Reformat));
  }
}

// The tactics of the layout table read nhwc or blocked activations: pinned on a node the route
// keeps nchw they are inactive (reported, left out of the plan's route), not a build failure (a
// tune lost 47 of 164 candidates to "tactic.MaxPool_2=onednn_pool is not a candidate").
TEST(LayoutRewrite, LayoutTacticPinsOnNchwNodesAreInactive) {
  const ir::Model m = small_cnn();
  const std::string pins = "tactic.pool0=onednn_pool tactic.concat=raw_buffer";
  auto e = build_and_check(m, "layout.default=nchw " + pins);
  ASSERT_TRUE(e);
  const builder::Plan& p = e->plan();
  ASSERT_EQ(p.report.inactive.size(), 2u);
  for (const std::string& s : p.report.inactive) EXPECT_NE(s.find("runs in nchw under this route"), std::string::npos) << s;
  EXPECT_EQ(p.route, "layout.default=nchw");
  // In the layout the same pins are taken.
  auto in_layout = build_and_check(m, "layout.default=nhwc " + pins);
  ASSERT_TRUE(in_layout);
  EXPECT_TRUE(in_layout->plan().report.inactive.empty());
  int taken = 0;
  for (const builder::PlanStep& st : in_layout->plan().steps) {
    const std::string name = in_layout->plan().model.graph.nodes[static_cast<size_t>(st.node)].name;
    if (name == "pool0" || name == "concat") {
      EXPECT_EQ(std::string(st.tactic->name), name == "pool0" ? "onednn_pool" : "raw_buffer");
      ++taken;
    }
  }
  EXPECT_EQ(taken, 2);
}

// One convolution between plain ops: by default it is not flipped into a layout for two
// reformats; pinned per node, it is (and the outputs still match).
TEST(LayoutRewrite, LoneConvDoesNotPingPongUnlessPinned) {
  ModelBuilder mb(17);
  mb.input("x", 1, {"1", "16", "6", "6"});
  mb.node("Sigmoid", {"x"}, {"s"}, "sig");
  test::initializer_random(mb, "w", {16, 16, 3, 3}, 1, 0.2f);
  auto* c = mb.node("Conv", {"s", "w"}, {"c"}, "conv");
  test::attr_ints(c, "pads", {1, 1, 1, 1});
  mb.node("Sigmoid", {"c"}, {"y"}, "sig2");
  mb.output("y", 1, {});
  const ir::Model m = load(mb);
  auto e = build_and_check(m, "layout.default=blocked");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->plan().report.reformats, 0);
  EXPECT_TRUE(e->plan().report.layouts.empty());
  auto pinned = build_and_check(m, "layout.conv=nhwc");
  ASSERT_TRUE(pinned);
  EXPECT_EQ(pinned->plan().report.reformats, 2);
  ASSERT_EQ(pinned->plan().report.layouts.size(), 1u);
  EXPECT_EQ(pinned->plan().report.layouts[0], "conv: nhwc");
  // Per node against the default: layout.convc=nchw ends the region at the Concat, whose plain
  // copy (the graph output) convc then reads; the rest of the graph stays plain.
  auto mixed = build_and_check(small_cnn(), "layout.default=blocked layout.convc=nchw");
  ASSERT_TRUE(mixed);
  EXPECT_EQ(mixed->plan().report.reformats, 1);
  for (const std::string& s : mixed->plan().report.layouts) EXPECT_EQ(s.rfind("convc", 0), std::string::npos) << s;
}

TEST(LayoutRewrite, KnobsAndErrorsNameTheNode) {
  const ir::Model m = small_cnn();
  auto space = builder::knob_space(m, {});
  ASSERT_TRUE(space.is_ok()) << space.status().to_string();
  const builder::Knob* def = space->find("layout.default");
  ASSERT_TRUE(def);
  EXPECT_EQ(def->values, (std::vector<std::string>{"nchw", "nhwc", "blocked"}));
  EXPECT_EQ(def->default_value, "nhwc");
  // The tactic knobs keep the convolutions' nchw-only tactics, searched too (a pin on one keeps
  // its node nchw).
  const builder::Knob* tc = space->find("tactic.convc");
  ASSERT_TRUE(tc);
  for (const char* t : {"onednn", "im2col_gemm"}) {
    EXPECT_NE(std::find(tc->values.begin(), tc->values.end(), t), tc->values.end()) << t;
    EXPECT_NE(std::find(tc->search_values.begin(), tc->search_values.end(), t), tc->search_values.end()) << t;
  }
  const builder::Knob* k = space->find("layout.convb");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->values, (std::vector<std::string>{"default", "nchw", "nhwc", "blocked"}));
  EXPECT_EQ(k->group.rfind("layout:", 0), 0u);
  EXPECT_EQ(space->find("layout.gap"), nullptr);  // only convolutions have layout knobs
  // A value outside the domain is refused by the route check, naming the knob.
  auto bad = test::build_engine(m, "layout.convb=nchw4c");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("layout.convb"), std::string::npos) << bad.status().to_string();
  // A pinned plain-only tactic wins over layout.default (logged), and over layout.<node> too.
  auto e = build_and_check(m, "layout.default=blocked tactic.convc=im2col_gemm");
  ASSERT_TRUE(e);
  bool logged = false;
  for (const std::string& s : e->plan().report.pass_log) logged |= s.find("convc stays nchw") != std::string::npos;
  EXPECT_TRUE(logged);
}

// bf16 convolutions follow the layouts (onednn_bf16 reads and writes them, Reformats and pools
// run in bf16); int8 ones stay nchw, logged, and the route still builds.
TEST(LayoutRewrite, Bf16FollowsTheLayoutInt8StaysNchw) {
  if (!kernels::cpu_features().avx512_bf16 || !kernels::cpu_features().avx512_vnni)
    GTEST_SKIP() << "no AVX512-BF16 / VNNI";
  const ir::Model m = small_cnn();
  for (const char* l : {"nhwc", "blocked"}) {
    const std::string route = std::string("layout.default=") + l + " precision.default=bf16";
    auto e = build_and_check_lowp(m, route);
    ASSERT_TRUE(e) << route;
    const auto& layouts = e->plan().report.layouts;
    for (const char* conv : {"conv0", "conva", "convb", "convc"})
      EXPECT_TRUE(std::any_of(layouts.begin(), layouts.end(),
                              [&](const std::string& s) { return s.rfind(std::string(conv) + ":", 0) == 0; }))
          << route << ": " << conv << " off nchw";
    // The fp32 MaxPool and Concat between them (casts around them) stay in the layout too.
    int bf16_convs = 0, pools_off_nchw = 0;
    for (const builder::PlanStep& st : e->plan().steps) {
      const ir::OpKind op = st.tactic->op;
      bf16_convs += std::string(st.tactic->name) == "onednn_bf16" && (op == ir::OpKind::Conv || op == ir::OpKind::FusedConv);
      pools_off_nchw += op == ir::OpKind::MaxPool && std::string(st.tactic->name) == "onednn_pool";
    }
    EXPECT_EQ(bf16_convs, 4) << route;
    EXPECT_EQ(pools_off_nchw, 1) << route;
  }
  auto pinned = build_and_check_lowp(m, "layout.default=nchw layout.convc=blocked precision.convc=int8");
  ASSERT_TRUE(pinned);
  bool logged = false;
  for (const std::string& s : pinned->plan().report.pass_log) logged |= s.find("convc stays nchw") != std::string::npos;
  EXPECT_TRUE(logged);
  EXPECT_TRUE(pinned->plan().report.layouts.empty());
}

// ---------------------------------------------------------------- CUDA: nchw and nhwc

// Host side (a CUDA build, no device needed): the knobs and the tactic tables.
TEST(LayoutCuda, KnobsOfferNchwAndNhwcAndTheLayoutTactics) {
  if (!cuda::compiled()) GTEST_SKIP() << "built without the CUDA backend";
  builder::BuildOptions opts;
  opts.backend = kernels::Backend::cuda;
  auto space = builder::knob_space(small_cnn(), opts);
  ASSERT_TRUE(space.is_ok()) << space.status().to_string();
  const builder::Knob* def = space->find("layout.default");
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->values, (std::vector<std::string>{"nchw", "nhwc"}));
  EXPECT_EQ(def->default_value, builder::default_layout(kernels::Backend::cuda));
  const builder::Knob* conv = space->find("layout.convc");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->values, (std::vector<std::string>{"default", "nchw", "nhwc"}));
  // The nhwc route's tactics are pinnable (the knob space looks at both layouts).
  auto has = [&](const std::string& knob, const std::string& v) {
    const builder::Knob* k = space->find(knob);
    return k && std::find(k->values.begin(), k->values.end(), v) != k->values.end();
  };
  EXPECT_TRUE(has("tactic.pool0", "cuda_nhwc"));
  EXPECT_TRUE(has("tactic.pool0", "cuda"));
  EXPECT_TRUE(has("tactic.gap", "cuda_nhwc"));
  EXPECT_TRUE(has("tactic.concat", "raw_buffer"));
  EXPECT_TRUE(has("tactic.conva", "cudnn_fused") || has("tactic.conva", "cudnn_implicit_precomp_gemm"));
  EXPECT_NE(kernels::find_tactic(ir::OpKind::Reformat, "cuda", kernels::Backend::cuda), nullptr);
  // Blocked layouts are the CPU's: the rewrite says so, naming the knob.
  ir::Model m = small_cnn();
  builder::Route r;
  r.values["layout.default"] = "blocked";
  builder::RouteView view(r, *space);
  auto st = builder::apply_layouts(m, view, 1, nullptr, kernels::Backend::cuda);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("layout.default=blocked"), std::string::npos) << st.message();
}

// Relative L2 distance of `got` from `want`, over every output.
double rel_l2(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  double num = 0, den = 0;
  for (size_t o = 0; o < want.size(); ++o)
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      const double d = got[o].get_f64(i) - want[o].get_f64(i);
      num += d * d;
      den += want[o].get_f64(i) * want[o].get_f64(i);
    }
  return std::sqrt(num / std::max(den, 1e-30));
}

// On the device: the CNN above in nhwc against the reference interpreter, with the region running
// from the first convolution (CUDA reads the 3-channel input through a Reformat, no first-layer
// exception) to the pooled vector. fp32: elementwise within 1e-4. fp16 / bf16 (activations
// rounded at every layer, four layers deep): relative L2 within 1e-2 / 3e-2 of the reference,
// and nhwc within the same of nchw at the same precision, with cuDNN's fused call and without.
TEST(LayoutCuda, NhwcEnginesMatchTheReference) {
  if (!cuda::compiled()) GTEST_SKIP() << "built without the CUDA backend";
  if (!cuda::device_present()) GTEST_SKIP() << "no CUDA device on this machine";
  const ir::Model m = small_cnn();
  builder::BuildOptions opts;
  opts.backend = kernels::Backend::cuda;
  auto space = builder::knob_space(m, opts);
  ASSERT_TRUE(space.is_ok()) << space.status().to_string();
  std::string fused_pins, unfused_pins;  // every convolution cuDNN's fused call takes, pinned to it / to plain precomp
  for (const builder::Knob& k : space->knobs())
    if (k.name.rfind("tactic.", 0) == 0 && std::find(k.values.begin(), k.values.end(), "cudnn_fused") != k.values.end()) {
      fused_pins += " " + k.name + "=cudnn_fused";
      unfused_pins += " " + k.name + "=cudnn_implicit_precomp_gemm";
    }
  EXPECT_NE(fused_pins, "");
  const std::vector<Tensor> in = test::random_inputs(*test::build_engine(m, "", opts).value(), 1);
  const auto want = test::reference_outputs(m, in);
  ASSERT_TRUE(want.is_ok());
  std::map<std::string, std::vector<Tensor>> outs;
  for (const std::string& route : {std::string("layout.default=nhwc"), std::string("layout.default=nchw layout.convc=nhwc"),
                                   std::string("layout.default=nchw precision.default=fp16"),
                                   std::string("layout.default=nhwc precision.default=fp16"),
                                   "layout.default=nhwc precision.default=fp16" + fused_pins,
                                   "layout.default=nhwc precision.default=fp16" + unfused_pins,
                                   std::string("layout.default=nchw precision.default=bf16"),
                                   std::string("layout.default=nhwc precision.default=bf16")}) {
    SCOPED_TRACE(route);
    auto e = test::build_engine(m, route, opts);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    const builder::Plan& p = (*e)->plan();
    const ir::Graph& g = p.model.graph;
    EXPECT_EQ(p.report.reformats, count_op(g, ir::OpKind::Reformat));
    if (route.find("layout.default=nhwc") != std::string::npos) {
      // x into the layout; out of it: the concat (a graph output) and the pooled vector.
      EXPECT_EQ(p.report.reformats, 3) << test::op_list(g);
      for (const builder::PlanStep& st : p.steps) {
        const ir::Node& n = g.nodes[static_cast<size_t>(st.node)];
        if (n.op == ir::OpKind::MaxPool || n.op == ir::OpKind::GlobalAveragePool) {
          EXPECT_STREQ(st.tactic->name, "cuda_nhwc") << n.name;
        }
        if (n.op == ir::OpKind::Concat) {
          EXPECT_STREQ(st.tactic->name, "raw_buffer") << n.name;
        }
        if (n.op == ir::OpKind::Reformat) {
          EXPECT_STREQ(st.tactic->name, "cuda") << n.name;
        }
      }
    } else if (route.find("layout.convc") != std::string::npos) {
      // convc (and the nodes after it up to the pool) in nhwc: the concat in, the pooled vector out.
      EXPECT_EQ(p.report.reformats, 2) << test::op_list(g);
    }
    auto got = (*e)->run(in);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    const bool bf16 = route.find("bf16") != std::string::npos, fp16 = route.find("fp16") != std::string::npos;
    if (!bf16 && !fp16) {
      EXPECT_EQ(test::compare_outputs(*got, *want, 1e-4, 1e-4), "") << test::op_list(g);
    } else {
      const double e_ref = rel_l2(*got, *want);
      std::printf("  %s: relative L2 from the fp32 reference %.3g\n", route.c_str(), e_ref);
      EXPECT_LE(e_ref, bf16 ? 3e-2 : 1e-2) << test::op_list(g);
      const std::string nchw_route = bf16 ? "layout.default=nchw precision.default=bf16" : "layout.default=nchw precision.default=fp16";
      if (route != nchw_route && outs.count(nchw_route)) {
        const double e_nchw = rel_l2(*got, outs[nchw_route]);
        std::printf("  %s: relative L2 from nchw at the same precision %.3g\n", route.c_str(), e_nchw);
        EXPECT_LE(e_nchw, bf16 ? 3e-2 : 1e-2);
      }
    }
    outs[route] = std::move(got).value();
  }
}

// Each CUDA layout tactic against the reference kernel, with inputs and outputs in nhwc (odd
// channel counts; fp32 exact for data movement and pooling, 1e-4 for convolutions).
TEST(LayoutCuda, TacticsInNhwcMatchTheReference) {
  if (!cuda::compiled()) GTEST_SKIP() << "built without the CUDA backend";
  if (!cuda::device_present()) GTEST_SKIP() << "no CUDA device on this machine";
  const kernels::Backend cu = kernels::Backend::cuda;
  for (Layout from : {Layout::nchw, Layout::nhwc}) {
    ir::Node n = make_node("Reformat", 1, 1);
    n.domain = ir::kInternalDomain;
    const Layout to = from == Layout::nchw ? Layout::nhwc : Layout::nchw;
    for (DType dt : {DType::float32, DType::float16}) {
      auto r = check_tactic(*find_tactic(ir::OpKind::Reformat, "cuda", cu), n, {random_tensor(dt, {2, 5, 7, 3}, 3)}, {false},
                            1, {from}, to);
      expect_close(r, 0, std::string("Reformat ") + ir::layout_name(from));
    }
  }
  ir::Node mp = make_node("MaxPool", 1, 1);
  set_attr(mp, "kernel_shape", std::vector<int64_t>{3, 3});
  set_attr(mp, "strides", std::vector<int64_t>{2, 2});
  set_attr(mp, "pads", std::vector<int64_t>{1, 0, 1, 1});
  ir::Node ap = mp;
  ap.op = ir::OpKind::AveragePool;
  ap.op_type = "AveragePool";
  ir::Node gap = make_node("GlobalAveragePool", 1, 1);
  for (const ir::Node* n : {&mp, &ap, &gap}) {
    auto r = check_tactic(*find_tactic(n->op, "cuda_nhwc", cu), *n, {random_tensor(DType::float32, {2, 13, 9, 8}, 4)}, {false},
                          1, {Layout::nhwc}, Layout::nhwc);
    expect_close(r, 1e-5, n->op_type + " cuda_nhwc");
    auto plain = check_tactic(*find_tactic(n->op, "cuda_nhwc", cu), *n, {random_tensor(DType::float32, {2, 13, 9, 8}, 4)},
                              {false});
    EXPECT_EQ(plain.status.kind(), ErrorKind::not_applicable) << n->op_type;
  }
  ir::Node add = make_node("Add", 2, 1);
  expect_close(check_tactic(*find_tactic(ir::OpKind::Add, "raw_buffer", cu), add,
                            {random_tensor(DType::float32, {1, 11, 5, 4}, 5), random_tensor(DType::float32, {1, 11, 5, 4}, 6)},
                            {false, false}, 1, {Layout::nhwc, Layout::nhwc}, Layout::nhwc),
               0, "Add raw_buffer");
  ir::Node cat = make_node("Concat", 2, 1);
  set_attr(cat, "axis", int64_t{1});
  expect_close(check_tactic(*find_tactic(ir::OpKind::Concat, "raw_buffer", cu), cat,
                            {random_tensor(DType::float32, {2, 3, 5, 4}, 7), random_tensor(DType::float32, {2, 6, 5, 4}, 8)},
                            {false, false}, 1, {Layout::nhwc, Layout::nhwc}, Layout::nhwc),
               0, "Concat raw_buffer");
  // Convolutions: every cuDNN algorithm that applies in nhwc, and the fused call with a
  // residual and relu, against the reference.
  ir::Node f = make_node("FusedConv", 4, 1);
  f.domain = ir::kInternalDomain;
  set_attr(f, "pads", std::vector<int64_t>{1, 1, 1, 1});
  set_attr(f, "activation", std::string("Relu"));
  const std::vector<Tensor> in = {random_tensor(DType::float32, {2, 12, 10, 9}, 9), random_tensor(DType::float32, {8, 12, 3, 3}, 10),
                                  random_tensor(DType::float32, {8}, 11), random_tensor(DType::float32, {2, 8, 10, 9}, 12)};
  int applied = 0;
  for (const kernels::Tactic* t : kernels::tactics_for(ir::OpKind::FusedConv, cu)) {
    if (!t->layouts) continue;
    auto r = check_tactic(*t, f, in, {false, true, true, false}, 1, {Layout::nhwc, Layout::nhwc, Layout::nhwc, Layout::nhwc},
                          Layout::nhwc);
    if (r.status.kind() == ErrorKind::not_applicable) continue;
    ++applied;
    const std::string name = t->name;
    const bool transform = name.find("fft") != std::string::npos || name.find("winograd") != std::string::npos;
    expect_close(r, transform ? 1e-2 : 1e-3, "FusedConv nhwc " + name);
  }
  EXPECT_GE(applied, 2);
  // Depthwise in nhwc (our kernel; stride 2, asymmetric pads, a channel multiplier of 2, Clip).
  ir::Node dw = make_node("FusedConv", 3, 1);
  dw.domain = ir::kInternalDomain;
  set_attr(dw, "group", int64_t{6});
  set_attr(dw, "strides", std::vector<int64_t>{2, 2});
  set_attr(dw, "pads", std::vector<int64_t>{1, 0, 1, 1});
  set_attr(dw, "activation", std::string("Clip"));
  set_attr(dw, "act_alpha", 0.0f);
  set_attr(dw, "act_beta", 6.0f);
  for (DType dt : {DType::float32, DType::float16}) {
    auto r = check_tactic(*find_tactic(ir::OpKind::FusedConv, "cuda_depthwise", cu), dw,
                          {random_tensor(dt, {2, 6, 11, 9}, 13), random_tensor(dt, {12, 1, 3, 3}, 14), random_tensor(DType::float32, {12}, 15)},
                          {false, true, true}, 1, {Layout::nhwc}, Layout::nhwc);
    expect_close(r, dt == DType::float32 ? 1e-4 : 2e-2, std::string("depthwise nhwc ") + dtype_name(dt));
  }
}

}  // namespace
}  // namespace tac
