// Unary activations and math (float32): one vector pass, split over threads for large tensors.
// Rows per op: "avx512" and "avx2" (the same kernel compiled for each instruction set).
#include <cmath>
#include <limits>

#include "kernels/elementwise/common.h"

namespace tac::kernels::ew {
namespace {

using ir::OpKind;

struct UnarySpec {
  OpKind op;
  UnaryOp kind;
  double weight;  // vector work per element relative to a Relu (the cost model and thread split)
};

constexpr UnarySpec kUnary[] = {
    {OpKind::Relu, UnaryOp::relu, 1},          {OpKind::LeakyRelu, UnaryOp::leaky_relu, 1},
    {OpKind::Clip, UnaryOp::clip, 1},          {OpKind::Sigmoid, UnaryOp::sigmoid, 8},
    {OpKind::Tanh, UnaryOp::tanh, 10},         {OpKind::Erf, UnaryOp::erf, 14},
    {OpKind::Gelu, UnaryOp::gelu_erf, 16},     {OpKind::HardSigmoid, UnaryOp::hard_sigmoid, 1},
    {OpKind::HardSwish, UnaryOp::hard_swish, 1}, {OpKind::Exp, UnaryOp::exp, 6},
    {OpKind::Sqrt, UnaryOp::sqrt, 3},          {OpKind::Neg, UnaryOp::neg, 1},
    {OpKind::Abs, UnaryOp::abs, 1},            {OpKind::Reciprocal, UnaryOp::reciprocal, 3},
};

const UnarySpec& spec_of(OpKind op) {
  for (const UnarySpec& s : kUnary)
    if (s.op == op) return s;
  return kUnary[0];
}

Status unary_check(const StepDesc& s) {
  if (Status st = all_f32(s, {0}); !st) return st;
  if (s.node->op == OpKind::Clip && s.node->opset >= 11)
    for (size_t i = 1; i <= 2; ++i)
      if (s.has_input(i) && (s.in_dtypes[i] != DType::float32 || shape_numel(s.in_shapes[i]) != 1))
        return not_applicable("Clip bounds must be float32 scalars");
  if (s.node->op == OpKind::Gelu) {
    const std::string ap = attr_s(s, "approximate", "none");
    if (ap != "none" && ap != "tanh") return not_applicable("approximate must be none or tanh");
  }
  return Status::ok();
}

template <Isa I>
Status unary_applies(const StepDesc& s) {
  if (Status st = isa_applies(I); !st) return st;
  return unary_check(s);
}

template <Isa I>
double unary_cost(const StepDesc& s) {
  const double n = static_cast<double>(shape_numel(s.out_shapes[0]));
  const double w = spec_of(s.node->op).weight;
  return stream_cost_ns(8 * n, n * w * 0.06 * isa_factor(I), s.threads, static_cast<int64_t>(n * w));
}

template <Isa I>
Result<std::unique_ptr<Kernel>> unary_prepare(const StepDesc& s) {
  const UnarySpec& sp = spec_of(s.node->op);
  UnaryOp kind = sp.kind;
  float a = 0, b = 0;
  switch (s.node->op) {
    case OpKind::LeakyRelu: a = attr_f(s, "alpha", 0.01f); break;
    case OpKind::HardSigmoid:
      a = attr_f(s, "alpha", 0.2f);
      b = attr_f(s, "beta", 0.5f);
      break;
    case OpKind::Clip:
      a = attr_f(s, "min", std::numeric_limits<float>::lowest());
      b = attr_f(s, "max", std::numeric_limits<float>::max());
      break;
    case OpKind::Gelu:
      if (attr_s(s, "approximate", "none") == "tanh") kind = UnaryOp::gelu_tanh;
      break;
    default: break;
  }
  const bool clip_inputs = s.node->op == OpKind::Clip && s.node->opset >= 11;
  const int threads = s.threads;
  const int64_t weight = static_cast<int64_t>(sp.weight);
  const IsaKernels& k = isa_kernels(I);
  return make_kernel([=, &k](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
    float lo = a, hi = b;
    if (clip_inputs) {  // opset 11+: bounds are optional scalar inputs, read at run time
      lo = in.size() > 1 && in[1].data ? *in[1].as<float>() : -INFINITY;
      hi = in.size() > 2 && in[2].data ? *in[2].as<float>() : INFINITY;
    }
    const float* x = in[0].as<float>();
    float* y = out[0].as<float>();
    parallel_for(in[0].numel(), weight, threads, [&](int64_t b0, int64_t e0) { k.unary(kind, x + b0, y + b0, e0 - b0, lo, hi); }, 64);
    return Status::ok();
  });
}

}  // namespace

std::vector<Tactic> unary_tactics() {
  std::vector<Tactic> t;
  for (const UnarySpec& s : kUnary) {
    t.push_back(Tactic{"avx512", s.op, "AVX-512 vector loop (polynomial exp/tanh/erf, ~1e-6 relative)", unary_applies<Isa::avx512>,
                       unary_cost<Isa::avx512>, unary_prepare<Isa::avx512>});
    t.push_back(Tactic{"avx2", s.op, "AVX2 vector loop (polynomial exp/tanh/erf, ~1e-6 relative)", unary_applies<Isa::avx2>,
                       unary_cost<Isa::avx2>, unary_prepare<Isa::avx2>});
  }
  return t;
}

}  // namespace tac::kernels::ew
