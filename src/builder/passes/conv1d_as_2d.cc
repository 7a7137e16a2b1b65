// A 1-D convolution (Conv / FusedConv with rank-3 X and constant rank-3 W: audio front ends,
// Conv1d) becomes the 2-D convolution of height 1 it equals: X [N, C, L] read as [N, C, 1, L]
// through a Reshape, W [M, C/G, K] stored as [M, C/G, 1, K], kernel_shape / strides / dilations
// / pads given a leading 1 / 1 / 1 / 0, the residual of a FusedConv reshaped like X, and the
// output reshaped back. The Reshapes are views (memory.view_alias): every 2-D tactic (oneDNN,
// cuDNN, ...) applies where before only the reference kernel took a 1-D convolution.
#include "builder/passes/pass.h"

namespace tac::builder {

namespace {

bool rank3_known(const ir::Graph& g, int v) {
  if (v == ir::kNoValue) return false;
  const ir::ValueType& t = g.values[static_cast<size_t>(v)].type;
  if (t.kind != ir::ValueKind::tensor || !t.has_shape || t.dims.size() != 3) return false;
  for (const ir::Dim& d : t.dims)
    if (!d.known()) return false;
  return true;
}

Shape dims_of(const ir::Graph& g, int v) {
  Shape s;
  for (const ir::Dim& d : g.values[static_cast<size_t>(v)].type.dims) s.push_back(d.value);
  return s;
}

// `ints` with `lead` inserted before each of its `parts` halves (pads [b, e] -> [0, b, 0, e]).
void widen_ints(ir::Node& n, const char* key, int64_t lead, int parts) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end() || it->second.type != ir::Attribute::Type::ints) return;
  std::vector<int64_t>& v = it->second.ints;
  if (static_cast<int>(v.size()) != parts) return;
  std::vector<int64_t> out;
  for (int64_t x : v) {
    out.push_back(lead);
    out.push_back(x);
  }
  v = std::move(out);
}

}  // namespace

Status conv1d_as_2d(ir::Graph& g, PassContext& ctx) {
  int rewritten = 0;
  const size_t n_nodes = g.nodes.size();
  std::vector<ir::Node> added;
  for (size_t i = 0; i < n_nodes; ++i) {
    ir::Node& conv = g.nodes[i];
    const bool fused = conv.op == ir::OpKind::FusedConv && conv.domain == ir::kInternalDomain;
    if (!(conv.op == ir::OpKind::Conv && conv.domain.empty()) && !fused) continue;
    if (conv.inputs.size() < 2 || conv.outputs.size() != 1 || !rank3_known(g, conv.inputs[0]) ||
        !rank3_known(g, conv.outputs[0]))
      continue;
    const Tensor* wp = constant_of(g, conv.inputs[1]);
    if (!wp || wp->shape().size() != 3) continue;
    const Tensor w = *wp;  // a copy: adding values below moves the initializers
    const bool has_res = fused && conv.inputs.size() > 3 && conv.inputs[3] != ir::kNoValue;
    if (has_res && !rank3_known(g, conv.inputs[3])) continue;
    if (const ir::Attribute* a = conv.attr("pads"); a && a->ints.size() != 2) continue;
    auto reshaped = [&](int v, const std::string& suffix, bool before) {
      // A [N, C, 1, L] view of v (before the conv), or the conv's 4-D output viewed as v (after).
      Shape s = dims_of(g, v);
      Shape s4 = {s[0], s[1], 1, s[2]};
      Tensor shape = Tensor::create(DType::int64, {4}).value();
      for (int k = 0; k < 4; ++k) shape.set_f64(k, static_cast<double>(s4[static_cast<size_t>(k)]));
      Tensor back = Tensor::create(DType::int64, {3}).value();
      for (int k = 0; k < 3; ++k) back.set_f64(k, static_cast<double>(s[static_cast<size_t>(k)]));
      const std::string base = g.values[static_cast<size_t>(v)].name + suffix;
      ir::ValueType t4 = g.values[static_cast<size_t>(v)].type;
      t4.dims.insert(t4.dims.begin() + 2, ir::Dim{});
      t4.dims[2].value = 1;
      const int v4 = add_value(g, base, t4);
      ir::Node r;
      r.name = conv.name + suffix;
      r.op = ir::OpKind::Reshape;
      r.op_type = "Reshape";
      r.opset = conv.opset;
      const int sh = add_constant(g, base + ".shape", before ? std::move(shape) : std::move(back));
      r.inputs = before ? std::vector<int>{v, sh} : std::vector<int>{v4, sh};
      r.outputs = {before ? v4 : v};
      added.push_back(std::move(r));
      return v4;
    };
    const std::string label = conv.label();
    const int x4 = reshaped(conv.inputs[0], ".as_2d", true);
    int res4 = ir::kNoValue;
    if (has_res) res4 = reshaped(conv.inputs[3], ".as_2d", true);
    const int y = conv.outputs[0];
    const int y4 = reshaped(y, ".as_2d_out", false);
    ir::Node& c = g.nodes[i];
    const Shape ws = w.shape();
    c.inputs[1] = add_constant(g, g.values[static_cast<size_t>(c.inputs[1])].name + ".as_2d",
                               w.reshaped({ws[0], ws[1], 1, ws[2]}));
    c.inputs[0] = x4;
    if (has_res) c.inputs[3] = res4;
    c.outputs[0] = y4;
    widen_ints(c, "kernel_shape", 1, 1);
    widen_ints(c, "strides", 1, 1);
    widen_ints(c, "dilations", 1, 1);
    if (auto it = c.attrs.find("pads"); it != c.attrs.end()) {
      const std::vector<int64_t> p = it->second.ints;
      it->second.ints = {0, p[0], 0, p[1]};
    }
    ctx.log.push_back("conv1d_as_2d: " + label);
    ++rewritten;
  }
  if (!rewritten) return Status::ok();
  for (ir::Node& n : added) {
    n.index = static_cast<int>(g.nodes.size());
    g.nodes.push_back(std::move(n));
  }
  return g.sort_topologically();
}

}  // namespace tac::builder
