// One oneDNN 2.6 convolution kernel for every data type (issue 32): onednn_conv.cc's fp32
// tactics (onednn, onednn_nchw, onednn_winograd) and onednn_lowp.cc's bf16 and int8 tactics
// describe their step as an OnednnConv and share the kernel. Internal to the conv family.
#pragma once

#include <dnnl.hpp>
#include <memory>
#include <vector>

#include "kernels/conv/conv_common.h"

namespace tac::kernels::conv {

// choose: formats oneDNN's choice for nchw activations, the step's layout otherwise; plain:
// nchw/oihw; winograd: the Winograd algorithm, formats its choice whatever the step's layout.
enum class OnednnMode { choose, plain, winograd };

struct OnednnConv {
  ConvGeom g;  // read with fp32 dtypes (conv_geom)
  OnednnMode mode = OnednnMode::choose;
  dnnl::memory::data_type x = dnnl::memory::data_type::f32, w = dnnl::memory::data_type::f32,
                          y = dnnl::memory::data_type::f32;  // bias and scales are fp32
  ir::Layout src_layout = ir::Layout::nchw, dst_layout = ir::Layout::nchw;
  // int8: the output scales per output channel (x_scale * w_scales[m]); oneDNN 2.x adds the bias
  // before them, so the kernel divides the bias by them (once for a constant bias, `bias`).
  std::vector<float> scales;
  const Tensor* bias = nullptr;
  float y_scale = 0;  // > 0: a quantized output, y / y_scale as the last post-op
};

// The primitive descriptor of `c`; throws dnnl::error when oneDNN has none. `act_after` is set
// when the activation cannot be a post-op (Winograd's take a residual sum and ReLU only): the
// kernel then applies it after the primitive.
dnnl::convolution_forward::primitive_desc onednn_conv_pd(const OnednnConv& c, bool& act_after);

// The kernel of `c` with weights `w` (reordered now into the primitive's format);
// not_applicable when oneDNN has no convolution for it.
Result<std::unique_ptr<Kernel>> make_onednn_conv(const OnednnConv& c, const Tensor& w);

}  // namespace tac::kernels::conv
