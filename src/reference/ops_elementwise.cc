// Reference kernels: elementwise unary and binary ops, activations, comparison and logic, casts.
#include "reference/helpers.h"

namespace tac::ref {

namespace {

using ir::OpKind;

// out[i] = f(a[bi], b[bi]) with numpy broadcasting, computed in acc_t<T>.
template <class T, class Out, class F>
void binary_broadcast(KernelContext& ctx, DType out_dtype, F f) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Shape shape = broadcast_shapes(ctx, a.shape(), b.shape());
  Tensor& out = ctx.make_output(0, out_dtype, shape);
  auto ia = broadcast_index(a.shape(), shape);
  auto ib = broadcast_index(b.shape(), shape);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  Out* po = out.data<Out>();
  for (int64_t i = 0; i < out.numel(); ++i) po[i] = f(pa[ia[static_cast<size_t>(i)]], pb[ib[static_cast<size_t>(i)]]);
}

template <class T>
void check_same_dtype(KernelContext& ctx) {
  if (ctx.input(0).dtype() != ctx.input(1).dtype())
    ctx.fail_invalid("inputs have different types: " + dtype_name(ctx.input(0).dtype()) + " and " +
                     dtype_name(ctx.input(1).dtype()));
}

void add_kernel(KernelContext& ctx) {
  check_same_dtype<void>(ctx);
  dispatch(ctx, ctx.input(0).dtype(), [&]<class T>() {
    binary_broadcast<T, T>(ctx, ctx.input(0).dtype(), [](T x, T y) {
      if constexpr (is_float_v<T>) return from_f64<T>(to_f64(x) + to_f64(y));
      else return static_cast<T>(static_cast<acc_t<T>>(x) + static_cast<acc_t<T>>(y));
    });
  });
}

void relu_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.make_output(0, x.dtype(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.get_f64(i);
    y.set_f64(i, v > 0 ? v : 0.0);
  }
}

}  // namespace

void add_elementwise_kernels(KernelTable& t) {
  t.add(OpKind::Add, add_kernel);
  t.add(OpKind::Relu, relu_kernel);
}

}  // namespace tac::ref
