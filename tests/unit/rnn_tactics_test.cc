// The oneDNN LSTM / GRU / RNN tactics (kernels/rnn/onednn_rnn.cc: "onednn", oneDNN's own choice
// of implementation, and "onednn_gemm", its gemm-based one) against the reference kernel on
// random data: forward / reverse / bidirectional, batch 1 and 3, layout 0 and 1, with and
// without bias and initial states (an LSTM's h and c each alone too), every combination of the
// outputs present, GRU with both linear_before_reset values, hidden sizes that are not multiples
// of 8; and the cases the tactics leave to the reference (not_applicable, never wrong).
//
// Tolerance: fp32 GEMMs and oneDNN's vectorised sigmoid / tanh (a few ulp) against the float64
// reference. A step's pre-activations are dot products of K = I + H terms, so their rounding
// error is ~sqrt(K) * 6e-8 relative to their scale; the gates and tanh are contractive (slope at
// most 1), so an error does not grow along the sequence, it only accumulates additively in an
// LSTM's cell state, over at most T steps. Hence, with a factor ~15 for the activations' ulps
// and the sums' worst cases:
//   max|got - want| <= 1e-6 * max(1, max|want|) * sqrt(K) * T
// (K <= 28, T <= 6 here: a bound of ~3e-5 at outputs of magnitude ~1; the largest error seen is
// ~4e-7.) Weights are scaled to keep the pre-activations O(1), not saturated, so that a wrong gate
// order, bias or transposition shows: those give errors of 0.1 to 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/tactic_check.h"

namespace tac::kernels {
namespace {

uint64_t g_seed = 101;

// N(0,1) scaled by `scale`, never all zero.
Tensor rnd(Shape s, double scale = 1.0) {
  Tensor t = random_tensor(DType::float32, std::move(s), g_seed++);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, t.get_f64(i) * scale);
  return t;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.get_f64(i)));
  return m;
}

enum class Init { none, both, h_only, c_only };

struct Spec {
  ir::OpKind op = ir::OpKind::LSTM;
  std::string direction = "forward";
  int64_t T = 5, N = 1, I = 7, H = 5;
  int layout = 0;
  bool lbr = false;
  bool bias = true;
  Init init = Init::none;
  std::vector<bool> outs = {true, true, true};  // Y, Y_h (, Y_c): present or omitted
  std::string activation;  // RNN: "" (default Tanh) or one name for every direction

  int64_t gates() const { return op == ir::OpKind::LSTM ? 4 : op == ir::OpKind::GRU ? 3 : 1; }
  int64_t dirs() const { return direction == "bidirectional" ? 2 : 1; }
  std::string label() const {
    std::string s = std::string(op == ir::OpKind::LSTM ? "LSTM" : op == ir::OpKind::GRU ? "GRU" : "RNN") + " " +
                    direction + " T=" + std::to_string(T) + " N=" + std::to_string(N) + " I=" + std::to_string(I) +
                    " H=" + std::to_string(H) + " layout=" + std::to_string(layout) + (lbr ? " lbr" : "") +
                    (bias ? " bias" : " no-bias") + " init=" + std::to_string(static_cast<int>(init)) + " outs=";
    for (bool o : outs) s += o ? '1' : '0';
    if (!activation.empty()) s += " act=" + activation;
    return s;
  }
};

struct Case {
  ir::Node node;
  std::vector<Tensor> inputs;
  std::vector<bool> const_mask;
};

// The node and its inputs: X, W, R, B, sequence_lens, initial_h, initial_c (omitted ones empty
// and kNoValue); W, R, B and sequence_lens constant, as a model's weights are.
Case make_case(const Spec& sp) {
  const char* op = sp.op == ir::OpKind::LSTM ? "LSTM" : sp.op == ir::OpKind::GRU ? "GRU" : "RNN";
  const int64_t G = sp.gates(), D = sp.dirs(), H = sp.H;
  const bool h0 = sp.init == Init::both || sp.init == Init::h_only;
  const bool c0 = sp.op == ir::OpKind::LSTM && (sp.init == Init::both || sp.init == Init::c_only);
  const size_t n_in = c0 ? 7 : h0 ? 6 : sp.bias ? 4 : 3;
  Case c{make_node(op, n_in, sp.outs.size()), {}, {false, true, true, true, true, false, false}};
  c.node.op = sp.op;
  set_attr(c.node, "hidden_size", H);
  set_attr(c.node, "direction", sp.direction);
  if (sp.layout) set_attr(c.node, "layout", int64_t{1});
  if (sp.lbr) set_attr(c.node, "linear_before_reset", int64_t{1});
  if (!sp.activation.empty()) {
    ir::Attribute a;
    a.type = ir::Attribute::Type::strings;
    a.strings.assign(static_cast<size_t>(D), sp.activation);
    c.node.attrs["activations"] = a;
  }
  // Pre-activations O(1): weights ~ N(0, 1/K), X and states ~ N(0, 1).
  const double ws = 1.0 / std::sqrt(static_cast<double>(sp.I + H));
  const Shape state = sp.layout ? Shape{sp.N, D, H} : Shape{D, sp.N, H};
  c.inputs = {rnd(sp.layout ? Shape{sp.N, sp.T, sp.I} : Shape{sp.T, sp.N, sp.I}), rnd({D, G * H, sp.I}, ws),
              rnd({D, G * H, H}, ws)};
  c.inputs.push_back(sp.bias ? rnd({D, 2 * G * H}, 0.5) : Tensor());
  c.inputs.push_back(Tensor());  // sequence_lens
  c.inputs.push_back(h0 ? rnd(state) : Tensor());
  c.inputs.push_back(c0 ? rnd(state) : Tensor());
  c.inputs.resize(n_in);
  for (size_t i = 0; i < n_in; ++i)
    if (c.inputs[i].empty()) c.node.inputs[i] = ir::kNoValue;
  for (size_t k = 0; k < sp.outs.size(); ++k)
    if (!sp.outs[k]) c.node.outputs[k] = ir::kNoValue;
  return c;
}

double bound(const Spec& sp, const std::vector<Tensor>& expected) {
  double scale = 1.0;
  for (const Tensor& e : expected)
    if (!e.empty()) scale = std::max(scale, max_abs(e));
  return 1e-6 * scale * std::sqrt(static_cast<double>(sp.I + sp.H)) * static_cast<double>(sp.T);
}

// Runs the tactic on the case and compares with the reference. check_tactic takes trailing
// omitted outputs only (it allocates every output before the last present one), so a case with an
// omitted output before a present one runs the reference on the node with every output, and the
// tactic here, on the node as it is, with null views for its omitted outputs.
void check_one(const Tactic& t, const Spec& sp, int threads) {
  SCOPED_TRACE(t.name);
  Case c = make_case(sp);
  bool gap = false;
  for (size_t k = 0; k + 1 < sp.outs.size(); ++k) gap = gap || (!sp.outs[k] && sp.outs[k + 1]);
  if (!gap) {
    ir::Node trimmed = c.node;
    while (!trimmed.outputs.empty() && trimmed.outputs.back() == ir::kNoValue) trimmed.outputs.pop_back();
    TacticCheck r = check_tactic(t, trimmed, c.inputs, c.const_mask, threads);
    ASSERT_TRUE(r.status.is_ok()) << sp.label() << ": " << r.status.to_string();
    EXPECT_LE(r.max_abs_diff, bound(sp, r.expected)) << sp.label() << " threads=" << threads;
    return;
  }
  ir::Node full = c.node;
  for (size_t k = 0; k < full.outputs.size(); ++k) full.outputs[k] = static_cast<int>(c.inputs.size() + k);
  TacticCheck ref = check_tactic(t, full, c.inputs, c.const_mask, threads);
  ASSERT_TRUE(ref.status.is_ok()) << sp.label() << " (every output): " << ref.status.to_string();
  StepDesc step;
  step.node = &c.node;
  step.threads = threads;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    step.in_dtypes.push_back(c.inputs[i].empty() ? DType::undefined : DType::float32);
    step.in_shapes.push_back(c.inputs[i].shape());
    step.constants.push_back(c.const_mask[i] && !c.inputs[i].empty() ? &c.inputs[i] : nullptr);
  }
  std::vector<Tensor> got;
  std::vector<TensorView> in_views, out_views;
  for (const Tensor& x : c.inputs) in_views.push_back({x.empty() ? nullptr : const_cast<void*>(x.raw()), x.dtype(), x.shape()});
  for (size_t k = 0; k < sp.outs.size(); ++k) {
    const Tensor& e = ref.expected[k];
    step.out_dtypes.push_back(sp.outs[k] ? e.dtype() : DType::undefined);
    step.out_shapes.push_back(sp.outs[k] ? e.shape() : Shape{});
    got.push_back(sp.outs[k] ? Tensor::create(e.dtype(), e.shape()).value() : Tensor());
    if (sp.outs[k]) std::memset(got.back().raw(), 0x7f, got.back().bytes());  // poison
    out_views.push_back(sp.outs[k] ? TensorView{got.back().raw(), e.dtype(), e.shape()} : TensorView{});
  }
  ASSERT_TRUE(t.applies(step).is_ok()) << sp.label();
  auto kernel = t.prepare(step);
  ASSERT_TRUE(kernel.is_ok()) << sp.label() << ": " << kernel.status().to_string();
  std::vector<std::byte> ws((*kernel)->workspace_bytes() + 64);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) & ~uintptr_t{63});
  ASSERT_TRUE((*kernel)->run(in_views, out_views, aligned).is_ok()) << sp.label();
  double diff = 0;
  for (size_t k = 0; k < sp.outs.size(); ++k)
    if (sp.outs[k])
      for (int64_t i = 0; i < got[k].numel(); ++i) {
        const double d = std::fabs(got[k].get_f64(i) - ref.expected[k].get_f64(i));
        diff = std::max(diff, std::isnan(d) ? INFINITY : d);
      }
  EXPECT_LE(diff, bound(sp, ref.expected)) << sp.label();
}

// Every tactic of the family for the op.
void check(const Spec& sp, int threads = 1) {
  int n = 0;
  for (const Tactic& t : rnn_tactics())
    if (t.op == sp.op) check_one(t, sp, threads), ++n;
  EXPECT_EQ(n, 2);
}

TEST(RnnTactics, TableHasTwoOnednnTacticsPerOp) {
  for (ir::OpKind op : {ir::OpKind::LSTM, ir::OpKind::GRU, ir::OpKind::RNN}) {
    const Tactic* t = find_tactic(op, "onednn");
    const Tactic* g = find_tactic(op, "onednn_gemm");
    ASSERT_NE(t, nullptr);
    ASSERT_NE(g, nullptr);
    const std::vector<const Tactic*> all = tactics_for(op);
    ASSERT_EQ(all.size(), 3u);
    EXPECT_STREQ(all.back()->name, "reference");  // the fallback, last
  }
}

// The default ranking: the gemm-based implementation at batch 1 (bound by streaming the weights,
// which it does for R only), oneDNN's brgemm at a large batch on AVX-512 (compute bound).
TEST(RnnTactics, CostRanksGemmAtBatchOneBrgemmAtLargeBatch) {
  for (int64_t N : {1, 32}) {
    Spec sp;
    sp.T = 100, sp.N = N, sp.I = 256, sp.H = 256;
    Case c = make_case(sp);
    StepDesc step;
    step.node = &c.node;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      step.in_dtypes.push_back(c.inputs[i].empty() ? DType::undefined : DType::float32);
      step.in_shapes.push_back(c.inputs[i].shape());
      step.constants.push_back(c.const_mask[i] && !c.inputs[i].empty() ? &c.inputs[i] : nullptr);
    }
    step.out_dtypes.assign(3, DType::float32);
    step.out_shapes = {{sp.T, 1, N, sp.H}, {1, N, sp.H}, {1, N, sp.H}};
    const Tactic* t = find_tactic(sp.op, "onednn");
    const Tactic* g = find_tactic(sp.op, "onednn_gemm");
    ASSERT_TRUE(t->applies(step).is_ok());
    const double choice = t->cost(step), gemm = g->cost(step);
    if (N == 1) {
      EXPECT_LT(gemm, choice);
    } else if (cpu_features().avx512) {
      EXPECT_LT(choice, gemm);
    }
    // Measured: 1.4 ms (batch 1) and ~20 ms (batch 32) for these shapes.
    EXPECT_GT(std::min(choice, gemm), 5e5);
    EXPECT_LT(std::min(choice, gemm), 5e7);
  }
}

// Every cell x direction x batch x layout x bias x initial states, every output present.
TEST(RnnTactics, CellsDirectionsLayoutsStates) {
  int cases = 0;
  for (ir::OpKind op : {ir::OpKind::LSTM, ir::OpKind::GRU, ir::OpKind::RNN})
    for (bool lbr : {false, true}) {
      if (lbr && op != ir::OpKind::GRU) continue;
      for (const char* dir : {"forward", "reverse", "bidirectional"})
        for (int64_t N : {1, 3})
          for (int layout : {0, 1})
            for (bool bias : {true, false})
              for (Init init : {Init::none, Init::both, Init::h_only, Init::c_only}) {
                if (op != ir::OpKind::LSTM && init == Init::c_only) continue;
                if (op != ir::OpKind::LSTM && init == Init::h_only) continue;
                Spec sp;
                sp.op = op;
                sp.lbr = lbr;
                sp.direction = dir;
                sp.N = N;
                sp.layout = layout;
                sp.bias = bias;
                sp.init = init;
                sp.H = (cases % 2) ? 13 : 5;
                sp.I = (cases % 3) ? 7 : 11;
                sp.T = (cases % 2) ? 4 : 6;
                sp.outs.assign(op == ir::OpKind::LSTM ? 3 : 2, true);
                check(sp);
                ++cases;
              }
    }
  EXPECT_EQ(cases, 96 + 96 + 48);  // LSTM (4 initial-state variants), GRU (both lbr), RNN
}

// Every non-empty subset of the outputs (an omitted one before a present one included).
TEST(RnnTactics, OutputsPresentOrOmitted) {
  for (ir::OpKind op : {ir::OpKind::LSTM, ir::OpKind::GRU, ir::OpKind::RNN})
    for (const char* dir : {"forward", "bidirectional"})
      for (int layout : {0, 1}) {
        const size_t n_out = op == ir::OpKind::LSTM ? 3 : 2;
        for (unsigned mask = 1; mask < (1u << n_out); ++mask) {
          Spec sp;
          sp.op = op;
          sp.direction = dir;
          sp.layout = layout;
          sp.N = 3;
          sp.H = 11;
          sp.init = Init::both;
          sp.outs.clear();
          for (size_t k = 0; k < n_out; ++k) sp.outs.push_back((mask >> k) & 1u);
          check(sp);
        }
      }
}

TEST(RnnTactics, RnnActivationsAndThreads) {
  for (const char* act : {"Tanh", "Relu", "Sigmoid"})
    for (const char* dir : {"forward", "bidirectional"}) {
      Spec sp;
      sp.op = ir::OpKind::RNN;
      sp.direction = dir;
      sp.N = 3;
      sp.H = 9;
      sp.activation = act;
      sp.outs = {true, true};
      check(sp);
    }
  for (ir::OpKind op : {ir::OpKind::LSTM, ir::OpKind::GRU}) {
    Spec sp;
    sp.op = op;
    sp.direction = "bidirectional";
    sp.N = 3;
    sp.H = 21;
    sp.T = 6;
    sp.init = Init::both;
    sp.outs.assign(op == ir::OpKind::LSTM ? 3 : 2, true);
    check(sp, 2);
    sp.lbr = op == ir::OpKind::GRU;
    sp.layout = 1;
    check(sp, 3);
  }
}

// What the tactics leave to the reference: not_applicable, and the reference still runs it.
TEST(RnnTactics, NotApplicableCases) {
  auto expect_na = [](Case c, const std::string& what) {
    for (const Tactic& t : rnn_tactics()) {
      if (t.op != c.node.op) continue;
      TacticCheck r = check_tactic(t, c.node, c.inputs, c.const_mask);
      EXPECT_EQ(r.status.kind(), ErrorKind::not_applicable) << t.name << " " << what << ": " << r.status.to_string();
    }
    const Tactic* ref = tactics_for(c.node.op).back();
    EXPECT_STREQ(ref->name, "reference");
    EXPECT_TRUE(check_tactic(*ref, c.node, c.inputs, c.const_mask).status.is_ok()) << what;
  };
  Spec sp;
  sp.N = 2;
  sp.init = Init::both;
  {
    Case c = make_case(sp);  // peepholes
    c.node.inputs.push_back(static_cast<int>(c.node.inputs.size()));
    c.inputs.push_back(rnd({1, 3 * sp.H}));
    c.const_mask.push_back(true);
    expect_na(c, "peepholes");
  }
  {
    Case c = make_case(sp);
    set_attr(c.node, "clip", 0.5f);
    expect_na(c, "clip");
  }
  {
    Case c = make_case(sp);
    set_attr(c.node, "input_forget", int64_t{1});
    expect_na(c, "input_forget");
  }
  {
    Case c = make_case(sp);
    ir::Attribute a;
    a.type = ir::Attribute::Type::strings;
    a.strings = {"HardSigmoid", "Tanh", "Tanh"};
    c.node.attrs["activations"] = a;
    expect_na(c, "activations");
  }
  {
    Case c = make_case(sp);  // sequence_lens shorter than seq_length for one sequence
    Tensor lens = Tensor::create(DType::int32, {sp.N}).value();
    lens.set_i64(0, sp.T);
    lens.set_i64(1, sp.T - 2);
    c.inputs[4] = lens;
    c.node.inputs[4] = 4;
    expect_na(c, "sequence_lens");
  }
  {
    Case c = make_case(sp);  // W not constant
    c.const_mask[1] = false;
    expect_na(c, "W not constant");
  }
}

TEST(RnnTactics, SequenceLensAllFullLengthApplies) {
  Spec sp;
  sp.op = ir::OpKind::GRU;
  sp.N = 3;
  sp.direction = "bidirectional";
  sp.init = Init::both;  // inputs up to initial_h, sequence_lens among them
  sp.outs = {true, true};
  Case c = make_case(sp);
  Tensor lens = Tensor::create(DType::int32, {sp.N}).value();
  for (int64_t i = 0; i < sp.N; ++i) lens.set_i64(i, sp.T);
  c.inputs[4] = lens;
  c.node.inputs[4] = 4;
  for (const Tactic& t : rnn_tactics()) {
    if (t.op != sp.op) continue;
    TacticCheck r = check_tactic(t, c.node, c.inputs, c.const_mask);
    ASSERT_TRUE(r.status.is_ok()) << t.name << ": " << r.status.to_string();
    EXPECT_LE(r.max_abs_diff, bound(sp, r.expected)) << t.name;
  }
}

}  // namespace
}  // namespace tac::kernels
