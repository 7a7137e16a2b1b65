// The epilogue of the builder's fused ops (FusedConv, FusedMatMul): what is applied to each
// output element after the main computation. One definition shared by the reference kernels,
// the fusion passes and every tactic, so they cannot disagree.
#pragma once

#include <cmath>
#include <string>

#include "ir/graph.h"

namespace tac::ir {

struct Epilogue {
  enum class Act { none, relu, clip, leaky_relu, sigmoid, tanh, hard_sigmoid, gelu, silu, hard_swish };
  Act act = Act::none;
  float alpha = 0;  // Clip: min; LeakyRelu: alpha; HardSigmoid: alpha
  float beta = 0;   // Clip: max; HardSigmoid: beta

  // Attribute names on the fused node.
  static constexpr const char* kActivation = "activation";
  static constexpr const char* kAlpha = "act_alpha";
  static constexpr const char* kBeta = "act_beta";

  // y = act(x) in double (the reference) ...
  double apply(double x) const {
    switch (act) {
      case Act::none: return x;
      case Act::relu: return x > 0 ? x : 0;
      case Act::clip: return x < alpha ? alpha : (x > beta ? beta : x);
      case Act::leaky_relu: return x >= 0 ? x : alpha * x;
      case Act::sigmoid: return 1.0 / (1.0 + std::exp(-x));
      case Act::tanh: return std::tanh(x);
      case Act::hard_sigmoid: { double v = alpha * x + beta; return v < 0 ? 0 : (v > 1 ? 1 : v); }
      case Act::gelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
      case Act::silu: return x / (1.0 + std::exp(-x));
      case Act::hard_swish: { double v = x / 6.0 + 0.5; return x * (v < 0 ? 0 : (v > 1 ? 1 : v)); }
    }
    return x;
  }
  // ... and in float (the fast kernels' scalar tails and vector code must match this).
  float apply(float x) const { return static_cast<float>(apply(static_cast<double>(x))); }
};

// Activation name as written in the attribute ("Relu", ...) <-> enum; "" is none.
const char* activation_name(Epilogue::Act a);
// The epilogue a fused node carries; fails naming the node on an unknown activation.
Result<Epilogue> epilogue_of(const Node& n);
// Writes the epilogue as attributes on `n` (used by the fusion passes).
void set_epilogue(Node& n, const Epilogue& e);

}  // namespace tac::ir
