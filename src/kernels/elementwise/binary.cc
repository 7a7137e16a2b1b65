// Binary arithmetic with numpy broadcasting (Add, Sub, Mul, Div, Max, Min, Pow) and Where, float32.
// Rows per op: "avx512" and "avx2". Broadcasting is reduced to runs (broadcast.h): same shape,
// scalar operand, row and channel broadcast all end up in the vector-vector or vector-scalar
// loop. Pow has vector fast paths for a constant scalar exponent 2, 0.5 or 1; other exponents
// use powf per element.
#include <cmath>

#include "kernels/elementwise/broadcast.h"
#include "kernels/elementwise/common.h"

namespace tac::kernels::ew {
namespace {

using ir::OpKind;

constexpr size_t kMaxRank = 16;

BinaryOp binary_kind(OpKind op) {
  switch (op) {
    case OpKind::Sub: return BinaryOp::sub;
    case OpKind::Mul: return BinaryOp::mul;
    case OpKind::Div: return BinaryOp::div;
    case OpKind::Max: return BinaryOp::max;
    case OpKind::Min: return BinaryOp::min;
    default: return BinaryOp::add;
  }
}

// Pow's constant scalar exponent, or NaN when there is none.
float pow_constant_exponent(const StepDesc& s) {
  if (s.node->op != OpKind::Pow || !s.constants.size() || s.constants.size() < 2 || !s.constants[1] ||
      shape_numel(s.in_shapes[1]) != 1 || shape_numel(s.out_shapes[0]) != shape_numel(s.in_shapes[0]))
    return NAN;
  return s.constants[1]->data<float>()[0];
}

template <Isa I>
Status binary_applies(const StepDesc& s) {
  if (Status st = isa_applies(I); !st) return st;
  const size_t n_in = s.node->op == OpKind::Where ? 3 : 2;
  if (s.in_dtypes.size() != n_in || s.node->inputs.size() != n_in) return not_applicable("needs exactly " + std::to_string(n_in) + " inputs");
  if (s.node->op == OpKind::Where) {
    if (s.in_dtypes[0] != DType::boolean) return not_applicable("condition must be bool");
    if (Status st = all_f32(s, {1, 2}); !st) return st;
  } else if (Status st = all_f32(s, {0, 1}); !st) {
    return st;
  }
  if (s.out_shapes[0].size() > kMaxRank) return not_applicable("rank above 16");
  return Status::ok();
}

template <Isa I>
double binary_cost(const StepDesc& s) {
  const double n = static_cast<double>(shape_numel(s.out_shapes[0]));
  double bytes = 4 * n;
  for (const Shape& sh : s.in_shapes) bytes += 4 * static_cast<double>(shape_numel(sh));
  std::vector<Shape> ins(s.in_shapes.begin(), s.in_shapes.end());
  BroadcastPlan p(s.out_shapes[0], ins);
  double w = 1;
  if (s.node->op == OpKind::Div) w = 2;
  if (s.node->op == OpKind::Pow) {
    const float e = pow_constant_exponent(s);
    w = (e == 2.0f || e == 1.0f) ? 1 : e == 0.5f ? 3 : 40;  // powf is scalar
  }
  return stream_cost_ns(bytes, n * w * 0.06 * isa_factor(I) + 5.0 * static_cast<double>(p.outer), s.threads,
                        static_cast<int64_t>(n * w));
}

void pow_general(const float* a, const float* b, float* y, int64_t n, int sa, int sb) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::pow(a[i * sa], b[i * sb]);
}

template <Isa I>
Result<std::unique_ptr<Kernel>> binary_prepare(const StepDesc& s) {
  const IsaKernels& k = isa_kernels(I);
  const int threads = s.threads;
  const OpKind op = s.node->op;
  if (op == OpKind::Pow) {
    const float e = pow_constant_exponent(s);
    if (e == 2.0f || e == 1.0f || e == 0.5f) {
      const UnaryOp u = e == 2.0f ? UnaryOp::square : e == 1.0f ? UnaryOp::copy : UnaryOp::sqrt;
      return make_kernel([=, &k](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
        const float* x = in[0].as<float>();
        float* y = out[0].as<float>();
        const int64_t n = out[0].numel();
        parallel_for(n, 3, threads, [&](int64_t b, int64_t e0) {
          k.unary(u, x + b, y + b, e0 - b, 0, 0);
          if (u == UnaryOp::sqrt)  // pow(x, 0.5) differs from sqrt only at -inf (and -0, equal)
            for (int64_t i = b; i < e0; ++i)
              if (x[i] == -INFINITY) y[i] = INFINITY;
        }, 64);
        return Status::ok();
      });
    }
  }
  std::vector<Shape> ins(s.in_shapes.begin(), s.in_shapes.end());
  BroadcastPlan plan(s.out_shapes[0], ins);
  if (op == OpKind::Where)
    return make_kernel([=, &k](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
      const bool* c = in[0].as<bool>();
      const float* x = in[1].as<float>();
      const float* z = in[2].as<float>();
      float* y = out[0].as<float>();
      plan.run(threads, 1, [&](const int64_t* off, int64_t o, int64_t n) {
        k.where(c + off[0], x + off[1], z + off[2], y + o, n, plan.inner_stride[0], plan.inner_stride[1], plan.inner_stride[2]);
      });
      return Status::ok();
    });
  const bool general_pow = op == OpKind::Pow;
  const BinaryOp kind = binary_kind(op);
  return make_kernel([=, &k](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
    const float* a = in[0].as<float>();
    const float* b = in[1].as<float>();
    float* y = out[0].as<float>();
    const int sa = plan.inner_stride[0], sb = plan.inner_stride[1];
    plan.run(threads, general_pow ? 40 : 1, [&](const int64_t* off, int64_t o, int64_t n) {
      if (general_pow) pow_general(a + off[0], b + off[1], y + o, n, sa, sb);
      else k.binary(kind, a + off[0], b + off[1], y + o, n, sa, sb);
    });
    return Status::ok();
  });
}

}  // namespace

std::vector<Tactic> binary_tactics() {
  std::vector<Tactic> t;
  for (OpKind op : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Pow, OpKind::Max, OpKind::Min, OpKind::Where}) {
    t.push_back(Tactic{"avx512", op, "AVX-512 loop over broadcast runs (same shape / scalar / row / channel)",
                       binary_applies<Isa::avx512>, binary_cost<Isa::avx512>, binary_prepare<Isa::avx512>});
    t.push_back(Tactic{"avx2", op, "AVX2 loop over broadcast runs (same shape / scalar / row / channel)",
                       binary_applies<Isa::avx2>, binary_cost<Isa::avx2>, binary_prepare<Isa::avx2>});
  }
  return t;
}

}  // namespace tac::kernels::ew
