// Reference kernels of the builder's internal fused ops: the plain op's reference kernel, then
// the epilogue (residual add, activation) in double. They define what a fusion must compute.
#include <algorithm>
#include <cmath>

#include "ir/elementwise_chain.h"
#include "ir/epilogue.h"
#include "ir/strided.h"
#include "reference/helpers.h"

namespace tac::ref {

namespace {

using ir::OpKind;

// Runs `base` (Conv or MatMul) on this node's first `n_base` inputs, then y = act(y + R).
// `bias_last_dim`: FusedMatMul adds its bias input (index 2) along the last dim.
void fused_kernel(KernelContext& ctx, OpKind base, size_t n_base, bool matmul) {
  ir::Node plain = ctx.node;
  plain.op = base;
  plain.op_type = ir::op_name(base);
  plain.domain.clear();
  plain.inputs.resize(std::min(plain.inputs.size(), n_base));
  std::vector<const Datum*> ins;
  Tensor b_transposed;
  for (size_t i = 0; i < plain.inputs.size(); ++i) ins.push_back(ctx.has_input(i) ? &ctx.input_datum(i) : nullptr);
  // Lower precision (the builder's precision rewrite): bf16 operands compute in float, rounded
  // once at the output; int8 operands (attributes x_scale, w_scales) are dequantized first:
  // x = x_scale * xq, w[c] = w_scales[c] * wq[c] per output channel c, fp32 output.
  // With y_scale (and y_dtype: int8 or uint8) the fp32 result is then quantized as
  // QuantizeLinear(y, y_scale, 0) would: round half to even of y / y_scale, saturated.
  const bool int8 = ctx.node.attr("x_scale") != nullptr;
  const ir::Attribute* y_scale = ctx.node.attr("y_scale");
  const DType out_dtype = y_scale && ctx.node.attr("y_dtype") ? static_cast<DType>(ctx.node.attr("y_dtype")->i)
                          : int8                               ? DType::float32
                                                               : ctx.input(0).dtype();
  if (y_scale && out_dtype != DType::int8 && out_dtype != DType::uint8) ctx.fail_invalid("y_dtype must be int8 or uint8");
  Datum xf, wf;
  if (int8 || out_dtype == DType::bfloat16) {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    Tensor xt = new_tensor(ctx, DType::float32, x.shape());
    Tensor wt = new_tensor(ctx, DType::float32, w.shape());
    const double x_scale = int8 ? ctx.node.attr("x_scale")->f : 1.0;
    for (int64_t i = 0; i < x.numel(); ++i) xt.set_f64(i, x.get_f64(i) * x_scale);
    if (int8) {
      const ir::Attribute* ws = ctx.node.attr("w_scales");
      const bool by_row = !matmul || ctx.attr_int("transB", 0) != 0;  // channel = W's axis 0, else its last axis
      const int64_t channels = w.rank() == 0 ? 1 : (by_row ? w.dim(0) : w.shape().back());
      if (!ws || static_cast<int64_t>(ws->floats.size()) != channels)
        ctx.fail_invalid("w_scales must have one scale per output channel (" + std::to_string(channels) + ")");
      const int64_t inner = w.numel() / std::max<int64_t>(channels, 1);
      for (int64_t i = 0; i < w.numel(); ++i) {
        const int64_t c = by_row ? i / inner : i % channels;
        wt.set_f64(i, w.get_f64(i) * ws->floats[static_cast<size_t>(c)]);
      }
    } else {
      for (int64_t i = 0; i < w.numel(); ++i) wt.set_f64(i, w.get_f64(i));
    }
    xf = Datum(xt);
    wf = Datum(wt);
    ins[0] = &xf;
    ins[1] = &wf;
  }
  Datum bt;
  if (matmul && ctx.attr_int("transB", 0) != 0) {  // MatMul with B (2-D) transposed
    const Tensor& b = ins[1]->tensor;
    if (b.rank() != 2) ctx.fail_invalid("transB needs a 2-D B, got " + shape_to_string(b.shape()));
    Tensor t = new_tensor(ctx, b.dtype(), {b.dim(1), b.dim(0)});
    const size_t es = dtype_size(b.dtype());
    for (int64_t i = 0; i < b.dim(0); ++i)
      for (int64_t j = 0; j < b.dim(1); ++j)
        std::memcpy(static_cast<std::byte*>(t.raw()) + (j * b.dim(0) + i) * es,
                    static_cast<const std::byte*>(b.raw()) + (i * b.dim(1) + j) * es, es);
    bt = Datum(t);
    ins[1] = &bt;
  }
  KernelContext inner(plain, ins, nullptr);
  reference_kernel(base)(inner);
  Tensor y = inner.outputs()[0].tensor;
  auto ep = ir::epilogue_of(ctx.node);
  if (!ep) throw KernelError{ep.status()};
  const size_t r_index = matmul ? 3 : 3;
  const bool has_bias = matmul && ctx.has_input(2);
  const bool has_res = ctx.has_input(r_index);
  Tensor& out = ctx.make_output(0, out_dtype, y.shape());
  std::vector<int64_t> bias_idx, res_idx;
  if (has_bias) {
    const Tensor& b = ctx.input(2);
    if (b.rank() != 1 || y.rank() < 1 || b.dim(0) != y.shape().back())
      ctx.fail_invalid("bias of shape " + shape_to_string(b.shape()) + " does not match the last dim of " +
                       shape_to_string(y.shape()));
    bias_idx = broadcast_index(b.shape(), y.shape());
  }
  if (has_res) {
    const Tensor& r = ctx.input(r_index);
    if (broadcast_shapes(ctx, y.shape(), r.shape()) != y.shape())
      ctx.fail_invalid("residual of shape " + shape_to_string(r.shape()) + " does not broadcast to " +
                       shape_to_string(y.shape()));
    res_idx = broadcast_index(r.shape(), y.shape());
  }
  for (int64_t i = 0; i < y.numel(); ++i) {
    double v = y.get_f64(i);
    if (has_bias) v += ctx.input(2).get_f64(bias_idx[static_cast<size_t>(i)]);
    if (has_res) v += ctx.input(r_index).get_f64(res_idx[static_cast<size_t>(i)]);
    v = ep->apply(v);
    if (y_scale) {
      const double q = std::nearbyint(static_cast<float>(static_cast<double>(static_cast<float>(v)) / y_scale->f));
      v = std::isnan(q) ? 0.0 : std::clamp(q, out_dtype == DType::uint8 ? 0.0 : -128.0, out_dtype == DType::uint8 ? 255.0 : 127.0);
    }
    out.set_f64(i, v);
  }
}

void fused_conv_kernel(KernelContext& ctx) { fused_kernel(ctx, OpKind::Conv, 3, false); }
void fused_matmul_kernel(KernelContext& ctx) { fused_kernel(ctx, OpKind::MatMul, 2, true); }

// y = softmax(scale * Q·K + M) · V, per batch index, in double. Q, K, V and Y are views of the
// inputs and the output (ir/strided.h): contiguous, of the inputs' shapes, unless the node
// carries operand views (the attention_views pass).
void fused_attention_kernel(KernelContext& ctx) {
  const Tensor &q = ctx.input(0), &k = ctx.input(1), &v = ctx.input(2);
  auto views = ir::attention_views(ctx.node);
  if (!views) ctx.fail_invalid(views.status().message());
  ir::AttentionViews av;
  if (*views) {
    av = **views;
    const Tensor* bufs[3] = {&q, &k, &v};
    int64_t out_numel = 1;
    for (int64_t x : av.out_shape) out_numel *= x;
    for (size_t o = 0; o < 4; ++o) {
      const int64_t n = o < 3 ? bufs[o]->numel() : out_numel;
      if (ir::view_extent(av.op[o]) >= n && n > 0)
        ctx.fail_invalid("operand view " + std::to_string(o) + " reads past its buffer of " + std::to_string(n) +
                         " elements");
    }
  } else {
    const int64_t r = q.rank();
    if (r < 2 || k.rank() != r || v.rank() != r)
      ctx.fail_invalid("Q, K and V must have one rank >= 2, got " + shape_to_string(q.shape()) + ", " +
                       shape_to_string(k.shape()) + ", " + shape_to_string(v.shape()));
    for (int64_t i = 0; i + 2 < r; ++i)
      if (q.dim(i) != k.dim(i) || q.dim(i) != v.dim(i))
        ctx.fail_invalid("batch dims differ: " + shape_to_string(q.shape()) + ", " + shape_to_string(k.shape()) +
                         ", " + shape_to_string(v.shape()));
    av.sq = q.dim(r - 2), av.d = q.dim(r - 1), av.sk = k.dim(r - 1), av.dv = v.dim(r - 1);
    if (k.dim(r - 2) != av.d || v.dim(r - 2) != av.sk)
      ctx.fail_invalid("Q·K·V shapes do not chain: " + shape_to_string(q.shape()) + ", " +
                       shape_to_string(k.shape()) + ", " + shape_to_string(v.shape()));
    av.batch_dims.assign(q.shape().begin(), q.shape().end() - 2);
    av.out_shape = q.shape();
    av.out_shape.back() = av.dv;
    av.op = {ir::contiguous_view(q.shape()), ir::contiguous_view(k.shape()), ir::contiguous_view(v.shape()),
             ir::contiguous_view(av.out_shape)};
  }
  const int64_t sq = av.sq, d = av.d, sk = av.sk, dv = av.dv;
  Shape scores_shape = av.batch_dims;
  scores_shape.push_back(sq);
  scores_shape.push_back(sk);
  std::vector<int64_t> mask_idx;
  if (ctx.has_input(3)) {
    const Tensor& m = ctx.input(3);
    if (broadcast_shapes(ctx, scores_shape, m.shape()) != scores_shape)
      ctx.fail_invalid("mask of shape " + shape_to_string(m.shape()) + " does not broadcast to the scores " +
                       shape_to_string(scores_shape));
    mask_idx = broadcast_index(m.shape(), scores_shape);
  }
  const double scale = ctx.attr_float("scale", 1.0f);
  Tensor& y = ctx.make_output(0, q.dtype(), av.out_shape);
  int64_t batches = 1;
  for (int64_t b : av.batch_dims) batches *= b;
  const auto &qv = av.op[0], &kv = av.op[1], &vv = av.op[2], &yv = av.op[3];
  const size_t nb = av.batch_dims.size();
  std::vector<double> s(static_cast<size_t>(sk));
  for (int64_t b = 0; b < batches; ++b) {
    const int64_t qb = ir::batch_offset(qv, b), kb = ir::batch_offset(kv, b), vb = ir::batch_offset(vv, b),
                  yb = ir::batch_offset(yv, b);
    for (int64_t i = 0; i < sq; ++i) {
      double mx = -INFINITY;
      for (int64_t j = 0; j < sk; ++j) {
        double acc = 0;
        for (int64_t t = 0; t < d; ++t)
          acc += q.get_f64(qb + i * qv.strides[nb] + t * qv.strides[nb + 1]) *
                 k.get_f64(kb + t * kv.strides[nb] + j * kv.strides[nb + 1]);
        acc *= scale;
        if (!mask_idx.empty()) acc += ctx.input(3).get_f64(mask_idx[static_cast<size_t>((b * sq + i) * sk + j)]);
        s[static_cast<size_t>(j)] = acc;
        mx = std::max(mx, acc);
      }
      double sum = 0;
      for (double& e : s) sum += (e = std::exp(e - mx));
      for (int64_t c = 0; c < dv; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < sk; ++j)
          acc += s[static_cast<size_t>(j)] / sum * v.get_f64(vb + j * vv.strides[nb] + c * vv.strides[nb + 1]);
        y.set_f64(yb + i * yv.strides[nb] + c * yv.strides[nb + 1], acc);
      }
    }
  }
}

// The chain applied per element, in double, rounded once at the end.
void fused_elementwise_kernel(KernelContext& ctx) {
  auto ops = ir::parse_chain(ctx.node);
  if (!ops) throw KernelError{ops.status()};
  const Tensor& x = ctx.input(0);
  for (size_t i = 1; i < ctx.node.inputs.size(); ++i)
    if (ctx.input(i).shape() != x.shape())
      ctx.fail_invalid("input " + std::to_string(i) + " of shape " + shape_to_string(ctx.input(i).shape()) +
                       " differs from X's " + shape_to_string(x.shape()));
  Tensor& y = ctx.make_output(0, x.dtype(), x.shape());
  auto operand = [&](const ir::ChainOp::Operand& o, double xv, int64_t i) {
    switch (o.from) {
      case ir::ChainOp::Operand::From::x: return xv;
      case ir::ChainOp::Operand::From::input: return ctx.input(static_cast<size_t>(o.input)).get_f64(i);
      case ir::ChainOp::Operand::From::constant: return static_cast<double>(o.value);
    }
    return xv;
  };
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.get_f64(i);
    for (const ir::ChainOp& op : *ops)
      v = op.binary ? ir::apply_chain_op(op.kind, operand(op.lhs, v, i), operand(op.rhs, v, i))
                    : ir::apply_chain_op(op.kind, v);
    y.set_f64(i, v);
  }
}

// Reformat changes only how a buffer holds the value (ir/layout.h); on logical tensors it is the
// identity.
void reformat_kernel(KernelContext& c) { c.set_output(0, c.input(0)); }

}  // namespace

void add_fused_kernels(KernelTable& t) {
  t.add(OpKind::Reformat, reformat_kernel);
  t.add(OpKind::FusedElementwise, fused_elementwise_kernel);
  t.add(OpKind::FusedAttention, fused_attention_kernel);
  t.add(OpKind::FusedConv, fused_conv_kernel);
  t.add(OpKind::FusedMatMul, fused_matmul_kernel);
}

}  // namespace tac::ref
