// FusedAttention: its tactics against the reference kernel on random shapes (odd sizes, 3-D and
// 4-D, broadcast masks, threads), and the fuse_attention pass on and off against the reference
// interpreter on the original graph.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <span>
#include <tuple>

#include "backends/cuda/device.h"
#include "builder_test_util.h"
#include "io/onnx_import.h"
#include "io/test_case.h"
#include "ir/strided.h"
#include "kernels/tactic_check.h"

namespace tac {
namespace {

using kernels::check_tactic;
using kernels::random_tensor;
using test::ModelBuilder;

struct Case {
  Shape q, k, v;
  Shape mask;  // empty: no mask
  float scale;
};

// The FusedAttention node of a case.
ir::Node attention_node(bool mask, float scale) {
  ir::Node n = kernels::make_node("FusedAttention", mask ? 4 : 3, 1);
  n.domain = ir::kInternalDomain;
  kernels::set_attr(n, "scale", scale);
  return n;
}

// A CUDA tactic on `cases` in each of `types`, against the reference on the same inputs: within
// 1e-5 in fp32 (as on the CPU), about an ulp of the output type in fp16 / bf16.
void expect_cases_match(const kernels::Tactic& t, std::span<const Case> cases, std::initializer_list<DType> types,
                        uint64_t seed) {
  for (DType dt : types)
    for (const Case& c : cases) {
      const bool mask = !c.mask.empty();
      ir::Node n = attention_node(mask, c.scale);
      std::vector<Tensor> ins = {random_tensor(dt, c.q, seed), random_tensor(dt, c.k, seed + 1), random_tensor(dt, c.v, seed + 2)};
      if (mask) ins.push_back(random_tensor(dt, c.mask, seed + 3));
      seed += 4;
      auto r = check_tactic(t, n, ins, std::vector<bool>(ins.size(), false));
      ASSERT_TRUE(r.status.is_ok()) << t.name << " " << dtype_name(dt) << ": " << r.status.to_string();
      const double tol = dt == DType::float32 ? 1e-5 : dt == DType::float16 ? 4e-3 : 3e-2;
      EXPECT_LE(r.max_abs_diff, tol) << t.name << " " << dtype_name(dt) << " q=" << shape_to_string(c.q)
                                     << " mask=" << shape_to_string(c.mask);
    }
}

TEST(AttentionTactics, FusedMatchesReference) {
  const Case cases[] = {
      {{2, 3, 5, 7}, {2, 3, 7, 9}, {2, 3, 9, 4}, {}, 0.37f},
      {{2, 3, 5, 7}, {2, 3, 7, 9}, {2, 3, 9, 4}, {9}, 1.0f},
      {{2, 3, 5, 7}, {2, 3, 7, 9}, {2, 3, 9, 4}, {2, 1, 5, 9}, 0.5f},
      {{2, 3, 5, 7}, {2, 3, 7, 9}, {2, 3, 9, 4}, {5, 1}, 0.5f},
      {{4, 17, 33}, {4, 33, 19}, {4, 19, 40}, {1, 17, 19}, 0.17f},
      {{1, 12, 128, 64}, {1, 12, 64, 128}, {1, 12, 128, 64}, {1, 1, 1, 128}, 0.125f},
      {{3, 1, 1}, {3, 1, 1}, {3, 1, 1}, {}, 2.0f},
  };
  int ran = 0;
  for (const char* name : {"fused_avx512", "fused_avx2"}) {
    const kernels::Tactic* t = kernels::find_tactic(ir::OpKind::FusedAttention, name);
    ASSERT_NE(t, nullptr) << name;
    uint64_t seed = 100;
    for (const Case& c : cases)
      for (int threads : {1, 2}) {
        const bool mask = !c.mask.empty();
        ir::Node n = attention_node(mask, c.scale);
        std::vector<Tensor> ins = {random_tensor(DType::float32, c.q, seed), random_tensor(DType::float32, c.k, seed + 1),
                                   random_tensor(DType::float32, c.v, seed + 2)};
        if (mask) ins.push_back(random_tensor(DType::float32, c.mask, seed + 3));
        seed += 4;
        auto r = check_tactic(*t, n, ins, std::vector<bool>(ins.size(), false), threads);
        if (r.status.kind() == ErrorKind::not_applicable) continue;  // the CPU lacks the ISA
        ASSERT_TRUE(r.status.is_ok()) << name << ": " << r.status.to_string();
        // Each output is a convex combination of V's rows: float32 rounding keeps it within 1e-5.
        EXPECT_LE(r.max_abs_diff, 1e-5) << name << " q=" << shape_to_string(c.q) << " mask="
                                                               << shape_to_string(c.mask) << " threads=" << threads;
        ++ran;
      }
  }
  EXPECT_GT(ran, 0) << "no FusedAttention tactic ran on this CPU";
}

// The CUDA kernel (cuda_fused) on the same cases, in fp32 (within 1e-5, as on the CPU) and on
// fp16 / bf16 inputs against the reference on the same inputs (about an ulp of the output type).
// A FusedAttention node reading Q, K and V out of one packed [S, B, 3, H, D] buffer (PyTorch's
// in-projection output) and writing Y as [S, B, H, D] (ir/strided.h views, as attention_views
// leaves them). `k_rows`: K read as the rows of its packed block (d contiguous, the kernels'
// KROWS path); else from a separate [B, H, D, S] buffer behind the packed one (sk contiguous).
struct ViewsCase {
  ir::Node node;
  std::vector<Tensor> inputs;
};
ViewsCase views_case(DType dt, int64_t S, int64_t B, int64_t H, int64_t D, bool k_rows, bool mask, uint64_t seed) {
  const int64_t E = H * D;
  ViewsCase c{attention_node(mask, 0.3f), {}};
  ir::AttentionViews av;
  av.batch_dims = {B, H};
  av.sq = S, av.d = D, av.sk = S, av.dv = D;
  av.op[0] = {{B, H, S, D}, {3 * E, D, B * 3 * E, 1}, 0};
  av.op[1] = k_rows ? ir::StridedView{{B, H, D, S}, {3 * E, D, 1, B * 3 * E}, E}
                    : ir::StridedView{{B, H, D, S}, {H * D * S, D * S, S, 1}, S * B * 3 * E};
  av.op[2] = {{B, H, S, D}, {3 * E, D, B * 3 * E, 1}, 2 * E};
  av.op[3] = {{B, H, S, D}, {E, D, B * E, 1}, 0};
  av.out_shape = {S * B, E};
  ir::set_attention_views(c.node, av);
  // Q, K and V all name one buffer, large enough for the separate K too.
  Tensor packed = random_tensor(dt, {S * B * 3 * E + B * E * S}, seed);
  c.inputs = {packed, packed, packed};
  if (mask) c.inputs.push_back(random_tensor(dt, {1, S}, seed + 1));
  return c;
}

// Returns how many cases ran: a CPU tactic is not applicable where the CPU lacks its ISA.
int expect_views_match(const kernels::Tactic& t, std::initializer_list<DType> types) {
  int ran = 0;
  for (DType dt : types)
    for (bool k_rows : {true, false})
      for (bool mask : {false, true}) {
        ViewsCase c = views_case(dt, 32, 2, 3, 16, k_rows, mask, 40);
        auto r = check_tactic(t, c.node, c.inputs, std::vector<bool>(c.inputs.size(), false));
        if (t.backend == kernels::Backend::cpu && r.status.kind() == ErrorKind::not_applicable) continue;
        EXPECT_TRUE(r.status.is_ok()) << t.name << ": " << r.status.to_string();
        const double tol = dt == DType::float32 ? 1e-5 : dt == DType::float16 ? 4e-3 : 3e-2;
        EXPECT_LE(r.max_abs_diff, tol) << t.name << " " << dtype_name(dt) << " k_rows=" << k_rows << " mask=" << mask;
        ++ran;
      }
  return ran;
}

TEST(AttentionTactics, OperandViewsMatchReference) {
  int ran = 0;
  for (const char* name : {"fused_avx512", "fused_avx2"})
    ran += expect_views_match(*kernels::find_tactic(ir::OpKind::FusedAttention, name), {DType::float32});
  EXPECT_GT(ran, 0) << "no FusedAttention tactic ran on this CPU";
  if (!cuda::compiled() || !cuda::device_present()) GTEST_SKIP() << "no CUDA device: CPU tactics only";
  expect_views_match(*kernels::find_tactic(ir::OpKind::FusedAttention, "cuda_fused", kernels::Backend::cuda),
                     {DType::float32, DType::float16});
  for (const char* name : {"cuda_flash_w2", "cuda_flash_w4", "cuda_flash_w4s2", "cuda_flash_w8s2"})
    expect_views_match(*kernels::find_tactic(ir::OpKind::FusedAttention, name, kernels::Backend::cuda),
                       {DType::float16, DType::bfloat16});
}

TEST(AttentionTactics, CudaFusedMatchesReference) {
  if (!cuda::compiled()) GTEST_SKIP() << "built without the CUDA backend";
  const kernels::Tactic* t = kernels::find_tactic(ir::OpKind::FusedAttention, "cuda_fused", kernels::Backend::cuda);
  ASSERT_NE(t, nullptr);
  if (!cuda::device_present()) GTEST_SKIP() << "no CUDA device on this machine";
  const Case cases[] = {
      {{2, 3, 5, 7}, {2, 3, 7, 9}, {2, 3, 9, 4}, {}, 0.37f},
      {{2, 3, 5, 7}, {2, 3, 7, 9}, {2, 3, 9, 4}, {2, 1, 5, 9}, 0.5f},
      {{2, 3, 5, 7}, {2, 3, 7, 9}, {2, 3, 9, 4}, {5, 1}, 0.5f},
      {{4, 17, 33}, {4, 33, 19}, {4, 19, 40}, {1, 17, 19}, 0.17f},
      {{1, 12, 128, 64}, {1, 12, 64, 128}, {1, 12, 128, 64}, {1, 1, 1, 128}, 0.125f},
      {{2, 2, 37, 64}, {2, 2, 64, 45}, {2, 2, 45, 33}, {2, 1, 1, 45}, 0.125f},
      {{3, 1, 1}, {3, 1, 1}, {3, 1, 1}, {}, 2.0f},
  };
  expect_cases_match(*t, cases, {DType::float32, DType::float16, DType::bfloat16}, 300);
}

// The tensor-core kernel (cuda_flash_w2/w4/w4s2/w8s2: blocks of 2, 4 and 8 warps, one or two per
// 16 query rows): fp16 / bf16 on shapes whose head sizes and key count are multiples of 16, query
// counts that are not (a warp's last rows padded, whole warps idle in the last block), key counts
// that leave a partial chunk of 64 (48, 80) or split unevenly (48, 80) or leave the second split
// nothing (16), head sizes 64 (its exact variant) and others up to its limit of 128, broadcast
// masks; refused in fp32, for a key count that is not a multiple of 16 and for a head size above 128.
TEST(AttentionTactics, CudaFlashMatchesReference) {
  if (!cuda::compiled()) GTEST_SKIP() << "built without the CUDA backend";
  for (const char* name : {"cuda_flash_w2", "cuda_flash_w4", "cuda_flash_w4s2", "cuda_flash_w8s2"})
    ASSERT_NE(kernels::find_tactic(ir::OpKind::FusedAttention, name, kernels::Backend::cuda), nullptr) << name;
  if (!cuda::device_present()) GTEST_SKIP() << "no CUDA device on this machine";
  const Case cases[] = {
      {{1, 12, 128, 64}, {1, 12, 64, 128}, {1, 12, 128, 64}, {1, 1, 1, 128}, 0.125f},     // BERT-base, batch 1
      {{8, 12, 128, 64}, {8, 12, 64, 128}, {8, 12, 128, 64}, {8, 1, 1, 128}, 0.125f},     // batch 8
      {{4, 64, 128, 32}, {4, 64, 32, 128}, {4, 64, 128, 32}, {}, 0.17f},
      {{2, 2, 37, 64}, {2, 2, 64, 48}, {2, 2, 48, 32}, {2, 1, 37, 48}, 0.125f},           // sq = 37, sk = 48
      {{3, 70, 16}, {3, 16, 256}, {3, 256, 80}, {70, 1}, 0.3f},                           // dv = 80, sk = 256
      {{2, 20, 128}, {2, 128, 80}, {2, 80, 128}, {20, 80}, 0.09f},                        // d = dv = 128, sk = 80
      {{2, 3, 20, 64}, {2, 3, 64, 16}, {2, 3, 16, 64}, {2, 3, 20, 16}, 0.2f},             // sk = 16: one split idle
  };
  for (const char* name : {"cuda_flash_w2", "cuda_flash_w4", "cuda_flash_w4s2", "cuda_flash_w8s2"}) {
    SCOPED_TRACE(name);
    const kernels::Tactic* t = kernels::find_tactic(ir::OpKind::FusedAttention, name, kernels::Backend::cuda);
    expect_cases_match(*t, cases, {DType::float16, DType::bfloat16}, 700);
    ir::Node n = attention_node(false, 0.5f);
    for (auto [dt, sk, dh] : {std::tuple{DType::float32, int64_t{64}, int64_t{32}},
                              std::tuple{DType::float16, int64_t{45}, int64_t{32}},
                              std::tuple{DType::float16, int64_t{64}, int64_t{144}}}) {
      std::vector<Tensor> ins = {random_tensor(dt, {2, 8, dh}, 1), random_tensor(dt, {2, dh, sk}, 2),
                                 random_tensor(dt, {2, sk, 32}, 3)};
      auto r = check_tactic(*t, n, ins, std::vector<bool>(3, false));
      EXPECT_EQ(r.status.kind(), ErrorKind::not_applicable) << dtype_name(dt) << " sk=" << sk << " d=" << dh << ": "
                                                            << r.status.to_string();
    }
  }
}

TEST(AttentionTactics, MismatchedShapesAreRefused) {
  const kernels::Tactic* t = kernels::find_tactic(ir::OpKind::FusedAttention, "fused_avx2");
  ASSERT_NE(t, nullptr);
  ir::Node n = kernels::make_node("FusedAttention", 3, 1);
  kernels::StepDesc s;
  s.node = &n;
  s.in_dtypes = {DType::float32, DType::float32, DType::float32};
  s.in_shapes = {{2, 5, 7}, {3, 7, 9}, {2, 9, 4}};  // batch dims differ
  EXPECT_FALSE(t->applies(s).is_ok());
  s.in_shapes = {{2, 5, 7}, {2, 7, 9}, {2, 8, 4}};  // V's rows are not K's columns
  EXPECT_FALSE(t->applies(s).is_ok());
}

// Q [b,h,s,d] scaled by Div, Kt scaled by Mul (PyTorch's SDPA export scales both by
// sqrt(scale)), scores = MatMul(Q, Kt), Mul by a constant, + mask, Softmax, · V.
ir::Model attention_model(bool with_mask, bool scale_q, bool scale_k = false) {
  ModelBuilder m(17);
  m.input("q", 1, {"2", "3", "6", "8"});
  m.input("kt", 1, {"2", "3", "8", "6"});
  m.input("v", 1, {"2", "3", "6", "5"});
  std::string q = "q", kt = "kt";
  if (scale_q) {
    m.initializer("c", {}, {2.8284271f});
    m.node("Div", {"q", "c"}, {"qs"}, "scale_q");
    q = "qs";
  }
  if (scale_k) {
    m.initializer("ck", {}, {0.59460356f});
    m.node("Mul", {"ck", "kt"}, {"kts"}, "scale_k");
    kt = "kts";
  }
  m.node("MatMul", {q, kt}, {"s"}, "scores");
  m.initializer("f", {}, {0.7f});
  m.node("Mul", {"s", "f"}, {"s2"}, "scale_s");
  std::string sm_in = "s2";
  if (with_mask) {
    test::initializer_random(m, "mask", {2, 1, 1, 6}, 77);
    m.node("Add", {"s2", "mask"}, {"s3"}, "add_mask");
    sm_in = "s3";
  }
  auto* sm = m.node("Softmax", {sm_in}, {"p"}, "softmax");
  test::attr_i(sm, "axis", -1);
  m.node("MatMul", {"p", "v"}, {"y"}, "context");
  m.output("y", 1, {});
  auto model = m.load();
  EXPECT_TRUE(model.is_ok()) << model.status().to_string();
  return std::move(model).value();
}

TEST(BuilderPasses, FuseAttentionMakesOneNodeAndMatchesTheReference) {
  for (bool mask : {false, true})
    for (int scaled = 0; scaled < 3; ++scaled) {  // none, Q, Q and K
      const bool scale_q = scaled > 0;
      ir::Model model = attention_model(mask, scale_q, scaled == 2);
      for (const char* route : {"", "pass.fuse_attention=off"}) {
        auto e = test::build_engine(model, route);
        ASSERT_TRUE(e.is_ok()) << e.status().to_string();
        const ir::Graph& g = (*e)->plan().model.graph;
        if (*route == '\0') {
          EXPECT_EQ(test::op_list(g), "FusedAttention") << "mask=" << mask << " scaled=" << scaled;
        } else {
          EXPECT_EQ(test::count_op(g, "Softmax"), 1) << test::op_list(g);
        }
        EXPECT_EQ(test::mismatch_vs_reference(**e, model, 5, 1e-5, 1e-4), "") << "route '" << route << "' mask=" << mask;
      }
    }
}

// The FusedAttention node keeps the name of one of its MatMuls, so that node's tactic knob lists
// the fused tactics too; with the fusion off they name a tactic of another op: inactive,
// reported, ignored.
TEST(BuilderPasses, AFusedTacticPinnedWithItsFusionOffIsInactive) {
  ir::Model model = attention_model(true, false);
  auto space = builder::knob_space(model, {});
  ASSERT_TRUE(space.is_ok()) << space.status().to_string();
  std::string knob, fused;
  for (const builder::Knob& k : space->knobs())
    for (const std::string& v : k.values)
      if (fused.empty() && v.rfind("fused_", 0) == 0) {
        knob = k.name;
        fused = v;
      }
  if (fused.empty()) GTEST_SKIP() << "no fused attention tactic on this CPU";
  const std::string pin = knob + "=" + fused;
  auto on = builder::build_plan(model, builder::Route::parse(pin).value(), {});
  ASSERT_TRUE(on.is_ok()) << on.status().to_string();
  EXPECT_TRUE(on->report.inactive.empty());
  EXPECT_EQ(on->route, pin);
  auto off = builder::build_plan(model, builder::Route::parse("pass.fuse_attention=off " + pin).value(), {});
  ASSERT_TRUE(off.is_ok()) << off.status().to_string();
  ASSERT_EQ(off->report.inactive.size(), 1u);
  EXPECT_NE(off->report.inactive[0].find("is a MatMul under this route"), std::string::npos) << off->report.inactive[0];
  EXPECT_EQ(off->route, "pass.fuse_attention=off");
  auto e = runtime::Engine::create(std::move(off).value());
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ(test::mismatch_vs_reference(**e, model, 9, 1e-5, 1e-4), "");
}

// nn.MultiheadAttention as PyTorch exports it around the attention (S = 6, B = 2, H = 2, D = 8):
// the in-projection's [S, B, 3E] output in, the out-projection's [S*B, E] input out.
//  torch2: Reshape [S,B,3,E], Unsqueeze 0, Transpose(0,-2), Squeeze -2, Gather 0|1|2, Reshape [S,B*H,D],
//          Transpose(1,0,2), Reshape [B,H,S,D]; K's Transpose(0,1,3,2); after: Transpose(2,0,1,3),
//          Reshape [S*B,E]. 4-D attention.
//  torch1: Slice of the last dim, Reshape [S,B*H,D], Transpose(1,0,2) (K: then Transpose(0,2,1));
//          after: Transpose(1,0,2), Reshape [S*B,E]. 3-D attention over B*H, which no single stride
//          can index in the packed buffer: the pass splits that batch dim into B and H.
// `mask`: a [S, S] mask (no batch dims) or a [B*H, 1, S] one (torch1 only: blocks the split).
// `projections`: the whole batch_first layer around it, as PyTorch exports it: x [B, S, E] ->
// Transpose(1,0,2) -> MatMul(W_in) + bias -> qkv ... y -> Gemm(W_out, bias, transB) -> Reshape
// [S, B, E] -> Transpose(1,0,2) -> + x.
enum class MhaExport { torch2, torch1 };
ir::Model mha_model(MhaExport form, const std::string& mask, bool projections = false) {
  constexpr int64_t S = 6, B = 2, H = 2, D = 8, E = H * D;
  ModelBuilder m(17);
  std::string q, k, v;
  if (projections) {
    m.input("x", 1, {"2", "6", "16"});
    test::attr_ints(m.node("Transpose", {"x"}, {"xt"}), "perm", {1, 0, 2});
    test::initializer_random(m, "w_in", {E, 3 * E}, 81);
    test::initializer_random(m, "b_in", {3 * E}, 82);
    m.node("MatMul", {"xt", "w_in"}, {"xw"});
    m.node("Add", {"xw", "b_in"}, {"qkv"});
  } else {
    m.input("qkv", 1, {"6", "2", "48"});
  }
  auto reshape = [&](const std::string& x, const std::string& y, std::vector<int64_t> shape) {
    test::initializer_i64(m, y + "_shape", {static_cast<int64_t>(shape.size())}, shape);
    m.node("Reshape", {x, y + "_shape"}, {y});
  };
  auto transpose = [&](const std::string& x, const std::string& y, std::vector<int64_t> perm) {
    test::attr_ints(m.node("Transpose", {x}, {y}), "perm", perm);
  };
  if (form == MhaExport::torch2) {
    reshape("qkv", "r4", {S, B, 3, E});
    test::initializer_i64(m, "ax0", {1}, {0});
    m.node("Unsqueeze", {"r4", "ax0"}, {"u5"});
    transpose("u5", "t5", {3, 1, 2, 0, 4});
    test::initializer_i64(m, "axm2", {1}, {-2});
    m.node("Squeeze", {"t5", "axm2"}, {"s4"});
    for (int i = 0; i < 3; ++i) {
      const std::string n = std::string(1, "qkv"[i]);
      test::initializer_i64(m, "i" + n, {}, {i});
      test::attr_i(m.node("Gather", {"s4", "i" + n}, {n + "0"}), "axis", 0);
      reshape(n + "0", n + "1", {S, B * H, D});
      transpose(n + "1", n + "2", {1, 0, 2});
      reshape(n + "2", n + "3", {B, H, S, D});
    }
    q = "q3", v = "v3";
    transpose("k3", "kt", {0, 1, 3, 2});
  } else {
    test::initializer_i64(m, "axes", {1}, {2});
    for (int i = 0; i < 3; ++i) {
      const std::string n = std::string(1, "qkv"[i]);
      test::initializer_i64(m, n + "_start", {1}, {i * E});
      test::initializer_i64(m, n + "_end", {1}, {(i + 1) * E});
      m.node("Slice", {"qkv", n + "_start", n + "_end", "axes"}, {n + "0"});
      reshape(n + "0", n + "1", {S, B * H, D});
      transpose(n + "1", n + "2", {1, 0, 2});
    }
    q = "q2", v = "v2";
    transpose("k2", "kt", {0, 2, 1});
  }
  m.node("MatMul", {q, "kt"}, {"s"});
  m.initializer("f", {}, {0.35f});
  m.node("Mul", {"s", "f"}, {"s2"});
  std::string sm_in = "s2";
  if (!mask.empty()) {
    test::initializer_random(m, "mask", mask == "SS" ? std::vector<int64_t>{S, S} : std::vector<int64_t>{B * H, 1, S}, 78);
    m.node("Add", {"s2", "mask"}, {"s3"});
    sm_in = "s3";
  }
  test::attr_i(m.node("Softmax", {sm_in}, {"p"}), "axis", -1);
  m.node("MatMul", {"p", v}, {"o"});
  if (form == MhaExport::torch2) transpose("o", "ot", {2, 0, 1, 3});
  else transpose("o", "ot", {1, 0, 2});
  reshape("ot", "y", {S * B, E});
  if (projections) {
    test::initializer_random(m, "w_out", {E, E}, 83);
    test::initializer_random(m, "b_out", {E}, 84);
    test::attr_i(m.node("Gemm", {"y", "w_out", "b_out"}, {"yo"}), "transB", 1);
    reshape("yo", "yr", {S, B, E});
    transpose("yr", "yt", {1, 0, 2});
    m.node("Add", {"yt", "x"}, {"out"});
    m.output("out", 1, {});
  } else {
    m.output("y", 1, {});
  }
  auto model = m.load();
  EXPECT_TRUE(model.is_ok()) << model.status().to_string();
  return std::move(model).value();
}

// With the views every Transpose, Reshape, Gather and Slice around the attention disappears
// (the node reads the packed input and writes the graph output); both routes match the
// reference interpreter on the original graph.
TEST(BuilderPasses, AttentionViewsAbsorbPyTorchMultiheadLayouts) {
  for (MhaExport form : {MhaExport::torch2, MhaExport::torch1})
    for (const char* mask : {"", "SS", "BH"}) {
      if (form == MhaExport::torch2 && std::string(mask) == "BH") continue;
      const std::string what = std::string(form == MhaExport::torch2 ? "torch2" : "torch1") + " mask=" + mask;
      ir::Model model = mha_model(form, mask);
      for (const char* route : {"", "pass.attention_views=off"}) {
        auto e = test::build_engine(model, route);
        ASSERT_TRUE(e.is_ok()) << e.status().to_string();
        const ir::Graph& g = (*e)->plan().model.graph;
        const bool absorbed = *route == '\0' && std::string(mask) != "BH";
        if (absorbed) EXPECT_EQ(test::op_list(g), "FusedAttention") << what;
        else EXPECT_GE(test::count_op(g, "Transpose"), 4) << what << " " << route << ": " << test::op_list(g);
        EXPECT_EQ(test::count_op(g, "FusedAttention"), 1) << what;
        EXPECT_EQ(test::mismatch_vs_reference(**e, model, 6, 1e-5, 1e-4), "") << what << " route '" << route << "'";
      }
    }
}

// At batch 1 the operand views drop the batch dim of size 1 (scores [heads, sq, sk]) while the
// mask keeps its rank ([1, 1, 1, sk], bert-toy's): it still broadcasts, so every attention gets a
// fused tactic (it fell back to the reference kernel), and the engine matches the stored outputs.
TEST(BuilderPasses, AttentionViewsAtBatchOneKeepTheMask) {
  const std::string dir = std::string(TAC_MODELS_DIR) + "/bert-toy";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no " << dir;
  auto model = io::load_model(dir + "/model.onnx");
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  auto data = io::load_test_data(*model, dir);
  ASSERT_TRUE(data.is_ok() && !data->empty()) << data.status().to_string();
  // The stored inputs' first row (batch 1); the reference interpreter's outputs for it.
  std::vector<Tensor> in;
  for (const Datum& d : (*data)[0].inputs) {
    Shape shape = d.tensor.shape();
    ASSERT_GE(shape.size(), 1u);
    shape[0] = 1;
    auto row = Tensor::create(d.tensor.dtype(), shape);
    ASSERT_TRUE(row.is_ok());
    std::memcpy(row->raw(), d.tensor.raw(), row->bytes());
    in.push_back(std::move(row).value());
  }
  builder::BuildOptions opts;
  ASSERT_TRUE(builder::bind_dims(model->graph, std::vector<Datum>(in.begin(), in.end()), opts).is_ok());
  auto e = test::build_engine(*model, "", opts);
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  int fused = 0;
  for (const builder::PlanStep& st : (*e)->plan().steps) {
    const ir::Node& n = (*e)->plan().model.graph.nodes[static_cast<size_t>(st.node)];
    if (n.op != ir::OpKind::FusedAttention) continue;
    ++fused;
    EXPECT_NE(std::string(st.tactic->name), "reference") << n.name;
  }
  EXPECT_EQ(fused, 5);
  auto got = (*e)->run(in);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  auto want = test::reference_outputs(*model, in);
  ASSERT_TRUE(want.is_ok()) << want.status().to_string();
  EXPECT_EQ(test::compare_outputs(*got, *want, 1e-5, 1e-4), "");
}

// pass.move_transposes on the batch_first layer: the Transpose before the in-projection sinks
// below it and its bias, the Reshape and Transpose after the out-projection rise above it (the
// Gemm becomes MatMul + Add on the way), attention_views absorbs all of them and fuse_matmul
// takes the residual: three nodes are left. Without the pass the Transposes stay. Both routes
// match the reference interpreter on the original graph.
TEST(BuilderPasses, MoveTransposesLetsAttentionAbsorbBatchFirstLayouts) {
  for (MhaExport form : {MhaExport::torch2, MhaExport::torch1}) {
    const std::string what = form == MhaExport::torch2 ? "torch2" : "torch1";
    ir::Model model = mha_model(form, "SS", true);
    for (const char* route : {"", "pass.move_transposes=off"}) {
      auto e = test::build_engine(model, route);
      ASSERT_TRUE(e.is_ok()) << e.status().to_string();
      const ir::Graph& g = (*e)->plan().model.graph;
      if (*route == '\0') {
        EXPECT_EQ(test::op_list(g), "FusedMatMul FusedAttention FusedMatMul") << what;
        EXPECT_TRUE(test::log_mentions((*e)->plan(), "became MatMul + Add")) << what;
      } else {
        EXPECT_EQ(test::count_op(g, "Transpose"), 2) << what << ": " << test::op_list(g);
      }
      EXPECT_EQ(test::mismatch_vs_reference(**e, model, 9, 1e-5, 1e-4), "") << what << " route '" << route << "'";
    }
  }
}

// What must not move: a Transpose that moves the last axis (each row would change), a Reshape
// that changes the last dim, and a Gemm with alpha != 1 (not a plain MatMul + bias).
TEST(BuilderPasses, MoveTransposesLeavesOpsThatDoNotKeepRows) {
  ModelBuilder m(17);
  m.input("a", 1, {"6", "4"});
  test::attr_ints(m.node("Transpose", {"a"}, {"at"}), "perm", {1, 0});  // moves the last axis
  test::initializer_random(m, "w", {6, 8}, 91);
  m.node("MatMul", {"at", "w"}, {"b"});  // [4, 8], read by a view op: would let a Transpose sink
  test::initializer_i64(m, "s1", {3}, {4, 2, 4});
  m.node("Reshape", {"b", "s1"}, {"c"});  // changes the last dim
  test::attr_ints(m.node("Transpose", {"c"}, {"ct"}), "perm", {1, 0, 2});
  test::initializer_i64(m, "s2", {2}, {8, 4});
  m.node("Reshape", {"ct", "s2"}, {"d"});
  test::initializer_random(m, "w2", {4, 4}, 92);
  test::attr_f(m.node("Gemm", {"d", "w2"}, {"e"}), "alpha", 0.5f);
  test::initializer_i64(m, "s3", {3}, {2, 4, 4});
  m.node("Reshape", {"e", "s3"}, {"y"});  // keeps rows, but the Gemm is not MatMul + bias
  m.output("y", 1, {});
  auto model = m.load();
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  auto e = test::build_engine(*model, "");
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_FALSE(test::log_mentions((*e)->plan(), "move_transposes")) << test::op_list((*e)->plan().model.graph);
  EXPECT_EQ(test::mismatch_vs_reference(**e, *model, 3, 1e-5, 1e-4), "");
}

TEST(BuilderPasses, AttentionWhoseScoresAreUsedTwiceIsNotFused) {
  ModelBuilder m(17);
  m.input("q", 1, {"2", "6", "8"});
  m.input("kt", 1, {"2", "8", "6"});
  m.input("v", 1, {"2", "6", "5"});
  m.node("MatMul", {"q", "kt"}, {"s"}, "scores");
  auto* sm = m.node("Softmax", {"s"}, {"p"}, "softmax");
  test::attr_i(sm, "axis", -1);
  m.node("MatMul", {"p", "v"}, {"y"}, "context");
  m.output("y", 1, {});
  m.output("p", 1, {});  // the probabilities are an output too
  auto model = m.load();
  ASSERT_TRUE(model.is_ok());
  auto e = test::build_engine(*model, "");
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ(test::count_op((*e)->plan().model.graph, "FusedAttention"), 0);
}

}  // namespace
}  // namespace tac
