// Reference kernels: shape and data movement ops.
#include "reference/helpers.h"

namespace tac::ref {

namespace {

using ir::OpKind;

void identity_kernel(KernelContext& ctx) { ctx.set_output_datum(0, ctx.input_datum(0)); }

void constant_kernel(KernelContext& ctx) {
  if (const Tensor* t = ctx.attr_tensor("value")) {
    ctx.set_output(0, *t);
    return;
  }
  if (ctx.has_attr("value_float")) {
    Tensor& out = ctx.make_output(0, DType::float32, {});
    out.data<float>()[0] = ctx.attr_float("value_float", 0);
  } else if (ctx.has_attr("value_floats")) {
    auto v = ctx.attr_floats("value_floats");
    Tensor& out = ctx.make_output(0, DType::float32, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), out.data<float>());
  } else if (ctx.has_attr("value_int")) {
    Tensor& out = ctx.make_output(0, DType::int64, {});
    out.data<int64_t>()[0] = ctx.attr_int("value_int", 0);
  } else if (ctx.has_attr("value_ints")) {
    auto v = ctx.attr_ints("value_ints");
    Tensor& out = ctx.make_output(0, DType::int64, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), out.data<int64_t>());
  } else if (ctx.has_attr("value_string") || ctx.has_attr("value_strings")) {
    ctx.fail_unsupported("string constants are not supported");
  } else if (ctx.has_attr("sparse_value")) {
    ctx.fail_unsupported("sparse constants are not supported");
  } else {
    ctx.fail_invalid("no value attribute");
  }
}

}  // namespace

void add_shape_kernels(KernelTable& t) {
  t.add(OpKind::Identity, identity_kernel);
  t.add(OpKind::Constant, constant_kernel);
}

}  // namespace tac::ref
