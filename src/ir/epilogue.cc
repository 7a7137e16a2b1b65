#include "ir/epilogue.h"

namespace tac::ir {

namespace {
constexpr Epilogue::Act kActs[] = {Epilogue::Act::none,    Epilogue::Act::relu, Epilogue::Act::clip,
                                   Epilogue::Act::leaky_relu, Epilogue::Act::sigmoid, Epilogue::Act::tanh,
                                   Epilogue::Act::hard_sigmoid, Epilogue::Act::gelu, Epilogue::Act::silu,
                                   Epilogue::Act::hard_swish};
}

const char* activation_name(Epilogue::Act a) {
  switch (a) {
    case Epilogue::Act::none: return "";
    case Epilogue::Act::relu: return "Relu";
    case Epilogue::Act::clip: return "Clip";
    case Epilogue::Act::leaky_relu: return "LeakyRelu";
    case Epilogue::Act::sigmoid: return "Sigmoid";
    case Epilogue::Act::tanh: return "Tanh";
    case Epilogue::Act::hard_sigmoid: return "HardSigmoid";
    case Epilogue::Act::gelu: return "Gelu";
    case Epilogue::Act::silu: return "Silu";
    case Epilogue::Act::hard_swish: return "HardSwish";
  }
  return "";
}

Result<Epilogue> epilogue_of(const Node& n) {
  Epilogue e;
  const Attribute* a = n.attr(Epilogue::kActivation);
  if (a) {
    if (a->type != Attribute::Type::s) return invalid_model(n.label() + ": attribute 'activation' must be a string");
    bool found = false;
    for (Epilogue::Act act : kActs)
      if (a->s == activation_name(act)) {
        e.act = act;
        found = true;
      }
    if (!found) return invalid_model(n.label() + ": unknown fused activation '" + a->s + "'");
  }
  if (const Attribute* al = n.attr(Epilogue::kAlpha); al && al->type == Attribute::Type::f) e.alpha = al->f;
  if (const Attribute* be = n.attr(Epilogue::kBeta); be && be->type == Attribute::Type::f) e.beta = be->f;
  return e;
}

void set_epilogue(Node& n, const Epilogue& e) {
  Attribute s;
  s.type = Attribute::Type::s;
  s.s = activation_name(e.act);
  n.attrs[Epilogue::kActivation] = s;
  Attribute a;
  a.type = Attribute::Type::f;
  a.f = e.alpha;
  n.attrs[Epilogue::kAlpha] = a;
  a.f = e.beta;
  n.attrs[Epilogue::kBeta] = a;
}

}  // namespace tac::ir
