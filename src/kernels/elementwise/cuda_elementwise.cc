// CUDA tactics of the elementwise family: our own kernels (cuda_kernels.cu, cuda_movement.cu) for
// activations, broadcasting binaries, softmax, layer normalization, pooling, transpose, gather,
// slice, depth-to-space / space-to-depth and cast, and plain data movement (Reshape/Flatten/
// Squeeze/Unsqueeze/Identity/Dropout as device copies, Concat as strided 2-D copies). Tactic
// name: "cuda" for each op (one implementation per op so far). Activations, binaries, softmax
// and layer normalization run in fp32, fp16 or bf16 (all float tensors of one type), as the CUDA
// precision rewrite leaves them (builder/precision.h).
// Layout tactics (Tactic::layouts, for the layout rewrite's nhwc regions, builder/layout.h):
// Reformat nchw <-> nhwc ("cuda"), pooling on nhwc ("cuda_nhwc"), and raw_buffer
// (layout/raw_buffer.h) for elementwise ops and Concat.
#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/cuda_util.h"
#include "kernels/elementwise/common.h"  // const_ints
#include "kernels/elementwise/cuda_kernels.h"
#include "kernels/layout/raw_buffer.h"

namespace tac::kernels {

namespace {

using cuda::kern::Binary;
using cuda::kern::Unary;
using ir::OpKind;

int64_t int_attr(const StepDesc& s, const char* k, int64_t d) {
  const ir::Attribute* a = s.node->attr(k);
  return a ? a->i : d;
}
float float_attr(const StepDesc& s, const char* k, float d) {
  const ir::Attribute* a = s.node->attr(k);
  return a ? a->f : d;
}
std::string string_attr(const StepDesc& s, const char* k, const std::string& d) {
  const ir::Attribute* a = s.node->attr(k);
  return a ? a->s : d;
}
std::vector<int64_t> ints_attr(const StepDesc& s, const char* k) {
  const ir::Attribute* a = s.node->attr(k);
  return a ? a->ints : std::vector<int64_t>{};
}
using cuda::kern::Elem;
using cuda::elem_of;
// Every present input (the first `n_typed`, or all) and every output of one float type.
Result<Elem> one_float_type(const StepDesc& s, size_t n_typed = SIZE_MAX) {
  if (s.out_dtypes.empty() || s.out_dtypes[0] == DType::undefined) return not_applicable("no output");
  const DType t = s.out_dtypes[0];
  TAC_ASSIGN_OR_RETURN(Elem e, elem_of(t));
  for (size_t i = 0; i < s.in_dtypes.size() && i < n_typed; ++i)
    if (s.has_input(i) && s.in_dtypes[i] != t) return not_applicable("inputs and output of one float type");
  for (DType o : s.out_dtypes)
    if (o != DType::undefined && o != t) return not_applicable("outputs of one float type");
  return e;
}
// Outputs after the first must be absent (Dropout's mask, LayerNormalization's mean, ...).
bool only_first_output(const StepDesc& s) {
  for (size_t i = 1; i < s.out_dtypes.size(); ++i)
    if (s.out_dtypes[i] != DType::undefined) return false;
  return true;
}
double bytes_of(const StepDesc& s) {
  double b = 0;
  for (size_t i = 0; i < s.in_shapes.size(); ++i)
    if (s.has_input(i)) b += static_cast<double>(dtype_size(s.in_dtypes[i])) * std::max<int64_t>(0, shape_numel(s.in_shapes[i]));
  for (size_t i = 0; i < s.out_shapes.size(); ++i)
    b += static_cast<double>(dtype_size(s.out_dtypes[i])) * std::max<int64_t>(0, shape_numel(s.out_shapes[i]));
  return b;
}
double movement_cost(const StepDesc& s) { return cuda::memory_bound_ns(bytes_of(s)); }
Result<void*> stream() {
  TAC_ASSIGN_OR_RETURN(cuda::Context * c, cuda::context());
  return static_cast<void*>(c->stream);
}
// A scalar from a constant input (Clip's min/max), or `d` when the input is absent.
Result<float> scalar_input(const StepDesc& s, size_t i, float d) {
  if (!s.has_input(i)) return d;
  if (!s.constants[i] || s.constants[i]->numel() != 1) return not_applicable("input " + std::to_string(i) + " is not a constant scalar");
  return static_cast<float>(s.constants[i]->get_f64(0));
}

// ---- unary ----
struct UnaryParams {
  Unary op;
  float alpha = 0, beta = 0;
  Elem t = Elem::f32;
};
Result<UnaryParams> unary_params(const StepDesc& s) {
  switch (s.node->op) {
    case OpKind::Relu: return UnaryParams{Unary::relu};
    case OpKind::Sigmoid: return UnaryParams{Unary::sigmoid};
    case OpKind::Tanh: return UnaryParams{Unary::tanh};
    case OpKind::Erf: return UnaryParams{Unary::erf};
    case OpKind::Exp: return UnaryParams{Unary::exp};
    case OpKind::Log: return UnaryParams{Unary::log};
    case OpKind::Neg: return UnaryParams{Unary::neg};
    case OpKind::Abs: return UnaryParams{Unary::abs};
    case OpKind::Sqrt: return UnaryParams{Unary::sqrt};
    case OpKind::Reciprocal: return UnaryParams{Unary::reciprocal};
    case OpKind::Floor: return UnaryParams{Unary::floor};
    case OpKind::Ceil: return UnaryParams{Unary::ceil};
    case OpKind::Sin: return UnaryParams{Unary::sin};
    case OpKind::Cos: return UnaryParams{Unary::cos};
    case OpKind::Softplus: return UnaryParams{Unary::softplus};
    case OpKind::HardSwish: return UnaryParams{Unary::hard_swish};
    case OpKind::LeakyRelu: return UnaryParams{Unary::leaky_relu, float_attr(s, "alpha", 0.01f)};
    case OpKind::Elu: return UnaryParams{Unary::elu, float_attr(s, "alpha", 1.0f)};
    case OpKind::Selu:
      return UnaryParams{Unary::selu, float_attr(s, "alpha", 1.67326319217681884765625f), float_attr(s, "gamma", 1.05070102214813232421875f)};
    case OpKind::HardSigmoid: return UnaryParams{Unary::hard_sigmoid, float_attr(s, "alpha", 0.2f), float_attr(s, "beta", 0.5f)};
    case OpKind::Gelu:
      if (string_attr(s, "approximate", "none") != "none") return not_applicable("tanh-approximated Gelu");
      return UnaryParams{Unary::gelu};
    case OpKind::Clip: {
      UnaryParams p{Unary::clip, -INFINITY, INFINITY};
      if (s.node->opset < 11) {
        p.alpha = float_attr(s, "min", -INFINITY);
        p.beta = float_attr(s, "max", INFINITY);
      } else {
        TAC_ASSIGN_OR_RETURN(p.alpha, scalar_input(s, 1, -INFINITY));
        TAC_ASSIGN_OR_RETURN(p.beta, scalar_input(s, 2, INFINITY));
      }
      return p;
    }
    default: return not_applicable("not a unary op of this table");
  }
}
Status unary_applies(const StepDesc& s) {
  if (!s.has_input(0) || s.out_dtypes.size() != 1) return not_applicable("one input and one output");
  // Clip's min / max inputs are fp32 scalars read at build time whatever x's type.
  TAC_RETURN_IF_ERROR(one_float_type(s, 1).status());
  return unary_params(s).status();
}
Result<std::unique_ptr<Kernel>> unary_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(UnaryParams p, unary_params(s));
  TAC_ASSIGN_OR_RETURN(p.t, one_float_type(s, 1));
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([p, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::unary(p.t, p.op, in[0].data, out[0].data, out[0].numel(), p.alpha, p.beta, st),
                               "unary kernel");
  });
}

// ---- binary with broadcast ----
Result<Binary> binary_op(OpKind op) {
  switch (op) {
    case OpKind::Add: return Binary::add;
    case OpKind::Sub: return Binary::sub;
    case OpKind::Mul: return Binary::mul;
    case OpKind::Div: return Binary::div;
    case OpKind::Pow: return Binary::pow;
    case OpKind::Max: return Binary::max;
    case OpKind::Min: return Binary::min;
    default: return not_applicable("not a binary op of this table");
  }
}
// Strides of `in` (right-aligned against `out`), 0 where it broadcasts.
void broadcast_strides(const Shape& in, const Shape& out, int64_t* strides) {
  const size_t r = out.size(), off = r - in.size();
  int64_t st = 1;
  for (size_t d = r; d-- > 0;) {
    if (d < off) {
      strides[d] = 0;
      continue;
    }
    strides[d] = in[d - off] == 1 ? 0 : st;
    st *= in[d - off];
  }
}
Status binary_applies(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(binary_op(s.node->op).status());
  if (s.in_dtypes.size() != 2 || !s.has_input(0) || !s.has_input(1)) return not_applicable("two inputs only");
  if (s.out_dtypes.size() != 1) return not_applicable("one output");
  TAC_RETURN_IF_ERROR(one_float_type(s).status());
  const Shape& o = s.out_shapes[0];
  if (o.size() > cuda::kern::kMaxDims) return not_applicable("rank above 8");
  for (size_t i = 0; i < 2; ++i)
    if (s.in_shapes[i].size() > o.size()) return not_applicable("input rank above the output's");
  return Status::ok();
}
Result<std::unique_ptr<Kernel>> binary_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(Binary op, binary_op(s.node->op));
  TAC_ASSIGN_OR_RETURN(Elem t, one_float_type(s));
  cuda::kern::BroadcastDesc d;
  const Shape& o = s.out_shapes[0];
  d.rank = static_cast<int>(o.size());
  for (size_t k = 0; k < o.size(); ++k) d.out_dims[k] = o[k];
  broadcast_strides(s.in_shapes[0], o, d.a_strides);
  broadcast_strides(s.in_shapes[1], o, d.b_strides);
  d.same_shape = shape_numel(s.in_shapes[0]) == shape_numel(o) && shape_numel(s.in_shapes[1]) == shape_numel(o);
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([t, op, d, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::binary(t, op, in[0].data, in[1].data, out[0].data, out[0].numel(), d, st),
                               "binary kernel");
  });
}

// ---- softmax ----
struct SoftmaxGeom {
  int64_t outer = 1, dim = 1, inner = 1;
};
Result<SoftmaxGeom> softmax_geom(const StepDesc& s) {
  const Shape& x = s.in_shapes[0];
  const int64_t r = static_cast<int64_t>(x.size());
  const bool old = s.node->opset < 13;
  int64_t axis = int_attr(s, "axis", old ? 1 : -1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= std::max<int64_t>(r, 1)) return not_applicable("axis out of range");
  SoftmaxGeom g;
  for (int64_t d = 0; d < axis; ++d) g.outer *= x[static_cast<size_t>(d)];
  if (old) {  // coerced to 2-D [outer, rest]
    for (int64_t d = axis; d < r; ++d) g.dim *= x[static_cast<size_t>(d)];
  } else {
    g.dim = x[static_cast<size_t>(axis)];
    for (int64_t d = axis + 1; d < r; ++d) g.inner *= x[static_cast<size_t>(d)];
  }
  return g;
}
Status softmax_applies(const StepDesc& s) {
  if (!s.has_input(0) || s.out_dtypes.size() != 1) return not_applicable("one input and one output");
  TAC_RETURN_IF_ERROR(one_float_type(s).status());
  return softmax_geom(s).status();
}
Result<std::unique_ptr<Kernel>> softmax_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(SoftmaxGeom g, softmax_geom(s));
  TAC_ASSIGN_OR_RETURN(Elem t, one_float_type(s));
  const bool log = s.node->op == OpKind::LogSoftmax;
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([t, g, log, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::softmax(t, in[0].data, out[0].data, g.outer, g.dim, g.inner, log, st),
                               "softmax kernel");
  });
}

// ---- layer normalization ----
// x, scale, bias and y all fp32, fp16 or bf16.
Result<Elem> layer_norm_type(const StepDesc& s) {
  if (!s.has_input(0) || !s.has_input(1)) return not_applicable("a scale is needed");
  return one_float_type(s);
}
Status layer_norm_applies(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(layer_norm_type(s).status());
  if (!only_first_output(s)) return not_applicable("Mean / InvStdDev outputs");
  const Shape& x = s.in_shapes[0];
  int64_t axis = int_attr(s, "axis", -1), r = static_cast<int64_t>(x.size());
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return not_applicable("axis out of range");
  int64_t cols = 1;
  for (int64_t d = axis; d < r; ++d) cols *= x[static_cast<size_t>(d)];
  if (shape_numel(s.in_shapes[1]) != cols || (s.has_input(2) && shape_numel(s.in_shapes[2]) != cols))
    return not_applicable("scale / bias broadcast over the normalized dims");
  return Status::ok();
}
Result<std::unique_ptr<Kernel>> layer_norm_prepare(const StepDesc& s) {
  const Shape& x = s.in_shapes[0];
  int64_t axis = int_attr(s, "axis", -1), r = static_cast<int64_t>(x.size());
  if (axis < 0) axis += r;
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < r; ++d) (d < axis ? rows : cols) *= x[static_cast<size_t>(d)];
  const float eps = float_attr(s, "epsilon", 1e-5f);
  const bool bias = s.has_input(2);
  TAC_ASSIGN_OR_RETURN(Elem t, layer_norm_type(s));
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([t, rows, cols, eps, bias, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::layer_norm(t, in[0].data, in[1].data, bias ? in[2].data : nullptr, out[0].data,
                                                      rows, cols, eps, st),
                               "layer_norm kernel");
  });
}

// ---- batch normalization (inference) ----
// y = x * s[c] + t[c], s and t folded at prepare (ew::bn_fold, as the CPU's tactics): the
// pre-activation BatchNormalizations that fold_batchnorm cannot merge into a Conv (DenseNet's
// BN -> ReLU -> Conv after each Concat). x and y fp32, fp16 or bf16; the
// parameters of any float type. "cuda" on nchw (any rank >= 2), "cuda_nhwc" on 4-D nhwc.
Status batch_norm_applies(const StepDesc& s, ir::Layout layout) {
  if (s.in_layout(0) != layout || s.out_layout(0) != layout)
    return not_applicable(layout == ir::Layout::nhwc ? "x and y in nhwc (nchw steps have the \"cuda\" tactic)"
                                                     : "x and y in nchw (nhwc steps have the \"cuda_nhwc\" tactic)");
  if (!s.has_input(0) || s.in_dtypes.size() < 5) return not_applicable("x and 4 parameters");
  TAC_RETURN_IF_ERROR(one_float_type(s, 1).status());
  if (!only_first_output(s)) return not_applicable("inference outputs only (no running statistics)");
  if (int_attr(s, "training_mode", 0) != 0 || s.node->opset < 7) return not_applicable("inference mode, opset 7 or later");
  const Shape& x = s.in_shapes[0];
  if (x.size() < 2 || (layout == ir::Layout::nhwc && x.size() != 4)) return not_applicable("x of rank 2 or more (4 in nhwc)");
  for (size_t i = 1; i < 5; ++i)
    if (!s.has_input(i) || !s.constants[i] || !dtype_is_float(s.in_dtypes[i]) || s.constants[i]->numel() != x[1])
      return not_applicable("constant per-channel float parameters");
  return Status::ok();
}
template <ir::Layout L>
Status batch_norm_applies_in(const StepDesc& s) {
  return batch_norm_applies(s, L);
}
template <ir::Layout L>
Result<std::unique_ptr<Kernel>> batch_norm_prepare(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(batch_norm_applies(s, L));
  TAC_ASSIGN_OR_RETURN(Elem t, one_float_type(s, 1));
  const Shape& x = s.in_shapes[0];
  const int64_t C = x[1], n = shape_numel(x);
  const int64_t inner = L == ir::Layout::nhwc ? 1 : n / std::max<int64_t>(1, x[0] * C);
  TAC_ASSIGN_OR_RETURN(Tensor st, Tensor::create(DType::float32, {2, C}));
  ew::bn_fold(*s.constants[1], *s.constants[2], *s.constants[3], *s.constants[4], float_attr(s, "epsilon", 1e-5f),
              st.data<float>(), st.data<float>() + C);
  TAC_ASSIGN_OR_RETURN(cuda::DeviceBuffer buf, cuda::upload(st));
  TAC_ASSIGN_OR_RETURN(void* stm, stream());
  auto params = std::make_shared<cuda::DeviceBuffer>(std::move(buf));
  return cuda::make_kernel([t, n, C, inner, params, stm](auto in, auto out, void*) {
    const float* sc = static_cast<const float*>(params->get());
    return cuda::launch_status(cuda::kern::channel_affine(t, in[0].data, out[0].data, sc, sc + C, n, C, inner, stm),
                               "channel_affine kernel");
  });
}

// ---- pooling ----
Result<cuda::kern::Pool2dDesc> pool_desc(const StepDesc& s) {
  if (!s.has_input(0) || !only_first_output(s)) return not_applicable("one output only");
  TAC_RETURN_IF_ERROR(one_float_type(s).status());
  const Shape& x = s.in_shapes[0];
  const Shape& y = s.out_shapes[0];
  if (x.size() != 4 || y.size() != 4) return not_applicable("2-D pooling (NCHW) only");
  cuda::kern::Pool2dDesc d;
  d.max = s.node->op == OpKind::MaxPool;
  d.N = x[0], d.C = x[1], d.H = x[2], d.W = x[3], d.OH = y[2], d.OW = y[3];
  auto k = ints_attr(s, "kernel_shape");
  if (k.size() != 2) return not_applicable("kernel_shape must have 2 dims");
  d.KH = k[0], d.KW = k[1];
  auto st = ints_attr(s, "strides");
  if (st.size() == 2) d.SH = st[0], d.SW = st[1];
  auto dil = ints_attr(s, "dilations");
  if (dil.size() == 2) d.DH = dil[0], d.DW = dil[1];
  if (!d.max && (d.DH != 1 || d.DW != 1)) return not_applicable("dilated average pooling");
  if (int_attr(s, "storage_order", 0) != 0) return not_applicable("storage_order");
  d.count_include_pad = int_attr(s, "count_include_pad", 0) != 0;
  const bool ceil = int_attr(s, "ceil_mode", 0) != 0;
  if (ceil && !d.max && d.count_include_pad) return not_applicable("ceil_mode with count_include_pad");
  const std::string ap = string_attr(s, "auto_pad", "NOTSET");
  if (ap == "NOTSET") {
    auto p = ints_attr(s, "pads");
    if (p.size() == 4) d.PT = p[0], d.PL = p[1];
    else if (!p.empty()) return not_applicable("pads must have 4 values");
  } else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    const int64_t th = std::max<int64_t>(0, (d.OH - 1) * d.SH + (d.KH - 1) * d.DH + 1 - d.H);
    const int64_t tw = std::max<int64_t>(0, (d.OW - 1) * d.SW + (d.KW - 1) * d.DW + 1 - d.W);
    d.PT = ap == "SAME_UPPER" ? th / 2 : th - th / 2;
    d.PL = ap == "SAME_UPPER" ? tw / 2 : tw - tw / 2;
    if (!d.max && d.count_include_pad) return not_applicable("SAME padding with count_include_pad");
  } else if (ap != "VALID") {
    return not_applicable("auto_pad " + ap);
  }
  return d;
}
// The layout tactics ("cuda_nhwc", Tactic::layouts): x and y both nhwc (ir/layout.h).
Status nhwc_only(const StepDesc& s) {
  if (s.in_layout(0) != ir::Layout::nhwc || s.out_layout(0) != ir::Layout::nhwc)
    return not_applicable("x and y in nhwc (nchw steps have the \"cuda\" tactic)");
  return Status::ok();
}
Result<cuda::kern::Pool2dDesc> nhwc_pool_desc(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(nhwc_only(s));
  TAC_ASSIGN_OR_RETURN(cuda::kern::Pool2dDesc d, pool_desc(s));
  d.nhwc = true;
  return d;
}
Status pool_applies(const StepDesc& s) { return pool_desc(s).status(); }
Status nhwc_pool_applies(const StepDesc& s) { return nhwc_pool_desc(s).status(); }
template <bool Nhwc>
Result<std::unique_ptr<Kernel>> pool_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(cuda::kern::Pool2dDesc d, Nhwc ? nhwc_pool_desc(s) : pool_desc(s));
  TAC_ASSIGN_OR_RETURN(Elem t, one_float_type(s));
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([t, d, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::pool2d(t, in[0].data, out[0].data, d, st), "pool2d kernel");
  });
}
Status global_pool_applies(const StepDesc& s) {
  if (!s.has_input(0) || s.in_shapes[0].size() < 3) return not_applicable("spatial dims needed");
  return one_float_type(s).status();
}
Status nhwc_global_pool_applies(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(nhwc_only(s));
  if (s.in_shapes[0].size() != 4) return not_applicable("4-D x");
  return one_float_type(s).status();
}
Result<std::unique_ptr<Kernel>> nhwc_global_pool_prepare(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(nhwc_global_pool_applies(s));
  const Shape& x = s.in_shapes[0];
  const int64_t N = x[0], C = x[1], hw = x[2] * x[3];
  TAC_ASSIGN_OR_RETURN(Elem t, one_float_type(s));
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([t, N, C, hw, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::global_avg_pool_nhwc(t, in[0].data, out[0].data, N, hw, C, st),
                               "global_avg_pool_nhwc kernel");
  });
}
Result<std::unique_ptr<Kernel>> global_pool_prepare(const StepDesc& s) {
  const Shape& x = s.in_shapes[0];
  const int64_t nc = x[0] * x[1], hw = shape_numel(x) / std::max<int64_t>(1, nc);
  TAC_ASSIGN_OR_RETURN(Elem t, one_float_type(s));
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([t, nc, hw, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::global_avg_pool(t, in[0].data, out[0].data, nc, hw, st),
                               "global_avg_pool kernel");
  });
}

// ---- transpose ----
Status transpose_applies(const StepDesc& s) {
  if (!s.has_input(0)) return not_applicable("no input");
  const size_t e = dtype_size(s.in_dtypes[0]);
  if (e != 1 && e != 2 && e != 4 && e != 8) return not_applicable("element size");
  if (s.in_shapes[0].size() > cuda::kern::kMaxDims) return not_applicable("rank above 8");
  return Status::ok();
}
Result<std::unique_ptr<Kernel>> transpose_prepare(const StepDesc& s) {
  const Shape& x = s.in_shapes[0];
  const size_t r = x.size();
  std::vector<int64_t> perm = ints_attr(s, "perm");
  if (perm.empty())
    for (size_t d = 0; d < r; ++d) perm.push_back(static_cast<int64_t>(r - 1 - d));
  if (perm.size() != r) return invalid_model(s.node->label() + ": perm has the wrong length");
  std::vector<int64_t> in_strides(r, 1);
  for (size_t d = r; d-- > 1;) in_strides[d - 1] = in_strides[d] * x[d];
  cuda::kern::TransposeDesc d;
  d.rank = static_cast<int>(r);
  for (size_t k = 0; k < r; ++k) {
    d.out_dims[k] = x[static_cast<size_t>(perm[k])];
    d.in_strides[k] = in_strides[static_cast<size_t>(perm[k])];
  }
  const int e = static_cast<int>(dtype_size(s.in_dtypes[0]));
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([d, e, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::transpose(in[0].data, out[0].data, e, out[0].numel(), d, st), "transpose kernel");
  });
}

// ---- gather ----
Status gather_applies(const StepDesc& s) {
  if (!s.has_input(0) || !s.has_input(1)) return not_applicable("two inputs");
  if (s.in_dtypes[1] != DType::int64 && s.in_dtypes[1] != DType::int32) return not_applicable("int32/int64 indices");
  const size_t e = dtype_size(s.in_dtypes[0]);
  if (e != 1 && e != 2 && e != 4 && e != 8) return not_applicable("element size");
  if (s.in_shapes[0].empty()) return not_applicable("scalar data");
  return Status::ok();
}
Result<std::unique_ptr<Kernel>> gather_prepare(const StepDesc& s) {
  const Shape& x = s.in_shapes[0];
  int64_t axis = int_attr(s, "axis", 0), r = static_cast<int64_t>(x.size());
  if (axis < 0) axis += r;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < r; ++d) inner *= x[static_cast<size_t>(d)];
  const int64_t axis_len = x[static_cast<size_t>(axis)], n_idx = shape_numel(s.in_shapes[1]);
  const bool i64 = s.in_dtypes[1] == DType::int64;
  const int e = static_cast<int>(dtype_size(s.in_dtypes[0]));
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([=](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::gather(in[0].data, in[1].data, i64, out[0].data, outer, axis_len, n_idx, inner, e, st),
                               "gather kernel");
  });
}


// ---- strided gathers: Slice, DepthToSpace, SpaceToDepth (the transpose kernel with a base) ----
Status elem_size_ok(const StepDesc& s) {
  if (!s.has_input(0) || s.out_dtypes.empty() || s.out_dtypes[0] != s.in_dtypes[0]) return not_applicable("one typed input");
  const size_t e = dtype_size(s.in_dtypes[0]);
  if (e != 1 && e != 2 && e != 4 && e != 8) return not_applicable("element size");
  return Status::ok();
}
Result<std::unique_ptr<Kernel>> gather_desc_kernel(const StepDesc& s, const cuda::kern::TransposeDesc& d) {
  const int e = static_cast<int>(dtype_size(s.in_dtypes[0]));
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([d, e, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::transpose(in[0].data, out[0].data, e, out[0].numel(), d, st), "strided gather kernel");
  });
}
// ---- Reformat between nchw and nhwc (the layout rewrite's, builder/layout.h): a 4-D transpose ----
Result<cuda::kern::TransposeDesc> reformat_desc(const StepDesc& s) {
  if (!s.has_input(0) || s.out_shapes.size() != 1 || s.in_shapes[0].size() != 4 || s.in_shapes[0] != s.out_shapes[0])
    return not_applicable("one 4-D input of the output's shape");
  TAC_RETURN_IF_ERROR(elem_size_ok(s));
  const ir::Layout from = s.in_layout(0), to = s.out_layout(0);
  auto plain_or_nhwc = [](ir::Layout l) { return l == ir::Layout::nchw || l == ir::Layout::nhwc; };
  if (!plain_or_nhwc(from) || !plain_or_nhwc(to) || from == to) return not_applicable("nchw <-> nhwc only");
  const Shape& x = s.in_shapes[0];
  const int64_t N = x[0], C = x[1], H = x[2], W = x[3];
  cuda::kern::TransposeDesc d;
  d.rank = 4;
  const std::array<int64_t, 4> out_dims = to == ir::Layout::nhwc ? std::array<int64_t, 4>{N, H, W, C}
                                                                  : std::array<int64_t, 4>{N, C, H, W};
  // Where each output coordinate steps in x's buffer.
  const std::array<int64_t, 4> strides = to == ir::Layout::nhwc ? std::array<int64_t, 4>{C * H * W, W, 1, H * W}
                                                                 : std::array<int64_t, 4>{H * W * C, 1, W * C, C};
  for (int k = 0; k < 4; ++k) d.out_dims[k] = out_dims[static_cast<size_t>(k)], d.in_strides[k] = strides[static_cast<size_t>(k)];
  return d;
}
Status reformat_applies(const StepDesc& s) { return reformat_desc(s).status(); }
Result<std::unique_ptr<Kernel>> reformat_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(cuda::kern::TransposeDesc d, reformat_desc(s));
  return gather_desc_kernel(s, d);
}

std::vector<int64_t> row_major_strides(const Shape& x) {
  std::vector<int64_t> st(x.size(), 1);
  for (size_t d = x.size(); d-- > 1;) st[d - 1] = st[d] * x[d];
  return st;
}
// Integer values of constant input i (int32 / int64), or not_applicable.
// Slice: the output shape is known (fixed-shape plans); starts (clamped as the reference does,
// per the sign of the step) give the base, steps scale the strides. Ends are implied.
Result<cuda::kern::TransposeDesc> slice_desc(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(elem_size_ok(s));
  const Shape& x = s.in_shapes[0];
  const Shape& y = s.out_shapes[0];
  const size_t r = x.size();
  if (y.size() != r || r == 0 || r > static_cast<size_t>(cuda::kern::kMaxDims)) return not_applicable("rank 1..8, unchanged");
  std::vector<int64_t> starts, axes, steps;
  if (s.node->opset >= 10) {
    TAC_ASSIGN_OR_RETURN(starts, ew::const_ints(s, 1, "starts"));
    if (s.has_input(3)) {
      TAC_ASSIGN_OR_RETURN(axes, ew::const_ints(s, 3, "axes"));
    }
    if (s.has_input(4)) {
      TAC_ASSIGN_OR_RETURN(steps, ew::const_ints(s, 4, "steps"));
    }
  } else {
    starts = ints_attr(s, "starts");
    axes = ints_attr(s, "axes");
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) return not_applicable("starts / axes / steps lengths differ");
  std::vector<int64_t> start(r, 0), step(r, 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + static_cast<int64_t>(r) : axes[i];
    if (a < 0 || a >= static_cast<int64_t>(r)) return not_applicable("axis out of range");
    const int64_t dim = x[static_cast<size_t>(a)];
    if (steps[i] == 0) return not_applicable("step 0");
    int64_t v = starts[i] < 0 ? starts[i] + dim : starts[i];
    v = steps[i] > 0 ? std::clamp<int64_t>(v, 0, dim) : std::clamp<int64_t>(v, 0, dim - 1);
    start[static_cast<size_t>(a)] = v;
    step[static_cast<size_t>(a)] = steps[i];
  }
  const std::vector<int64_t> xs = row_major_strides(x);
  cuda::kern::TransposeDesc d;
  d.rank = static_cast<int>(r);
  for (size_t k = 0; k < r; ++k) {
    d.out_dims[k] = y[k];
    d.in_strides[k] = xs[k] * step[k];
    if (y[k] > 0) d.base += xs[k] * start[k];
  }
  return d;
}
Status slice_applies(const StepDesc& s) { return slice_desc(s).status(); }
Result<std::unique_ptr<Kernel>> slice_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(cuda::kern::TransposeDesc d, slice_desc(s));
  return gather_desc_kernel(s, d);
}

// DepthToSpace as a 6-D transpose: DCR reads x as [N][b][b][C'][H][W], CRD as [N][C'][b][b][H][W],
// both written as [N][C'][H][b][W][b]. SpaceToDepth is the inverse of DCR.
Result<cuda::kern::TransposeDesc> d2s_desc(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(elem_size_ok(s));
  const Shape& x = s.in_shapes[0];
  if (x.size() != 4) return not_applicable("4-D input");
  const int64_t b = int_attr(s, "blocksize", 0), N = x[0], C = x[1], H = x[2], W = x[3];
  if (b <= 0) return not_applicable("blocksize");
  cuda::kern::TransposeDesc d;
  d.rank = 6;
  auto set = [&d](std::vector<int64_t> dims6, std::vector<int64_t> perm) {  // x viewed as dims6, y = x.transpose(perm)
    std::vector<int64_t> st(6, 1);
    for (size_t k = 6; k-- > 1;) st[k - 1] = st[k] * dims6[k];
    for (size_t k = 0; k < 6; ++k) {
      d.out_dims[k] = dims6[static_cast<size_t>(perm[k])];
      d.in_strides[k] = st[static_cast<size_t>(perm[k])];
    }
  };
  if (s.node->op == OpKind::DepthToSpace) {
    if (C % (b * b) != 0) return not_applicable("channels not divisible by blocksize^2");
    const int64_t c = C / (b * b);
    const std::string mode = s.node->opset >= 11 ? string_attr(s, "mode", "DCR") : "DCR";
    if (mode == "DCR") set({N, b, b, c, H, W}, {0, 3, 4, 1, 5, 2});
    else if (mode == "CRD") set({N, c, b, b, H, W}, {0, 1, 4, 2, 5, 3});
    else return not_applicable("mode " + mode);
  } else {
    if (H % b != 0 || W % b != 0) return not_applicable("spatial dims not divisible by blocksize");
    // y [N][b][b][C][H/b][W/b] from x viewed as [N][C][H/b][b][W/b][b].
    set({N, C, H / b, b, W / b, b}, {0, 3, 5, 1, 2, 4});
  }
  return d;
}
Status d2s_applies(const StepDesc& s) { return d2s_desc(s).status(); }
Result<std::unique_ptr<Kernel>> d2s_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(cuda::kern::TransposeDesc d, d2s_desc(s));
  return gather_desc_kernel(s, d);
}

// ---- cast ----
Status cast_applies(const StepDesc& s) {
  if (!s.has_input(0) || s.out_dtypes.size() != 1) return not_applicable("one input and one output");
  if (!cuda::kern::cast_supported(static_cast<int>(s.in_dtypes[0])) || !cuda::kern::cast_supported(static_cast<int>(s.out_dtypes[0])))
    return not_applicable("cast between " + dtype_name(s.in_dtypes[0]) + " and " + dtype_name(s.out_dtypes[0]) +
                          " (float, float16, bfloat16, double, int64, int32, int8, uint8, bool)");
  return Status::ok();
}
Result<std::unique_ptr<Kernel>> cast_prepare(const StepDesc& s) {
  const int from = static_cast<int>(s.in_dtypes[0]), to = static_cast<int>(s.out_dtypes[0]);
  const size_t bytes = dtype_size(s.out_dtypes[0]) * static_cast<size_t>(shape_numel(s.out_shapes[0]));
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([from, to, bytes, st](auto in, auto out, void*) -> Status {
    if (from == to) {  // a no-op cast: a copy (bool stays canonical: its source is bool too)
      if (in[0].data == out[0].data || bytes == 0) return Status::ok();
      TAC_CUDA_CALL(cudaMemcpyAsync(out[0].data, in[0].data, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(st)));
      return Status::ok();
    }
    return cuda::launch_status(cuda::kern::cast(in[0].data, from, out[0].data, to, out[0].numel(), st), "cast kernel");
  });
}

// ---- data movement ----
Status copy_applies(const StepDesc& s) {
  if (!s.has_input(0) || s.out_dtypes.empty() || !only_first_output(s)) return not_applicable("one output only");
  if (s.in_dtypes[0] != s.out_dtypes[0] || shape_numel(s.in_shapes[0]) != shape_numel(s.out_shapes[0]))
    return not_applicable("not a pure copy");
  if (s.node->op == OpKind::Dropout && s.has_input(2) && (!s.constants[2] || s.constants[2]->get_i64(0) != 0))
    return not_applicable("training_mode");
  return Status::ok();
}
Result<std::unique_ptr<Kernel>> copy_prepare(const StepDesc& s) {
  const size_t bytes = dtype_size(s.out_dtypes[0]) * static_cast<size_t>(shape_numel(s.out_shapes[0]));
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([bytes, st](auto in, auto out, void*) -> Status {
    if (in[0].data == out[0].data || bytes == 0) return Status::ok();
    TAC_CUDA_CALL(cudaMemcpyAsync(out[0].data, in[0].data, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(st)));
    return Status::ok();
  });
}

Status concat_applies(const StepDesc& s) {
  if (s.out_dtypes.size() != 1 || s.in_dtypes.empty()) return not_applicable("one output");
  for (size_t i = 0; i < s.in_dtypes.size(); ++i)
    if (!s.has_input(i) || s.in_dtypes[i] != s.out_dtypes[0]) return not_applicable("inputs of the output's type");
  return Status::ok();
}
Result<std::unique_ptr<Kernel>> concat_prepare(const StepDesc& s) {
  const Shape& y = s.out_shapes[0];
  int64_t axis = int_attr(s, "axis", 0), r = static_cast<int64_t>(y.size());
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return invalid_model(s.node->label() + ": axis out of range");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= y[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < r; ++d) inner *= y[static_cast<size_t>(d)];
  const size_t e = dtype_size(s.out_dtypes[0]);
  const size_t row_bytes = static_cast<size_t>(y[static_cast<size_t>(axis)] * inner) * e;
  std::vector<std::pair<size_t, size_t>> parts;  // (offset in an output row, bytes of this input's row)
  size_t off = 0;
  for (const Shape& x : s.in_shapes) {
    const size_t b = static_cast<size_t>((x.empty() ? 1 : x[static_cast<size_t>(axis)]) * inner) * e;
    parts.emplace_back(off, b);
    off += b;
  }
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([parts, row_bytes, outer, st](auto in, auto out, void*) -> Status {
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].second == 0 || outer == 0) continue;
      TAC_CUDA_CALL(cudaMemcpy2DAsync(static_cast<std::byte*>(out[0].data) + parts[i].first, row_bytes, in[i].data,
                                      parts[i].second, parts[i].second, static_cast<size_t>(outer),
                                      cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(st)));
    }
    return Status::ok();
  });
}

constexpr Backend kCuda = Backend::cuda;

}  // namespace

std::span<const Tactic> cuda_elementwise_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t;
    for (OpKind op : {OpKind::Relu, OpKind::Sigmoid, OpKind::Tanh, OpKind::Erf, OpKind::Exp, OpKind::Log, OpKind::Neg,
                      OpKind::Abs, OpKind::Sqrt, OpKind::Reciprocal, OpKind::Floor, OpKind::Ceil, OpKind::Sin, OpKind::Cos,
                      OpKind::Softplus, OpKind::HardSwish, OpKind::LeakyRelu, OpKind::Elu, OpKind::Selu, OpKind::HardSigmoid,
                      OpKind::Gelu, OpKind::Clip})
      t.push_back({"cuda", op, "own CUDA kernel, one thread per element", unary_applies, movement_cost, unary_prepare, kCuda});
    for (OpKind op : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Pow, OpKind::Max, OpKind::Min})
      t.push_back({"cuda", op, "own CUDA kernel with numpy broadcasting", binary_applies, movement_cost, binary_prepare, kCuda});
    for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax})
      t.push_back({"cuda", op, "own CUDA kernel, one block per row", softmax_applies, movement_cost, softmax_prepare, kCuda});
    t.push_back({"cuda", OpKind::LayerNormalization, "own CUDA kernel, one block per row (two-pass variance)",
                 layer_norm_applies, movement_cost, layer_norm_prepare, kCuda});
    t.push_back({"cuda", OpKind::BatchNormalization, "own CUDA kernel: per-channel scale and shift folded at prepare",
                 batch_norm_applies_in<ir::Layout::nchw>, movement_cost, batch_norm_prepare<ir::Layout::nchw>, kCuda});
    t.push_back({"cuda_nhwc", OpKind::BatchNormalization,
                 "own CUDA kernel on nhwc activations: per-channel scale and shift folded at prepare",
                 batch_norm_applies_in<ir::Layout::nhwc>, movement_cost, batch_norm_prepare<ir::Layout::nhwc>, kCuda,
                 /*layouts=*/true});
    for (OpKind op : {OpKind::MaxPool, OpKind::AveragePool}) {
      t.push_back({"cuda", op, "own CUDA kernel, one thread per output", pool_applies, movement_cost, pool_prepare<false>,
                   kCuda});
      t.push_back({"cuda_nhwc", op, "own CUDA kernel on nhwc activations, one thread per output (channels innermost)",
                   nhwc_pool_applies, movement_cost, pool_prepare<true>, kCuda, /*layouts=*/true});
    }
    t.push_back({"cuda", OpKind::GlobalAveragePool, "own CUDA kernel, one warp per plane", global_pool_applies,
                 movement_cost, global_pool_prepare, kCuda});
    t.push_back({"cuda_nhwc", OpKind::GlobalAveragePool, "own CUDA kernel on nhwc activations, one thread per (n, c)",
                 nhwc_global_pool_applies, movement_cost, nhwc_global_pool_prepare, kCuda, /*layouts=*/true});
    t.push_back({"cuda", OpKind::Reformat, "own CUDA kernel between nchw and nhwc (a 4-D transpose, one thread per output)",
                 reformat_applies, movement_cost, reformat_prepare, kCuda, /*layouts=*/true});
    t.push_back({"cuda", OpKind::Transpose, "own CUDA kernel, one thread per output", transpose_applies, movement_cost,
                 transpose_prepare, kCuda});
    t.push_back({"cuda", OpKind::Gather, "own CUDA kernel, one thread per output", gather_applies, movement_cost,
                 gather_prepare, kCuda});
    t.push_back({"cuda", OpKind::Slice, "own CUDA kernel: strided gather (any steps), one thread per output", slice_applies,
                 movement_cost, slice_prepare, kCuda});
    for (OpKind op : {OpKind::DepthToSpace, OpKind::SpaceToDepth})
      t.push_back({"cuda", op, "own CUDA kernel: a 6-D transpose, one thread per output", d2s_applies, movement_cost,
                   d2s_prepare, kCuda});
    t.push_back({"cuda", OpKind::Cast, "own CUDA kernel, one thread per element (the reference's conversion rules)",
                 cast_applies, movement_cost, cast_prepare, kCuda});
    for (OpKind op : {OpKind::Reshape, OpKind::Flatten, OpKind::Squeeze, OpKind::Unsqueeze, OpKind::Identity, OpKind::Dropout})
      t.push_back({"cuda_copy", op, "device-to-device copy", copy_applies, movement_cost, copy_prepare, kCuda});
    t.push_back({"cuda_copy", OpKind::Concat, "one strided 2-D device copy per input", concat_applies, movement_cost,
                 concat_prepare, kCuda});
    add_raw_buffer_tactics(t, kCuda);  // elementwise ops and Concat on nhwc activations
    return t;
  }();
  return table;
}

}  // namespace tac::kernels
