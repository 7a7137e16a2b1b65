// Every elementwise-family tactic against the reference kernel (check_tactic) on random data
// with odd sizes, broadcasting, batch > 1, and special values (0, -0, denormals, +-inf, NaN,
// large |x|) for the math functions; each at 1 and 3 threads.
//
// Bounds: |got - want| <= atol + rtol |want|, NaN only where the reference is NaN.
// - Correctly rounded float ops (Add/Sub/Mul/Div/Max/Min/Where, Relu, Neg, Abs, Sqrt,
//   Reciprocal, MaxPool, data movement) must match exactly.
// - Polynomial math (exp, sigmoid, tanh, erf, gelu): rtol 2e-6 (a few float ulps); atol 1e-37
//   so results in the denormal range may differ in their last denormal bits. Gelu's tanh form
//   evaluates u = c (x + 0.044715 x^3) in float, whose rounding is amplified by |2u| in
//   sigmoid(2u) for x << 0: rtol 1e-5 there. The reference's exact Gelu computes 1 + erf(z) in
//   float64, so it carries an absolute error ~1e-16 (it gives -0 for x = -9 where the true value
//   is -7e-19), and its tanh form 1 + tanh(u) likewise: atol 1e-15 for Gelu.
// - Sums (Softmax, LayerNorm, reductions, pooling averages, BatchNorm): rtol 1e-5 plus an atol
//   of 1e-5 times the operands' scale, because a float result that cancels to near zero has an
//   error relative to its operands, not to itself.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/tactic_check.h"

namespace tac::kernels {
namespace {

struct Bound {
  double rtol = 0, atol = 0;
};

// Runs the tactic at 1 and 3 threads; skips tactics whose ISA the machine lacks.
void expect_tactic(const char* name, const ir::Node& n, const std::vector<Tensor>& in, const std::vector<bool>& cmask, Bound b,
                   bool expect_applies = true) {
  const Tactic* t = find_tactic(n.op, name);
  ASSERT_NE(t, nullptr) << n.op_type << " " << name;
  for (int threads : {1, 3}) {
    TacticCheck r = check_tactic(*t, n, in, cmask, threads);
    if (!r.status && r.status.kind() == ErrorKind::not_applicable) {
      const std::string why = r.status.to_string();
      if (why.find("needs AVX") != std::string::npos) return;
      EXPECT_FALSE(expect_applies) << n.op_type << " " << name << ": " << why;
      return;
    }
    ASSERT_TRUE(r.status.is_ok()) << n.op_type << " " << name << ": " << r.status.to_string();
    EXPECT_TRUE(expect_applies) << n.op_type << " " << name << " applied";
    ASSERT_EQ(r.outputs.size(), r.expected.size());
    for (size_t k = 0; k < r.outputs.size(); ++k) {
      int bad = 0;
      for (int64_t i = 0; i < r.expected[k].numel() && bad < 5; ++i) {
        const double want = r.expected[k].get_f64(i), got = r.outputs[k].get_f64(i);
        const bool ok = std::isnan(want) ? std::isnan(got)
                                         : (got == want || std::fabs(got - want) <= b.atol + b.rtol * std::fabs(want));
        if (!ok) {
          ++bad;
          ADD_FAILURE() << n.op_type << " " << name << " threads=" << threads << " out" << k << "[" << i << "]: got " << got
                        << " want " << want;
        }
      }
    }
  }
}

void expect_both(const ir::Node& n, const std::vector<Tensor>& in, const std::vector<bool>& cmask, Bound b, bool applies = true) {
  expect_tactic("avx512", n, in, cmask, b, applies);
  expect_tactic("avx2", n, in, cmask, b, applies);
}

Tensor scaled(Tensor t, double k, double shift = 0) {
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, t.get_f64(i) * k + shift);
  return t;
}

// Random normal(0, 4) with the special values spliced in at the front.
Tensor wide(Shape s, uint64_t seed, bool with_nan = true) {
  Tensor t = scaled(random_tensor(DType::float32, std::move(s), seed), 4.0);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> sp = {0.0, -0.0, 1e-40, -1e-40, inf, -inf, 1e-3, -1e-3, 0.5, -0.5, 0.625, -0.625, 3.9, -3.9, 9.0,
                            -9.0, 15.0, -15.0, 30.0, -30.0, 87.0, -87.0, 88.5, -88.5, 89.0, -89.0, 100.0, -100.0, 1e4, -1e4};
  if (with_nan) sp.push_back(std::nan(""));
  for (size_t i = 0; i < sp.size() && static_cast<int64_t>(i) < t.numel(); ++i) t.set_f64(static_cast<int64_t>(i), sp[i]);
  return t;
}

Tensor ints(DType dt, Shape s, std::vector<int64_t> v) {
  Tensor t = Tensor::create(dt, std::move(s)).value();
  for (size_t i = 0; i < v.size(); ++i) t.set_i64(static_cast<int64_t>(i), v[i]);
  return t;
}
Tensor scalar_f(float v) {
  Tensor t = Tensor::create(DType::float32, {}).value();
  t.set_f64(0, v);
  return t;
}

const std::vector<Shape> kUnaryShapes = {{1}, {7}, {3, 5, 17}, {2, 64, 33}, {2, 300, 129}};

TEST(ElementwiseTactics, UnaryMathOnWideRanges) {
  const Bound exact{0, 0}, poly{2e-6, 1e-37};
  struct Case {
    const char* op;
    Bound b;
  };
  for (Case c : {Case{"Relu", exact}, Case{"Neg", exact}, Case{"Abs", exact}, Case{"Sqrt", exact}, Case{"Reciprocal", exact},
                 Case{"Exp", poly}, Case{"Sigmoid", poly}, Case{"Tanh", poly}, Case{"Erf", poly}, Case{"Gelu", Bound{2e-6, 1e-15}}}) {
    uint64_t seed = 1;
    for (const Shape& s : kUnaryShapes) expect_both(make_node(c.op, 1, 1, 20), {wide(s, seed++)}, {false}, c.b);
  }
  ir::Node gt = make_node("Gelu", 1, 1, 20);
  set_attr(gt, "approximate", std::string("tanh"));
  for (const Shape& s : kUnaryShapes) expect_both(gt, {wide(s, 9)}, {false}, Bound{1e-5, 1e-15});
  ir::Node bad = make_node("Gelu", 1, 1, 20);
  set_attr(bad, "approximate", std::string("fast"));
  EXPECT_FALSE(find_tactic(ir::OpKind::Gelu, "avx2")->applies(StepDesc{&bad, {DType::float32}, {DType::float32}, {{4}}, {{4}}, {nullptr}, 1, {}, {}}));
}

TEST(ElementwiseTactics, ActivationsWithAttributes) {
  const Bound b{3e-7, 1e-37};  // two float roundings vs the float64 formula
  ir::Node lr = make_node("LeakyRelu", 1, 1);
  set_attr(lr, "alpha", 0.1f);
  ir::Node hs = make_node("HardSigmoid", 1, 1);
  set_attr(hs, "alpha", 0.3f);
  set_attr(hs, "beta", 0.4f);
  ir::Node clip6 = make_node("Clip", 1, 1, 6);
  set_attr(clip6, "min", -0.5f);
  set_attr(clip6, "max", 1.5f);
  for (const Shape& s : kUnaryShapes) {
    expect_both(lr, {wide(s, 3)}, {false}, b);
    expect_both(make_node("HardSwish", 1, 1), {wide(s, 4, false)}, {false}, b);
    expect_both(hs, {wide(s, 5, false)}, {false}, b);
    expect_both(clip6, {wide(s, 6)}, {false}, b);
    expect_both(make_node("Clip", 3, 1, 13), {wide(s, 7), scalar_f(-1.0f), scalar_f(2.0f)}, {false, true, true}, b);
    expect_both(make_node("Clip", 2, 1, 13), {wide(s, 8), scalar_f(0.0f)}, {false, false}, b);  // min only, not constant
  }
}

struct BinCase {
  Shape a, b;
};
const std::vector<BinCase> kBin = {
    {{2, 3, 17}, {2, 3, 17}},       // same shape
    {{5, 33}, {}},                  // scalar
    {{}, {4, 19}},                  // scalar first
    {{4, 5, 33}, {33}},             // row broadcast
    {{2, 8, 7, 9}, {8, 1, 1}},      // channel broadcast
    {{5, 1, 7}, {1, 6, 1}},         // both ways
    {{3, 1}, {3, 40}},              // column
    {{1, 64, 56, 56}, {64, 1, 1}},  // large channel broadcast (threads)
    {{1, 64, 56, 56}, {1, 64, 56, 56}},
};

TEST(ElementwiseTactics, BinaryBroadcastingIsExact) {
  uint64_t seed = 100;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"})
    for (const BinCase& c : kBin) {
      Tensor a = random_tensor(DType::float32, c.a, seed++), b = random_tensor(DType::float32, c.b, seed++);
      if (std::string(op) == "Max" || std::string(op) == "Min") {  // NaN propagates from either side
        a.set_f64(0, std::nan(""));
        if (b.numel() > 1) b.set_f64(1, std::nan(""));
      }
      expect_both(make_node(op, 2, 1), {a, b}, {false, false}, Bound{0, 0});
      expect_both(make_node(op, 2, 1), {a, b}, {false, true}, Bound{0, 0});
    }
}

TEST(ElementwiseTactics, PowFastPathsAndGeneral) {
  Tensor x = wide({3, 7, 11}, 11);
  for (float e : {2.0f, 0.5f, 1.0f}) expect_both(make_node("Pow", 2, 1), {x, scalar_f(e)}, {false, true}, Bound{0, 0});
  // general exponents (powf, < 1 ulp), broadcast and not constant; positive bases
  Tensor base = scaled(random_tensor(DType::float32, {4, 5, 6}, 12), 0.5, 3.0);
  for (const BinCase& c : std::vector<BinCase>{{{4, 5, 6}, {}}, {{4, 5, 6}, {6}}, {{4, 5, 6}, {4, 5, 6}}})
    expect_both(make_node("Pow", 2, 1), {base, random_tensor(DType::float32, c.b, 13)}, {false, false}, Bound{2e-7, 0});
}

TEST(ElementwiseTactics, WhereBroadcasting) {
  uint64_t seed = 200;
  for (const auto& s : std::vector<std::vector<Shape>>{{{2, 3, 17}, {2, 3, 17}, {2, 3, 17}},
                                                       {{1, 1, 5, 5}, {2, 4, 5, 5}, {}},
                                                       {{7, 1}, {1, 9}, {7, 9}},
                                                       {{300, 257}, {300, 257}, {257}}})
    expect_both(make_node("Where", 3, 1),
                {random_tensor(DType::boolean, s[0], seed++), random_tensor(DType::float32, s[1], seed++),
                 random_tensor(DType::float32, s[2], seed++)},
                {false, false, false}, Bound{0, 0});
}

TEST(ElementwiseTactics, SoftmaxLastAxis) {
  uint64_t seed = 300;
  for (const Shape& s : std::vector<Shape>{{5, 1}, {4, 16}, {2, 3, 37}, {3, 300}, {1, 4, 128, 128}})
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      Tensor x = scaled(random_tensor(DType::float32, s, seed++), 5.0);
      expect_both(make_node(op, 1, 1, 13), {x}, {false}, Bound{1e-5, 1e-30});
      ir::Node pos = make_node(op, 1, 1, 13);
      set_attr(pos, "axis", static_cast<int64_t>(s.size() - 1));
      expect_both(pos, {x}, {false}, Bound{1e-5, 1e-30});
      ir::Node old = make_node(op, 1, 1, 11);  // opset 11: coerced to 2-D at axis 1
      expect_both(old, {x}, {false}, Bound{1e-5, 1e-30}, s.size() == 2);
      ir::Node first = make_node(op, 1, 1, 13);
      set_attr(first, "axis", int64_t{0});
      expect_both(first, {x}, {false}, Bound{}, false);
    }
}

TEST(ElementwiseTactics, LayerNormalization) {
  uint64_t seed = 400;
  for (const Shape& s : std::vector<Shape>{{1, 128, 256}, {2, 7, 33}, {3, 5}, {4, 1}})
    for (bool bias : {true, false})
      for (int64_t axis : {int64_t{-1}, int64_t{1}}) {
        ir::Node n = make_node("LayerNormalization", bias ? 3 : 2, 1);
        set_attr(n, "axis", axis);
        set_attr(n, "epsilon", 1e-3f);
        const size_t ax = static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(s.size()) : axis);
        Shape ps(s.begin() + static_cast<std::ptrdiff_t>(ax), s.end());
        std::vector<Tensor> in = {scaled(random_tensor(DType::float32, s, seed++), 3.0, 1.0),
                                  random_tensor(DType::float32, ps, seed++)};
        if (bias) in.push_back(random_tensor(DType::float32, ps, seed++));
        expect_both(n, in, {false, true, true}, Bound{1e-5, 3e-5});
      }
}

TEST(ElementwiseTactics, ReduceTrailingAxes) {
  uint64_t seed = 500;
  Tensor x = random_tensor(DType::float32, {3, 5, 7, 300}, seed++);
  for (const char* op : {"ReduceSum", "ReduceMean"}) {
    for (int64_t keep : {0, 1}) {
      ir::Node n = make_node(op, 2, 1, 18);
      set_attr(n, "keepdims", keep);
      expect_both(n, {x, ints(DType::int64, {1}, {-1})}, {false, true}, Bound{1e-5, 1e-4});
      expect_both(n, {x, ints(DType::int64, {2}, {3, 2})}, {false, true}, Bound{1e-5, 1e-3});
      expect_both(n, {x, ints(DType::int64, {1}, {1})}, {false, true}, Bound{}, false);
    }
    ir::Node all = make_node(op, 1, 1, 18);  // no axes: everything
    expect_both(all, {x}, {false}, Bound{1e-5, 1e-2});
  }
  ir::Node old = make_node("ReduceMean", 1, 1, 13);
  set_attr(old, "axes", std::vector<int64_t>{-1});
  expect_both(old, {random_tensor(DType::float32, {4, 1000}, seed++)}, {false}, Bound{1e-5, 1e-6});
}

TEST(ElementwiseTactics, BatchNormalizationInference) {
  uint64_t seed = 600;
  for (const Shape& s : std::vector<Shape>{{2, 5, 7, 9}, {1, 64, 56, 56}, {3, 4}}) {
    const int64_t C = s[1];
    Tensor var = random_tensor(DType::float32, {C}, seed++);
    for (int64_t i = 0; i < C; ++i) var.set_f64(i, std::fabs(var.get_f64(i)) + 0.1);
    std::vector<Tensor> in = {random_tensor(DType::float32, s, seed++), random_tensor(DType::float32, {C}, seed++),
                              random_tensor(DType::float32, {C}, seed++), random_tensor(DType::float32, {C}, seed++), var};
    ir::Node n = make_node("BatchNormalization", 5, 1, 15);
    expect_both(n, in, {false, true, true, true, true}, Bound{1e-5, 3e-5});
    expect_both(n, in, {false, false, false, false, false}, Bound{1e-5, 3e-5});
  }
}

ir::Node pool_node(const char* op, std::vector<int64_t> k, std::vector<int64_t> st, std::vector<int64_t> pads, int64_t ceil,
                   int64_t include_pad = 0) {
  ir::Node n = make_node(op, 1, 1, 19);
  set_attr(n, "kernel_shape", std::move(k));
  set_attr(n, "strides", std::move(st));
  set_attr(n, "pads", std::move(pads));
  set_attr(n, "ceil_mode", ceil);
  if (std::string(op) == "AveragePool") set_attr(n, "count_include_pad", include_pad);
  return n;
}

TEST(ElementwiseTactics, Pooling) {
  uint64_t seed = 700;
  struct P {
    std::vector<int64_t> k, s, pads;
    int64_t ceil;
  };
  const std::vector<P> ps = {{{3, 3}, {2, 2}, {1, 1, 1, 1}, 0}, {{3, 3}, {2, 2}, {1, 1, 1, 1}, 1}, {{2, 2}, {2, 2}, {0, 0, 0, 0}, 1},
                             {{3, 2}, {1, 1}, {0, 1, 2, 0}, 0}, {{3, 3}, {3, 3}, {1, 0, 1, 1}, 1}, {{1, 5}, {1, 2}, {0, 2, 0, 2}, 0},
                             {{7, 7}, {1, 1}, {3, 3, 3, 3}, 0}};
  for (const Shape& s : std::vector<Shape>{{1, 3, 17, 19}, {2, 2, 8, 40}, {1, 1, 5, 5}}) {
    Tensor x = random_tensor(DType::float32, s, seed++);
    for (const P& p : ps) {
      expect_both(pool_node("MaxPool", p.k, p.s, p.pads, p.ceil), {x}, {false}, Bound{0, 0});
      for (int64_t inc : {0, 1}) expect_both(pool_node("AveragePool", p.k, p.s, p.pads, p.ceil, inc), {x}, {false}, Bound{1e-5, 1e-6});
    }
    ir::Node same = make_node("MaxPool", 1, 1, 19);
    set_attr(same, "kernel_shape", std::vector<int64_t>{3, 3});
    set_attr(same, "strides", std::vector<int64_t>{2, 2});
    set_attr(same, "auto_pad", std::string("SAME_UPPER"));
    expect_both(same, {x}, {false}, Bound{0, 0});
    expect_both(make_node("GlobalAveragePool", 1, 1), {x}, {false}, Bound{1e-5, 1e-6});
    expect_both(make_node("GlobalMaxPool", 1, 1), {x}, {false}, Bound{0, 0});
  }
  Tensor big = random_tensor(DType::float32, {1, 64, 112, 112}, seed++);
  expect_both(pool_node("MaxPool", {3, 3}, {2, 2}, {1, 1, 1, 1}, 0), {big}, {false}, Bound{0, 0});
  ir::Node dil = pool_node("MaxPool", {3, 3}, {1, 1}, {0, 0, 0, 0}, 0);
  set_attr(dil, "dilations", std::vector<int64_t>{2, 2});
  expect_both(dil, {random_tensor(DType::float32, {1, 1, 9, 9}, 1)}, {false}, Bound{}, false);
}

TEST(ElementwiseTactics, Transpose) {
  uint64_t seed = 800;
  struct T {
    Shape s;
    std::vector<int64_t> perm;
    bool blocked;
  };
  for (const T& t : std::vector<T>{{{2, 5, 7, 3}, {0, 2, 1, 3}, true},
                                   {{37, 29}, {1, 0}, true},
                                   {{3, 33, 17}, {0, 2, 1}, true},
                                   {{1, 300, 70}, {0, 2, 1}, true},
                                   {{4, 5, 6}, {2, 0, 1}, true},   // merges to a 2-D swap [20,6]
                                   {{2, 3, 4, 5}, {0, 3, 1, 2}, true},  // batched [2,12,5] swap
                                   {{2, 3, 4}, {1, 0, 2}, true},
                                   {{2, 3, 4, 5}, {3, 1, 0, 2}, false},
                                   {{2, 1, 4, 5}, {1, 0, 2, 3}, true},
                                   {{3, 4, 5}, {}, false}})
    for (DType dt : {DType::float32, DType::int64, DType::uint8}) {
      ir::Node n = make_node("Transpose", 1, 1);
      if (!t.perm.empty()) set_attr(n, "perm", t.perm);
      Tensor x = random_tensor(dt, t.s, seed++);
      expect_tactic("generic", n, {x}, {false}, Bound{});
      expect_tactic("blocked", n, {x}, {false}, Bound{}, t.blocked);
    }
}

TEST(ElementwiseTactics, ConcatSplitGatherSliceCopy) {
  uint64_t seed = 900;
  for (int64_t axis : {0, 1, -1}) {
    ir::Node c = make_node("Concat", 3, 1);
    set_attr(c, "axis", axis);
    Shape a = {4, 3, 5}, b = a, d = a;
    const size_t ax = static_cast<size_t>(axis < 0 ? 2 : axis);
    b[ax] = 1;
    d[ax] = 7;
    expect_tactic("copy", c,
                  {random_tensor(DType::float32, a, seed++), random_tensor(DType::float32, b, seed++),
                   random_tensor(DType::float32, d, seed++)},
                  {false, false, false}, Bound{});
  }
  ir::Node sp = make_node("Split", 2, 3, 13);
  set_attr(sp, "axis", int64_t{-1});
  expect_tactic("copy", sp, {random_tensor(DType::int32, {3, 4, 10}, seed++), ints(DType::int64, {3}, {2, 5, 3})}, {false, true}, Bound{});
  ir::Node sp0 = make_node("Split", 1, 2, 11);
  expect_tactic("copy", sp0, {random_tensor(DType::float32, {6, 4}, seed++)}, {false}, Bound{});

  for (DType it : {DType::int64, DType::int32}) {
    ir::Node g = make_node("Gather", 2, 1);
    expect_tactic("copy", g, {random_tensor(DType::float32, {11, 24}, seed++), random_tensor(it, {2, 7}, seed++)}, {false, false}, Bound{});
    expect_tactic("copy", g, {random_tensor(DType::float32, {6}, seed++), random_tensor(it, {5}, seed++)}, {false, false}, Bound{});
  }
  ir::Node g1 = make_node("Gather", 2, 1);
  set_attr(g1, "axis", int64_t{1});
  expect_tactic("copy", g1, {random_tensor(DType::float32, {6, 6}, seed++), random_tensor(DType::int64, {3}, seed++)}, {false, false},
                Bound{}, false);

  Tensor x = random_tensor(DType::float32, {4, 9, 10}, seed++);
  ir::Node sl = make_node("Slice", 4, 1, 13);
  expect_tactic("copy", sl, {x, ints(DType::int64, {2}, {1, -8}), ints(DType::int64, {2}, {3, 100}), ints(DType::int64, {2}, {0, 2})},
                {false, true, true, true}, Bound{});
  ir::Node sl2 = make_node("Slice", 3, 1, 13);
  expect_tactic("copy", sl2, {x, ints(DType::int32, {2}, {0, 2}), ints(DType::int32, {2}, {4, 5})}, {false, false, false}, Bound{});
  ir::Node sl3 = make_node("Slice", 5, 1, 13);
  expect_tactic("copy", sl3,
                {x, ints(DType::int64, {1}, {0}), ints(DType::int64, {1}, {9}), ints(DType::int64, {1}, {1}), ints(DType::int64, {1}, {2})},
                {false, true, true, true, true}, Bound{}, false);

  for (const char* op : {"Identity", "Flatten"})
    expect_tactic("copy", make_node(op, 1, 1), {random_tensor(DType::int64, {3, 4, 5}, seed++)}, {false}, Bound{});
  expect_tactic("copy", make_node("Reshape", 2, 1), {random_tensor(DType::float32, {3, 4, 5}, seed++), ints(DType::int64, {2}, {-1, 5})},
                {false, true}, Bound{});
}

}  // namespace
}  // namespace tac::kernels
