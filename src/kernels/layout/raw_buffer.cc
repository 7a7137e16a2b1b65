#include "kernels/layout/raw_buffer.h"

#include <cmath>
#include <optional>

#include "ir/elementwise_chain.h"
#include "kernels/cost_model.h"

namespace tac::kernels {

namespace {

using ir::Layout;
using ir::OpKind;

// Activations and the output 4-D, of the output's float type (CPU: float32; CUDA: float32,
// float16, bfloat16); constants are checked per op below.
Status rank4_float(const StepDesc& s, Backend b) {
  if (s.out_dtypes.size() != 1 || s.out_shapes[0].size() != 4) return not_applicable("one 4-D output only");
  const DType t = s.out_dtypes[0];
  const bool ok = t == DType::float32 || (b == Backend::cuda && (t == DType::float16 || t == DType::bfloat16));
  if (!ok) return not_applicable(b == Backend::cpu ? "float32 only" : "float32, float16 or bfloat16 only");
  for (size_t i = 0; i < s.in_dtypes.size(); ++i)
    if (s.has_input(i) && !s.constants[i] && (s.in_dtypes[i] != t || s.in_shapes[i].size() != 4))
      return not_applicable("4-D activations of the output's type only");
  return Status::ok();
}

bool keeps_zero(const StepDesc& s) {
  switch (s.node->op) {
    case OpKind::Relu: case OpKind::LeakyRelu: case OpKind::Tanh: case OpKind::Neg: case OpKind::Abs: case OpKind::HardSwish:
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Max: case OpKind::Min: case OpKind::Sum:
      return true;
    case OpKind::Clip: {  // bounds as attributes (opset < 11) or constant scalar inputs
      double lo = -INFINITY, hi = INFINITY;
      if (const ir::Attribute* a = s.node->attr("min"); a && a->type == ir::Attribute::Type::f) lo = a->f;
      if (const ir::Attribute* a = s.node->attr("max"); a && a->type == ir::Attribute::Type::f) hi = a->f;
      for (size_t i = 1; i < 3; ++i) {
        if (!s.has_input(i)) continue;
        if (!s.constants[i] || s.constants[i]->numel() != 1) return false;
        (i == 1 ? lo : hi) = s.constants[i]->get_f64(0);
      }
      return lo <= 0 && 0 <= hi;
    }
    case OpKind::FusedElementwise: {  // the chain evaluated on zeros
      auto chain = ir::parse_chain(*s.node);
      if (!chain) return false;
      double x = 0;
      for (const ir::ChainOp& op : *chain) {
        auto operand = [&](const ir::ChainOp::Operand& o) {
          return o.from == ir::ChainOp::Operand::From::constant ? static_cast<double>(o.value)
                 : o.from == ir::ChainOp::Operand::From::x      ? x
                                                                 : 0.0;
        };
        x = op.binary ? ir::apply_chain_op(op.kind, operand(op.lhs), operand(op.rhs)) : ir::apply_chain_op(op.kind, x);
      }
      return x == 0;
    }
    default:
      return false;
  }
}

// Mul of an activation in nhwc / blocked layout `l` by a per-channel operand ([N or 1, C, 1, 1],
// or a constant of C values: squeeze-excitation's scale, ConvNeXt's layer scale) as the plain
// broadcast Mul over the buffers: nhwc [N, H*W, C] x [N|1, 1, C]; blocked [N, Cb, H*W, B] x
// [N|1, Cb, 1, B] (the operand in the same blocked layout, or plain with C a multiple of B). The
// padding of a blocked output stays zero: the activation's is, and 0 times a finite scale is 0.
// Empty when the step is not such a Mul.
std::optional<StepDesc> channel_scale_equivalent(const StepDesc& s, Layout l, const StepDesc& plain) {
  if (s.node->op != OpKind::Mul || s.in_shapes.size() != 2 || !s.has_input(0) || !s.has_input(1)) return std::nullopt;
  const Shape& y = s.out_shapes[0];
  const size_t big = s.in_shapes[0] == y && !s.constants[0] && s.in_layout(0) == l ? 0 : 1;
  const size_t other = 1 - big;
  if (s.in_shapes[big] != y || s.constants[big] || s.in_layout(big) != l) return std::nullopt;
  const Shape& o = s.in_shapes[other];
  if (o.size() > 4 || s.in_dtypes[other] != s.out_dtypes[0]) return std::nullopt;
  Shape o4(4 - o.size(), 1);
  o4.insert(o4.end(), o.begin(), o.end());
  const int64_t N = y[0], C = y[1], HW = y[2] * y[3];
  if (o4[1] != C || o4[2] != 1 || o4[3] != 1 || (o4[0] != N && o4[0] != 1) || C == 1) return std::nullopt;
  // How the operand's C values lie in memory: plain (a constant, or an nchw activation), or in `l`.
  const Layout lo = s.constants[other] ? Layout::nchw : s.in_layout(other);
  if (lo != Layout::nchw && lo != l) return std::nullopt;
  StepDesc p = plain;
  if (l == Layout::nhwc) {
    p.in_shapes[big] = {N, HW, C};
    p.in_shapes[other] = {o4[0], 1, C};
  } else {
    const int64_t B = ir::layout_block(l), Cb = (C + B - 1) / B;
    if (lo == Layout::nchw && C % B != 0) return std::nullopt;
    p.in_shapes[big] = {N, Cb, HW, B};
    p.in_shapes[other] = {o4[0], Cb, 1, B};
  }
  p.out_shapes[0] = p.in_shapes[big];
  return p;
}

// The plain step computing the same thing on `s`'s buffers: elementwise over the whole buffer
// as one row, Concat over [N, C, H, W] (blocked: image-major blocks) or [N*H*W, C] (nhwc).
Result<StepDesc> plain_equivalent(const StepDesc& s, Backend b) {
  if (Status st = rank4_float(s, b); !st) return st;
  const Layout l = s.out_layout(0);
  if (l == Layout::nchw) return not_applicable("for nhwc and blocked layouts (nchw steps have their own tactics)");
  StepDesc p = s;
  p.in_layouts.clear();
  p.out_layouts.clear();
  if (s.node->op == OpKind::Concat) {
    const ir::Attribute* a = s.node->attr("axis");
    if (!a || a->type != ir::Attribute::Type::i || (a->i != 1 && a->i != -3)) return not_applicable("Concat along channels only");
    for (size_t i = 0; i < s.in_shapes.size(); ++i) {
      if (s.in_layout(i) != l) return not_applicable("every input in the output's layout");
      if (s.in_shapes[i].size() != 4) return not_applicable("4-D inputs");
      if (ir::is_blocked(l) && s.in_shapes[i][1] % ir::layout_block(l) != 0)
        return not_applicable("blocked Concat needs every input's channels a multiple of the block");
      if (l == Layout::nhwc) {
        const Shape& x = s.in_shapes[i];
        p.in_shapes[i] = {x[0] * x[2] * x[3], x[1]};
      }
    }
    if (l == Layout::nhwc) {
      const Shape& y = s.out_shapes[0];
      p.out_shapes[0] = {y[0] * y[2] * y[3], y[1]};
    }
    return p;
  }
  if (auto scaled = channel_scale_equivalent(s, l, p)) return *scaled;
  if (!keeps_zero(s)) return not_applicable("an op with f(0) = 0 (the padding must stay zero)");
  const Shape& y = s.out_shapes[0];
  for (size_t i = 0; i < s.in_shapes.size(); ++i) {
    if (!s.has_input(i) || s.constants[i]) continue;  // Clip's bounds: checked by keeps_zero
    if (s.in_shapes[i] != y || s.in_layout(i) != l) return not_applicable("every activation input of the output's shape and layout");
    p.in_shapes[i] = {ir::physical_numel(y, l)};
  }
  for (size_t i = 0; i < s.in_shapes.size(); ++i)
    if (s.has_input(i) && s.constants[i] && !(s.node->op == OpKind::Clip && i > 0))
      return not_applicable("constant operands (broadcasting would touch the padding)");
  p.out_shapes[0] = {ir::physical_numel(y, l)};
  return p;
}

// The cheapest plain tactic of the op for `p` (never a layout tactic).
const Tactic* best_plain(const StepDesc& p, Backend b) {
  const Tactic* best = nullptr;
  double best_cost = INFINITY;
  for (const Tactic* t : tactics_for(p.node->op, b)) {
    if (t->layouts || !t->applies(p).is_ok()) continue;
    const double c = estimated_cost(*t, p);
    if (!best || c < best_cost) best = t, best_cost = c;
  }
  return best;
}

template <Backend B>
Status raw_applies(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(StepDesc p, plain_equivalent(s, B));
  if (!best_plain(p, B)) return not_applicable("no plain tactic for the equivalent step");
  return Status::ok();
}
template <Backend B>
double raw_cost(const StepDesc& s) {
  auto p = plain_equivalent(s, B);
  const Tactic* t = p ? best_plain(*p, B) : nullptr;
  return t ? estimated_cost(*t, *p) : 1e30;
}

// The plain kernel, handed views with the plain shapes.
class RawKernel final : public Kernel {
 public:
  RawKernel(std::unique_ptr<Kernel> inner, const StepDesc& p) : inner_(std::move(inner)) {
    for (size_t i = 0; i < p.in_shapes.size(); ++i) in_.push_back({nullptr, p.in_dtypes[i], p.in_shapes[i]});
    for (size_t i = 0; i < p.out_shapes.size(); ++i) out_.push_back({nullptr, p.out_dtypes[i], p.out_shapes[i]});
  }
  size_t workspace_bytes() const override { return inner_->workspace_bytes(); }
  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* ws) override {
    for (size_t i = 0; i < in_.size(); ++i) in_[i].data = in[i].data;
    for (size_t i = 0; i < out_.size(); ++i) out_[i].data = out[i].data;
    return inner_->run(in_, out_, ws);
  }

 private:
  std::unique_ptr<Kernel> inner_;
  std::vector<TensorView> in_, out_;
};

template <Backend B>
Result<std::unique_ptr<Kernel>> raw_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(StepDesc p, plain_equivalent(s, B));
  const Tactic* t = best_plain(p, B);
  if (!t) return not_applicable("no plain tactic for the equivalent step");
  TAC_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> inner, t->prepare(p));
  return std::unique_ptr<Kernel>(new RawKernel(std::move(inner), p));
}

}  // namespace

void add_raw_buffer_tactics(std::vector<Tactic>& t, Backend b) {
  const char* help =
      "nhwc / blocked: the plain tactic on the whole buffer (elementwise with f(0) = 0, inputs of one shape and "
      "layout) or on the equivalent plain shapes (Concat along channels, Mul by a per-channel scale)";
  for (OpKind op : {OpKind::Relu, OpKind::LeakyRelu, OpKind::Tanh, OpKind::Neg, OpKind::Abs, OpKind::HardSwish,
                    OpKind::Clip, OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Max, OpKind::Min, OpKind::Sum,
                    OpKind::FusedElementwise, OpKind::Concat}) {
    if (b == Backend::cpu)
      t.push_back(Tactic{"raw_buffer", op, help, raw_applies<Backend::cpu>, raw_cost<Backend::cpu>,
                         raw_prepare<Backend::cpu>, b, /*layouts=*/true});
    else
      t.push_back(Tactic{"raw_buffer", op, help, raw_applies<Backend::cuda>, raw_cost<Backend::cuda>,
                         raw_prepare<Backend::cuda>, b, /*layouts=*/true});
  }
}

}  // namespace tac::kernels
