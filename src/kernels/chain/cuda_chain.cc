// FusedElementwise on CUDA (tactic "cuda"): the chain's program parsed once at prepare into the
// kernel's plain links (cuda_chain.h), then one launch per run evaluating the whole chain per
// element (chains longer than kMaxChainLinks: one launch per kMaxChainLinks links, through an
// fp32 workspace). fp32, fp16 or bf16 tensors, all of the output's type and X's shape (as the
// precision rewrite and the fusion pass leave them); arithmetic in fp32, constants fp32.
#include "kernels/chain/cuda_chain.h"

#include <algorithm>
#include <array>

#include "ir/elementwise_chain.h"
#include "kernels/cuda_util.h"

namespace tac::kernels {

namespace {

using cuda::kern::ChainKind;
using cuda::kern::ChainLink;
using cuda::elem_of;
using cuda::kern::Elem;

static_assert(cuda::kern::kNumChainKinds == static_cast<int>(ir::ChainOp::Kind::Min) + 1,
              "one kernel kind per ir::ChainOp::Kind");

ChainKind kind_of(ir::ChainOp::Kind k) {
  using K = ir::ChainOp::Kind;
  switch (k) {
    case K::Relu: return ChainKind::relu;
    case K::Sigmoid: return ChainKind::sigmoid;
    case K::Tanh: return ChainKind::tanh;
    case K::Exp: return ChainKind::exp;
    case K::Neg: return ChainKind::neg;
    case K::Abs: return ChainKind::abs;
    case K::Sqrt: return ChainKind::sqrt;
    case K::Reciprocal: return ChainKind::reciprocal;
    case K::Erf: return ChainKind::erf;
    case K::Add: return ChainKind::add;
    case K::Sub: return ChainKind::sub;
    case K::Mul: return ChainKind::mul;
    case K::Div: return ChainKind::div;
    case K::Max: return ChainKind::max;
    case K::Min: return ChainKind::min;
  }
  return ChainKind::relu;
}

// The step's element type: every input present, of the output's float type and of X's shape.
Result<Elem> chain_type(const StepDesc& s) {
  if (s.out_dtypes.size() != 1 || s.out_shapes.empty()) return not_applicable("one output");
  TAC_ASSIGN_OR_RETURN(Elem e, elem_of(s.out_dtypes[0]));
  if (s.in_dtypes.empty() || s.in_dtypes.size() > static_cast<size_t>(cuda::kern::kMaxChainInputs))
    return not_applicable("1 to " + std::to_string(cuda::kern::kMaxChainInputs) + " inputs");
  for (size_t i = 0; i < s.in_dtypes.size(); ++i) {
    if (!s.has_input(i) || s.in_dtypes[i] != s.out_dtypes[0]) return not_applicable("inputs of the output's float type");
    if (s.in_shapes[i] != s.in_shapes[0]) return not_applicable("every input must have X's shape");
  }
  for (int64_t d : s.in_shapes[0])
    if (d < 0) return not_applicable("shapes known at build time");
  if (shape_numel(s.out_shapes[0]) != shape_numel(s.in_shapes[0])) return not_applicable("output of X's size");
  return e;
}

Result<std::vector<ChainLink>> links_of(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(std::vector<ir::ChainOp> ops, ir::parse_chain(*s.node));
  std::vector<ChainLink> out;
  for (const ir::ChainOp& op : ops) {
    ChainLink l;
    l.op = kind_of(op.kind);
    if (op.binary) {
      l.x_left = op.lhs.from == ir::ChainOp::Operand::From::x ? 1 : 0;
      const ir::ChainOp::Operand& other = l.x_left ? op.rhs : op.lhs;
      if (other.from == ir::ChainOp::Operand::From::input) {
        if (other.input < 0 || static_cast<size_t>(other.input) >= s.in_dtypes.size())
          return not_applicable("a link names a missing input");
        l.operand = ChainLink::tensor;
        l.input = static_cast<uint8_t>(other.input);
      } else {
        l.operand = ChainLink::constant;
        l.value = other.value;
      }
    }
    out.push_back(l);
  }
  return out;
}

Status chain_applies(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(chain_type(s).status());
  TAC_ASSIGN_OR_RETURN(std::vector<ChainLink> links, links_of(s));
  const size_t ws =
      static_cast<size_t>(cuda::kern::chain_workspace_bytes(static_cast<int>(links.size()), shape_numel(s.in_shapes[0])));
  if (ws > s.workspace_limit) return workspace_over_limit(ws, s.workspace_limit);
  return Status::ok();
}

// Memory-bound: each tensor read once and the output written once, plus an fp32 write and read
// of the running value between launches of a long chain.
double chain_cost(const StepDesc& s) {
  const double n = static_cast<double>(std::max<int64_t>(0, shape_numel(s.in_shapes.empty() ? Shape{} : s.in_shapes[0])));
  const double elem = s.out_dtypes.empty() ? 4.0 : static_cast<double>(dtype_size(s.out_dtypes[0]));
  const ir::Attribute* ops = s.node->attr("ops");
  const int links = ops ? static_cast<int>(ops->strings.size()) : 1;
  const int launches = std::max(1, (links + cuda::kern::kMaxChainLinks - 1) / cuda::kern::kMaxChainLinks);
  const double bytes = elem * n * static_cast<double>(s.in_dtypes.size() + 1) + 8.0 * n * (launches - 1);
  return cuda::memory_bound_ns(bytes) + 3000.0 * (launches - 1);
}

Result<std::unique_ptr<Kernel>> chain_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(Elem t, chain_type(s));
  TAC_ASSIGN_OR_RETURN(std::vector<ChainLink> links, links_of(s));
  TAC_ASSIGN_OR_RETURN(cuda::Context * c, cuda::context());
  void* st = c->stream;
  const int n_links = static_cast<int>(links.size());
  const size_t ws = static_cast<size_t>(cuda::kern::chain_workspace_bytes(n_links, shape_numel(s.in_shapes[0])));
  return cuda::make_kernel(
      [t, links = std::move(links), n_links, st](std::span<const TensorView> in, std::span<const TensorView> out,
                                                  void* workspace) {
        std::array<const void*, cuda::kern::kMaxChainInputs> ptrs{};
        for (size_t i = 0; i < in.size() && i < ptrs.size(); ++i) ptrs[i] = in[i].data;
        return cuda::launch_status(cuda::kern::chain(t, links.data(), n_links, ptrs.data(), static_cast<int>(in.size()),
                                                     out[0].data, out[0].numel(), workspace, st),
                                   "elementwise chain kernel");
      },
      ws);
}

const std::vector<Tactic>& table() {
  static const std::vector<Tactic> t = {
      {"cuda", ir::OpKind::FusedElementwise,
       "own CUDA kernel: the whole chain per element in registers, one launch (16-byte accesses when aligned)",
       chain_applies, chain_cost, chain_prepare, Backend::cuda},
  };
  return t;
}

}  // namespace

std::span<const Tactic> cuda_chain_tactics() { return table(); }

}  // namespace tac::kernels
