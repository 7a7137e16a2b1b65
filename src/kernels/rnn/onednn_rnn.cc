// CPU tactics of LSTM / GRU / RNN through oneDNN 2.6's RNN primitives (lstm_forward,
// gru_forward, lbr_gru_forward, vanilla_rnn_forward; forward_inference), two per op: "onednn"
// (oneDNN's own choice of implementation: brgemm on AVX-512) and "onednn_gemm" (its gemm-based
// one, faster at small batches; see Impl below).
//
// ONNX to oneDNN:
// - W [dirs, G*H, I] and R [dirs, G*H, H] are oneDNN's ldgoi once their gate blocks are put in
//   oneDNN's order (LSTM: ONNX i,o,f,c -> oneDNN i,f,c,o; GRU z,r,h = oneDNN u,r,o; RNN one gate);
//   they are permuted and reordered once at prepare() into the primitive's format.
// - B [dirs, 2*G*H] = Wb ++ Rb becomes oneDNN's one bias [1, dirs, G, H] = Wb + Rb; for GRU with
//   linear_before_reset (oneDNN lbr_gru) the candidate gate keeps them apart: [Wbz+Rbz, Wbr+Rbr,
//   Wbh, Rbh] (Rbh is the extra row inside r * (R h + Rbh)).
// - forward / reverse / bidirectional -> left2right / right2left / bidirectional_concat.
// - X is tnc (layout 0) or ntc (layout 1); Y is [seq, dirs, batch, H] (layout 0), oneDNN writes
//   [seq, batch, dirs*H]: the same memory when dirs or batch is 1, otherwise Y goes through the
//   workspace and a transposing copy. Layout 1's Y [batch, seq, dirs, H] is oneDNN's ntc as it is.
//   States are [dirs, batch, H] (layout 0, oneDNN's ldnc) or [batch, dirs, H] (layout 1: a copy
//   through the workspace when dirs and batch both exceed 1).
// - Omitted initial_h / initial_c: zeros (oneDNN's zero memory desc, or a zeroed workspace buffer
//   when only one of an LSTM's two is given). Omitted Y: oneDNN still writes dst_layer, into the
//   workspace. Omitted Y_h and Y_c: no dst_iter.
// Not applicable (the reference tactic runs them): peepholes (P), sequence_lens other than all
// seq_length, activations other than the defaults (RNN: Tanh, Relu or Sigmoid, the same for
// both directions), clip, input_forget, non-constant W / R / B, types other than float32.

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/conv/conv_common.h"  // ScopedOmpThreads
#include "kernels/onednn_common.h"
#include "kernels/rnn/rnn_geom.h"
#include "kernels/tactic.h"

namespace tac::kernels {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

size_t round64(size_t n) { return (n + 63) / 64 * 64; }

using rnn::Cell;
using rnn::RnnGeom;
using rnn::wants_output;

// The step as oneDNN sees it: float32 only.
Result<RnnGeom> rnn_geom(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(RnnGeom g, rnn::rnn_geom(s));
  if (g.dtype != DType::float32) return not_applicable("float32 only");
  return g;
}

dnnl::algorithm act_of(rnn::Act a) {
  switch (a) {
    case rnn::Act::relu: return dnnl::algorithm::eltwise_relu;
    case rnn::Act::sigmoid: return dnnl::algorithm::eltwise_logistic;
    case rnn::Act::tanh: break;
  }
  return dnnl::algorithm::eltwise_tanh;
}

// src [outer, a, b, inner] -> dst [outer, b, a, inner]
void swap_middle(const float* src, float* dst, int64_t outer, int64_t a, int64_t b, int64_t inner) {
  const size_t row = static_cast<size_t>(inner) * sizeof(float);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        std::memcpy(dst + ((o * b + j) * a + i) * inner, src + ((o * a + i) * b + j) * inner, row);
}

// oneDNN gate g is ONNX gate kLstmGates[g] (LSTM: oneDNN i,f,c,o from ONNX i,o,f,c; GRU, RNN: the same).
constexpr std::array<int64_t, 4> kLstmGates{0, 2, 3, 1};
int64_t onnx_gate(const RnnGeom& g, int64_t dnnl_gate) { return g.lstm() ? kLstmGates[static_cast<size_t>(dnnl_gate)] : dnnl_gate; }

// Which of oneDNN's implementations: its own first choice (on AVX-512, "brgemm" for LSTM, GRU and
// RNN, not lbr GRU: one fused GEMM of [x_t, h_t-1] by [W; R] per step, so W and R both stream
// from cache at every step), or its gemm-based one ("ref": the input projection of every step as
// one GEMM of T*N rows first, then only R per step; oneDNN 2.6 picks it when the weights are
// plain ldigo). Measured at one thread here, LSTM: gemm 1.3-1.9x faster at batch 1 (bound by the
// weights' bandwidth), about even at batch 4, brgemm 1.15-1.25x faster from batch 8 (compute bound).
enum class Impl { choice, gemm };

class RnnKernel final : public Kernel {
 public:
  RnnKernel(const RnnGeom& g, Impl impl, int threads)
      : g_(g), impl_(impl), threads_(std::max(threads, 1)), stream_(cpu_engine()) {}

  void init(const StepDesc& s) {
    conv::ScopedOmpThreads scope(std::max(threads_, 1));
    auto& eng = cpu_engine();
    const memory::dim T = g_.T, N = g_.N, I = g_.I, H = g_.H, D = g_.D, G = g_.G;
    const memory::desc none;
    const tag seq_tag = g_.layout1 ? tag::ntc : tag::tnc;
    src_layer_md_ = memory::desc({T, N, I}, dt::f32, seq_tag);
    dst_layer_md_ = memory::desc({T, N, D * H}, dt::f32, seq_tag);
    state_md_ = memory::desc({1, D, N, H}, dt::f32, tag::ldnc);
    const memory::desc src_iter = g_.src_iter() ? state_md_ : none, dst_iter = g_.dst_iter() ? state_md_ : none;
    // Weights in oneDNN's format of choice (brgemm's blocked one on AVX-512), or plain ldigo, which
    // brgemm does not take: oneDNN then falls back to its gemm-based implementation.
    const tag w_tag = impl_ == Impl::gemm ? tag::ldigo : tag::any;
    const memory::desc w_layer_want({1, D, I, G, H}, dt::f32, w_tag), w_iter_want({1, D, H, G, H}, dt::f32, w_tag);
    const memory::dim bias_rows = G + (g_.lbr ? 1 : 0);
    const memory::desc bias_md({1, D, bias_rows, H}, dt::f32, tag::ldgo);
    const auto pk = dnnl::prop_kind::forward_inference;
    const auto dir = g_.D == 2 ? dnnl::rnn_direction::bidirectional_concat
                     : g_.reverse ? dnnl::rnn_direction::unidirectional_right2left
                                  : dnnl::rnn_direction::unidirectional_left2right;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // scratch comes from the engine's workspace
    memory::desc w_layer_md, w_iter_md, b_md;
    // The primitive of oneDNN's `impl_` (see Impl), its weights' and scratchpad's descriptions.
    auto make = [&]<class Prim>(typename Prim::primitive_desc pd) {
      if (impl_ == Impl::gemm && std::strncmp(pd.impl_info_str(), "ref", 3) != 0)
        throw dnnl::error(dnnl_unimplemented, "no gemm-based implementation");
      prim_ = Prim(pd);
      w_layer_md = pd.weights_layer_desc(), w_iter_md = pd.weights_iter_desc(), b_md = pd.bias_desc();
      scratch_md_ = pd.scratchpad_desc();
    };
    switch (g_.cell) {
      case Cell::lstm:
        make.template operator()<dnnl::lstm_forward>({{pk, dir, src_layer_md_, src_iter, src_iter, w_layer_want, w_iter_want,
                                                       bias_md, dst_layer_md_, dst_iter, dst_iter},
                                                      attr, eng});
        break;
      case Cell::gru:
        if (g_.lbr)
          make.template operator()<dnnl::lbr_gru_forward>(
              {{pk, dir, src_layer_md_, src_iter, w_layer_want, w_iter_want, bias_md, dst_layer_md_, dst_iter}, attr, eng});
        else
          make.template operator()<dnnl::gru_forward>(
              {{pk, dir, src_layer_md_, src_iter, w_layer_want, w_iter_want, bias_md, dst_layer_md_, dst_iter}, attr, eng});
        break;
      case Cell::rnn:
        make.template operator()<dnnl::vanilla_rnn_forward>(
            {{pk, act_of(g_.act), dir, src_layer_md_, src_iter, w_layer_want, w_iter_want, bias_md, dst_layer_md_, dst_iter},
             attr, eng});
        break;
    }

    // Weights: ONNX [D, G*H, K] with the gate blocks in oneDNN's order is ldgoi [1, D, K, G, H].
    auto reorder_weights = [&](const Tensor& onnx, memory::dim K, const memory::desc& to) {
      std::vector<float> permuted(static_cast<size_t>(D * G * H * K));
      const float* src = onnx.data<float>();
      const size_t block = static_cast<size_t>(H * K);
      for (int64_t d = 0; d < D; ++d)
        for (int64_t gt = 0; gt < G; ++gt)
          std::memcpy(permuted.data() + static_cast<size_t>(d * G + gt) * block,
                      src + static_cast<size_t>(d * G + onnx_gate(g_, gt)) * block, block * sizeof(float));
      memory user(memory::desc({1, D, K, G, H}, dt::f32, tag::ldgoi), eng, permuted.data());
      memory packed(to, eng);
      dnnl::reorder(user, packed).execute(stream_, user, packed);
      stream_.wait();
      return packed;
    };
    w_layer_ = reorder_weights(*s.constants[1], I, w_layer_md);
    w_iter_ = reorder_weights(*s.constants[2], H, w_iter_md);

    // Bias [1, D, G(+1), H]: Wb + Rb per gate; lbr GRU keeps the candidate's Wbh and Rbh apart.
    std::vector<float> bias(static_cast<size_t>(D * bias_rows * H), 0.0f);
    if (g_.has_b) {
      const float* b = s.constants[3]->data<float>();
      for (int64_t d = 0; d < D; ++d) {
        const float* wb = b + d * 2 * G * H;
        const float* rb = wb + G * H;
        for (int64_t gt = 0; gt < G; ++gt) {
          const int64_t og = onnx_gate(g_, gt);
          float* out = bias.data() + (d * bias_rows + gt) * H;
          const bool apart = g_.lbr && gt == 2;
          for (int64_t h = 0; h < H; ++h) out[h] = wb[og * H + h] + (apart ? 0.0f : rb[og * H + h]);
          if (apart)
            for (int64_t h = 0; h < H; ++h) bias[static_cast<size_t>((d * bias_rows + 3) * H + h)] = rb[og * H + h];
        }
      }
    }
    memory user_b(bias_md, eng, bias.data());
    bias_ = memory(b_md, eng);
    dnnl::reorder(user_b, bias_).execute(stream_, user_b, bias_);
    stream_.wait();

    // Workspace: scratchpad, then the buffers standing in for what the step's own can't be.
    const size_t state_bytes = round64(state_md_.get_size());
    size_t off = round64(scratch_md_.get_size());
    if (!g_.want_y || !g_.y_plain()) y_off_ = off, off += round64(dst_layer_md_.get_size());
    if (g_.src_iter()) {
      if (!g_.has_h0 || !g_.states_plain()) h0_off_ = off, off += state_bytes;
      if (g_.lstm() && (!g_.has_c0 || !g_.states_plain())) c0_off_ = off, off += state_bytes;
    }
    if (g_.dst_iter()) {
      if (!g_.want_yh || !g_.states_plain()) yh_off_ = off, off += state_bytes;
      if (g_.lstm() && (!g_.want_yc || !g_.states_plain())) yc_off_ = off, off += state_bytes;
    }
    ws_bytes_ = off;
    src_layer_ = memory(src_layer_md_, eng, nullptr);
    dst_layer_ = memory(dst_layer_md_, eng, nullptr);
    h0_ = memory(state_md_, eng, nullptr), c0_ = memory(state_md_, eng, nullptr);
    yh_ = memory(state_md_, eng, nullptr), yc_ = memory(state_md_, eng, nullptr);
    scratch_ = memory(scratch_md_, eng, nullptr);
    // The primitive's arguments, once: run() only points their memories at its buffers.
    args_ = {{DNNL_ARG_SRC_LAYER, src_layer_}, {DNNL_ARG_WEIGHTS_LAYER, w_layer_}, {DNNL_ARG_WEIGHTS_ITER, w_iter_},
             {DNNL_ARG_BIAS, bias_},           {DNNL_ARG_DST_LAYER, dst_layer_},  {DNNL_ARG_SCRATCHPAD, scratch_}};
    if (g_.src_iter()) {
      args_.emplace(DNNL_ARG_SRC_ITER, h0_);
      if (g_.lstm()) args_.emplace(DNNL_ARG_SRC_ITER_C, c0_);
    }
    if (g_.dst_iter()) {
      args_.emplace(DNNL_ARG_DST_ITER, yh_);
      if (g_.lstm()) args_.emplace(DNNL_ARG_DST_ITER_C, yc_);
    }
  }

  size_t workspace_bytes() const override { return ws_bytes_; }

  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* workspace) override {
    conv::ScopedOmpThreads scope(std::max(threads_, 1));
    auto* ws = static_cast<std::byte*>(workspace);
    auto at = [&](size_t off) { return reinterpret_cast<float*>(ws + off); };
    const int64_t D = g_.D, N = g_.N, H = g_.H, T = g_.T;
    const size_t state_bytes = state_md_.get_size();
    try {
      src_layer_.set_data_handle(in[0].data);
      dst_layer_.set_data_handle(y_off_ != kNone ? at(y_off_) : out[0].data);
      scratch_.set_data_handle(ws);
      // Initial states: as given, transposed from layout 1, or zeros.
      auto initial = [&](memory& m, bool given, size_t input, size_t off) {
        if (off == kNone) {
          m.set_data_handle(in[input].data);
        } else if (given) {
          swap_middle(in[input].as<const float>(), at(off), 1, N, D, H);
          m.set_data_handle(at(off));
        } else {
          std::memset(at(off), 0, state_bytes);
          m.set_data_handle(at(off));
        }
      };
      if (g_.src_iter()) {
        initial(h0_, g_.has_h0, 5, h0_off_);
        if (g_.lstm()) initial(c0_, g_.has_c0, 6, c0_off_);
      }
      if (g_.dst_iter()) {
        yh_.set_data_handle(yh_off_ != kNone ? at(yh_off_) : out[1].data);
        if (g_.lstm()) yc_.set_data_handle(yc_off_ != kNone ? at(yc_off_) : out[2].data);
      }
      prim_.execute(stream_, args_);
      stream_.wait();
    } catch (const dnnl::error& e) {
      return internal_error(std::string("oneDNN RNN: ") + e.what());
    }
    // Outputs oneDNN wrote elsewhere: Y [T, N, D, H] -> [T, D, N, H]; states [D, N, H] -> [N, D, H].
    if (g_.want_y && y_off_ != kNone) swap_middle(at(y_off_), out[0].as<float>(), T, N, D, H);
    if (g_.want_yh && yh_off_ != kNone) swap_middle(at(yh_off_), out[1].as<float>(), 1, D, N, H);
    if (g_.want_yc && yc_off_ != kNone) swap_middle(at(yc_off_), out[2].as<float>(), 1, D, N, H);
    return Status::ok();
  }

 private:
  static constexpr size_t kNone = SIZE_MAX;  // no workspace buffer: the step's own
  RnnGeom g_;
  Impl impl_;
  int threads_;
  dnnl::stream stream_;
  dnnl::primitive prim_;
  memory::desc src_layer_md_, dst_layer_md_, state_md_, scratch_md_;
  memory w_layer_, w_iter_, bias_;
  memory src_layer_, dst_layer_, h0_, c0_, yh_, yc_, scratch_;
  std::unordered_map<int, memory> args_;
  size_t y_off_ = kNone, h0_off_ = kNone, c0_off_ = kNone, yh_off_ = kNone, yc_off_ = kNone;
  size_t ws_bytes_ = 0;
};

Status rnn_applies(const StepDesc& s) {
  auto g = rnn_geom(s);
  return g ? Status::ok() : g.status();
}

// Fitted to oneDNN 2.6 at one thread on this machine (AMD EPYC, AVX-512; LSTM, T = 50..200,
// batch 1..32, H = 64..512, within ~25%). Per step and direction, brgemm multiplies [x_t, h_t-1]
// by [W; R]: at batch 1 to 4 it is bound by streaming W and R from L2/L3 (~80 bytes/ns), from
// batch 8 by its ~185 GFLOP/s. The gemm-based implementation first runs X*W for every step as one
// GEMM (~200 GFLOP/s), then per step multiplies by R only (~90 bytes/ns, or ~120 GFLOP/s with a
// larger batch). The gates cost ~0.2 ns per element, a step ~0.3-0.5 us of fixed overhead.
// Compute scales with the threads, bandwidth up to ~4 of them.
// Threads the kernel runs on: one below batch 8, where a time step's work is a few microseconds and
// a second thread's synchronisation per step costs more than it saves (lstm_audio's GRU, batch 1:
// 572 us on one thread, 1491 us on two).
int rnn_threads(const RnnGeom& g, int threads) { return g.N < 8 ? 1 : std::max(threads, 1); }

template <Impl impl>
double rnn_cost(const StepDesc& s) {
  auto g = rnn_geom(s);
  if (!g) return 1e30;
  const double t = rnn_threads(*g, s.threads), bw = std::min(t, 4.0);
  const double N = static_cast<double>(g->N), I = static_cast<double>(g->I), H = static_cast<double>(g->H);
  const double GH = static_cast<double>(g->G) * H, steps = static_cast<double>(g->D * g->T);
  const bool brgemm = impl == Impl::choice && cpu_features().avx512 && !g->lbr;  // oneDNN's choice here
  double once = 0, step = 0;
  if (brgemm) {
    step = std::max(2.0 * N * GH * (I + H) / (185.0 * t), 4.0 * GH * (I + H) / (80.0 * bw)) + 500.0;
  } else {
    once = g->layer_flops() / (200.0 * t);
    step = std::max(2.0 * N * GH * H / (120.0 * t), 4.0 * GH * H / (90.0 * bw)) + 300.0;
  }
  return 5000.0 + once + steps * (step + 0.2 * N * GH / t);
}

template <Impl impl>
Result<std::unique_ptr<Kernel>> rnn_prepare(const StepDesc& s) {
  auto g = rnn_geom(s);
  if (!g) return g.status();
  try {
    auto k = std::make_unique<RnnKernel>(*g, impl, rnn_threads(*g, s.threads));
    k->init(s);
    return std::unique_ptr<Kernel>(std::move(k));
  } catch (const dnnl::error& e) {
    return not_applicable(std::string("oneDNN has no RNN primitive for this step: ") + e.what());
  }
}

const Tactic kRnnTactics[] = {
    {"onednn", ir::OpKind::LSTM, "oneDNN lstm_forward, its own implementation (brgemm): weights reordered once",
     rnn_applies, rnn_cost<Impl::choice>, rnn_prepare<Impl::choice>},
    {"onednn_gemm", ir::OpKind::LSTM, "oneDNN lstm_forward, gemm-based: X*W of all steps as one GEMM, then R per step",
     rnn_applies, rnn_cost<Impl::gemm>, rnn_prepare<Impl::gemm>},
    {"onednn", ir::OpKind::GRU, "oneDNN gru_forward / lbr_gru_forward (linear_before_reset), its own implementation",
     rnn_applies, rnn_cost<Impl::choice>, rnn_prepare<Impl::choice>},
    {"onednn_gemm", ir::OpKind::GRU, "oneDNN gru_forward / lbr_gru_forward, gemm-based: X*W of all steps as one GEMM",
     rnn_applies, rnn_cost<Impl::gemm>, rnn_prepare<Impl::gemm>},
    {"onednn", ir::OpKind::RNN, "oneDNN vanilla_rnn_forward (Tanh, Relu or Sigmoid), its own implementation",
     rnn_applies, rnn_cost<Impl::choice>, rnn_prepare<Impl::choice>},
    {"onednn_gemm", ir::OpKind::RNN, "oneDNN vanilla_rnn_forward, gemm-based: X*W of all steps as one GEMM",
     rnn_applies, rnn_cost<Impl::gemm>, rnn_prepare<Impl::gemm>},
};

}  // namespace

std::span<const Tactic> rnn_tactics() { return kRnnTactics; }

}  // namespace tac::kernels
