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
#include "kernels/tactic.h"

namespace tac::kernels {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

enum class Cell { rnn, gru, lstm };

size_t round64(size_t n) { return (n + 63) / 64 * 64; }


// The step as oneDNN sees it.
struct RnnGeom {
  Cell cell = Cell::lstm;
  int64_t T = 0, N = 0, I = 0, H = 0, D = 1;
  int64_t G = 4;  // gates
  bool reverse = false;  // one direction, right to left
  bool layout1 = false;  // ONNX layout=1: batch first
  bool lbr = false;      // GRU linear_before_reset
  dnnl::algorithm act = dnnl::algorithm::eltwise_tanh;  // RNN's activation
  bool has_b = false, has_h0 = false, has_c0 = false;
  bool want_y = false, want_yh = false, want_yc = false;

  bool lstm() const { return cell == Cell::lstm; }
  // The states' buffers are oneDNN's ldnc: layout 0, or layout 1 with one direction or batch 1.
  bool states_plain() const { return !layout1 || D == 1 || N == 1; }
  // Y's buffer is oneDNN's dst_layer (tnc / ntc).
  bool y_plain() const { return layout1 || D == 1 || N == 1; }
  // oneDNN gets initial states (an LSTM's h and c as a pair, the omitted one zeroed) when either
  // is given, else its zero memory desc; final states likewise when Y_h or Y_c is wanted.
  bool src_iter() const { return has_h0 || has_c0; }
  bool dst_iter() const { return want_yh || want_yc; }

  // Flops of the input projection X*W of every step and direction.
  double layer_flops() const { return 2.0 * static_cast<double>(D * T * N * G * H * I); }
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

int64_t int_attr(const StepDesc& s, const char* key, int64_t def) {
  const ir::Attribute* a = s.node->attr(key);
  return a ? a->i : def;
}

bool wants_output(const StepDesc& s, size_t k) { return k < s.out_dtypes.size() && s.out_dtypes[k] != DType::undefined; }

Result<RnnGeom> rnn_geom(const StepDesc& s) {
  RnnGeom g;
  const ir::OpKind op = s.node->op;
  g.cell = op == ir::OpKind::LSTM ? Cell::lstm : op == ir::OpKind::GRU ? Cell::gru : Cell::rnn;
  g.G = g.lstm() ? 4 : g.cell == Cell::gru ? 3 : 1;
  if (s.dynamic) return not_applicable("shapes known only at run time");
  for (size_t i = 0; i < 3; ++i)
    if (!s.has_input(i) || s.in_dtypes[i] != DType::float32) return not_applicable("float32 X, W, R only");
  if (!s.constants[1] || !s.constants[2]) return not_applicable("W and R are not constant (reordered at prepare)");
  if (s.has_input(3) && !s.constants[3]) return not_applicable("B is not constant (folded at prepare)");
  const Shape& x = s.in_shapes[0];
  const Shape& w = s.in_shapes[1];
  if (x.size() != 3 || w.size() != 3 || s.in_shapes[2].size() != 3) return not_applicable("X, W, R of rank 3 only");
  const int64_t layout = int_attr(s, "layout", 0);
  if (layout != 0 && layout != 1) return not_applicable("layout other than 0 or 1");
  g.layout1 = layout == 1;
  g.T = g.layout1 ? x[1] : x[0];
  g.N = g.layout1 ? x[0] : x[1];
  g.I = x[2];
  const ir::Attribute* dir = s.node->attr("direction");
  const std::string direction = dir ? dir->s : "forward";
  if (direction == "bidirectional") g.D = 2;
  else if (direction == "reverse") g.reverse = true;
  else if (direction != "forward") return not_applicable("direction '" + direction + "'");
  if (w[0] != g.D || w[1] % g.G != 0 || w[2] != g.I) return not_applicable("W's shape does not fit X");
  g.H = w[1] / g.G;
  if (g.T <= 0 || g.N <= 0 || g.I <= 0 || g.H <= 0) return not_applicable("an empty dimension");
  if (s.in_shapes[2] != Shape{g.D, g.G * g.H, g.H}) return not_applicable("R's shape does not fit W");
  if (int_attr(s, "hidden_size", g.H) != g.H) return not_applicable("hidden_size does not match W");
  g.has_b = s.has_input(3);
  if (g.has_b && (s.in_dtypes[3] != DType::float32 || s.in_shapes[3] != Shape{g.D, 2 * g.G * g.H}))
    return not_applicable("B's type or shape");
  if (s.has_input(4)) {  // sequence_lens: all seq_length, known at build time
    const Tensor* lens = s.constants[4];
    if (!lens) return not_applicable("sequence_lens not constant");
    if (lens->numel() != g.N) return not_applicable("sequence_lens of another batch");
    for (int64_t i = 0; i < lens->numel(); ++i)
      if (lens->get_i64(i) != g.T) return not_applicable("sequence_lens not all seq_length");
  }
  const Shape state = g.layout1 ? Shape{g.N, g.D, g.H} : Shape{g.D, g.N, g.H};
  g.has_h0 = s.has_input(5);
  if (g.has_h0 && (s.in_dtypes[5] != DType::float32 || s.in_shapes[5] != state)) return not_applicable("initial_h's type or shape");
  if (g.lstm()) {
    g.has_c0 = s.has_input(6);
    if (g.has_c0 && (s.in_dtypes[6] != DType::float32 || s.in_shapes[6] != state))
      return not_applicable("initial_c's type or shape");
    if (s.has_input(7)) return not_applicable("peepholes (P)");
    if (int_attr(s, "input_forget", 0) != 0) return not_applicable("input_forget");
  }
  if (g.cell == Cell::gru) g.lbr = int_attr(s, "linear_before_reset", 0) != 0;
  if (s.node->attr("clip")) return not_applicable("clip");
  // Activations: the defaults only (oneDNN's cells hard-wire them), but RNN's one activation may
  // be Tanh, Relu or Sigmoid. None of these take activation_alpha / activation_beta.
  if (const ir::Attribute* a = s.node->attr("activations"); a && !a->strings.empty()) {
    std::vector<std::string> want = g.lstm() ? std::vector<std::string>{"sigmoid", "tanh", "tanh"}
                                    : g.cell == Cell::gru ? std::vector<std::string>{"sigmoid", "tanh"}
                                                          : std::vector<std::string>{lower(a->strings[0])};
    if (g.cell == Cell::rnn) {
      if (want[0] == "relu") g.act = dnnl::algorithm::eltwise_relu;
      else if (want[0] == "sigmoid") g.act = dnnl::algorithm::eltwise_logistic;
      else if (want[0] != "tanh") return not_applicable("activation " + a->strings[0]);
    }
    std::vector<std::string> got;
    for (const std::string& n : a->strings) got.push_back(lower(n));
    std::vector<std::string> per_dir = want;
    if (got.size() == want.size() * 2) want.insert(want.end(), per_dir.begin(), per_dir.end());
    if (got != want) return not_applicable("activations other than the defaults");
  }
  for (size_t k = 0; k < s.out_dtypes.size(); ++k)
    if (wants_output(s, k) && s.out_dtypes[k] != DType::float32) return not_applicable("float32 outputs only");
  g.want_y = wants_output(s, 0);
  g.want_yh = wants_output(s, 1);
  g.want_yc = g.lstm() && wants_output(s, 2);
  return g;
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
            {{pk, g_.act, dir, src_layer_md_, src_iter, w_layer_want, w_iter_want, bias_md, dst_layer_md_, dst_iter},
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
