// Channel shuffles and channel slices as gathers of channels (ShuffleNet's blocks):
//
//   Reshape [N,C,H,W] -> [N,g,C/g,H,W] -> Transpose(0,2,1,3,4) -> Reshape [N,C,H,W]
//       becomes Gather(x, idx, axis=1) with idx[c] = (c % g) * (C/g) + c / g;
//   Slice(Gather(x, idx, axis=1), start..end on axis 1, step 1)
//       becomes Gather(x, idx[start..end], axis=1) (the first Gather goes once no one reads it).
//
// The shuffle was three steps, two of them rank-5 views no 4-D layout takes, so a channels-last
// region ended before it and began again after it (ShuffleNet v2: 44 Reformats, a fifth of its
// time on one CPU core); a gather of channels is one step, which the CPU's nhwc tactic
// (kernels/layout/gather_channels.cc) runs inside the region.
#include <algorithm>
#include <optional>

#include "builder/passes/fusion_common.h"
#include "builder/passes/pass.h"

namespace tac::builder {

namespace {

// The known 4-D shape of float value v, or nullopt.
std::optional<Shape> shape4(const ir::Graph& g, int v) {
  const ir::ValueType& t = g.values[static_cast<size_t>(v)].type;
  auto s = known_shape(g, v);
  if (t.kind != ir::ValueKind::tensor || !dtype_is_float(t.dtype) || !s || s->size() != 4) return std::nullopt;
  for (int64_t d : *s)
    if (d <= 0) return std::nullopt;
  return s;
}

Tensor int64s(const std::vector<int64_t>& v) {
  Tensor t = Tensor::create(DType::int64, {static_cast<int64_t>(v.size())}).value();
  for (size_t i = 0; i < v.size(); ++i) t.set_f64(static_cast<int64_t>(i), static_cast<double>(v[i]));
  return t;
}

// Node n (in place) as Gather(x, idx, axis=1) writing its output 0.
void make_gather(ir::Graph& g, ir::Node& n, int x, const std::vector<int64_t>& idx) {
  const int iv = add_constant(g, n.name + ".channels", int64s(idx));
  n.op = ir::OpKind::Gather;
  n.op_type = "Gather";
  n.domain.clear();
  n.opset = std::max(n.opset, 13);
  n.inputs = {x, iv};
  n.outputs.resize(1);
  n.attrs.clear();
  ir::Attribute a;
  a.type = ir::Attribute::Type::i;
  a.i = 1;
  n.attrs["axis"] = a;
}

// The channel indices of a Gather along axis 1 of a 4-D value by constant 1-D indices (made
// non-negative), or nullopt.
std::optional<std::vector<int64_t>> channel_gather(const ir::Graph& g, const ir::Node& n) {
  if (!is_op(n, ir::OpKind::Gather, 2) || int_attr(n, "axis", 0) != 1) return std::nullopt;
  const auto x = shape4(g, n.inputs[0]);
  const Tensor* idx = constant_of(g, n.inputs[1]);
  if (!x || !idx || idx->rank() != 1 || (idx->dtype() != DType::int64 && idx->dtype() != DType::int32)) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < idx->numel(); ++i) {
    int64_t c = idx->get_i64(i);
    if (c < 0) c += (*x)[1];
    if (c < 0 || c >= (*x)[1]) return std::nullopt;
    out.push_back(c);
  }
  return out;
}

// Slice's [start, end) on axis 1 with step 1 (constant, normalised against `len`), or nullopt.
std::optional<std::pair<int64_t, int64_t>> channel_range(const ir::Graph& g, const ir::Node& s, int64_t len) {
  if (!is_op(s, ir::OpKind::Slice) || s.inputs.size() < 3) return std::nullopt;
  const Tensor* starts = constant_of(g, s.inputs[1]);
  const Tensor* ends = constant_of(g, s.inputs[2]);
  const Tensor* axes = s.inputs.size() > 3 && s.inputs[3] != ir::kNoValue ? constant_of(g, s.inputs[3]) : nullptr;
  const Tensor* steps = s.inputs.size() > 4 && s.inputs[4] != ir::kNoValue ? constant_of(g, s.inputs[4]) : nullptr;
  if (!starts || !ends || starts->numel() != 1 || ends->numel() != 1) return std::nullopt;
  if (s.inputs.size() > 3 && s.inputs[3] != ir::kNoValue && (!axes || axes->numel() != 1)) return std::nullopt;
  if (s.inputs.size() > 4 && s.inputs[4] != ir::kNoValue && (!steps || steps->numel() != 1 || steps->get_i64(0) != 1))
    return std::nullopt;
  const int64_t axis = axes ? axes->get_i64(0) : 0;
  if (axis != 1 && axis != -3) return std::nullopt;
  auto clamp = [&](int64_t v) {
    if (v < 0) v += len;
    return std::min(std::max<int64_t>(v, 0), len);
  };
  const int64_t b = clamp(starts->get_i64(0)), e = clamp(ends->get_i64(0));
  if (e <= b) return std::nullopt;
  return std::make_pair(b, e);
}

}  // namespace

Status channel_gather(ir::Graph& g, PassContext& ctx) {
  auto users = value_users(g);
  std::vector<bool> dead(g.nodes.size(), false);
  int shuffles = 0, slices = 0;
  for (ir::Node& r2 : g.nodes) {
    if (!is_op(r2, ir::OpKind::Reshape, 2) || dead[static_cast<size_t>(r2.index)]) continue;
    ir::Node* t = producer_of(g, r2.inputs[0]);
    if (!t || !is_op(*t, ir::OpKind::Transpose) || !has_single_user(users, t->outputs[0])) continue;
    const auto perm = transpose_perm(g, *t);
    if (!perm || *perm != std::vector<int64_t>{0, 2, 1, 3, 4}) continue;
    ir::Node* r1 = producer_of(g, t->inputs[0]);
    if (!r1 || !is_op(*r1, ir::OpKind::Reshape, 2) || !has_single_user(users, r1->outputs[0])) continue;
    const int x = r1->inputs[0];
    const auto xs = shape4(g, x), ys = shape4(g, r2.outputs[0]);
    const auto mid = known_shape(g, r1->outputs[0]);
    if (!xs || !ys || !mid || *xs != *ys || mid->size() != 5) continue;
    const int64_t C = (*xs)[1], grp = (*mid)[1];
    if ((*mid)[0] != (*xs)[0] || grp * (*mid)[2] != C || (*mid)[3] != (*xs)[2] || (*mid)[4] != (*xs)[3]) continue;
    std::vector<int64_t> idx(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) idx[static_cast<size_t>(c)] = (c % grp) * (C / grp) + c / grp;
    dead[static_cast<size_t>(r1->index)] = dead[static_cast<size_t>(t->index)] = true;
    ctx.log.push_back("channel_gather: the channel shuffle of " + r1->label() + ", " + t->label() + ", " + r2.label() +
                      " as a Gather of " + std::to_string(C) + " channels (groups " + std::to_string(grp) + ")");
    make_gather(g, r2, x, idx);
    ++shuffles;
  }
  // Slices of a channel gather (the shuffled halves ShuffleNet's next block splits).
  users = value_users(g);
  for (ir::Node& s : g.nodes) {
    if (dead[static_cast<size_t>(s.index)] || s.inputs.empty()) continue;
    ir::Node* gather = producer_of(g, s.inputs[0]);
    if (!gather || dead[static_cast<size_t>(gather->index)]) continue;
    const auto idx = channel_gather(g, *gather);
    if (!idx) continue;
    const auto range = channel_range(g, s, static_cast<int64_t>(idx->size()));
    if (!range || !shape4(g, s.outputs[0])) continue;
    const int x = gather->inputs[0];
    ctx.log.push_back("channel_gather: " + s.label() + " of " + gather->label() + " as a Gather of channels " +
                      std::to_string(range->first) + ".." + std::to_string(range->second));
    make_gather(g, s, x, std::vector<int64_t>(idx->begin() + range->first, idx->begin() + range->second));
    ++slices;
  }
  if (!shuffles && !slices) return Status::ok();
  // Gathers whose every reader became a gather of their input.
  users = value_users(g);
  for (const ir::Node& n : g.nodes) {
    if (dead[static_cast<size_t>(n.index)] || !channel_gather(g, n) || n.outputs.empty()) continue;
    const int v = n.outputs[0];
    bool graph_output = false;
    for (int o : g.outputs) graph_output |= o == v;
    if (!graph_output && users[static_cast<size_t>(v)].empty()) dead[static_cast<size_t>(n.index)] = true;
  }
  return remove_nodes(g, dead);
}

}  // namespace tac::builder
