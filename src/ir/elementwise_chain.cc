#include "ir/elementwise_chain.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace tac::ir {

namespace {

struct Name {
  const char* name;
  ChainOp::Kind kind;
  bool binary;
};
constexpr Name kNames[] = {
    {"Relu", ChainOp::Kind::Relu, false},       {"Sigmoid", ChainOp::Kind::Sigmoid, false},
    {"Tanh", ChainOp::Kind::Tanh, false},       {"Exp", ChainOp::Kind::Exp, false},
    {"Neg", ChainOp::Kind::Neg, false},         {"Abs", ChainOp::Kind::Abs, false},
    {"Sqrt", ChainOp::Kind::Sqrt, false},       {"Reciprocal", ChainOp::Kind::Reciprocal, false},
    {"Erf", ChainOp::Kind::Erf, false},         {"Add", ChainOp::Kind::Add, true},
    {"Sub", ChainOp::Kind::Sub, true},          {"Mul", ChainOp::Kind::Mul, true},
    {"Div", ChainOp::Kind::Div, true},          {"Max", ChainOp::Kind::Max, true},
    {"Min", ChainOp::Kind::Min, true},
};

std::string operand_text(const ChainOp::Operand& o) {
  if (o.from == ChainOp::Operand::From::x) return "x";
  if (o.from == ChainOp::Operand::From::input) return "in" + std::to_string(o.input);
  char b[48];
  std::snprintf(b, sizeof b, "c%.9g", static_cast<double>(o.value));
  return b;
}

bool parse_operand(const std::string& t, ChainOp::Operand& o) {
  if (t == "x") {
    o.from = ChainOp::Operand::From::x;
    return true;
  }
  char* end = nullptr;
  if (t.size() > 2 && t.compare(0, 2, "in") == 0) {
    long v = std::strtol(t.c_str() + 2, &end, 10);
    if (*end != '\0' || v < 0) return false;
    o.from = ChainOp::Operand::From::input;
    o.input = static_cast<int>(v);
    return true;
  }
  if (t.size() > 1 && t[0] == 'c') {
    double v = std::strtod(t.c_str() + 1, &end);
    if (*end != '\0') return false;
    o.from = ChainOp::Operand::From::constant;
    o.value = static_cast<float>(v);
    return true;
  }
  return false;
}

}  // namespace

bool chain_kind(const std::string& op_type, ChainOp::Kind& kind, bool& binary) {
  for (const Name& n : kNames)
    if (op_type == n.name) {
      kind = n.kind;
      binary = n.binary;
      return true;
    }
  return false;
}

std::string chain_entry(const ChainOp& op) {
  std::string name;
  for (const Name& n : kNames)
    if (n.kind == op.kind) name = n.name;
  if (!op.binary) return name;
  return name + "," + operand_text(op.lhs) + "," + operand_text(op.rhs);
}

Result<std::vector<ChainOp>> parse_chain(const Node& n) {
  const Attribute* a = n.attr("ops");
  if (!a || a->type != Attribute::Type::strings || a->strings.empty())
    return invalid_argument(n.label() + ": FusedElementwise needs a non-empty `ops` attribute (strings)");
  std::vector<ChainOp> out;
  for (const std::string& e : a->strings) {
    std::vector<std::string> parts;
    std::stringstream ss(e);
    for (std::string p; std::getline(ss, p, ',');) parts.push_back(p);
    ChainOp op;
    if (parts.empty() || !chain_kind(parts[0], op.kind, op.binary))
      return invalid_argument(n.label() + ": unknown FusedElementwise op '" + e + "'");
    if (op.binary) {
      if (parts.size() != 3 || !parse_operand(parts[1], op.lhs) || !parse_operand(parts[2], op.rhs))
        return invalid_argument(n.label() + ": bad FusedElementwise entry '" + e + "' (want e.g. Add,x,in1)");
      const bool lx = op.lhs.from == ChainOp::Operand::From::x, rx = op.rhs.from == ChainOp::Operand::From::x;
      if (lx == rx) return invalid_argument(n.label() + ": FusedElementwise entry '" + e + "' must use x exactly once");
      for (const ChainOp::Operand* o : {&op.lhs, &op.rhs})
        if (o->from == ChainOp::Operand::From::input && static_cast<size_t>(o->input) >= n.inputs.size())
          return invalid_argument(n.label() + ": FusedElementwise entry '" + e + "' names a missing input");
    } else if (parts.size() != 1) {
      return invalid_argument(n.label() + ": bad FusedElementwise entry '" + e + "'");
    }
    out.push_back(op);
  }
  return out;
}

double apply_chain_op(ChainOp::Kind k, double a, double b) {
  switch (k) {
    case ChainOp::Kind::Relu: return std::isnan(a) ? a : (a > 0 ? a : 0.0);
    case ChainOp::Kind::Sigmoid: return 1 / (1 + std::exp(-a));
    case ChainOp::Kind::Tanh: return std::tanh(a);
    case ChainOp::Kind::Exp: return std::exp(a);
    case ChainOp::Kind::Neg: return -a;
    case ChainOp::Kind::Abs: return std::fabs(a);
    case ChainOp::Kind::Sqrt: return std::sqrt(a);
    case ChainOp::Kind::Reciprocal: return 1 / a;
    case ChainOp::Kind::Erf: return std::erf(a);
    case ChainOp::Kind::Add: return a + b;
    case ChainOp::Kind::Sub: return a - b;
    case ChainOp::Kind::Mul: return a * b;
    case ChainOp::Kind::Div: return a / b;
    case ChainOp::Kind::Max: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    case ChainOp::Kind::Min: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
  }
  return NAN;
}

}  // namespace tac::ir
