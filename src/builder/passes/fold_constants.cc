// Constant folding: a node whose inputs are all constants is evaluated once, at build time, with
// its reference kernel; Shape and Size of values with fully known shapes become constants too.
// With the input shapes bound by the builder, this turns the Shape -> Gather -> Concat -> Reshape
// chains of exported transformers into plain constants.
#include <algorithm>

#include "builder/passes/pass.h"
#include "reference/interpreter.h"
#include "reference/kernel.h"

namespace tac::builder {

namespace {

bool fully_known(const ir::ValueType& t) {
  if (!t.has_shape || t.kind != ir::ValueKind::tensor) return false;
  for (const ir::Dim& d : t.dims)
    if (!d.known()) return false;
  return true;
}

bool has_subgraph(const ir::Node& n) {
  for (const auto& [k, a] : n.attrs)
    if (a.g || !a.graphs.empty()) return true;
  return false;
}

bool is_random(ir::OpKind op) {
  return op == ir::OpKind::RandomNormal || op == ir::OpKind::RandomNormalLike || op == ir::OpKind::RandomUniform ||
         op == ir::OpKind::RandomUniformLike || op == ir::OpKind::Bernoulli || op == ir::OpKind::Multinomial;
}

// Folding must not blow the model up: ConstantOfShape/Expand/Tile can make huge constants.
constexpr uint64_t kMaxFoldedBytes = uint64_t{64} << 20;

}  // namespace

Status fold_constants(ir::Graph& g, PassContext& ctx) {
  std::vector<bool> dead(g.nodes.size(), false);
  int folded = 0;
  for (ir::Node& n : g.nodes) {
    if (n.domain.size() && n.domain != ir::kInternalDomain) continue;
    // Shape / Size of a value whose shape is known.
    if ((n.op == ir::OpKind::Shape || n.op == ir::OpKind::Size) && !n.inputs.empty() && n.inputs[0] != ir::kNoValue &&
        fully_known(g.values[static_cast<size_t>(n.inputs[0])].type) && n.outputs.size() == 1 &&
        n.outputs[0] != ir::kNoValue) {
      const ir::ValueType& t = g.values[static_cast<size_t>(n.inputs[0])].type;
      const int64_t rank = static_cast<int64_t>(t.dims.size());
      if (n.op == ir::OpKind::Size) {
        int64_t total = 1;
        for (const ir::Dim& d : t.dims) total *= d.value;
        Tensor s = Tensor::create(DType::int64, {}).value();
        s.data<int64_t>()[0] = total;
        set_constant(g, n.outputs[0], std::move(s));
      } else {
        int64_t start = 0, end = rank;
        if (const ir::Attribute* a = n.attr("start"); a && a->type == ir::Attribute::Type::i) start = a->i;
        if (const ir::Attribute* a = n.attr("end"); a && a->type == ir::Attribute::Type::i) end = a->i;
        auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
        start = clamp(start);
        end = std::max(start, clamp(end));
        Tensor s = Tensor::create(DType::int64, {end - start}).value();
        for (int64_t i = start; i < end; ++i) s.data<int64_t>()[i - start] = t.dims[static_cast<size_t>(i)].value;
        set_constant(g, n.outputs[0], std::move(s));
      }
      dead[static_cast<size_t>(n.index)] = true;
      ++folded;
      continue;
    }
    if (is_random(n.op) || has_subgraph(n) || !ref::reference_supports(n)) continue;
    bool all_const = true;
    std::vector<Datum> data(n.inputs.size());
    std::vector<const Datum*> ptrs;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      int v = n.inputs[i];
      if (v == ir::kNoValue) {
        ptrs.push_back(nullptr);
        continue;
      }
      const Tensor* c = constant_of(g, v);
      if (!c) {
        all_const = false;
        break;
      }
      data[i] = Datum(*c);
      ptrs.push_back(&data[i]);
    }
    if (!all_const) continue;
    // Outputs whose size shape inference knows are checked before anything is computed; the
    // others are refused by the kernel as it allocates them (max_output_bytes).
    bool over = false;
    for (int v : n.outputs)
      if (v != ir::kNoValue && fully_known(g.values[static_cast<size_t>(v)].type)) {
        const ir::ValueType& t = g.values[static_cast<size_t>(v)].type;
        Shape s;
        for (const ir::Dim& d : t.dims) s.push_back(d.value);
        const int64_t numel = shape_numel(s);
        over = over || numel < 0 || static_cast<uint64_t>(numel) > kMaxFoldedBytes / std::max<size_t>(1, dtype_size(t.dtype));
      }
    if (over) continue;
    ir::Graph empty;
    ref::Frame frame(empty, nullptr);
    ref::KernelContext kc(n, ptrs, &frame);
    kc.max_output_bytes = static_cast<int64_t>(kMaxFoldedBytes);
    try {
      ref::reference_kernel(n.op)(kc);
    } catch (const ref::KernelError& e) {
      if (e.status.kind() == ErrorKind::not_applicable) continue;  // too large to fold: it runs as a step
      return e.status;  // the node would fail at run time as well: say so now, naming it
    }
    bool small = true;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Datum& d = kc.outputs()[i];
      if (n.outputs[i] != ir::kNoValue && (d.kind != Datum::Kind::tensor || d.tensor.bytes() > kMaxFoldedBytes))
        small = false;
    }
    if (!small) continue;
    for (size_t i = 0; i < n.outputs.size(); ++i)
      if (n.outputs[i] != ir::kNoValue) set_constant(g, n.outputs[i], kc.outputs()[i].tensor);
    dead[static_cast<size_t>(n.index)] = true;
    ++folded;
  }
  if (folded) ctx.log.push_back("fold_constants: " + std::to_string(folded) + " nodes");
  return folded ? remove_nodes(g, dead) : Status::ok();
}

}  // namespace tac::builder
