#include "kernels/tactic_check.h"

#include <cmath>
#include <cstdlib>
#include <random>

#include "backends/cuda/device.h"
#include "reference/interpreter.h"
#include "reference/kernel.h"

namespace tac::kernels {

ir::Node make_node(const std::string& op_type, size_t n_inputs, size_t n_outputs, int opset) {
  ir::Node n;
  n.op_type = op_type;
  n.op = ir::op_kind_from_name(op_type);
  n.opset = opset;
  n.name = "test_" + op_type;
  for (size_t i = 0; i < n_inputs; ++i) n.inputs.push_back(static_cast<int>(i));
  for (size_t i = 0; i < n_outputs; ++i) n.outputs.push_back(static_cast<int>(n_inputs + i));
  n.index = 0;
  return n;
}

void set_attr(ir::Node& n, const std::string& key, int64_t v) {
  ir::Attribute a;
  a.type = ir::Attribute::Type::i;
  a.i = v;
  n.attrs[key] = a;
}
void set_attr(ir::Node& n, const std::string& key, float v) {
  ir::Attribute a;
  a.type = ir::Attribute::Type::f;
  a.f = v;
  n.attrs[key] = a;
}
void set_attr(ir::Node& n, const std::string& key, const std::string& v) {
  ir::Attribute a;
  a.type = ir::Attribute::Type::s;
  a.s = v;
  n.attrs[key] = a;
}
void set_attr(ir::Node& n, const std::string& key, std::vector<int64_t> v) {
  ir::Attribute a;
  a.type = ir::Attribute::Type::ints;
  a.ints = std::move(v);
  n.attrs[key] = a;
}

Tensor random_tensor(DType dtype, Shape shape, uint64_t seed) {
  Tensor t = Tensor::create(dtype, std::move(shape)).value();
  std::mt19937_64 rng(seed * 7919 + 17);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::uniform_int_distribution<int> small(-5, 5);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype_is_float(dtype)) t.set_f64(i, nd(rng));
    else if (dtype == DType::boolean) t.set_i64(i, small(rng) > 0);
    else t.set_i64(i, dtype_is_unsigned_int(dtype) ? std::abs(small(rng)) : small(rng));
  }
  return t;
}

namespace {
// A CUDA tactic's run: the kernel run on device_run's buffers (outputs poisoned), the outputs
// copied back into r.outputs (as plain nchw).
Status run_on_device(Kernel& kernel, const StepDesc& step, const std::vector<Tensor>& inputs, TacticCheck& r) {
  TAC_ASSIGN_OR_RETURN(DeviceRun d, device_run(kernel, step, inputs, 0x7f));
  TAC_RETURN_IF_ERROR(kernel.run(d.in, d.out, d.workspace.get()));
  std::vector<Tensor> physical;
  for (size_t k = 0; k < r.expected.size(); ++k) {
    Tensor o = Tensor::create(r.expected[k].dtype(), {ir::physical_numel(r.expected[k].shape(), step.out_layout(k))}).value();
    TAC_RETURN_IF_ERROR(cuda::copy_to_host(o.raw(), d.out[k].data, o.bytes()));
    physical.push_back(o);
  }
  TAC_RETURN_IF_ERROR(cuda::synchronize());
  for (size_t k = 0; k < physical.size(); ++k) r.outputs.push_back(ir::from_layout(physical[k], r.expected[k].shape(), step.out_layout(k)));
  return Status::ok();
}
}  // namespace

Result<DeviceRun> device_run(const Kernel& kernel, const StepDesc& step, const std::vector<Tensor>& inputs, int fill) {
  DeviceRun d;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const Tensor physical = t.empty() ? t : ir::to_layout(t, step.in_layout(i));
    TAC_ASSIGN_OR_RETURN(cuda::DeviceBuffer b, cuda::DeviceBuffer::allocate(t.empty() ? 0 : physical.bytes()));
    if (!t.empty()) TAC_RETURN_IF_ERROR(cuda::copy_to_device(b.get(), physical.raw(), physical.bytes()));
    d.in.push_back(TensorView{t.empty() ? nullptr : b.get(), t.dtype(), t.shape()});
    d.bufs.push_back(std::move(b));
  }
  for (size_t k = 0; k < step.out_dtypes.size(); ++k) {
    if (step.out_dtypes[k] == DType::undefined) {
      d.out.push_back({});
      continue;
    }
    const size_t bytes = static_cast<size_t>(ir::physical_numel(step.out_shapes[k], step.out_layout(k))) * dtype_size(step.out_dtypes[k]);
    TAC_ASSIGN_OR_RETURN(cuda::DeviceBuffer b, cuda::DeviceBuffer::allocate(bytes));
    TAC_RETURN_IF_ERROR(cuda::fill_bytes(b.get(), fill, bytes));
    d.out.push_back(TensorView{b.get(), step.out_dtypes[k], step.out_shapes[k]});
    d.bufs.push_back(std::move(b));
  }
  TAC_ASSIGN_OR_RETURN(d.workspace, cuda::DeviceBuffer::allocate(kernel.workspace_bytes()));
  return d;
}

TacticCheck check_tactic(const Tactic& tactic, const ir::Node& node, const std::vector<Tensor>& inputs,
                         const std::vector<bool>& const_mask, int threads, const std::vector<ir::Layout>& in_layouts,
                         ir::Layout out_layout) {
  TacticCheck r;
  // Reference first: it defines the output shapes.
  std::vector<Datum> data(inputs.size());
  std::vector<const Datum*> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty()) {
      ptrs.push_back(nullptr);
      continue;
    }
    data[i] = Datum(inputs[i]);
    ptrs.push_back(&data[i]);
  }
  ir::Graph empty;
  ref::Frame frame(empty, nullptr);
  ref::KernelContext ctx(node, ptrs, &frame);
  ref::RefKernel rk = ref::reference_kernel(node.op);
  if (!rk) {
    r.status = internal_error("no reference kernel for " + node.op_type);
    return r;
  }
  try {
    rk(ctx);
  } catch (const ref::KernelError& e) {
    r.status = e.status.with_context("reference: ");
    return r;
  }
  StepDesc step;
  step.node = &node;
  step.threads = threads;
  for (size_t i = 0; i < inputs.size(); ++i) {
    step.in_dtypes.push_back(inputs[i].empty() ? DType::undefined : inputs[i].dtype());
    step.in_shapes.push_back(inputs[i].shape());
    step.constants.push_back(i < const_mask.size() && const_mask[i] && !inputs[i].empty() ? &inputs[i] : nullptr);
  }
  for (const Datum& d : ctx.outputs()) {
    r.expected.push_back(d.tensor);
    step.out_dtypes.push_back(d.tensor.dtype());
    step.out_shapes.push_back(d.tensor.shape());
  }
  // Layouts: constants stay plain.
  for (size_t i = 0; i < inputs.size(); ++i)
    step.in_layouts.push_back(i < in_layouts.size() && !step.constants[i] ? in_layouts[i] : ir::Layout::nchw);
  step.out_layouts.assign(step.out_dtypes.size(), ir::Layout::nchw);
  if (!step.out_layouts.empty()) step.out_layouts[0] = out_layout;
  if (!step.plain() && !tactic.layouts) {
    r.status = not_applicable("reads and writes nchw only");
    return r;
  }
  r.status = tactic.applies(step);
  if (!r.status) return r;
  auto kernel = tactic.prepare(step);
  if (!kernel) {
    r.status = kernel.status();
    return r;
  }
  if (tactic.backend == Backend::cuda) {
    r.status = run_on_device(**kernel, step, inputs, r);
    if (!r.status) return r;
  } else {
  std::vector<TensorView> in_views, out_views;
  std::vector<Tensor> physical;  // inputs in their layouts
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    physical.push_back(t.empty() ? t : ir::to_layout(t, step.in_layout(i)));
    in_views.push_back(TensorView{t.empty() ? nullptr : const_cast<void*>(physical.back().raw()), t.dtype(), t.shape()});
  }
  for (size_t k = 0; k < r.expected.size(); ++k) {
    const Tensor& e = r.expected[k];
    const ir::Layout l = step.out_layout(k);
    Tensor o = Tensor::create(e.dtype(), l == ir::Layout::nchw ? e.shape() : Shape{ir::physical_numel(e.shape(), l)}).value();
    // Poison the output so a kernel that skips elements cannot pass by luck.
    std::memset(o.raw(), 0x7f, o.bytes());
    out_views.push_back(TensorView{o.raw(), o.dtype(), e.shape()});
    r.outputs.push_back(o);
  }
  std::vector<std::byte> ws((*kernel)->workspace_bytes() + 64);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) & ~uintptr_t{63});
  r.status = (*kernel)->run(in_views, out_views, aligned);
  if (!r.status) return r;
  for (size_t k = 0; k < r.outputs.size(); ++k) {
    const ir::Layout l = step.out_layout(k);
    if (l == ir::Layout::nchw) continue;
    const Shape& s = r.expected[k].shape();
    Tensor plain = ir::from_layout(r.outputs[k], s, l);
    // Padded channels: every buffer element no logical element maps to must be zero.
    Tensor back = ir::to_layout(plain, l);
    if (back.bytes() != r.outputs[k].bytes() || std::memcmp(back.raw(), r.outputs[k].raw(), back.bytes()) != 0) {
      r.status = internal_error(std::string("padding of the ") + ir::layout_name(l) + " output is not zero");
      return r;
    }
    r.outputs[k] = plain;
  }
  }
  for (size_t k = 0; k < r.expected.size(); ++k)
    for (int64_t i = 0; i < r.expected[k].numel(); ++i) {
      double want = r.expected[k].get_f64(i), got = r.outputs[k].get_f64(i);
      double d = got == want ? 0.0 : std::fabs(got - want);  // equal infinities differ by 0, not NaN
      if (std::isnan(d)) d = std::isnan(want) && std::isnan(got) ? 0 : INFINITY;
      r.max_abs_diff = std::max(r.max_abs_diff, d);
      r.max_rel_diff = std::max(r.max_rel_diff, d / std::max(std::fabs(want), 1e-6));
    }
  return r;
}

}  // namespace tac::kernels
