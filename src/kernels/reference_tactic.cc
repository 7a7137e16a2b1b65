// The fallback tactic: any op the reference interpreter supports runs through its kernel, so
// every model that `check` passes also builds. Slow, exact, and always last in the ranking.
#include <cstring>

#include "kernels/tactic.h"
#include "reference/interpreter.h"
#include "reference/kernel.h"

namespace tac::kernels {

namespace {

class ReferenceKernel final : public Kernel {
 public:
  explicit ReferenceKernel(const ir::Node& node) : node_(node) {
    // Values that the node's subgraphs read from the enclosing graph arrive as extra inputs
    // after the node's own (see builder); a small scope graph names them for lookup.
    for (const ir::Graph* g : node.subgraphs())
      for (const ir::Value& v : g->values)
        if (v.is_outer && scope_.find_value(v.name) == ir::kNoValue) scope_.get_or_add_value(v.name);
  }

  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void*) override {
    std::vector<Datum> data(in.size());
    std::vector<const Datum*> ptrs(in.size(), nullptr);
    for (size_t i = 0; i < in.size(); ++i) {
      if (i < node_.inputs.size() && (node_.inputs[i] == ir::kNoValue || !in[i].data)) continue;
      data[i] = Datum(Tensor::wrap(in[i].data, in[i].dtype, in[i].shape));
      ptrs[i] = &data[i];
    }
    std::vector<Datum> outs;
    TAC_RETURN_IF_ERROR(run_dynamic(ptrs, outs));
    for (size_t i = 0; i < out.size(); ++i) {
      if (!out[i].data) continue;
      const Datum& d = outs[i];
      // Only a shape the model declares (or its shape inference derives) and the data contradict,
      // e.g. an If branch of another shape, gets here: a model error, not ours.
      if (d.kind != Datum::Kind::tensor || d.tensor.shape() != out[i].shape || d.tensor.dtype() != out[i].dtype)
        return invalid_model(node_.label() + ": output " + std::to_string(i) + " is " +
                             (d.kind == Datum::Kind::tensor ? dtype_name(d.tensor.dtype()) + shape_to_string(d.tensor.shape())
                                                            : std::string("not a tensor")) +
                             " in this run, and the plan was built for " + dtype_name(out[i].dtype) +
                             shape_to_string(out[i].shape) + " (as declared or inferred)");
      std::memcpy(out[i].data, d.tensor.raw(), d.tensor.bytes());
    }
    return Status::ok();
  }

  // Inputs: the node's own, then the outer-scope values its subgraphs read (see builder).
  Status run_dynamic(std::span<const Datum* const> in, std::vector<Datum>& outs) override {
    const size_t own = node_.inputs.size();
    std::vector<const Datum*> ptrs(own, nullptr);
    for (size_t i = 0; i < own && i < in.size(); ++i) ptrs[i] = node_.inputs[i] == ir::kNoValue ? nullptr : in[i];
    ref::Frame scope(scope_, nullptr);
    for (size_t k = 0; k < scope_.values.size() && own + k < in.size(); ++k) {
      if (!in[own + k]) continue;
      scope.values[k] = *in[own + k];
      scope.defined[k] = true;
    }
    ref::KernelContext ctx(node_, std::move(ptrs), &scope);
    try {
      ref::reference_kernel(node_.op)(ctx);
    } catch (const ref::KernelError& e) {
      return e.status;
    } catch (const std::bad_alloc&) {
      return internal_error(node_.label() + ": out of memory");
    } catch (const std::length_error&) {
      return invalid_model(node_.label() + ": tensor too large");
    }
    outs = std::move(ctx.outputs());
    outs.resize(node_.outputs.size());
    for (size_t i = 0; i < outs.size(); ++i)
      if (node_.outputs[i] != ir::kNoValue && outs[i].kind == Datum::Kind::tensor && outs[i].tensor.empty())
        return internal_error(node_.label() + ": kernel did not produce output " + std::to_string(i));
    return Status::ok();
  }

 private:
  const ir::Node& node_;
  ir::Graph scope_;
};

Status reference_applies(const StepDesc& s) {
  return ref::reference_supports(*s.node) ? Status::ok() : not_applicable("the reference interpreter lacks this op");
}
// Ranked last: a large constant cost per element keeps it behind any real tactic.
double reference_cost(const StepDesc& s) {
  double n = 1;
  for (const Shape& sh : s.out_shapes) n += static_cast<double>(std::max<int64_t>(0, shape_numel(sh)));
  return 1e6 + 100.0 * n;
}
Result<std::unique_ptr<Kernel>> reference_prepare(const StepDesc& s) {
  return std::unique_ptr<Kernel>(new ReferenceKernel(*s.node));
}

}  // namespace

std::span<const Tactic> reference_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t;
    for (int i = 0; i < ir::kNumOps; ++i) {
      auto op = static_cast<ir::OpKind>(i);
      if (ref::reference_kernel(op)) {
        t.push_back(Tactic{"reference", op, "the reference interpreter's kernel (float64 accumulation; slow)",
                           reference_applies, reference_cost, reference_prepare, Backend::cpu,
                           /*layouts=*/false, /*dynamic_shapes=*/true, /*approximate=*/false, /*fallback=*/true});
        t.back().catch_all = true;
      }
    }
    return t;
  }();
  return table;
}

}  // namespace tac::kernels
