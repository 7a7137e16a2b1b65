// The CUDA kernel of FusedElementwise (cuda_chain.cu), callable from host code that includes no
// CUDA header (the convention of kernels/elementwise/cuda_kernels.h): the chain's program as plain
// data, evaluated per element in one launch, the running value in fp32 registers.
#pragma once

#include <cstdint>

#include "kernels/elementwise/cuda_kernels.h"

namespace tac::cuda::kern {

// Links evaluated by one launch (the program travels by value in the kernel's parameters, 8 bytes
// a link); a longer chain runs in launches of this many, the running value kept in fp32 in the
// workspace between them (chain_workspace_bytes).
constexpr int kMaxChainLinks = 64;
// Tensor inputs of one chain (X and the binary links' tensor operands; their pointers travel in
// the parameters too).
constexpr int kMaxChainInputs = 32;

// ir::ChainOp::Kind, one for one (cuda_chain.cc maps them).
enum class ChainKind : uint8_t { relu, sigmoid, tanh, exp, neg, abs, sqrt, reciprocal, erf, add, sub, mul, div, max, min };
constexpr int kNumChainKinds = 15;

// One link: a unary op (operand unary) applies to the running value x; a binary one combines x with a tensor
// input (element i of inputs[input]) or a constant, x on the left (x_left) or the right.
struct ChainLink {
  enum Operand : uint8_t { unary = 0, tensor = 1, constant = 2 };
  ChainKind op = ChainKind::relu;
  uint8_t operand = unary;
  uint8_t x_left = 1;
  uint8_t input = 0;
  float value = 0;  // the constant, fp32 whatever the tensors' type
};

// Scratch of a chain of n_links over n elements: 0 for one launch, else the fp32 running value.
int64_t chain_workspace_bytes(int n_links, int64_t n);

// y[i] = the chain applied to inputs[0][i], for i < n. inputs: n_inputs device pointers of type t,
// each n elements; y (type t) may be inputs[k] itself (in place) but must not overlap it
// otherwise. Any alignment (16-byte accesses where every pointer allows). workspace: at least
// chain_workspace_bytes, 16-byte aligned.
int chain(Elem t, const ChainLink* links, int n_links, const void* const* inputs, int n_inputs, void* y, int64_t n,
          void* workspace, void* stream);

}  // namespace tac::cuda::kern
