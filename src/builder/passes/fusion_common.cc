#include "builder/passes/fusion_common.h"

#include <limits>

namespace tac::builder {

std::optional<ir::Epilogue> activation_of(const ir::Graph& g, const ir::Node& n) {
  if (!n.domain.empty() || n.inputs.empty() || n.outputs.size() != 1) return std::nullopt;
  ir::Epilogue e;
  auto fattr = [&](const char* k, float def) {
    const ir::Attribute* a = n.attr(k);
    return a && a->type == ir::Attribute::Type::f ? a->f : def;
  };
  switch (n.op) {
    case ir::OpKind::Relu: e.act = ir::Epilogue::Act::relu; break;
    case ir::OpKind::Sigmoid: e.act = ir::Epilogue::Act::sigmoid; break;
    case ir::OpKind::Tanh: e.act = ir::Epilogue::Act::tanh; break;
    case ir::OpKind::LeakyRelu:
      e.act = ir::Epilogue::Act::leaky_relu;
      e.alpha = fattr("alpha", 0.01f);
      break;
    case ir::OpKind::HardSigmoid:
      e.act = ir::Epilogue::Act::hard_sigmoid;
      e.alpha = fattr("alpha", 0.2f);
      e.beta = fattr("beta", 0.5f);
      break;
    case ir::OpKind::Clip: {
      e.act = ir::Epilogue::Act::clip;
      e.alpha = -std::numeric_limits<float>::infinity();
      e.beta = std::numeric_limits<float>::infinity();
      if (n.opset < 11) {
        e.alpha = fattr("min", e.alpha);
        e.beta = fattr("max", e.beta);
      } else {
        for (size_t i = 1; i < 3 && i < n.inputs.size(); ++i) {
          if (n.inputs[i] == ir::kNoValue) continue;
          const Tensor* t = constant_of(g, n.inputs[i]);
          if (!t || t->numel() != 1) return std::nullopt;
          (i == 1 ? e.alpha : e.beta) = static_cast<float>(t->get_f64(0));
        }
      }
      break;
    }
    default:
      return std::nullopt;
  }
  return e;
}

}  // namespace tac::builder
