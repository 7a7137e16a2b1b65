// Every gemm-family tactic (packed microkernel rows, openblas, onednn) against the reference
// kernel on random data: odd sizes, several K blocks, batches with broadcasting, transposes,
// bias / residual / every activation, Gemm's alpha / beta / C broadcasts, several thread counts.
//
// Tolerance: fp32 accumulation against the float64 reference. Individual outputs can be close to
// zero by cancellation, so the error is measured against the scale of the computation: the
// largest output magnitude, or sqrt(K) (the typical size of a dot product of N(0,1) vectors, i.e.
// of the pre-activation value when a bounded activation such as tanh follows):
//   max|got - want| <= 1e-5 * max(1, max|want|, sqrt(K))
// (K up to 600 here; float error grows ~sqrt(K) * 6e-8 relative to that scale).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ir/epilogue.h"
#include "kernels/gemm/gemm.h"
#include "kernels/tactic_check.h"

namespace tac::kernels {
namespace {

struct Case {
  std::string label;
  ir::Node node;
  std::vector<Tensor> inputs;
  std::vector<bool> const_mask;
  int64_t k = 1;  // the GEMM's K, for the tolerance
};

double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.get_f64(i)));
  return m;
}

// Runs every gemm tactic for the node's op on the case; counts the tactics that applied.
int check_all(const Case& c, int threads = 1) {
  int applied = 0;
  for (const Tactic& t : gemm_tactics()) {
    if (t.op != c.node.op) continue;
    auto r = check_tactic(t, c.node, c.inputs, c.const_mask, threads);
    if (r.status.kind() == ErrorKind::not_applicable) continue;
    ++applied;
    EXPECT_TRUE(r.status.is_ok()) << t.name << " " << c.label << ": " << r.status.to_string();
    if (!r.status.is_ok()) continue;
    const double bound = 1e-5 * std::max({1.0, max_abs(r.expected[0]), std::sqrt(double(c.k))});
    EXPECT_LE(r.max_abs_diff, bound) << t.name << " " << c.label << " threads=" << threads;
  }
  return applied;
}

uint64_t g_seed = 1;
Tensor rnd(Shape s) { return random_tensor(DType::float32, std::move(s), g_seed++); }

Case matmul(Shape a, Shape b, bool b_const = true) {
  Case c{"MatMul " + shape_to_string(a) + "x" + shape_to_string(b), make_node("MatMul", 2, 1), {rnd(a), rnd(b)},
         {false, b_const}, a.back()};
  c.node.op = ir::OpKind::MatMul;
  return c;
}

TEST(GemmTactics, TableNamesAreUniquePerOp) {
  for (const Tactic& a : gemm_tactics())
    for (const Tactic& b : gemm_tactics())
      if (&a != &b && a.op == b.op) {
        EXPECT_STRNE(a.name, b.name);
      }
  EXPECT_NE(find_tactic(ir::OpKind::FusedMatMul, "gemm_avx2_6x16"), nullptr);
  EXPECT_NE(find_tactic(ir::OpKind::Gemm, "onednn"), nullptr);
}

TEST(GemmTactics, MatMulShapes) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{1, 1}, {1, 1}},       {{1, 7}, {7, 1000}},       {{5, 3}, {3, 33}},          {{17, 37}, {37, 49}},
      {{29, 300}, {300, 65}}, {{15, 600}, {600, 17}},    {{2, 3, 5, 7}, {7, 9}},     {{2, 1, 4, 6}, {3, 6, 5}},
      {{3, 4, 19}, {3, 19, 40}}, {{4, 19}, {2, 19, 23}}, {{128, 64}, {64, 96}},
  };
  for (const auto& [a, b] : shapes)
    for (bool b_const : {true, false}) {
      EXPECT_GT(check_all(matmul(a, b, b_const)), 10);
    }
}

TEST(GemmTactics, OneDimensionalOperandsAreNotApplicableButNeverWrong) {
  Case c = matmul({7}, {7, 5});
  EXPECT_EQ(check_all(c), 0);
}

TEST(GemmTactics, ThreadCountsGiveBitwiseIdenticalResults) {
  for (const auto& [a, b] : std::vector<std::pair<Shape, Shape>>{{{61, 300}, {300, 97}}, {{6, 5, 9}, {9, 40}},
                                                                 {{8, 5, 9}, {8, 9, 33}}}) {
    Case c = matmul(a, b);
    for (const Tactic* t : tactics_for(ir::OpKind::MatMul)) {
      if (std::strncmp(t->name, "gemm_", 5) != 0) continue;
      auto r1 = check_tactic(*t, c.node, c.inputs, c.const_mask, 1);
      if (r1.status.kind() == ErrorKind::not_applicable) continue;
      for (int threads : {2, 3}) {
        auto rn = check_tactic(*t, c.node, c.inputs, c.const_mask, threads);
        ASSERT_TRUE(rn.status.is_ok()) << rn.status.to_string();
        EXPECT_EQ(std::memcmp(r1.outputs[0].raw(), rn.outputs[0].raw(), r1.outputs[0].bytes()), 0)
            << t->name << " threads=" << threads;
      }
      check_all(c, 3);
    }
  }
}

TEST(GemmTactics, FusedMatMulEpilogues) {
  using A = ir::Epilogue::Act;
  const std::vector<ir::Epilogue> acts = {{A::none, 0, 0},      {A::relu, 0, 0},         {A::clip, -0.5f, 0.7f},
                                          {A::leaky_relu, 0.1f, 0}, {A::sigmoid, 0, 0},  {A::tanh, 0, 0},
                                          {A::hard_sigmoid, 0.2f, 0.5f}, {A::gelu, 0, 0}, {A::silu, 0, 0},
                                          {A::hard_swish, 0, 0}};
  struct Variant {
    Shape a, b, res;
    bool trans_b, bias;
  };
  const std::vector<Variant> variants = {
      {{5, 9}, {9, 37}, {}, false, true},          {{7, 20}, {33, 20}, {7, 33}, true, true},
      {{2, 3, 11}, {11, 50}, {2, 3, 50}, false, false}, {{19, 300}, {40, 300}, {40}, true, true},
      {{13, 8}, {8, 17}, {13, 1}, false, true},    {{2, 4, 6}, {2, 6, 18}, {1, 4, 18}, false, true},
  };
  for (const ir::Epilogue& ep : acts)
    for (const Variant& v : variants) {
      Case c{"FusedMatMul", make_node("FusedMatMul", 4, 1), {}, {false, true, true, false}};
      c.node.op = ir::OpKind::FusedMatMul;
      c.node.domain = "tactician";
      ir::set_epilogue(c.node, ep);
      if (v.trans_b) set_attr(c.node, "transB", int64_t{1});
      const int64_t n = v.trans_b ? v.b[0] : v.b.back();
      c.k = v.a.back();
      c.inputs = {rnd(v.a), rnd(v.b), v.bias ? rnd({n}) : Tensor(), v.res.empty() ? Tensor() : rnd(v.res)};
      c.label = std::string(ir::activation_name(ep.act)) + " " + shape_to_string(v.a) + "x" + shape_to_string(v.b) +
                " res " + shape_to_string(v.res);
      EXPECT_GT(check_all(c), 10) << c.label;
    }
}

TEST(GemmTactics, GemmAttributes) {
  const int64_t M = 23, N = 41, K = 35;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const Shape& cs : std::vector<Shape>{{}, {N}, {1, N}, {M, 1}, {M, N}, {1}})
        for (const auto& [alpha, beta] : std::vector<std::pair<float, float>>{{1.0f, 1.0f}, {0.5f, 2.0f}}) {
          Case c{"Gemm", make_node("Gemm", 3, 1), {}, {false, true, true}};
          c.node.op = ir::OpKind::Gemm;
          set_attr(c.node, "transA", int64_t{ta});
          set_attr(c.node, "transB", int64_t{tb});
          set_attr(c.node, "alpha", alpha);
          set_attr(c.node, "beta", beta);
          c.k = K;
          c.inputs = {rnd(ta ? Shape{K, M} : Shape{M, K}), rnd(tb ? Shape{N, K} : Shape{K, N}),
                      rnd(cs)};
          c.label = "Gemm ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " C" + shape_to_string(cs);
          EXPECT_GT(check_all(c), 9) << c.label;
        }
  Case c{"Gemm no C", make_node("Gemm", 2, 1), {rnd({M, K}), rnd({K, N})}, {false, true}};
  c.k = K;
  c.node.op = ir::OpKind::Gemm;
  EXPECT_GT(check_all(c), 10);
}

TEST(GemmTactics, SgemmPackedAWithPerRowBias) {
  // The contract the convolution family relies on: prepacked A (weights), unpacked B, per-row bias.
  if (!gemm::isa_available(gemm::Isa::avx2)) GTEST_SKIP();
  const gemm::Blocking blk{gemm::Isa::avx2, 6, 16, 64, 60, 128};
  ASSERT_TRUE(gemm::blocking_supported(blk));
  const int64_t M = 13, N = 70, K = 150;
  Tensor a = rnd({M, K}), b = rnd({K, N}), bias = rnd({M});
  std::vector<float> pa(gemm::packed_a_floats(blk, M, K) + 16), c(static_cast<size_t>(M * N));
  gemm::pack_a(blk, M, K, a.data<float>(), K, 1, pa.data());
  std::vector<float> ws(gemm::sgemm_workspace_bytes(blk, M, N, K, false, 2) / 4 + 16);
  gemm::Epilogue ep;
  ep.bias = bias.data<float>();
  ep.bias_per_row = true;
  ep.act.act = ir::Epilogue::Act::relu;
  gemm::sgemm(blk, M, N, K, gemm::Operand{pa.data(), 0, 0, true}, gemm::Operand{b.data<float>(), N, 1, false}, c.data(), N,
              ep, 2, ws.data());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = bias.data<float>()[i];
      for (int64_t k = 0; k < K; ++k) s += double(a.data<float>()[i * K + k]) * b.data<float>()[k * N + j];
      EXPECT_NEAR(c[static_cast<size_t>(i * N + j)], std::max(s, 0.0), 1e-4) << i << "," << j;
    }
}

TEST(GemmTactics, TaskGridIsBalancedAcrossThreads) {
  // The multi-thread split: every block within the blocking's mc x nc, the grid covering C, the
  // task count a multiple of the thread count where the tiles allow, and the per-thread work of a
  // static schedule (contiguous task chunks; task t = row block t % tm, column block t / tm), in
  // padded mr x nr tiles, within one task's worth of the mean. bert-base's projections
  // (128 x 768, 128 x 3072), ResNet-50-like conv GEMMs (256 x 3136, 64 x 3136), small and odd
  // shapes.
  const gemm::Blocking rows[] = {{gemm::Isa::avx512, 8, 32, 256, 128, 1024, false},
                                 {gemm::Isa::avx512, 14, 32, 256, 112, 1024, true},
                                 {gemm::Isa::avx512, 8, 48, 256, 128, 960, true}};
  const std::pair<int64_t, int64_t> shapes[] = {{128, 768}, {128, 3072}, {256, 3136}, {64, 3136}, {960, 49},
                                                {37, 1000}, {1, 1000}, {300, 97}, {2048, 2048}, {5, 20}};
  for (const gemm::Blocking& blk : rows)
    for (const auto& [M, N] : shapes)
      for (int threads : {1, 2, 3, 4}) {
        int64_t tm = 0, tn = 0;
        gemm::task_grid(blk, M, N, threads, tm, tn);
        const std::string what = std::to_string(M) + "x" + std::to_string(N) + " mr=" + std::to_string(blk.mr) +
                                 " nr=" + std::to_string(blk.nr) + " threads=" + std::to_string(threads) +
                                 " grid " + std::to_string(tm) + "x" + std::to_string(tn);
        const int64_t mt = (M + blk.mr - 1) / blk.mr, nt = (N + blk.nr - 1) / blk.nr, ntasks = tm * tn;
        ASSERT_TRUE(tm >= 1 && tm <= mt && tn >= 1 && tn <= nt) << what;
        EXPECT_LE((mt + tm - 1) / tm * blk.mr, blk.mc) << what;
        EXPECT_LE((nt + tn - 1) / tn * blk.nr, blk.nc) << what;
        if (threads == 1) {
          EXPECT_EQ(ntasks, ((M + blk.mc - 1) / blk.mc) * ((N + blk.nc - 1) / blk.nc)) << what;
          continue;
        }
        if (mt * nt < 2 * threads) continue;  // too few tiles to balance
        EXPECT_EQ(ntasks % threads, 0) << what;
        std::vector<int64_t> work(static_cast<size_t>(threads), 0);
        const int64_t chunk = (ntasks + threads - 1) / threads;
        int64_t biggest = 0;
        for (int64_t t = 0; t < ntasks; ++t) {
          const int64_t ti = t % tm, tj = t / tm;
          const int64_t tiles = ((ti + 1) * mt / tm - ti * mt / tm) * ((tj + 1) * nt / tn - tj * nt / tn);
          work[static_cast<size_t>(t / chunk)] += tiles;
          biggest = std::max(biggest, tiles);
        }
        const double mean = double(mt * nt) / threads;
        for (int64_t w : work) EXPECT_LE(double(w), mean + double(biggest)) << what;
      }
}

}  // namespace
}  // namespace tac::kernels
