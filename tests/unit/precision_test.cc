// Precision per node (src/builder/precision.h): the bf16 / int8 tactics against the reference
// kernel, the Cast / QuantizeLinear steps exactly, the rewrite on and off on real models, and
// route validation.
//
// Tolerances:
//   bf16 tactics vs the reference (which computes in double from the same bf16 operands and
//   rounds once to bf16): |got - want| <= 2^-7 |want| + 4e-3 sqrt(K): the output's own rounding
//   (one bf16 ulp, 2^-8 relative) and fp32 accumulation order, K the reduction length (outputs
//   are ~sqrt(K) in size with N(0,1) data).
//   int8 tactics vs the reference (which dequantizes the same int8 operands exactly): the integer
//   products are exact, only fp32 scaling differs: 1e-4 (|want| + 1).
//   Whole models against the fp32 reference: bf16 cos >= 0.999 and relative l2 <= 3e-2 (bf16
//   rounding of every layer's input and output accumulates: squeezenet1.1's softmax output is at
//   l2 1.4e-2 even with every bf16 conv computed by the reference kernel; resnet18, bert and
//   mobilenet logits at 4-5e-3); int8 cos >= 0.99 and relative l2 <= 0.15 (per-tensor activation
//   scales calibrated on the model's test inputs).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "builder/precision.h"
#include "builder_test_util.h"
#include "io/onnx_import.h"
#include "io/test_case.h"
#include "ir/epilogue.h"
#include "kernels/tactic_check.h"
#include "tuner/accuracy.h"

namespace tac {
namespace {

using kernels::check_tactic;
using kernels::find_tactic;
using kernels::make_node;
using kernels::random_tensor;
using kernels::set_attr;

bool has_bf16() { return kernels::cpu_features().avx512_bf16; }
bool has_vnni() { return kernels::cpu_features().avx512_vnni; }

// Random int8 / uint8 data over the full range (random_tensor's integers are small).
Tensor random_q(DType dt, Shape s, uint64_t seed) {
  Tensor f = random_tensor(DType::float32, s, seed);
  Tensor q = Tensor::create(dt, s).value();
  for (int64_t i = 0; i < q.numel(); ++i) {
    double v = std::nearbyint(f.get_f64(i) * 50.0);
    q.set_f64(i, dt == DType::uint8 ? std::clamp(std::fabs(v), 0.0, 255.0) : std::clamp(v, -127.0, 127.0));
  }
  return q;
}

void set_floats(ir::Node& n, const std::string& k, std::vector<float> v) {
  ir::Attribute a;
  a.type = ir::Attribute::Type::floats;
  a.floats = std::move(v);
  n.attrs[k] = a;
}

std::vector<float> random_scales(int64_t n, uint64_t seed) {
  Tensor t = random_tensor(DType::float32, {n}, seed);
  std::vector<float> s(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) s[static_cast<size_t>(i)] = 0.002f + 0.01f * std::fabs(t.data<float>()[i]);
  return s;
}

// ---- Cast and QuantizeLinear steps: exact ----

// A Cast of `x` to ONNX type `to` through tactic `t` (2 threads; input and output in layout `l`)
// matches the reference bit for bit (a blocked output's padding staying zero: check_tactic checks it).
void expect_cast_exact(const kernels::Tactic& t, int64_t to, const Tensor& x, ir::Layout l = ir::Layout::nchw) {
  ir::Node n = make_node("Cast", 1, 1, 19);
  set_attr(n, "to", to);
  auto r = l == ir::Layout::nchw ? check_tactic(t, n, {x}, {false}, 2) : check_tactic(t, n, {x}, {false}, 2, {l}, l);
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  EXPECT_EQ(r.max_abs_diff, 0.0);
}

TEST(PrecisionTactics, CastBf16MatchesTheReferenceExactly) {
  if (!has_bf16()) GTEST_SKIP() << "no AVX512-BF16";
  const kernels::Tactic* t = find_tactic(ir::OpKind::Cast, "cast_bf16_avx512");
  ASSERT_NE(t, nullptr);
  for (int64_t n : {1, 15, 31, 33, 1000, 70001}) {
    SCOPED_TRACE(n);
    expect_cast_exact(*t, 16, random_tensor(DType::float32, {n}, 3 + n));
    expect_cast_exact(*t, 1, random_tensor(DType::bfloat16, {3, n}, 5 + n));
  }
  // In the layout rewrite's layouts, both ways, the padding of blocked ones staying zero
  // (check_tactic checks it).
  ASSERT_TRUE(t->layouts);
  for (ir::Layout l : {ir::Layout::nhwc, ir::Layout::nchw16c, ir::Layout::nchw8c}) {
    SCOPED_TRACE(ir::layout_name(l));
    for (int64_t to : {16, 1})
      expect_cast_exact(*t, to, random_tensor(to == 16 ? DType::float32 : DType::bfloat16, {2, 21, 5, 7}, 9 + to), l);
  }
  // Not fp32 <-> bf16: not applicable.
  ir::Node to16 = make_node("Cast", 1, 1, 19);
  set_attr(to16, "to", int64_t{10});
  auto r = check_tactic(*t, to16, {random_tensor(DType::float32, {8}, 1)}, {false});
  EXPECT_EQ(r.status.kind(), ErrorKind::not_applicable);
}

// fp32 <-> fp16 (the boundary Casts of a model stored in fp16): bit-exact with the reference's IEEE
// conversion, on values that round to fp16 subnormals, overflow to Inf and sit on rounding ties.
TEST(PrecisionTactics, CastFp16MatchesTheReferenceExactly) {
  if (!kernels::cpu_features().avx512) GTEST_SKIP() << "no AVX-512";
  const kernels::Tactic* t = find_tactic(ir::OpKind::Cast, "cast_fp16_avx512");
  ASSERT_NE(t, nullptr);
  for (int64_t n : {1, 15, 33, 1000, 70001}) {
    SCOPED_TRACE(n);
    Tensor x = random_tensor(DType::float32, {n}, 7 + n);
    float* v = x.data<float>();
    const float scales[] = {1.0f, 1e-6f, 3e-8f, 7e4f, 1e5f};
    for (int64_t i = 0; i < n; ++i) v[i] *= scales[i % 5];
    if (n > 4) {
      v[0] = 65519.0f;                              // rounds down to 65504
      v[1] = 65520.0f;                              // the first value that rounds to Inf
      v[2] = 1.0f + 1.0f / 2048.0f;                 // a tie between 1 and the next fp16: to even
      v[3] = -std::numeric_limits<float>::infinity();
    }
    expect_cast_exact(*t, 10, x);
    expect_cast_exact(*t, 1, random_tensor(DType::float16, {3, n}, 5 + n));
  }
  // In the layout rewrite's layouts.
  ASSERT_TRUE(t->layouts);
  for (ir::Layout l : {ir::Layout::nhwc, ir::Layout::nchw16c}) {
    SCOPED_TRACE(ir::layout_name(l));
    for (int64_t to : {10, 1})
      expect_cast_exact(*t, to, random_tensor(to == 10 ? DType::float32 : DType::float16, {2, 21, 5, 7}, 11 + to), l);
  }
  // fp32 -> bf16 is the other tactic's.
  ir::Node to_bf16 = make_node("Cast", 1, 1, 19);
  set_attr(to_bf16, "to", int64_t{16});
  auto r = check_tactic(*t, to_bf16, {random_tensor(DType::float32, {8}, 1)}, {false});
  EXPECT_EQ(r.status.kind(), ErrorKind::not_applicable);
}

TEST(PrecisionTactics, QuantizeMatchesTheReferenceExactly) {
  const kernels::Tactic* t = find_tactic(ir::OpKind::QuantizeLinear, "quantize_avx512");
  ASSERT_NE(t, nullptr);
  if (!kernels::cpu_features().avx512) GTEST_SKIP() << "no AVX-512";
  for (DType dt : {DType::int8, DType::uint8}) {
    for (int64_t n : {1, 17, 1001, 40000}) {
      SCOPED_TRACE(std::to_string(n) + " " + dtype_name(dt));
      Tensor scale = Tensor::create(DType::float32, {}).value();
      scale.data<float>()[0] = 0.013f;
      Tensor zp = Tensor::create(dt, {}).value();
      zp.set_f64(0, dt == DType::uint8 ? 7 : -3);
      ir::Node q = make_node("QuantizeLinear", 3, 1, 19);
      Tensor x = random_tensor(DType::float32, {n}, 11 + n);
      for (int64_t i = 0; i < n; i += 7) x.data<float>()[i] *= 5;  // some saturate
      auto r = check_tactic(*t, q, {x, scale, zp}, {false, true, true}, 2);
      ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
      EXPECT_EQ(r.max_abs_diff, 0.0);
    }
  }
}

// ---- bf16 / int8 convolution ----

struct ConvCase {
  const char* what;
  Shape x, w;
  std::vector<int64_t> strides, pads;
  int64_t group = 1;
};
std::vector<ConvCase> conv_cases() {
  return {{"3x3 s2 odd", {1, 3, 9, 7}, {5, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}},
          {"3x3 batch2", {2, 17, 11, 13}, {19, 17, 3, 3}, {}, {1, 1, 1, 1}},
          {"1x1 64", {1, 64, 7, 9}, {33, 64, 1, 1}, {}, {}},
          {"group3 asym pads", {1, 6, 15, 14}, {9, 2, 3, 3}, {}, {0, 1, 2, 1}, 3},
          {"depthwise s2", {1, 20, 16, 15}, {20, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, 20},
          {"7x7 s2 first layer", {1, 3, 23, 21}, {16, 3, 7, 7}, {2, 2}, {3, 3, 3, 3}}};
}

ir::Node conv_node(const ConvCase& c, bool fused, ir::Epilogue ep) {
  ir::Node n = make_node(fused ? "FusedConv" : "Conv", fused ? 4 : 3, 1);
  if (fused) n.domain = "tactician";
  if (!c.strides.empty()) set_attr(n, "strides", c.strides);
  if (!c.pads.empty()) set_attr(n, "pads", c.pads);
  if (c.group != 1) set_attr(n, "group", c.group);
  if (fused) ir::set_epilogue(n, ep);
  return n;
}

Shape conv_out_shape(const ConvCase& c) {
  ir::Node plain = conv_node(c, false, {});
  auto r = check_tactic(*find_tactic(ir::OpKind::Conv, "reference"), plain,
                        {random_tensor(DType::float32, c.x, 1), random_tensor(DType::float32, c.w, 2), Tensor()},
                        {false, true, false});
  return r.expected.at(0).shape();
}

TEST(PrecisionTactics, OnednnBf16ConvAgainstReference) {
  if (!has_bf16()) GTEST_SKIP() << "no AVX512-BF16";
  using A = ir::Epilogue::Act;
  int checked = 0;
  for (const ConvCase& c : conv_cases()) {
    const Shape y = conv_out_shape(c);
    const double K = static_cast<double>(c.w[1] * c.w[2] * c.w[3]);
    for (int variant = 0; variant < 4; ++variant) {
      SCOPED_TRACE(std::string(c.what) + " variant " + std::to_string(variant));
      const bool fused = variant > 0, bias = variant != 1, res = variant == 3;
      ir::Epilogue ep{variant == 2 ? A::relu : variant == 3 ? A::clip : A::none, -0.5f, 3.0f};
      ir::Node n = conv_node(c, fused, ep);
      std::vector<Tensor> ins = {random_tensor(DType::bfloat16, c.x, 10), random_tensor(DType::bfloat16, c.w, 11),
                                 bias ? random_tensor(DType::float32, {c.w[0]}, 12) : Tensor()};
      if (fused) ins.push_back(res ? random_tensor(DType::bfloat16, y, 13) : Tensor());
      std::vector<bool> mask = {false, true, true, false};
      mask.resize(ins.size());
      const kernels::Tactic* t = find_tactic(fused ? ir::OpKind::FusedConv : ir::OpKind::Conv, "onednn_bf16");
      ASSERT_NE(t, nullptr);
      ASSERT_TRUE(t->layouts);
      // nchw (reordered inside), then each layout of the layout rewrite read and written as it
      // is (the residual in the output's), and a first layer reading nchw and writing the layout.
      using L = ir::Layout;
      const std::pair<L, L> layouts[] = {{L::nchw, L::nchw},       {L::nhwc, L::nhwc}, {L::nchw16c, L::nchw16c},
                                         {L::nchw8c, L::nchw8c},   {L::nchw, L::nhwc}, {L::nchw, L::nchw16c}};
      for (const auto& [li, lo] : layouts) {
        SCOPED_TRACE(std::string(ir::layout_name(li)) + " -> " + ir::layout_name(lo));
        std::vector<L> in_l(ins.size(), L::nchw);
        in_l[0] = li;
        if (in_l.size() > 3) in_l[3] = lo;
        auto r = check_tactic(*t, n, ins, mask, 1 + variant % 2, in_l, lo);
        ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
        ASSERT_EQ(r.outputs.at(0).dtype(), DType::bfloat16);
        for (int64_t i = 0; i < r.outputs[0].numel(); ++i) {
          const double g = r.outputs[0].get_f64(i), w = r.expected[0].get_f64(i);
          ASSERT_LE(std::fabs(g - w), std::ldexp(std::fabs(w), -7) + 4e-3 * std::sqrt(K)) << "at " << i;
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 24 * 6);
}

// int8 outputs: fp32 within 1e-4 (|want| + 1); quantized (y_scale) within one step, and few of
// them off (y * (1 / y_scale) against y / y_scale at rounding ties).
void expect_int8_close(const kernels::TacticCheck& r, bool quantized) {
  int64_t off = 0;
  for (int64_t i = 0; i < r.outputs[0].numel(); ++i) {
    const double g = r.outputs[0].get_f64(i), w = r.expected[0].get_f64(i);
    if (quantized) {
      ASSERT_LE(std::fabs(g - w), 1.0) << "at " << i;
      off += g != w;
    } else {
      ASSERT_LE(std::fabs(g - w), 1e-4 * (std::fabs(w) + 1)) << "at " << i;
    }
  }
  EXPECT_LE(off, r.outputs[0].numel() / 100 + 1);
  if (quantized) {  // the quantized output is not trivially saturated
    int64_t nonzero = 0;
    for (int64_t i = 0; i < r.outputs[0].numel(); ++i) nonzero += r.expected[0].get_f64(i) != 0;
    EXPECT_GT(nonzero, r.outputs[0].numel() / 10);
  }
}

TEST(PrecisionTactics, OnednnInt8ConvAgainstReference) {
  if (!has_vnni()) GTEST_SKIP() << "no AVX512-VNNI";
  using A = ir::Epilogue::Act;
  const kernels::Tactic* t = find_tactic(ir::OpKind::FusedConv, "onednn_int8");
  ASSERT_NE(t, nullptr);
  for (const ConvCase& c : conv_cases()) {
    const Shape y = conv_out_shape(c);
    for (int variant = 0; variant < 6; ++variant) {
      SCOPED_TRACE(std::string(c.what) + " variant " + std::to_string(variant));
      // 4, 5: the output quantized (y_scale) to u8 after relu / to s8 after clip.
      const bool bias = variant != 1, res = variant == 2 || variant == 3, yq = variant >= 4;
      const DType xt = variant % 2 ? DType::uint8 : DType::int8;
      ir::Node n = conv_node(c, true, {variant == 3 || variant == 4 ? A::relu : variant == 5 ? A::clip : A::none, -2.0f, 3.0f});
      set_attr(n, "x_scale", 0.02f);
      set_floats(n, "w_scales", random_scales(c.w[0], 40 + variant));
      if (yq) {
        set_attr(n, "y_scale", 0.05f);
        set_attr(n, "y_dtype", static_cast<int64_t>(variant == 4 ? DType::uint8 : DType::int8));
      }
      std::vector<Tensor> ins = {random_q(xt, c.x, 20), random_q(DType::int8, c.w, 21),
                                 bias ? random_tensor(DType::float32, {c.w[0]}, 22) : Tensor(),
                                 res ? random_tensor(DType::float32, y, 23) : Tensor()};
      auto r = check_tactic(*t, n, ins, {false, true, true, false}, 1 + variant % 2);
      ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
      ASSERT_EQ(r.outputs.at(0).dtype(), yq ? (variant == 4 ? DType::uint8 : DType::int8) : DType::float32);
      expect_int8_close(r, yq);
    }
  }
}

TEST(PrecisionTactics, Fp32TacticsRejectLowPrecisionSteps) {
  const ConvCase c = conv_cases()[1];
  ir::Node n = conv_node(c, false, {});
  for (const kernels::Tactic* t : kernels::tactics_for(ir::OpKind::Conv)) {
    if (std::string(t->name) == "reference" || std::string(t->name) == "onednn_bf16") continue;
    auto r = check_tactic(*t, n, {random_tensor(DType::bfloat16, c.x, 1), random_tensor(DType::bfloat16, c.w, 2), Tensor()},
                          {false, true, false});
    EXPECT_EQ(r.status.kind(), ErrorKind::not_applicable) << t->name;
  }
  ir::Node mm = make_node("MatMul", 2, 1);
  for (const kernels::Tactic* t : kernels::tactics_for(ir::OpKind::MatMul)) {
    if (std::string(t->name) == "reference" || std::string(t->name) == "onednn_bf16") continue;
    auto r = check_tactic(*t, mm, {random_tensor(DType::bfloat16, {5, 7}, 1), random_tensor(DType::bfloat16, {7, 3}, 2)},
                          {false, true});
    EXPECT_EQ(r.status.kind(), ErrorKind::not_applicable) << t->name;
  }
}

// ---- bf16 / int8 matmul ----

TEST(PrecisionTactics, OnednnBf16MatmulAgainstReference) {
  if (!has_bf16()) GTEST_SKIP() << "no AVX512-BF16";
  using A = ir::Epilogue::Act;
  struct MmCase {
    Shape a, b;
    bool b_const;
  };
  const std::vector<MmCase> cases = {{{1, 37}, {37, 13}, true},       {{33, 65}, {65, 129}, true},
                                     {{2, 7, 40}, {40, 31}, true},    {{3, 9, 17}, {3, 17, 5}, false},
                                     {{2, 4, 11, 16}, {2, 4, 16, 11}, false}};
  for (const MmCase& c : cases) {
    const int64_t K = c.a.back(), N = c.b.back();
    Shape y = c.a;
    y.back() = N;
    for (int variant = 0; variant < 3; ++variant) {
      SCOPED_TRACE(shape_to_string(c.a) + "x" + shape_to_string(c.b) + " variant " + std::to_string(variant));
      const bool fused = variant > 0;
      ir::Node n = make_node(fused ? "FusedMatMul" : "MatMul", fused ? 4 : 2, 1);
      std::vector<Tensor> ins = {random_tensor(DType::bfloat16, c.a, 30), random_tensor(DType::bfloat16, c.b, 31)};
      std::vector<bool> mask = {false, c.b_const};
      if (fused) {
        n.domain = "tactician";
        ir::set_epilogue(n, {variant == 1 ? A::gelu : A::relu, 0, 0});
        ins.push_back(random_tensor(DType::float32, {N}, 32));
        ins.push_back(variant == 2 ? random_tensor(DType::bfloat16, y, 33) : Tensor());
        mask.push_back(true);
        mask.push_back(false);
      }
      const kernels::Tactic* t = find_tactic(fused ? ir::OpKind::FusedMatMul : ir::OpKind::MatMul, "onednn_bf16");
      ASSERT_NE(t, nullptr);
      auto r = check_tactic(*t, n, ins, mask, 1 + variant % 2);
      ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
      for (int64_t i = 0; i < r.outputs[0].numel(); ++i) {
        const double g = r.outputs[0].get_f64(i), w = r.expected[0].get_f64(i);
        ASSERT_LE(std::fabs(g - w), std::ldexp(std::fabs(w), -7) + 4e-3 * std::sqrt(static_cast<double>(K))) << "at " << i;
      }
    }
  }
}

TEST(PrecisionTactics, OnednnInt8MatmulAgainstReference) {
  if (!has_vnni()) GTEST_SKIP() << "no AVX512-VNNI";
  using A = ir::Epilogue::Act;
  const kernels::Tactic* t = find_tactic(ir::OpKind::FusedMatMul, "onednn_int8");
  ASSERT_NE(t, nullptr);
  struct MmCase {
    Shape a, b;
    bool trans_b;
  };
  const std::vector<MmCase> cases = {{{1, 37}, {37, 13}, false}, {{33, 65}, {65, 129}, false},
                                     {{2, 7, 40}, {31, 40}, true}, {{5, 3, 19}, {19, 64}, false}};
  for (const MmCase& c : cases) {
    const int64_t N = c.trans_b ? c.b[0] : c.b[1];
    Shape y = c.a;
    y.back() = N;
    for (int variant = 0; variant < 6; ++variant) {
      SCOPED_TRACE(shape_to_string(c.a) + "x" + shape_to_string(c.b) + " variant " + std::to_string(variant));
      const bool yq = variant >= 4;  // output quantized: u8 after relu, s8 after gelu
      ir::Node n = make_node("FusedMatMul", 4, 1);
      n.domain = "tactician";
      if (c.trans_b) set_attr(n, "transB", int64_t{1});
      ir::set_epilogue(n, {variant == 3 || variant == 5 ? A::gelu : variant == 4 ? A::relu : A::none, 0, 0});
      set_attr(n, "x_scale", 0.03f);
      set_floats(n, "w_scales", random_scales(N, 50 + variant));
      if (yq) {
        set_attr(n, "y_scale", 0.04f);
        set_attr(n, "y_dtype", static_cast<int64_t>(variant == 4 ? DType::uint8 : DType::int8));
      }
      const DType xt = variant % 2 ? DType::uint8 : DType::int8;
      std::vector<Tensor> ins = {random_q(xt, c.a, 34), random_q(DType::int8, c.b, 35),
                                 variant != 1 ? random_tensor(DType::float32, {N}, 36) : Tensor(),
                                 variant == 2 || variant == 3 ? random_tensor(DType::float32, y, 37) : Tensor()};
      auto r = check_tactic(*t, n, ins, {false, true, true, false}, 1 + variant % 2);
      ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
      expect_int8_close(r, yq);
    }
  }
}

// ---- the rewrite on real models ----

struct ModelRun {
  builder::Plan plan;
  std::vector<tuner::Metrics> metrics;  // per output, against the fp32 reference
};

Result<ModelRun> run_model_route(const std::string& name, const std::string& route_text) {
  const std::string dir = std::string(TAC_MODELS_DIR) + "/" + name;
  TAC_ASSIGN_OR_RETURN(ir::Model model, io::load_model(dir + "/model.onnx"));
  TAC_ASSIGN_OR_RETURN(auto data, io::load_test_data(model, dir));
  if (data.empty()) return invalid_argument("no test data in " + dir);
  builder::BuildOptions opts;
  TAC_RETURN_IF_ERROR(builder::bind_dims(model.graph, data[0].inputs, opts));
  TAC_ASSIGN_OR_RETURN(builder::Route route, builder::Route::parse(route_text));
  ModelRun out;
  TAC_ASSIGN_OR_RETURN(out.plan, builder::build_plan(model, route, opts));
  builder::Plan copy = out.plan;
  TAC_ASSIGN_OR_RETURN(auto engine, runtime::Engine::create(std::move(copy)));
  std::vector<Tensor> inputs;
  for (const Datum& d : data[0].inputs) inputs.push_back(d.tensor);
  TAC_ASSIGN_OR_RETURN(std::vector<Tensor> got, engine->run(inputs));
  for (size_t i = 0; i < got.size(); ++i) {
    TAC_ASSIGN_OR_RETURN(tuner::Metrics m, tuner::compute_metrics(got[i], data[0].outputs[i].tensor, 1e-4, 1e-3));
    out.metrics.push_back(m);
  }
  return out;
}

class PrecisionModels : public ::testing::TestWithParam<const char*> {};

TEST_P(PrecisionModels, Bf16RewriteChangesTheGraphAndStaysWithinTolerance) {
  if (!has_bf16()) GTEST_SKIP() << "no AVX512-BF16";
  if (!std::filesystem::exists(TAC_MODELS_DIR)) GTEST_SKIP() << "no model zoo";
  auto base = run_model_route(GetParam(), "");
  ASSERT_TRUE(base.is_ok()) << base.status().to_string();
  EXPECT_EQ(base->plan.report.casts, 0);
  EXPECT_EQ(test::count_op(base->plan.model.graph, "Cast"), test::count_op(base->plan.model.graph, "Cast"));
  const int base_casts = test::count_op(base->plan.model.graph, "Cast");
  auto lowp = run_model_route(GetParam(), "precision.default=bf16");
  ASSERT_TRUE(lowp.is_ok()) << lowp.status().to_string();
  EXPECT_GT(lowp->plan.report.casts, 0);
  EXPECT_EQ(test::count_op(lowp->plan.model.graph, "Cast") - base_casts, lowp->plan.report.casts);
  int bf16_steps = 0;
  for (const builder::PlanStep& st : lowp->plan.steps) bf16_steps += std::string(st.tactic->name) == "onednn_bf16";
  EXPECT_GT(bf16_steps, 0);
  // Consecutive bf16 layers exchange bf16 activations: in the CNNs, far fewer casts than two per
  // bf16 node (bert's MatMuls are separated by LayerNorm / Softmax / reshapes, which stay fp32).
  if (std::string(GetParam()) != "bert-mini-like") {
    EXPECT_LT(lowp->plan.report.casts, bf16_steps / 2);
  }
  for (size_t o = 0; o < lowp->metrics.size(); ++o) {
    EXPECT_GE(lowp->metrics[o].cos, 0.999) << "output " << o;
    EXPECT_LE(lowp->metrics[o].l2, 3e-2) << "output " << o;
  }
  std::printf("[ bf16 ] %-16s casts %d, bf16 steps %d, cos %.6f, l2 %.2e\n", GetParam(), lowp->plan.report.casts,
              bf16_steps, lowp->metrics[0].cos, lowp->metrics[0].l2);
}

TEST_P(PrecisionModels, Int8RewriteCalibratesAndStaysWithinTolerance) {
  if (!has_vnni()) GTEST_SKIP() << "no AVX512-VNNI";
  if (!std::filesystem::exists(TAC_MODELS_DIR)) GTEST_SKIP() << "no model zoo";
  auto lowp = run_model_route(GetParam(), "precision.default=int8");
  ASSERT_TRUE(lowp.is_ok()) << lowp.status().to_string();
  EXPECT_GT(lowp->plan.report.quantizes, 0);
  EXPECT_NE(lowp->plan.report.calibration.find("test_data_set"), std::string::npos) << lowp->plan.report.calibration;
  int int8_steps = 0;
  for (const builder::PlanStep& st : lowp->plan.steps) int8_steps += std::string(st.tactic->name) == "onednn_int8";
  EXPECT_GT(int8_steps, 0);
  // int8 nodes feeding only the next int8 node write int8 themselves: fewer QuantizeLinear steps.
  EXPECT_LT(lowp->plan.report.quantizes, int8_steps);
  EXPECT_TRUE(test::log_mentions(lowp->plan, "QuantizeLinear absorbed"));
  for (size_t o = 0; o < lowp->metrics.size(); ++o) {
    EXPECT_GE(lowp->metrics[o].cos, 0.99) << "output " << o;
    EXPECT_LE(lowp->metrics[o].l2, 0.15) << "output " << o;
  }
  std::printf("[ int8 ] %-16s quantizes %d, int8 steps %d, cos %.6f, l2 %.2e\n", GetParam(), lowp->plan.report.quantizes,
              int8_steps, lowp->metrics[0].cos, lowp->metrics[0].l2);
  // Deterministic: the same route builds the same scales.
  auto again = run_model_route(GetParam(), "precision.default=int8");
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->metrics[0].l2, lowp->metrics[0].l2);
}

// The model's own test data calibrates only a build whose inputs it fits: tiny-gpt's
// test_data_set_0 has batch 2, and a build with the batch bound to 1 (the default) calibrates on
// seeded random inputs instead of failing (it failed every int8 candidate of a tune).
TEST(PrecisionCalibration, ModelTestDataOnlyWhenItFitsTheBoundShapes) {
  if (!has_vnni()) GTEST_SKIP() << "no AVX512-VNNI";
  const std::string path = std::string(TAC_MODELS_DIR) + "/tiny-gpt/model.onnx";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no model zoo";
  auto m = io::load_model(path);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  auto route = builder::Route::parse("precision.default=int8");
  ASSERT_TRUE(route.is_ok());
  builder::BuildOptions opts;
  auto b1 = builder::build_plan(*m, *route, opts);
  ASSERT_TRUE(b1.is_ok()) << b1.status().to_string();
  EXPECT_NE(b1->report.calibration.find("random"), std::string::npos) << b1->report.calibration;
  opts.dims["batch"] = 2;
  auto b2 = builder::build_plan(*m, *route, opts);
  ASSERT_TRUE(b2.is_ok()) << b2.status().to_string();
  EXPECT_NE(b2->report.calibration.find("test_data_set"), std::string::npos) << b2->report.calibration;
}

INSTANTIATE_TEST_SUITE_P(Shared, PrecisionModels, ::testing::Values("resnet18", "bert-mini-like", "mobilenet_v2"));

// ---- calibration ----

// max takes the largest |x|; pNN takes the nearest-rank percentile of |x| (the smallest seen
// value at or above which lie no more than (100 - NN)% of the values): one outlier of 100 among
// 30000 N(0,1) values is the max, and is clipped by p99.99 (rank ceil(0.9999 * 30000) = 29997).
TEST(PrecisionCalibration, MaxAndPercentileRanges) {
  test::ModelBuilder mb(17);
  mb.input("x", 1, {"1", "3", "100", "100"});
  test::initializer_random(mb, "w", {4, 3, 3, 3}, 11, 0.3f);
  mb.node("Conv", {"x", "w"}, {"y"}, "conv0");
  mb.output("y", 1, {});
  auto m = mb.load();
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  Tensor x = random_tensor(DType::float32, {1, 3, 100, 100}, 77);
  x.data<float>()[517] = 100.0f;
  std::vector<float> sorted(x.data<float>(), x.data<float>() + x.numel());
  for (float& v : sorted) v = std::fabs(v);
  std::sort(sorted.begin(), sorted.end());
  const std::vector<std::vector<Datum>> sets = {{Datum(x)}};
  auto max = builder::calibrate_ranges(*m, {"conv0"}, sets, "test", "max");
  ASSERT_TRUE(max.is_ok()) << max.status().to_string();
  ASSERT_EQ(max->ranges.count("x"), 1u);
  EXPECT_EQ(max->ranges.at("x").absmax, 100.0f);
  EXPECT_FALSE(max->ranges.at("x").nonnegative);
  auto pct = builder::calibrate_ranges(*m, {"conv0"}, sets, "test", "p99.99");
  ASSERT_TRUE(pct.is_ok()) << pct.status().to_string();
  EXPECT_EQ(pct->ranges.at("x").absmax, sorted[29996]);
  EXPECT_LT(pct->ranges.at("x").absmax, 6.0f);
  EXPECT_NE(pct->source.find("99.99th percentile"), std::string::npos) << pct->source;
  auto bad = builder::calibrate_ranges(*m, {"conv0"}, sets, "test", "p200");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("precision.calibration"), std::string::npos);
}

TEST(PrecisionCalibration, CacheFileRoundTripsExactlyAndRefusesOtherKeys) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("tac-calib-" + std::to_string(getpid()))).string();
  builder::Calibration c;
  c.source = "2 input set(s) of /data";
  c.ranges["a b/c:0"] = {0.1234567f, true};
  c.ranges["x"] = {3.0e-7f, false};
  ASSERT_TRUE(builder::save_calibration(dir, "key|1", c).is_ok());
  auto back = builder::load_calibration(dir, "key|1");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->source, c.source);
  ASSERT_EQ(back->ranges.size(), 2u);
  EXPECT_EQ(back->ranges.at("a b/c:0").absmax, 0.1234567f);  // bit-exact: the same scales as a fresh calibration
  EXPECT_TRUE(back->ranges.at("a b/c:0").nonnegative);
  EXPECT_EQ(back->ranges.at("x").absmax, 3.0e-7f);
  EXPECT_FALSE(back->ranges.at("x").nonnegative);
  EXPECT_FALSE(builder::load_calibration(dir, "key|2").has_value());
  // A damaged file is not used (the builder calibrates again and rewrites it).
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ofstream out(e.path(), std::ios::app);
    out << "garbage\n";
  }
  EXPECT_FALSE(builder::load_calibration(dir, "key|1").has_value());
  std::filesystem::remove_all(dir);
}

// ---- knobs and route validation ----

Result<ir::Model> load_zoo(const std::string& name) {
  return io::load_model(std::string(TAC_MODELS_DIR) + "/" + name + "/model.onnx");
}

TEST(PrecisionKnobs, DeclaredPerNodeWithDefaultsAtFp32) {
  if (!std::filesystem::exists(TAC_MODELS_DIR)) GTEST_SKIP() << "no model zoo";
  auto m = load_zoo("resnet18");
  ASSERT_TRUE(m.is_ok());
  auto space = builder::knob_space(*m, {});
  ASSERT_TRUE(space.is_ok()) << space.status().to_string();
  const builder::Knob* def = space->find("precision.default");
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->default_value, "fp32");
  EXPECT_EQ(def->values, builder::precision_values());
  int per_node = 0;
  std::set<std::string> groups;
  for (const builder::Knob& k : space->knobs()) {
    if (k.name.rfind("precision.", 0) != 0 || k.name == "precision.default" || k.name == "precision.calibration") continue;
    ++per_node;
    EXPECT_EQ(k.scope, builder::KnobScope::node);
    EXPECT_EQ(k.default_value, "default");
    EXPECT_EQ(k.values.front(), "default");
    EXPECT_EQ(k.group.rfind("precision:", 0), 0u);
    groups.insert(k.group);
    // The node has a tactic knob of the same name, which can pin the bf16 tactic.
    const builder::Knob* tk = space->find("tactic." + k.name.substr(10));
    ASSERT_NE(tk, nullptr) << k.name;
    if (has_bf16()) {
      EXPECT_NE(std::find(tk->values.begin(), tk->values.end(), "onednn_bf16"), tk->values.end()) << k.name;
    }
  }
  const builder::Knob* cal = space->find("precision.calibration");
  if (has_vnni()) {
    ASSERT_NE(cal, nullptr);
    EXPECT_EQ(cal->default_value, "max");
    EXPECT_EQ(cal->values, builder::calibration_methods());
  }
  if (builder::precision_values().size() > 1) {
    EXPECT_EQ(per_node, 21);  // 20 convs + the classifier
    EXPECT_LT(groups.size(), static_cast<size_t>(per_node));  // repeated layers share a group
  }
}

TEST(PrecisionKnobs, RouteErrorsNameTheKnob) {
  if (!std::filesystem::exists(TAC_MODELS_DIR)) GTEST_SKIP() << "no model zoo";
  auto m = load_zoo("resnet18");
  ASSERT_TRUE(m.is_ok());
  auto bad_node = builder::build_plan(*m, builder::Route::parse("precision.no_such_node=bf16").value(), {});
  ASSERT_FALSE(bad_node.is_ok());
  EXPECT_EQ(bad_node.status().kind(), ErrorKind::invalid_argument);
  EXPECT_NE(bad_node.status().message().find("precision.no_such_node"), std::string::npos);
  auto bad_value = builder::build_plan(*m, builder::Route::parse("precision.default=fp8").value(), {});
  ASSERT_FALSE(bad_value.is_ok());
  EXPECT_NE(bad_value.status().message().find("precision.default"), std::string::npos);
  EXPECT_NE(bad_value.status().message().find("fp32"), std::string::npos);
  if (has_bf16()) {
    // A precision other than fp32 on a node without a precision knob (a MaxPool) is unknown.
    auto pool = builder::build_plan(*m, builder::Route::parse("precision._maxpool_MaxPool=bf16").value(), {});
    ASSERT_FALSE(pool.is_ok());
    EXPECT_NE(pool.status().message().find("precision._maxpool_MaxPool"), std::string::npos);
  }
}

// int8 on a node whose weights this route's passes leave computed (mnist-cntk's classifier reads
// a Reshape of its weights until fold_constants folds it) is inactive: the node stays fp32.
TEST(PrecisionKnobs, Int8OnANodeTheRoutesPassesLeaveWithoutConstantWeightsIsInactive) {
  if (!std::filesystem::exists(TAC_MODELS_DIR)) GTEST_SKIP() << "no model zoo";
  if (!has_vnni()) GTEST_SKIP() << "no AVX512-VNNI";
  auto m = load_zoo("mnist-cntk");
  ASSERT_TRUE(m.is_ok());
  auto on = builder::build_plan(*m, builder::Route::parse("precision.Times212=int8").value(), {});
  ASSERT_TRUE(on.is_ok()) << on.status().to_string();
  EXPECT_TRUE(on->report.inactive.empty());
  EXPECT_EQ(on->report.quantizes, 1);
  auto off = builder::build_plan(*m, builder::Route::parse("pass.fold_constants=off precision.Times212=int8").value(), {});
  ASSERT_TRUE(off.is_ok()) << off.status().to_string();
  ASSERT_EQ(off->report.inactive.size(), 1u);
  EXPECT_EQ(off->report.inactive[0].rfind("precision.Times212=int8 (", 0), 0u) << off->report.inactive[0];
  EXPECT_EQ(off->report.quantizes, 0);
  EXPECT_EQ(off->route, "pass.fold_constants=off");
}

// Tactic values are conditional on the node's precision: a pin that does not apply under the
// route's precisions is inactive (reported, ignored), and routes differing only there are one.
TEST(PrecisionKnobs, TacticPinsAreConditionalOnTheNodesPrecision) {
  if (!std::filesystem::exists(TAC_MODELS_DIR)) GTEST_SKIP() << "no model zoo";
  if (!has_bf16()) GTEST_SKIP() << "no AVX512-BF16";
  auto m = load_zoo("resnet18");
  ASSERT_TRUE(m.is_ok());
  auto space = builder::knob_space(*m, {});
  ASSERT_TRUE(space.is_ok());
  const std::string conv = "_layer1_layer1.0_conv1_Conv";
  const builder::Knob* tk = space->find("tactic." + conv);
  ASSERT_NE(tk, nullptr);
  ASSERT_EQ(tk->value_precisions.count("onednn_bf16"), 1u);
  EXPECT_EQ(tk->value_precisions.at("onednn_bf16"), std::vector<std::string>{"bf16"});
  EXPECT_EQ(tk->value_precisions.at("winograd_f4x3"), std::vector<std::string>{"fp32"});
  EXPECT_EQ(tk->value_precisions.count("auto"), 0u);

  auto active = [&](const std::string& text, std::vector<std::string>* inactive = nullptr) {
    return builder::active_route(builder::Route::parse(text).value(), *space, inactive).to_string();
  };
  std::vector<std::string> why;
  // bf16 pinned on an fp32 node; fp32 pinned under precision.default=bf16; both inactive.
  EXPECT_EQ(active("tactic." + conv + "=onednn_bf16", &why), "");
  ASSERT_EQ(why.size(), 1u);
  EXPECT_NE(why[0].find("computes in fp32"), std::string::npos) << why[0];
  EXPECT_EQ(active("precision.default=bf16 tactic." + conv + "=winograd_f4x3"), "precision.default=bf16");
  // The node's own precision knob overrides the default, in both directions.
  EXPECT_EQ(active("precision." + conv + "=fp32 precision.default=bf16 tactic." + conv + "=winograd_f4x3"),
            "precision." + conv + "=fp32 precision.default=bf16 tactic." + conv + "=winograd_f4x3");
  EXPECT_EQ(active("precision." + conv + "=bf16 tactic." + conv + "=onednn_bf16"),
            "precision." + conv + "=bf16 tactic." + conv + "=onednn_bf16");
  // Values without a condition, and other knobs, are never dropped.
  EXPECT_EQ(active("precision.default=bf16 tactic." + conv + "=reference memory.inplace=off"),
            "memory.inplace=off precision.default=bf16 tactic." + conv + "=reference");

  // The builder builds the active route: the pin is reported and the heuristic chooses.
  auto pin = builder::build_plan(*m, builder::Route::parse("tactic." + conv + "=onednn_bf16").value(), {});
  ASSERT_TRUE(pin.is_ok()) << pin.status().to_string();
  EXPECT_EQ(pin->route, "");
  ASSERT_EQ(pin->report.inactive.size(), 1u);
  EXPECT_NE(pin->report.inactive[0].find("tactic." + conv + "=onednn_bf16"), std::string::npos);
  EXPECT_EQ(pin->report.casts, 0);
  auto lowered = builder::build_plan(
      *m, builder::Route::parse("precision." + conv + "=bf16 tactic." + conv + "=onednn_bf16").value(), {});
  ASSERT_TRUE(lowered.is_ok()) << lowered.status().to_string();
  EXPECT_TRUE(lowered->report.inactive.empty());
  EXPECT_EQ(lowered->report.casts, 2);  // one node: a cast in, a cast out
  bool pinned = false;
  for (const builder::TacticRanking& r : lowered->report.rankings)
    if (r.node == conv) pinned = r.chosen == "onednn_bf16" && r.why == "route";
  EXPECT_TRUE(pinned);
}

}  // namespace
}  // namespace tac
