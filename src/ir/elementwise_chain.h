// The program of a FusedElementwise node (see ops.def): parsed once, shared by the reference
// kernel, the fast tactics and the fusion pass that writes it.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "tactician/status.h"

namespace tac::ir {

struct ChainOp {
  enum class Kind { Relu, Sigmoid, Tanh, Exp, Neg, Abs, Sqrt, Reciprocal, Erf, Add, Sub, Mul, Div, Max, Min };
  Kind kind = Kind::Relu;
  bool binary = false;
  // Binary operands, each the running value (x), an input of the node, or a constant.
  struct Operand {
    enum class From { x, input, constant } from = From::x;
    int input = 0;
    float value = 0;
  } lhs, rhs;
};

// The op kind of an ONNX op name usable in a chain ("Relu", "Add", ...), or false.
bool chain_kind(const std::string& op_type, ChainOp::Kind& kind, bool& binary);
// Parses the `ops` attribute of `n`; errors name the node and the entry.
Result<std::vector<ChainOp>> parse_chain(const Node& n);
// The text of one entry (the inverse of the parser).
std::string chain_entry(const ChainOp& op);
// Reference semantics of one op on doubles.
double apply_chain_op(ChainOp::Kind k, double a, double b = 0);

}  // namespace tac::ir
