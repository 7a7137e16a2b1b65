// Conv -> BatchNormalization (inference, constant parameters) becomes one Conv:
//   s = scale / sqrt(var + eps);  W'[o] = W[o] * s[o];  B'[o] = (B[o] - mean[o]) * s[o] + bias[o]
// computed in double, stored in the weights' type.
#include <cmath>

#include "builder/passes/pass.h"

namespace tac::builder {

Status fold_batchnorm(ir::Graph& g, PassContext& ctx) {
  auto users = value_users(g);
  std::vector<bool> dead(g.nodes.size(), false);
  int folded = 0;
  for (ir::Node& bn : g.nodes) {
    if (bn.op != ir::OpKind::BatchNormalization || !bn.domain.empty() || bn.inputs.size() < 5) continue;
    if (bn.outputs.size() > 1) {
      bool extra_used = false;
      for (size_t i = 1; i < bn.outputs.size(); ++i)
        extra_used |= bn.outputs[i] != ir::kNoValue && !users[static_cast<size_t>(bn.outputs[i])].empty();
      if (extra_used) continue;  // training outputs in use
    }
    if (const ir::Attribute* a = bn.attr("training_mode"); a && a->i != 0) continue;
    if (const ir::Attribute* a = bn.attr("spatial"); a && a->type == ir::Attribute::Type::i && a->i == 0) continue;
    int x = bn.inputs[0];
    const ir::Value& xv = g.values[static_cast<size_t>(x)];
    if (xv.producer < 0 || !has_single_user(users, x)) continue;
    ir::Node& conv = g.nodes[static_cast<size_t>(xv.producer)];
    if (conv.op != ir::OpKind::Conv || !conv.domain.empty() || conv.inputs.size() < 2) continue;
    const Tensor* w = constant_of(g, conv.inputs[1]);
    const Tensor* b = conv.inputs.size() > 2 ? constant_of(g, conv.inputs[2]) : nullptr;
    if (conv.inputs.size() > 2 && conv.inputs[2] != ir::kNoValue && !b) continue;
    const Tensor* scale = constant_of(g, bn.inputs[1]);
    const Tensor* bias = constant_of(g, bn.inputs[2]);
    const Tensor* mean = constant_of(g, bn.inputs[3]);
    const Tensor* var = constant_of(g, bn.inputs[4]);
    if (!w || !scale || !bias || !mean || !var || !dtype_is_float(w->dtype()) || w->rank() < 3) continue;
    const int64_t oc = w->dim(0);
    if (scale->numel() != oc || bias->numel() != oc || mean->numel() != oc || var->numel() != oc) continue;
    if (b && b->numel() != oc) continue;
    double eps = 1e-5;
    if (const ir::Attribute* a = bn.attr("epsilon"); a && a->type == ir::Attribute::Type::f) eps = a->f;
    Tensor nw = Tensor::create(w->dtype(), w->shape()).value();
    Tensor nb = Tensor::create(w->dtype(), {oc}).value();
    const int64_t per = w->numel() / oc;
    for (int64_t o = 0; o < oc; ++o) {
      double s = scale->get_f64(o) / std::sqrt(var->get_f64(o) + eps);
      for (int64_t k = 0; k < per; ++k) nw.set_f64(o * per + k, w->get_f64(o * per + k) * s);
      double b0 = b ? b->get_f64(o) : 0.0;
      nb.set_f64(o, (b0 - mean->get_f64(o)) * s + bias->get_f64(o));
    }
    std::string base = conv.name.empty() ? "conv" : conv.name;
    conv.inputs[1] = add_constant(g, base + ".folded_w", std::move(nw));
    if (conv.inputs.size() < 3) conv.inputs.resize(3, ir::kNoValue);
    conv.inputs[2] = add_constant(g, base + ".folded_b", std::move(nb));
    conv.outputs[0] = bn.outputs[0];  // the conv now produces what the BN produced
    dead[static_cast<size_t>(bn.index)] = true;
    ctx.log.push_back("fold_batchnorm: " + bn.label() + " into " + conv.label());
    ++folded;
  }
  return folded ? remove_nodes(g, dead) : Status::ok();
}

}  // namespace tac::builder
