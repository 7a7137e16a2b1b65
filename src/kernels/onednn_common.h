// oneDNN's CPU engine and its descriptions of Tactician's layouts and element types, shared by the
// oneDNN tactics (conv/onednn_conv.cc, conv/onednn_lowp.cc, gemm/onednn_lowp.cc, gemm/gemm_libs.cc,
// layout/tactics.cc). Only those translation units include it: dnnl.hpp is large.
#pragma once

#include <dnnl.hpp>

#include "ir/epilogue.h"
#include "ir/layout.h"
#include "tactician/tensor.h"

namespace tac::kernels {

// The one CPU engine every oneDNN tactic builds its primitives and memories on (inline: a single
// instance across the translation units that include this header).
inline dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// The format tag of a 4-D activation in layout `l`.
inline dnnl::memory::format_tag dnnl_tag(ir::Layout l) {
  using tag = dnnl::memory::format_tag;
  switch (l) {
    case ir::Layout::nhwc: return tag::nhwc;
    case ir::Layout::nchw16c: return tag::nChw16c;
    case ir::Layout::nchw8c: return tag::nChw8c;
    case ir::Layout::nchw: break;
  }
  return tag::nchw;
}

// bf16, s8, u8 as themselves; every other type as f32.
inline dnnl::memory::data_type dnnl_type(DType t) {
  using dt = dnnl::memory::data_type;
  switch (t) {
    case DType::bfloat16: return dt::bf16;
    case DType::int8: return dt::s8;
    case DType::uint8: return dt::u8;
    default: return dt::f32;
  }
}

// Appends the activation `ep` as oneDNN eltwise post-ops (2.6 has no hardsigmoid: linear, then
// clip to [0, 1]).
inline void append_activation(dnnl::post_ops& po, const ir::Epilogue& ep) {
  const float a = ep.alpha, b = ep.beta;
  using alg = dnnl::algorithm;
  using A = ir::Epilogue::Act;
  switch (ep.act) {
    case A::none: break;
    case A::relu: po.append_eltwise(1.0f, alg::eltwise_relu, 0.0f, 0.0f); break;
    case A::leaky_relu: po.append_eltwise(1.0f, alg::eltwise_relu, a, 0.0f); break;
    case A::clip: po.append_eltwise(1.0f, alg::eltwise_clip, a, b); break;
    case A::sigmoid: po.append_eltwise(1.0f, alg::eltwise_logistic, 0.0f, 0.0f); break;
    case A::tanh: po.append_eltwise(1.0f, alg::eltwise_tanh, 0.0f, 0.0f); break;
    case A::gelu: po.append_eltwise(1.0f, alg::eltwise_gelu_erf, 0.0f, 0.0f); break;
    case A::silu: po.append_eltwise(1.0f, alg::eltwise_swish, 1.0f, 0.0f); break;
    case A::hard_swish: po.append_eltwise(1.0f, alg::eltwise_hardswish, 1.0f / 6.0f, 0.5f); break;
    case A::hard_sigmoid:
      po.append_eltwise(1.0f, alg::eltwise_linear, a, b);
      po.append_eltwise(1.0f, alg::eltwise_clip, 0.0f, 1.0f);
      break;
  }
}

// Constant weights `src` (described by `from`) in the format `to`: reordered now, or the same
// reordering an earlier kernel made of the same tensor while the weight cache is on
// (kernels/weight_cache.h). The kernels only read the result.
dnnl::memory reordered_weights(const Tensor& src, const dnnl::memory::desc& from, const dnnl::memory::desc& to, dnnl::stream& s);

}  // namespace tac::kernels
