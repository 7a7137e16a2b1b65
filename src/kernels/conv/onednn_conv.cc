// oneDNN 2.6 convolution. "onednn" lets oneDNN choose the memory formats (format_tag::any: on
// AVX-512 it picks channel-blocked nChw16c / OIhw16i16o): src is reordered from NCHW into the
// workspace and dst back to NCHW on every run (the residual too, for the sum post-op); weights
// are reordered once at prepare(). "onednn_nchw" forces plain nchw/oihw, so no reorders: the
// pair shows the tuner what the reorders cost. Epilogue: sum post-op (residual) + eltwise.
// In the layout rewrite's regions (ir/layout.h), "onednn" reads src and writes dst (and reads
// the residual) in the step's layouts, nhwc or nChw16c/nChw8c, with no reorder: src may also
// stay nchw (a first layer of few channels, which oneDNN's blocked kernels read directly).
// "onednn_winograd" is oneDNN's Winograd (F(2x2,3x3) or F(4x4,3x3), its choice; 3x3 stride 1,
// AVX-512, blocked formats only): src/dst are reordered from/to whatever layout the step has.
// The activation is a oneDNN post-op, but Winograd's post-ops take a residual sum and ReLU, not
// SiLU, HardSwish, Sigmoid, ...: those run over dst right after the convolution (finish_row, the
// epilogue of our own convolutions). The kernel is onednn_conv.h's, shared with the bf16 and
// int8 tactics of onednn_lowp.cc.
#include "kernels/conv/onednn_conv.h"

#include <cstring>
#include <dnnl.hpp>
#include <vector>

#include "kernels/onednn_common.h"

namespace tac::kernels::conv {

namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

size_t round64(size_t n) { return (n + 63) / 64 * 64; }

dnnl::memory::dims weight_dims(const ConvGeom& g) {
  return g.G > 1 ? dnnl::memory::dims{g.G, g.Mg(), g.Cg(), g.KH, g.KW} : dnnl::memory::dims{g.M, g.C, g.KH, g.KW};
}
tag weight_tag(const ConvGeom& g) { return g.G > 1 ? tag::goihw : tag::oihw; }

// The primitive for `c`; `with_act`: the activation as a post-op (else the caller applies it after).
dnnl::convolution_forward::primitive_desc conv_pd(const OnednnConv& c, bool with_act) {
  const ConvGeom& g = c.g;
  const bool plain = c.mode == OnednnMode::plain, any = c.mode == OnednnMode::winograd;
  const dnnl::memory::dims src_d{g.N, g.C, g.H, g.W}, dst_d{g.N, g.M, g.OH, g.OW};
  // nchw: oneDNN's choice (reordered by the kernel) unless `plain`; other layouts: exactly that
  // one, but for Winograd, which takes its own formats only.
  auto act_tag = [&](ir::Layout l) { return plain ? tag::nchw : l != ir::Layout::nchw && !any ? dnnl_tag(l) : tag::any; };
  const dnnl::memory::desc src_md(src_d, c.x, act_tag(c.src_layout)), dst_md(dst_d, c.y, act_tag(c.dst_layout));
  const dnnl::memory::desc w_md(weight_dims(g), c.w, plain ? weight_tag(g) : tag::any);
  const dnnl::memory::desc b_md({g.M}, dt::f32, tag::x);
  dnnl::primitive_attr attr;
  if (!c.scales.empty()) attr.set_output_scales(1 << 1, c.scales);
  dnnl::post_ops po;
  if (g.has_res) po.append_sum(1.0f);
  if (with_act) append_activation(po, g.ep);
  // y_scale: y / y_scale last; the f32 -> s8/u8 store rounds to nearest even and saturates.
  if (c.y_scale > 0) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, 1.0f / c.y_scale, 0.0f);
  attr.set_post_ops(po);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::memory::dims strides{g.SH, g.SW}, dil{g.DH - 1, g.DW - 1}, pl{g.PT, g.PL}, pr{g.PB, g.PR};
  using alg = dnnl::algorithm;
  const alg a_conv = any ? alg::convolution_winograd : alg::convolution_direct;
  auto desc = g.has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, a_conv, src_md, w_md,
                                                           b_md, dst_md, strides, dil, pl, pr)
                         : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, a_conv, src_md, w_md,
                                                           dst_md, strides, dil, pl, pr);
  return dnnl::convolution_forward::primitive_desc(desc, attr, cpu_engine());
}

class OnednnKernel final : public Kernel {
 public:
  OnednnKernel(const OnednnConv& c, const Tensor& w) : g_(c.g), stream_(cpu_engine()) {
    const ConvGeom& g = c.g;
    ScopedOmpThreads scope(g.threads);
    auto& eng = cpu_engine();
    user_src_md_ = dnnl::memory::desc({g.N, g.C, g.H, g.W}, c.x, dnnl_tag(c.src_layout));
    user_dst_md_ = dnnl::memory::desc({g.N, g.M, g.OH, g.OW}, c.y, dnnl_tag(c.dst_layout));
    const dnnl::memory::desc user_w_md(weight_dims(g), c.w, weight_tag(g));
    const dnnl::memory::desc b_md({g.M}, dt::f32, tag::x);
    pd_ = onednn_conv_pd(c, act_after_);
    conv_ = dnnl::convolution_forward(pd_);
    if (!c.scales.empty() && g.has_bias) {  // the bias divided by the output scales (see OnednnConv)
      scales_ = c.scales;
      bias_scaled_.resize(static_cast<size_t>(g.M));
      bias_const_ = c.bias;
      if (bias_const_)
        for (size_t m = 0; m < bias_scaled_.size(); ++m) bias_scaled_[m] = bias_const_->data<float>()[m] / scales_[m];
    }
    // Weights: reordered once into the primitive's format (or the weight cache's earlier reordering).
    weights_ = reordered_weights(w, user_w_md, pd_.weights_desc(), stream_);
    reorder_src_ = pd_.src_desc() != user_src_md_;
    reorder_dst_ = pd_.dst_desc() != user_dst_md_;
    src_bytes_ = reorder_src_ ? round64(pd_.src_desc().get_size()) : 0;
    dst_bytes_ = reorder_dst_ ? round64(pd_.dst_desc().get_size()) : 0;
    scratch_bytes_ = round64(pd_.scratchpad_desc().get_size());
    src_mem_ = dnnl::memory(pd_.src_desc(), eng, nullptr);
    dst_mem_ = dnnl::memory(pd_.dst_desc(), eng, nullptr);
    user_src_ = dnnl::memory(user_src_md_, eng, nullptr);
    user_dst_ = dnnl::memory(user_dst_md_, eng, nullptr);
    user_res_ = dnnl::memory(user_dst_md_, eng, nullptr);
    scratch_ = dnnl::memory(pd_.scratchpad_desc(), eng, nullptr);
    bias_ = dnnl::memory(b_md, eng, nullptr);
    if (reorder_src_) src_reorder_ = dnnl::reorder(user_src_, src_mem_);
    if (reorder_dst_) {
      dst_reorder_ = dnnl::reorder(dst_mem_, user_dst_);
      if (g.has_res) res_reorder_ = dnnl::reorder(user_res_, dst_mem_);
    }
  }
  size_t workspace_bytes() const override { return src_bytes_ + dst_bytes_ + scratch_bytes_ + 64; }

  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* ws) override {
    ScopedOmpThreads scope(g_.threads);
    auto* base = static_cast<std::byte*>(ws);
    try {
      user_src_.set_data_handle(in[0].data);
      user_dst_.set_data_handle(out[0].data);
      src_mem_.set_data_handle(reorder_src_ ? base : in[0].data);
      dst_mem_.set_data_handle(reorder_dst_ ? base + src_bytes_ : out[0].data);
      scratch_.set_data_handle(base + src_bytes_ + dst_bytes_);
      if (reorder_src_) src_reorder_.execute(stream_, user_src_, src_mem_);
      if (g_.has_res) {
        if (reorder_dst_) {
          user_res_.set_data_handle(in[3].data);
          res_reorder_.execute(stream_, user_res_, dst_mem_);
        } else if (out[0].data != in[3].data) {  // else planned over the residual (Tactic::over_input)
          // The whole buffer: a blocked layout's padded channels too.
          std::memcpy(out[0].data, in[3].data, user_dst_md_.get_size());
        }
      }
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src_mem_},
                                                 {DNNL_ARG_WEIGHTS, weights_},
                                                 {DNNL_ARG_DST, dst_mem_},
                                                 {DNNL_ARG_SCRATCHPAD, scratch_}};
      if (g_.has_bias) {
        void* b = in[2].data;
        if (!scales_.empty()) {
          if (!bias_const_) {
            const float* bf = static_cast<const float*>(b);
            for (size_t m = 0; m < bias_scaled_.size(); ++m) bias_scaled_[m] = bf[m] / scales_[m];
          }
          b = bias_scaled_.data();
        }
        bias_.set_data_handle(b);
        args.emplace(DNNL_ARG_BIAS, bias_);
      }
      conv_.execute(stream_, args);
      if (act_after_) {
        stream_.wait();
        run_act_after(static_cast<float*>(dst_mem_.get_data_handle()), pd_.dst_desc().get_size() / sizeof(float));
      }
      if (reorder_dst_) dst_reorder_.execute(stream_, dst_mem_, user_dst_);
      stream_.wait();
    } catch (const dnnl::error& e) {
      return internal_error(std::string("oneDNN convolution: ") + e.what());
    }
    return Status::ok();
  }

 private:
  ConvGeom g_;
  dnnl::stream stream_;
  dnnl::memory::desc user_src_md_, user_dst_md_;
  dnnl::convolution_forward::primitive_desc pd_;
  dnnl::convolution_forward conv_;
  dnnl::reorder src_reorder_, dst_reorder_, res_reorder_;
  bool act_after_ = false;                   // the activation runs after the primitive (onednn_conv_pd; fp32 only)
  std::vector<float> scales_, bias_scaled_;  // int8 (OnednnConv::scales)
  const Tensor* bias_const_ = nullptr;

  // y = act(y) over the primitive's dst (padded channels included: an activation that runs after
  // keeps 0 at 0 where dst is blocked, see onednn_winograd_applies), in chunks over the step's threads.
  void run_act_after(float* y, size_t n) const {
    constexpr int64_t kChunk = 16384;
    const int64_t total = static_cast<int64_t>(n), chunks = (total + kChunk - 1) / kChunk;
#pragma omp parallel for num_threads(g_.threads) schedule(static) if (g_.threads > 1 && chunks > 1)
    for (int64_t c = 0; c < chunks; ++c)
      finish_row(y + c * kChunk, nullptr, std::min(kChunk, total - c * kChunk), 0.0f, g_.ep);
  }
  dnnl::memory weights_, src_mem_, dst_mem_, user_src_, user_dst_, user_res_, scratch_, bias_;
  bool reorder_src_ = false, reorder_dst_ = false;
  size_t src_bytes_ = 0, dst_bytes_ = 0, scratch_bytes_ = 0;
};

OnednnConv fp32_conv(const ConvGeom& g, OnednnMode mode, const StepDesc& s) {
  OnednnConv c;
  c.g = g;
  c.mode = mode;
  c.src_layout = s.in_layout(0);
  c.dst_layout = s.out_layout(0);
  return c;
}

Status onednn_applies_impl(const StepDesc& step) {
  auto g = conv_geom(step);
  if (!g) return g.status();
  if (!step.constants[1]) return not_applicable("weights are not constant (reordered at prepare)");
  if (g->has_res && step.in_layout(3) != step.out_layout(0)) return not_applicable("the residual in the output's layout");
  return Status::ok();
}

Result<std::unique_ptr<Kernel>> onednn_prepare_impl(const StepDesc& step, OnednnMode mode) {
  auto g = conv_geom(step);
  if (!g) return g.status();
  return make_onednn_conv(fp32_conv(*g, mode, step), *step.constants[1]);
}

// Bytes the step's own reorders move: src in and out of the primitive's format, dst (and the
// residual it starts from) likewise, for the activations whose layout `reordered` says it converts.
template <class Reordered>
double reorder_bytes(const StepDesc& s, const ConvGeom& g, Reordered reordered) {
  return 4.0 * 2 * g.N *
         ((reordered(s.in_layout(0)) ? g.C * g.hw() : 0) +
          (reordered(s.out_layout(0)) ? g.M * g.ohw() * (g.has_res ? 2 : 1) : 0));
}

}  // namespace

// With the activation as a post-op, or, for Winograd, whose post-ops lack most activations,
// without it: `act_after` then says the kernel applies it after the primitive. (Running SiLU after
// oneDNN's direct kernels too, instead of its swish post-op, measured no faster on efficientnet_b1.)
dnnl::convolution_forward::primitive_desc onednn_conv_pd(const OnednnConv& c, bool& act_after) {
  act_after = false;
  try {
    return conv_pd(c, true);
  } catch (const dnnl::error&) {
    if (c.mode != OnednnMode::winograd || c.g.ep.act == ir::Epilogue::Act::none) throw;
  }
  act_after = true;
  return conv_pd(c, false);
}

Result<std::unique_ptr<Kernel>> make_onednn_conv(const OnednnConv& c, const Tensor& w) {
  try {
    return std::unique_ptr<Kernel>(new OnednnKernel(c, w));
  } catch (const dnnl::error& e) {
    return not_applicable(std::string("oneDNN has no convolution for this step: ") + e.what());
  }
}

// oneDNN's blocked JIT kernels reach ~60% of peak for C, M >= 64 at one thread (146 GFLOP/s
// measured on 256x14x14 3x3), ~40% for the first layer's C = 3, far less for depthwise;
// reorders of src/dst (and residual) move every activation twice more.
Status onednn_applies(const StepDesc& s) { return onednn_applies_impl(s); }
double onednn_cost(const StepDesc& s) {
  auto g = conv_geom(s);
  if (!g) return 1e30;
  // Measured at 1 thread: 0.6-0.65 of peak on ResNet-18's 3x3 layers, ~0.65 on the 7x7 first layer.
  const double eff = g->Cg() >= 16 && g->Mg() >= 16 ? 0.62 : g->Cg() >= 3 ? 0.6 : 0.05;
  // Activations in a layout of the layout rewrite are read and written as they are.
  auto reordered = [](ir::Layout l) { return l == ir::Layout::nchw; };
  return cost_ns(g->flops(), eff, g->io_bytes() + reorder_bytes(s, *g, reordered), g->threads);
}
Result<std::unique_ptr<Kernel>> onednn_prepare(const StepDesc& s) { return onednn_prepare_impl(s, OnednnMode::choose); }

// Plain-format oneDNN falls back to its generic (gemm-based or reference) implementations.
Status onednn_nchw_applies(const StepDesc& s) { return onednn_applies_impl(s); }
double onednn_nchw_cost(const StepDesc& s) {
  auto g = conv_geom(s);
  if (!g) return 1e30;
  return cost_ns(g->flops(), g->Cg() >= 16 ? 0.3 : g->Cg() >= 3 ? 0.12 : 0.005, g->io_bytes() * 2, g->threads);
}
Result<std::unique_ptr<Kernel>> onednn_nchw_prepare(const StepDesc& s) { return onednn_prepare_impl(s, OnednnMode::plain); }

// oneDNN 2.6 has Winograd on AVX-512 only, for 3x3 stride-1 undilated ungrouped convolutions
// (and picks F(2x2) or F(4x4) itself); whether it takes a step is asked by describing it.
// Measured alone, 1 thread, this machine: 1.8x (64ch 56x56), 2.4x (128ch 28x28), 1.7x (256ch
// 14x14) faster than oneDNN's direct kernel, none at 512ch 7x7. Its transforms round more than a
// direct sum in theory (F(4x4): relative errors ~1e-5), but on whole models its outputs are as close
// to the reference as the direct kernel's (bench/winograd_accuracy.sh): it is ranked by its fitted
// cost like every tactic.
Status onednn_winograd_applies(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(onednn_applies_impl(s));
  auto g = conv_geom(s);
  if (!cpu_features().avx512) return not_applicable("oneDNN's Winograd needs AVX-512");
  if (g->KH != 3 || g->KW != 3 || g->SH != 1 || g->SW != 1 || g->DH != 1 || g->DW != 1 || g->G != 1)
    return not_applicable("Winograd: 3x3 stride 1, no dilation, one group");
  try {
    bool after = false;
    onednn_conv_pd(fp32_conv(*g, OnednnMode::winograd, s), after);
    // The activation then runs over dst in the primitive's blocked format, padded channels
    // included, which must stay zero where the step's own layout is blocked.
    if (after && g->ep.apply(0.0f) != 0.0f && ir::is_blocked(s.out_layout(0)))
      return not_applicable("Winograd: this activation after the convolution would write the blocked padding");
  } catch (const dnnl::error& e) {
    return not_applicable(std::string("oneDNN has no Winograd convolution for this step: ") + e.what());
  }
  return Status::ok();
}
double onednn_winograd_cost(const StepDesc& s) {
  auto g = conv_geom(s);
  if (!g) return 1e30;
  auto reordered = [](ir::Layout l) { return l != ir::Layout::nchw16c; };  // its own format: no reorder
  return cost_ns(g->flops(), 0.62, g->io_bytes() + reorder_bytes(s, *g, reordered), g->threads);
}
Result<std::unique_ptr<Kernel>> onednn_winograd_prepare(const StepDesc& s) {
  return onednn_prepare_impl(s, OnednnMode::winograd);
}

}  // namespace tac::kernels::conv
