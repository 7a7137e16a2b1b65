// oneDNN's CPU engine and its descriptions of Tactician's layouts and element types, shared by the
// oneDNN tactics (conv/onednn_conv.cc, conv/onednn_lowp.cc, gemm/onednn_lowp.cc, gemm/gemm_libs.cc,
// layout/tactics.cc). Only those translation units include it: dnnl.hpp is large.
#pragma once

#include <dnnl.hpp>

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

}  // namespace tac::kernels
