// CUDA tactics of the reductions: Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,SumSquare}
// over any set of axes (an attribute before opset 13 for ReduceSum and 18 for the others, a
// constant input after; keepdims; noop_with_empty_axes) and ArgMax / ArgMin; our own kernels
// (cuda_reduce.cu), one launch each, fp32 / fp16 / bf16 with fp32 accumulation. Tactic name
// "cuda". The input is seen as coalesced groups of kept and reduced dims (cuda_reduce.h).
#include "kernels/reduce/cuda_reduce.h"

#include <algorithm>

#include "kernels/cuda_util.h"
#include "kernels/elementwise/common.h"  // attr_i, attr_f, attr_s

namespace tac::kernels {

namespace {

using cuda::kern::Reduce;
using cuda::kern::ReduceDesc;
using ew::attr_f;
using ew::attr_i;
using ew::attr_s;
using ir::OpKind;


Result<Reduce> reduce_op(OpKind op) {
  switch (op) {
    case OpKind::ReduceSum: return Reduce::sum;
    case OpKind::ReduceMean: return Reduce::mean;
    case OpKind::ReduceMax: return Reduce::max;
    case OpKind::ReduceMin: return Reduce::min;
    case OpKind::ReduceProd: return Reduce::prod;
    case OpKind::ReduceL1: return Reduce::l1;
    case OpKind::ReduceL2: return Reduce::l2;
    case OpKind::ReduceLogSum: return Reduce::log_sum;
    case OpKind::ReduceLogSumExp: return Reduce::log_sum_exp;
    case OpKind::ReduceSumSquare: return Reduce::sum_square;
    case OpKind::ArgMax: return Reduce::arg_max;
    case OpKind::ArgMin: return Reduce::arg_min;
    default: return not_applicable("not a reduction of this table");
  }
}

// Which dims of x are reduced, and whether they stay as size-1 dims; as the reference reads them.
struct Axes {
  std::vector<bool> reduced;
  bool keepdims = true;
};
Result<Axes> reduced_axes(const StepDesc& s, Reduce op) {
  const int64_t r = static_cast<int64_t>(s.in_shapes[0].size());
  Axes a;
  a.reduced.assign(static_cast<size_t>(r), false);
  a.keepdims = attr_i(s, "keepdims", 1) != 0;
  std::vector<int64_t> axes;
  bool noop = false;
  if (op == Reduce::arg_max || op == Reduce::arg_min) {
    if (r == 0) return not_applicable("rank 0");
    axes = {attr_i(s, "axis", 0)};
  } else {
    const int since = op == Reduce::sum ? 13 : 18;  // axes became an input
    if (s.node->opset < since) {
      if (const ir::Attribute* at = s.node->attr("axes")) axes = at->ints;
    } else {
      if (s.node->attr("axes")) return not_applicable("'axes' attribute at this opset (the reference refuses it)");
      if (s.has_input(1)) {
        if (!s.constants[1]) return not_applicable("axes must be a constant");
        if (s.in_dtypes[1] != DType::int64) return not_applicable("axes must be int64");
        for (int64_t k = 0; k < s.constants[1]->numel(); ++k) axes.push_back(s.constants[1]->get_i64(k));
      }
      noop = attr_i(s, "noop_with_empty_axes", 0) != 0;
    }
  }
  if (axes.empty()) {
    if (!noop) std::fill(a.reduced.begin(), a.reduced.end(), true);
    return a;
  }
  for (int64_t ax : axes) {
    const int64_t n = ax < 0 ? ax + r : ax;
    if (n < 0 || n >= r) return not_applicable("axis out of range");
    if (a.reduced[static_cast<size_t>(n)]) return not_applicable("repeated axis");
    a.reduced[static_cast<size_t>(n)] = true;
  }
  return a;
}

Result<ReduceDesc> reduce_desc(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(Reduce op, reduce_op(s.node->op));
  if (!s.has_input(0) || s.out_dtypes.size() != 1) return not_applicable("one input and one output");
  const DType t = s.in_dtypes[0];
  TAC_RETURN_IF_ERROR(cuda::elem_of(t).status());
  const bool arg = op == Reduce::arg_max || op == Reduce::arg_min;
  if (s.out_dtypes[0] != (arg ? DType::int64 : t)) return not_applicable(arg ? "int64 output" : "output of the input's type");
  TAC_ASSIGN_OR_RETURN(Axes ax, reduced_axes(s, op));
  const Shape& x = s.in_shapes[0];
  ReduceDesc d;
  d.op = op;
  d.select_last = arg && s.node->opset >= 12 && attr_i(s, "select_last_index", 0) != 0;
  // Coalesced groups, outermost first: (size, stride of its innermost dim, reduced).
  struct Group {
    int64_t size, stride;
    bool reduced;
  };
  std::vector<Group> g;
  int64_t stride = 1;
  for (size_t k = x.size(); k-- > 0;) {
    const int64_t n = x[k];
    if (n < 0) return not_applicable("unknown dims");
    if (n != 1) {
      if (!g.empty() && g.back().reduced == ax.reduced[k]) g.back().size *= n;
      else g.push_back({n, stride, static_cast<bool>(ax.reduced[k])});
    }
    stride *= n;
  }
  std::reverse(g.begin(), g.end());
  d.columns = !g.empty() && !g.back().reduced;
  if (d.columns) {
    d.inner = g.back().size;
    g.pop_back();
  }
  d.outputs = d.inner;
  for (const Group& k : g) {
    if (k.reduced) {
      if (d.n_red == cuda::kern::kMaxDims) return not_applicable("more than 8 groups of reduced dims");
      d.red_dims[d.n_red] = k.size, d.red_strides[d.n_red] = k.stride, ++d.n_red;
      d.count *= k.size;
    } else {
      if (d.n_kept == cuda::kern::kMaxDims) return not_applicable("more than 8 groups of kept dims");
      d.kept_dims[d.n_kept] = k.size, d.kept_strides[d.n_kept] = k.stride, ++d.n_kept;
      d.outputs *= k.size;
    }
  }
  if (arg && d.count == 0 && d.outputs > 0) return not_applicable("the arg of an empty axis");
  if (d.outputs != shape_numel(s.out_shapes[0])) return not_applicable("output shape disagrees with the axes");
  return d;
}

Status reduce_applies(const StepDesc& s) { return reduce_desc(s).status(); }

Result<std::unique_ptr<Kernel>> reduce_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(ReduceDesc d, reduce_desc(s));
  TAC_ASSIGN_OR_RETURN(cuda::kern::Elem t, cuda::elem_of(s.in_dtypes[0]));
  TAC_ASSIGN_OR_RETURN(cuda::Context * c, cuda::context());
  void* st = c->stream;
  return cuda::make_kernel([t, d, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::reduce(t, in[0].data, out[0].data, d, st), "reduce kernel");
  });
}

// Memory-bound: the input read once (twice for LogSumExp), the output written once.
double reduce_cost(const StepDesc& s) {
  double b = 0;
  if (s.has_input(0)) b += static_cast<double>(dtype_size(s.in_dtypes[0])) * std::max<int64_t>(0, shape_numel(s.in_shapes[0]));
  if (s.node->op == OpKind::ReduceLogSumExp) b *= 2;
  if (!s.out_shapes.empty())
    b += static_cast<double>(dtype_size(s.out_dtypes[0])) * std::max<int64_t>(0, shape_numel(s.out_shapes[0]));
  return cuda::memory_bound_ns(b);
}

}  // namespace

std::span<const Tactic> cuda_reduce_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t;
    for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax, OpKind::ReduceMin, OpKind::ReduceProd,
                      OpKind::ReduceL1, OpKind::ReduceL2, OpKind::ReduceLogSum, OpKind::ReduceLogSumExp,
                      OpKind::ReduceSumSquare, OpKind::ArgMax, OpKind::ArgMin})
      t.push_back({"cuda", op, "own CUDA kernel over any axes: a thread, warp or block per output (fp32 accumulation)",
                   reduce_applies, reduce_cost, reduce_prepare, Backend::cuda});
    return t;
  }();
  return table;
}

}  // namespace tac::kernels
