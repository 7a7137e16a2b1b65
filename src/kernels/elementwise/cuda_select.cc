// CUDA tactics of the selection and shape-subgraph ops that detectors and channel-shuffle
// networks carry: comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual) and logic (And,
// Or, Xor, Not) with bool outputs and numpy broadcasting, Where, Pad (constant / edge / reflect /
// wrap, negative pads cropping), our own kernels (cuda_select.cu); Expand and Tile as strided
// gathers (the transpose kernel, strides 0 where a dim repeats); Split as one strided 2-D device
// copy per output. Any element type of 1, 2, 4 or 8 bytes where the op only moves data; tactic
// name "cuda" ("cuda_copy" for Split, as Concat).
#include "kernels/elementwise/cuda_select.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda_util.h"
#include "kernels/elementwise/common.h"  // const_ints, pads_per_dim

namespace tac::kernels {

namespace {

using cuda::kern::Compare;
using ir::OpKind;
constexpr int kMaxDims = cuda::kern::kMaxDims;

int64_t int_attr(const StepDesc& s, const char* k, int64_t d) {
  const ir::Attribute* a = s.node->attr(k);
  return a ? a->i : d;
}
Result<void*> stream() {
  TAC_ASSIGN_OR_RETURN(cuda::Context * c, cuda::context());
  return static_cast<void*>(c->stream);
}
double bytes_of(const StepDesc& s) {
  double b = 0;
  for (size_t i = 0; i < s.in_shapes.size(); ++i)
    if (s.has_input(i) && !s.constants[i])
      b += static_cast<double>(dtype_size(s.in_dtypes[i])) * std::max<int64_t>(0, shape_numel(s.in_shapes[i]));
  for (size_t i = 0; i < s.out_shapes.size(); ++i)
    if (s.out_dtypes[i] != DType::undefined)
      b += static_cast<double>(dtype_size(s.out_dtypes[i])) * std::max<int64_t>(0, shape_numel(s.out_shapes[i]));
  return b;
}
double movement_cost(const StepDesc& s) { return cuda::memory_bound_ns(bytes_of(s)); }
bool movable_size(size_t e) { return e == 1 || e == 2 || e == 4 || e == 8; }
bool known(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](int64_t d) { return d >= 0; });
}
// Strides of `in` (right-aligned against `out`), 0 where it broadcasts.
void broadcast_strides(const Shape& in, const Shape& out, int64_t* strides) {
  const size_t r = out.size(), off = r - in.size();
  int64_t st = 1;
  for (size_t d = r; d-- > 0;) {
    if (d < off) {
      strides[d] = 0;
      continue;
    }
    strides[d] = in[d - off] == 1 ? 0 : st;
    st *= in[d - off];
  }
}
// Every input a (broadcastable) operand of the output, whose rank is at most 8.
Status broadcast_ok(const StepDesc& s, size_t n_inputs) {
  if (s.in_dtypes.size() != n_inputs || s.out_dtypes.size() != 1) return not_applicable("inputs and one output");
  const Shape& o = s.out_shapes[0];
  if (o.size() > static_cast<size_t>(kMaxDims) || !known(o)) return not_applicable("output rank above 8 or unknown");
  for (size_t i = 0; i < n_inputs; ++i) {
    if (!s.has_input(i)) return not_applicable("every input present");
    const Shape& x = s.in_shapes[i];
    if (x.size() > o.size()) return not_applicable("input rank above the output's");
    for (size_t d = 0; d < x.size(); ++d)
      if (x[d] != 1 && x[d] != o[d + o.size() - x.size()]) return not_applicable("not a broadcast of the output");
  }
  return Status::ok();
}

// ---- comparisons and logic ----
Result<Compare> compare_op(OpKind op) {
  switch (op) {
    case OpKind::Equal: return Compare::eq;
    case OpKind::Less: return Compare::lt;
    case OpKind::Greater: return Compare::gt;
    case OpKind::LessOrEqual: return Compare::le;
    case OpKind::GreaterOrEqual: return Compare::ge;
    case OpKind::And: return Compare::logical_and;
    case OpKind::Or: return Compare::logical_or;
    case OpKind::Xor: return Compare::logical_xor;
    default: return not_applicable("not a comparison of this table");
  }
}
Status compare_applies(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(Compare op, compare_op(s.node->op));
  TAC_RETURN_IF_ERROR(broadcast_ok(s, 2));
  const DType t = s.in_dtypes[0];
  if (s.in_dtypes[1] != t || s.out_dtypes[0] != DType::boolean) return not_applicable("inputs of one type, a bool output");
  const bool logic = op == Compare::logical_and || op == Compare::logical_or || op == Compare::logical_xor;
  if (logic && t != DType::boolean) return not_applicable("bool inputs");
  if (!logic && t == DType::boolean && op != Compare::eq) return not_applicable("numeric inputs (Equal takes bools too)");
  if (!cuda::kern::compare_supported(static_cast<int>(t)))
    return not_applicable("float, float16, bfloat16, double, int64, int32, int8, uint8 or bool inputs");
  return Status::ok();
}
Result<std::unique_ptr<Kernel>> compare_prepare(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(compare_applies(s));
  TAC_ASSIGN_OR_RETURN(Compare op, compare_op(s.node->op));
  const Shape& o = s.out_shapes[0];
  cuda::kern::BroadcastDesc d;
  d.rank = static_cast<int>(o.size());
  for (size_t k = 0; k < o.size(); ++k) d.out_dims[k] = o[k];
  broadcast_strides(s.in_shapes[0], o, d.a_strides);
  broadcast_strides(s.in_shapes[1], o, d.b_strides);
  d.same_shape = shape_numel(s.in_shapes[0]) == shape_numel(o) && shape_numel(s.in_shapes[1]) == shape_numel(o);
  const int t = static_cast<int>(s.in_dtypes[0]);
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([t, op, d, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::compare(t, op, in[0].data, in[1].data, out[0].data, out[0].numel(), d, st),
                               "compare kernel");
  });
}

Status not_applies(const StepDesc& s) {
  if (!s.has_input(0) || s.out_dtypes.size() != 1) return not_applicable("one input and one output");
  if (s.in_dtypes[0] != DType::boolean || s.out_dtypes[0] != DType::boolean) return not_applicable("bool only");
  return Status::ok();
}
Result<std::unique_ptr<Kernel>> not_prepare(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(not_applies(s));
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::logical_not(in[0].data, out[0].data, out[0].numel(), st), "not kernel");
  });
}

// ---- Where ----
Status where_applies(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(broadcast_ok(s, 3));
  if (s.in_dtypes[0] != DType::boolean) return not_applicable("a bool condition");
  if (s.in_dtypes[1] != s.in_dtypes[2] || s.out_dtypes[0] != s.in_dtypes[1]) return not_applicable("X, Y and the output of one type");
  if (!movable_size(dtype_size(s.in_dtypes[1]))) return not_applicable("element size");
  return Status::ok();
}
Result<std::unique_ptr<Kernel>> where_prepare(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(where_applies(s));
  const Shape& o = s.out_shapes[0];
  cuda::kern::WhereDesc d;
  d.rank = static_cast<int>(o.size());
  for (size_t k = 0; k < o.size(); ++k) d.out_dims[k] = o[k];
  broadcast_strides(s.in_shapes[0], o, d.c_strides);
  broadcast_strides(s.in_shapes[1], o, d.x_strides);
  broadcast_strides(s.in_shapes[2], o, d.y_strides);
  const int e = static_cast<int>(dtype_size(s.in_dtypes[1]));
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([d, e, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::where(in[0].data, in[1].data, in[2].data, out[0].data, e, out[0].numel(), d, st),
                               "where kernel");
  });
}

// ---- Pad ----
// The reference's reading of Pad (pad_kernel).
Result<cuda::kern::PadDesc> pad_desc(const StepDesc& s) {
  if (!s.has_input(0) || s.out_dtypes.size() != 1 || s.out_dtypes[0] != s.in_dtypes[0]) return not_applicable("one typed input");
  const DType t = s.in_dtypes[0];
  const size_t e = dtype_size(t);
  if (!movable_size(e)) return not_applicable("element size");
  const Shape& x = s.in_shapes[0];
  const int64_t r = static_cast<int64_t>(x.size());
  if (r > kMaxDims || !known(x)) return not_applicable("rank above 8 or unknown dims");
  const ir::Attribute* ma = s.node->attr("mode");
  const std::string mode_s = ma ? ma->s : "constant";
  cuda::kern::PadDesc d;
  if (mode_s == "constant") d.mode = 0;
  else if (mode_s == "edge") d.mode = 1;
  else if (mode_s == "reflect") d.mode = 2;
  else if (mode_s == "wrap") d.mode = 3;
  else return not_applicable("mode " + mode_s);
  std::vector<int64_t> pads, axes;
  TAC_ASSIGN_OR_RETURN(Tensor fill, Tensor::create(t, {}));
  std::memset(fill.raw(), 0, e);
  if (s.node->opset < 11) {
    const ir::Attribute* p = s.node->attr("pads");
    if (!p) p = s.node->attr("paddings");
    if (!p) return not_applicable("no pads");
    pads = p->ints;
    const ir::Attribute* v = s.node->attr("value");
    fill.set_f64(0, v ? v->f : 0.0f);
  } else {
    TAC_ASSIGN_OR_RETURN(pads, ew::const_ints(s, 1, "pads"));
    if (s.has_input(2)) {
      if (!s.constants[2]) return not_applicable("constant_value must be a constant");
      const Tensor& cv = *s.constants[2];
      if (cv.numel() == 1) {
        if (cv.dtype() != t) return not_applicable("constant_value of another type");
        std::memcpy(fill.raw(), cv.raw(), e);
      } else if (cv.numel() != 0) {
        return not_applicable("constant_value of more than one element");
      }
    }
    if (s.node->opset >= 18 && s.has_input(3)) {
      TAC_ASSIGN_OR_RETURN(axes, ew::const_ints(s, 3, "axes"));
    }
  }
  std::vector<int64_t> before, after;
  TAC_RETURN_IF_ERROR(ew::pads_per_dim(pads, axes, r, before, after));
  d.rank = static_cast<int>(r);
  std::memcpy(&d.fill, fill.raw(), e);
  int64_t stride = 1;
  Shape os(static_cast<size_t>(r));
  for (size_t k = static_cast<size_t>(r); k-- > 0;) {
    const int64_t crop0 = std::max<int64_t>(0, -before[k]);
    const int64_t n = x[k] - crop0 - std::max<int64_t>(0, -after[k]);
    if (n < 0) return not_applicable("negative pads remove more than the axis");
    const int64_t pb = std::max<int64_t>(0, before[k]);
    os[k] = n + pb + std::max<int64_t>(0, after[k]);
    if (n == 0 && os[k] > 0 && d.mode != 0) return not_applicable("an empty axis padded in mode " + mode_s);
    d.out_dims[k] = os[k];
    d.in_dims[k] = n;
    d.before[k] = pb;
    d.in_strides[k] = stride;
    d.base += crop0 * stride;
    stride *= x[k];
  }
  if (os != s.out_shapes[0]) return not_applicable("output shape disagrees with pads");
  return d;
}
Status pad_applies(const StepDesc& s) { return pad_desc(s).status(); }
Result<std::unique_ptr<Kernel>> pad_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(cuda::kern::PadDesc d, pad_desc(s));
  const int e = static_cast<int>(dtype_size(s.in_dtypes[0]));
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([d, e, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::pad(in[0].data, out[0].data, e, out[0].numel(), d, st), "pad kernel");
  });
}

// ---- Expand and Tile: strided gathers (cuda_kernels.h, transpose) ----
// dims / strides of a gather over the output, row-major; size-1 dims dropped, at most 8 left.
Result<cuda::kern::TransposeDesc> gather_desc(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  cuda::kern::TransposeDesc d;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 1) continue;
    if (d.rank == kMaxDims) return not_applicable("more than 8 dims after dropping size-1 dims");
    d.out_dims[d.rank] = dims[k];
    d.in_strides[d.rank] = strides[k];
    ++d.rank;
  }
  if (d.rank == 0) {
    d.rank = 1;
    d.out_dims[0] = 1;
    d.in_strides[0] = 0;
  }
  return d;
}
Status movement_ok(const StepDesc& s) {
  if (!s.has_input(0) || s.out_dtypes.size() != 1 || s.out_dtypes[0] != s.in_dtypes[0]) return not_applicable("one typed input");
  if (!movable_size(dtype_size(s.in_dtypes[0]))) return not_applicable("element size");
  if (!known(s.in_shapes[0]) || !known(s.out_shapes[0])) return not_applicable("unknown dims");
  return Status::ok();
}
Result<cuda::kern::TransposeDesc> expand_desc(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(movement_ok(s));
  const Shape& x = s.in_shapes[0];
  const Shape& o = s.out_shapes[0];
  if (x.size() > o.size()) return not_applicable("input rank above the output's");
  for (size_t d = 0; d < x.size(); ++d)
    if (x[d] != 1 && x[d] != o[d + o.size() - x.size()]) return not_applicable("not a broadcast of the output");
  std::vector<int64_t> st(o.size());
  broadcast_strides(x, o, st.data());
  return gather_desc(o, st);
}
// Tile: output dim k of x[k] * reps[k] elements seen as [reps[k]][x[k]], strides [0][x's].
Result<cuda::kern::TransposeDesc> tile_desc(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(movement_ok(s));
  const Shape& x = s.in_shapes[0];
  const Shape& o = s.out_shapes[0];
  if (o.size() != x.size()) return not_applicable("rank changed");
  std::vector<int64_t> dims, strides;
  int64_t stride = 1;
  std::vector<int64_t> xs(x.size());
  for (size_t k = x.size(); k-- > 0;) {
    xs[k] = stride;
    stride *= x[k];
  }
  for (size_t k = 0; k < x.size(); ++k) {
    if (x[k] == 0) {
      if (o[k] != 0) return not_applicable("output shape disagrees");
      dims.push_back(0), strides.push_back(0);
      continue;
    }
    if (o[k] % x[k] != 0) return not_applicable("output dims not multiples of the input's");
    dims.push_back(o[k] / x[k]), strides.push_back(0);
    dims.push_back(x[k]), strides.push_back(xs[k]);
  }
  return gather_desc(dims, strides);
}
template <Result<cuda::kern::TransposeDesc> (*Desc)(const StepDesc&)>
Status gather_applies(const StepDesc& s) {
  return Desc(s).status();
}
template <Result<cuda::kern::TransposeDesc> (*Desc)(const StepDesc&)>
Result<std::unique_ptr<Kernel>> gather_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(cuda::kern::TransposeDesc d, Desc(s));
  const int e = static_cast<int>(dtype_size(s.in_dtypes[0]));
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([d, e, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::transpose(in[0].data, out[0].data, e, out[0].numel(), d, st), "strided gather kernel");
  });
}

// ---- Split: the output shapes say each part's size along the axis ----
struct SplitPlan {
  int64_t outer = 1;
  size_t row_bytes = 0;
  std::vector<std::pair<size_t, size_t>> parts;  // (offset in an input row, bytes of this output's row)
};
Result<SplitPlan> split_plan(const StepDesc& s) {
  if (!s.has_input(0) || s.out_dtypes.empty()) return not_applicable("an input and outputs");
  const Shape& x = s.in_shapes[0];
  if (!known(x) || x.empty()) return not_applicable("unknown dims or a scalar");
  int64_t axis = int_attr(s, "axis", 0), r = static_cast<int64_t>(x.size());
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return not_applicable("axis out of range");
  SplitPlan p;
  int64_t inner = 1;
  for (int64_t d = 0; d < axis; ++d) p.outer *= x[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < r; ++d) inner *= x[static_cast<size_t>(d)];
  const size_t e = dtype_size(s.in_dtypes[0]);
  p.row_bytes = static_cast<size_t>(x[static_cast<size_t>(axis)] * inner) * e;
  size_t off = 0;
  for (size_t i = 0; i < s.out_dtypes.size(); ++i) {
    const Shape& y = s.out_shapes[i];
    if (s.out_dtypes[i] != s.in_dtypes[0]) return not_applicable("every output of the input's type");
    if (y.size() != x.size() || !known(y)) return not_applicable("outputs of the input's rank");
    for (int64_t d = 0; d < r; ++d)
      if (d != axis && y[static_cast<size_t>(d)] != x[static_cast<size_t>(d)]) return not_applicable("outputs differ off the axis");
    const size_t b = static_cast<size_t>(y[static_cast<size_t>(axis)] * inner) * e;
    p.parts.emplace_back(off, b);
    off += b;
  }
  if (off != p.row_bytes) return not_applicable("the parts do not cover the axis");
  return p;
}
Status split_applies(const StepDesc& s) { return split_plan(s).status(); }
Result<std::unique_ptr<Kernel>> split_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(SplitPlan p, split_plan(s));
  TAC_ASSIGN_OR_RETURN(void* st, stream());
  return cuda::make_kernel([p, st](auto in, auto out, void*) -> Status {
    for (size_t i = 0; i < p.parts.size() && i < out.size(); ++i) {
      if (p.parts[i].second == 0 || p.outer == 0 || !out[i].data) continue;
      TAC_CUDA_CALL(cudaMemcpy2DAsync(out[i].data, p.parts[i].second, static_cast<const std::byte*>(in[0].data) + p.parts[i].first,
                                      p.row_bytes, p.parts[i].second, static_cast<size_t>(p.outer), cudaMemcpyDeviceToDevice,
                                      static_cast<cudaStream_t>(st)));
    }
    return Status::ok();
  });
}

constexpr Backend kCuda = Backend::cuda;

}  // namespace

std::span<const Tactic> cuda_select_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t;
    for (OpKind op : {OpKind::Equal, OpKind::Less, OpKind::Greater, OpKind::LessOrEqual, OpKind::GreaterOrEqual,
                      OpKind::And, OpKind::Or, OpKind::Xor})
      t.push_back({"cuda", op, "own CUDA kernel with numpy broadcasting, bool output", compare_applies, movement_cost,
                   compare_prepare, kCuda});
    t.push_back({"cuda", OpKind::Not, "own CUDA kernel, one thread per element", not_applies, movement_cost, not_prepare, kCuda});
    t.push_back({"cuda", OpKind::Where, "own CUDA kernel with numpy broadcasting over the three inputs", where_applies,
                 movement_cost, where_prepare, kCuda});
    t.push_back({"cuda", OpKind::Pad, "own CUDA kernel (constant, edge, reflect, wrap), one thread per output", pad_applies,
                 movement_cost, pad_prepare, kCuda});
    t.push_back({"cuda", OpKind::Expand, "own CUDA kernel: strided gather with stride 0 on broadcast dims",
                 gather_applies<expand_desc>, movement_cost, gather_prepare<expand_desc>, kCuda});
    t.push_back({"cuda", OpKind::Tile, "own CUDA kernel: strided gather, each dim seen as [repeats][size]",
                 gather_applies<tile_desc>, movement_cost, gather_prepare<tile_desc>, kCuda});
    t.push_back({"cuda_copy", OpKind::Split, "one strided 2-D device copy per output", split_applies, movement_cost,
                 split_prepare, kCuda});
    return t;
  }();
  return table;
}

}  // namespace tac::kernels
