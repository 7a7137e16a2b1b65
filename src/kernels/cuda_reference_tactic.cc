// The CUDA backend's fallback, "host_reference": any op the reference interpreter supports runs
// on the host. Inputs are copied from the device (constants are read from the plan's host copy),
// the reference kernel runs, and the outputs are copied back. Slow but exact, always last in the
// ranking, and counted in the plan summary, so every model that builds on the CPU builds on CUDA.
#include "kernels/cuda_util.h"

namespace tac::kernels {

namespace {

class HostReferenceKernel final : public Kernel {
 public:
  static Result<std::unique_ptr<Kernel>> create(const StepDesc& s) {
    const Tactic* ref = find_tactic(s.node->op, "reference", Backend::cpu);
    if (!ref) return internal_error(s.node->label() + ": no reference tactic");
    std::unique_ptr<HostReferenceKernel> k(new HostReferenceKernel());
    TAC_ASSIGN_OR_RETURN(k->host_, ref->prepare(s));
    if (s.dynamic) return std::unique_ptr<Kernel>(std::move(k));  // run_dynamic only: no fixed host buffers
    for (size_t i = 0; i < s.in_dtypes.size(); ++i) {
      Tensor t;
      if (s.has_input(i) && !s.constants[i]) {
        TAC_ASSIGN_OR_RETURN(t, Tensor::create(s.in_dtypes[i], s.in_shapes[i]));
      }
      k->in_.push_back(std::move(t));
      k->in_views_.push_back(s.constants[i] ? TensorView{const_cast<void*>(s.constants[i]->raw()), s.in_dtypes[i], s.in_shapes[i]}
                                            : TensorView{s.has_input(i) ? k->in_.back().raw() : nullptr, s.in_dtypes[i], s.in_shapes[i]});
    }
    for (size_t i = 0; i < s.out_dtypes.size(); ++i) {
      Tensor t;
      if (s.out_dtypes[i] != DType::undefined) {
        TAC_ASSIGN_OR_RETURN(t, Tensor::create(s.out_dtypes[i], s.out_shapes[i]));
      }
      k->out_.push_back(std::move(t));
      k->out_views_.push_back(TensorView{k->out_.back().empty() ? nullptr : k->out_.back().raw(), s.out_dtypes[i], s.out_shapes[i]});
    }
    k->workspace_.resize(k->host_->workspace_bytes() + 64);
    return std::unique_ptr<Kernel>(std::move(k));
  }

  // Dynamic steps (shapes known only at run time): the engine hands host values and takes host
  // results (runtime/engine.cc run_dynamic_step), so the reference kernel runs on them as is.
  Status run_dynamic(std::span<const Datum* const> in, std::vector<Datum>& outs) override {
    return host_->run_dynamic(in, outs);
  }

  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void*) override {
    for (size_t i = 0; i < in.size() && i < in_.size(); ++i)
      if (!in_[i].empty() && in[i].data) TAC_RETURN_IF_ERROR(cuda::copy_to_host(in_[i].raw(), in[i].data, in_[i].bytes()));
    TAC_RETURN_IF_ERROR(cuda::synchronize());
    void* ws = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(workspace_.data()) + 63) & ~uintptr_t{63});
    TAC_RETURN_IF_ERROR(host_->run(in_views_, out_views_, ws));
    for (size_t i = 0; i < out.size() && i < out_.size(); ++i)
      if (!out_[i].empty() && out[i].data) TAC_RETURN_IF_ERROR(cuda::copy_to_device(out[i].data, out_[i].raw(), out_[i].bytes()));
    // The host buffers are reused by the next run: let the copies finish reading them.
    return cuda::synchronize();
  }

 private:
  std::unique_ptr<Kernel> host_;
  std::vector<Tensor> in_, out_;
  std::vector<TensorView> in_views_, out_views_;
  std::vector<std::byte> workspace_;
};

Status host_applies(const StepDesc& s) {
  const Tactic* ref = find_tactic(s.node->op, "reference", Backend::cpu);
  return ref ? ref->applies(s) : not_applicable("no reference kernel");
}
// Far behind any device tactic: copies both ways, a synchronization and the reference kernel.
double host_cost(const StepDesc& s) {
  double n = 1;
  for (const Shape& sh : s.out_shapes) n += static_cast<double>(std::max<int64_t>(0, shape_numel(sh)));
  return 1e12 + 100.0 * n;
}

}  // namespace

std::span<const Tactic> cuda_reference_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t;
    for (const Tactic& r : reference_tactics()) {
      t.push_back(Tactic{"host_reference", r.op, "the reference kernel on the host, with copies to and from the device (slow)",
                         host_applies, host_cost, HostReferenceKernel::create, Backend::cuda, /*layouts=*/false,
                         /*dynamic_shapes=*/true});
      t.back().catch_all = t.back().on_host = true;
    }
    return t;
  }();
  return table;
}

}  // namespace tac::kernels
