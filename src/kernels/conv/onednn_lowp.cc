// Lower-precision convolution tactics (steps made by the builder's precision rewrite, see
// src/builder/precision.h), oneDNN 2.6 with formats of its choice (blocked), src/dst reordered
// from/to NCHW in the workspace as in onednn_conv.cc; onednn_bf16 in the layout rewrite's
// regions (nhwc, nChw16c/nChw8c: builder/layout.h) reads and writes them as they are:
//   onednn_bf16: bf16 X, W and Y, fp32 bias, bf16 residual (sum post-op), AVX512-BF16;
//   onednn_int8: u8/s8 X, s8 W, fp32 Y with per-output-channel scales x_scale * w_scales[m]
//                (node attributes), fp32 bias and residual, AVX512-VNNI.
// The geometry is conv_geom's, read from the step with its dtypes set aside (conv_geom accepts
// fp32 only, so every fp32 tactic rejects these steps).
#include <cstring>
#include <dnnl.hpp>
#include <unordered_map>

#include "kernels/conv/conv_common.h"
#include "kernels/onednn_common.h"

namespace tac::kernels::conv {

namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

enum class Lowp { bf16, int8 };

size_t round64(size_t n) { return (n + 63) / 64 * 64; }

Result<ConvGeom> lowp_geom(const StepDesc& s, Lowp kind) {
  const ir::OpKind op = s.node->op;
  if (op != ir::OpKind::Conv && op != ir::OpKind::FusedConv) return not_applicable("not a convolution");
  if (s.in_dtypes.size() < 2 || s.out_dtypes.empty()) return not_applicable("missing inputs");
  const bool res = op == ir::OpKind::FusedConv && s.has_input(3);
  if (kind == Lowp::bf16) {
    if (!cpu_features().avx512_bf16) return not_applicable("needs AVX512-BF16");
    if (s.in_dtypes[0] != DType::bfloat16 || s.in_dtypes[1] != DType::bfloat16 || s.out_dtypes[0] != DType::bfloat16)
      return not_applicable("bf16 only (X, W and Y)");
    if (res && s.in_dtypes[3] != DType::bfloat16) return not_applicable("the residual must be bf16");
    if (s.node->attr("x_scale")) return not_applicable("an int8 step");
  } else {
    if (!cpu_features().avx512_vnni) return not_applicable("needs AVX512-VNNI");
    if (op != ir::OpKind::FusedConv || !s.node->attr("x_scale") || !s.node->attr("w_scales"))
      return not_applicable("not an int8 step (FusedConv with x_scale / w_scales)");
    // With y_scale the output is quantized (u8 / s8 for the next int8 node), else fp32.
    const bool y_q = s.node->attr("y_scale") != nullptr;
    const DType y = s.out_dtypes[0];
    if ((s.in_dtypes[0] != DType::uint8 && s.in_dtypes[0] != DType::int8) || s.in_dtypes[1] != DType::int8 ||
        (y_q ? y != DType::uint8 && y != DType::int8 : y != DType::float32))
      return not_applicable("int8 needs u8/s8 X, s8 W, fp32 Y (u8/s8 with y_scale)");
    if (res && (y_q || s.in_dtypes[3] != DType::float32)) return not_applicable("the residual must be fp32, without y_scale");
    if (y_q && !(s.node->attr("y_scale")->f > 0)) return not_applicable("y_scale must be positive");
  }
  if (!s.constants[1]) return not_applicable("weights are not constant (reordered at prepare)");
  if (kind == Lowp::int8 && !s.plain()) return not_applicable("int8 reads and writes nchw only");
  if (res && s.in_layout(3) != s.out_layout(0)) return not_applicable("the residual in the output's layout");
  StepDesc f = s;
  for (DType& d : f.in_dtypes)
    if (d != DType::undefined) d = DType::float32;
  f.out_dtypes[0] = DType::float32;
  auto g = conv_geom(f);
  if (!g) return g.status();
  if (g->has_bias && s.in_dtypes[2] != DType::float32) return not_applicable("bias must be fp32");
  if (kind == Lowp::int8 && static_cast<int64_t>(s.node->attr("w_scales")->floats.size()) != g->M)
    return not_applicable("w_scales must have one entry per output channel");
  return g;
}

class LowpConvKernel final : public Kernel {
 public:
  LowpConvKernel(const ConvGeom& g, const StepDesc& s, Lowp kind) : g_(g), kind_(kind), stream_(cpu_engine()) {
    ScopedOmpThreads scope(g.threads);
    auto& eng = cpu_engine();
    const dt x_t = dnnl_type(s.in_dtypes[0]), w_t = dnnl_type(s.in_dtypes[1]), y_t = dnnl_type(s.out_dtypes[0]);
    const dnnl::memory::dims src_d{g.N, g.C, g.H, g.W}, dst_d{g.N, g.M, g.OH, g.OW};
    const dnnl::memory::dims w_d = g.G > 1 ? dnnl::memory::dims{g.G, g.Mg(), g.Cg(), g.KH, g.KW}
                                           : dnnl::memory::dims{g.M, g.C, g.KH, g.KW};
    const tag w_tag = g.G > 1 ? tag::goihw : tag::oihw;
    // nchw: oneDNN's choice of format, reordered here; a layout of the layout rewrite: exactly it.
    const ir::Layout src_l = s.in_layout(0), dst_l = s.out_layout(0);
    user_src_md_ = dnnl::memory::desc(src_d, x_t, dnnl_tag(src_l));
    user_dst_md_ = dnnl::memory::desc(dst_d, y_t, dnnl_tag(dst_l));
    const dnnl::memory::desc user_w_md(w_d, w_t, w_tag);
    const dnnl::memory::desc src_md(src_d, x_t, src_l == ir::Layout::nchw ? tag::any : dnnl_tag(src_l)),
        dst_md(dst_d, y_t, dst_l == ir::Layout::nchw ? tag::any : dnnl_tag(dst_l)), w_md(w_d, w_t, tag::any);
    const dnnl::memory::desc b_md({g.M}, dt::f32, tag::x);
    dnnl::primitive_attr attr;
    if (kind == Lowp::int8) {
      const float xs = s.node->attr("x_scale")->f;
      const auto& ws = s.node->attr("w_scales")->floats;
      scales_.resize(ws.size());
      for (size_t i = 0; i < ws.size(); ++i) scales_[i] = xs * ws[i];
      attr.set_output_scales(1 << 1, scales_);
      // oneDNN 2.x adds the bias before the output scales: pre-divide it (see run()).
      if (g.has_bias) {
        bias_scaled_.resize(static_cast<size_t>(g.M));
        bias_const_ = s.constants[2];
        if (bias_const_)
          for (int64_t m = 0; m < g.M; ++m)
            bias_scaled_[static_cast<size_t>(m)] = bias_const_->data<float>()[m] / scales_[static_cast<size_t>(m)];
      }
    }
    dnnl::post_ops po;
    if (g.has_res) po.append_sum(1.0f);
    const float a = g.ep.alpha, b = g.ep.beta;

    using alg = dnnl::algorithm;
    switch (g.ep.act) {
      case ir::Epilogue::Act::none: break;
      case ir::Epilogue::Act::relu: po.append_eltwise(1.0f, alg::eltwise_relu, 0.0f, 0.0f); break;
      case ir::Epilogue::Act::leaky_relu: po.append_eltwise(1.0f, alg::eltwise_relu, a, 0.0f); break;
      case ir::Epilogue::Act::clip: po.append_eltwise(1.0f, alg::eltwise_clip, a, b); break;
      case ir::Epilogue::Act::sigmoid: po.append_eltwise(1.0f, alg::eltwise_logistic, 0.0f, 0.0f); break;
      case ir::Epilogue::Act::tanh: po.append_eltwise(1.0f, alg::eltwise_tanh, 0.0f, 0.0f); break;
      case ir::Epilogue::Act::gelu: po.append_eltwise(1.0f, alg::eltwise_gelu_erf, 0.0f, 0.0f); break;
      case ir::Epilogue::Act::silu: po.append_eltwise(1.0f, alg::eltwise_swish, 1.0f, 0.0f); break;
      case ir::Epilogue::Act::hard_swish: po.append_eltwise(1.0f, alg::eltwise_hardswish, 1.0f / 6.0f, 0.5f); break;
      case ir::Epilogue::Act::hard_sigmoid:
        po.append_eltwise(1.0f, alg::eltwise_linear, a, b);
        po.append_eltwise(1.0f, alg::eltwise_clip, 0.0f, 1.0f);
        break;
    }
    // y_scale: y / y_scale as the last post-op; the f32 -> s8/u8 store rounds to nearest even
    // and saturates.
    if (const ir::Attribute* ys = s.node->attr("y_scale"); ys && kind == Lowp::int8)
      po.append_eltwise(1.0f, alg::eltwise_linear, 1.0f / ys->f, 0.0f);
    attr.set_post_ops(po);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::memory::dims strides{g.SH, g.SW}, dil{g.DH - 1, g.DW - 1}, pl{g.PT, g.PL}, pr{g.PB, g.PR};
    auto desc = g.has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                             alg::convolution_direct, src_md, w_md, b_md, dst_md,
                                                             strides, dil, pl, pr)
                           : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                             alg::convolution_direct, src_md, w_md, dst_md, strides,
                                                             dil, pl, pr);
    pd_ = dnnl::convolution_forward::primitive_desc(desc, attr, eng);
    conv_ = dnnl::convolution_forward(pd_);
    weights_ = dnnl::memory(pd_.weights_desc(), eng);
    dnnl::memory user_w(user_w_md, eng, const_cast<void*>(s.constants[1]->raw()));
    dnnl::reorder(user_w, weights_).execute(stream_, user_w, weights_);
    stream_.wait();
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
        } else {
          // The whole buffer: a blocked layout's padded channels too.
          if (out[0].data != in[3].data) std::memcpy(out[0].data, in[3].data, user_dst_md_.get_size());
        }
      }
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src_mem_},
                                                 {DNNL_ARG_WEIGHTS, weights_},
                                                 {DNNL_ARG_DST, dst_mem_},
                                                 {DNNL_ARG_SCRATCHPAD, scratch_}};
      if (g_.has_bias) {
        void* b = in[2].data;
        if (kind_ == Lowp::int8) {
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
      if (reorder_dst_) dst_reorder_.execute(stream_, dst_mem_, user_dst_);
      stream_.wait();
    } catch (const dnnl::error& e) {
      return internal_error(std::string("oneDNN low-precision convolution: ") + e.what());
    }
    return Status::ok();
  }

 private:
  ConvGeom g_;
  Lowp kind_;
  dnnl::stream stream_;
  dnnl::memory::desc user_src_md_, user_dst_md_;
  dnnl::convolution_forward::primitive_desc pd_;
  dnnl::convolution_forward conv_;
  dnnl::reorder src_reorder_, dst_reorder_, res_reorder_;
  dnnl::memory weights_, src_mem_, dst_mem_, user_src_, user_dst_, user_res_, scratch_, bias_;
  bool reorder_src_ = false, reorder_dst_ = false;
  size_t src_bytes_ = 0, dst_bytes_ = 0, scratch_bytes_ = 0;
  std::vector<float> scales_, bias_scaled_;
  const Tensor* bias_const_ = nullptr;
};

template <Lowp K>
Status lowp_applies(const StepDesc& s) {
  auto g = lowp_geom(s, K);
  return g ? Status::ok() : g.status();
}

// Relative to onednn's fp32 formula (0.62 of peak on C, M >= 16): bf16 doubles the FMA rate
// and halves the bytes, int8 (VNNI) doubles it again; depthwise gains little (memory bound).
template <Lowp K>
double lowp_cost(const StepDesc& s) {
  auto g = lowp_geom(s, K);
  if (!g) return 1e30;
  const double speed = K == Lowp::bf16 ? 1.7 : 3.0;
  const bool dw = g->G > 1 && g->G == g->C && g->G == g->M;
  const double eff = (g->Cg() >= 16 && g->Mg() >= 16 ? 0.62 : g->Cg() >= 3 ? 0.5 : 0.05) * (dw ? 1.0 : speed);
  const double bytes = K == Lowp::bf16 ? 2.0 : 1.0;
  // src and dst (with the residual) are reordered when nchw, read and written as they are otherwise.
  const bool rs = s.in_layout(0) == ir::Layout::nchw, rd = s.out_layout(0) == ir::Layout::nchw;
  const double reorders = bytes * 2 * g->N * ((rs ? g->C * g->hw() : 0) + (rd ? g->M * g->ohw() * (g->has_res ? 2 : 1) : 0));
  return cost_ns(g->flops(), eff, g->io_bytes() * bytes / 4.0 + reorders, g->threads);
}

template <Lowp K>
Result<std::unique_ptr<Kernel>> lowp_prepare(const StepDesc& s) {
  auto g = lowp_geom(s, K);
  if (!g) return g.status();
  try {
    return std::unique_ptr<Kernel>(new LowpConvKernel(*g, s, K));
  } catch (const dnnl::error& e) {
    return not_applicable(std::string("oneDNN has no low-precision convolution for this step: ") + e.what());
  }
}

}  // namespace

std::span<const Tactic> lowp_conv_tactics() {
  static const Tactic kTactics[] = {
      {"onednn_bf16", ir::OpKind::Conv,
       "oneDNN convolution in bf16 (AVX512-BF16), blocked formats, fp32 bias; nhwc / blocked layouts (layout.*) "
       "read and written directly",
       lowp_applies<Lowp::bf16>, lowp_cost<Lowp::bf16>, lowp_prepare<Lowp::bf16>, Backend::cpu, /*layouts=*/true},
      {"onednn_bf16", ir::OpKind::FusedConv,
       "oneDNN convolution in bf16 (AVX512-BF16), blocked formats, fp32 bias, residual/activation post-ops; nhwc / "
       "blocked layouts (layout.*) read and written directly",
       lowp_applies<Lowp::bf16>, lowp_cost<Lowp::bf16>, lowp_prepare<Lowp::bf16>, Backend::cpu, /*layouts=*/true},
      {"onednn_int8", ir::OpKind::FusedConv,
       "oneDNN convolution in int8 (VNNI): u8/s8 X, s8 W, fp32 Y with per-channel scales, fp32 post-ops",
       lowp_applies<Lowp::int8>, lowp_cost<Lowp::int8>, lowp_prepare<Lowp::int8>},
  };
  return kTactics;
}

}  // namespace tac::kernels::conv
