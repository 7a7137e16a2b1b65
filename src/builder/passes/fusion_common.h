// Shared pieces of the fusion passes: activation matching for the fused epilogues (fuse_conv,
// fuse_matmul) and the small pattern vocabulary the subgraph fusions (fuse_gelu,
// fuse_layernorm, eliminate_transpose, merge_reshapes) are written in.
#pragma once

#include <optional>

#include "builder/passes/pass.h"
#include "ir/epilogue.h"

namespace tac::builder {

// The epilogue activation equivalent to node `n`, or nullopt when `n` is not a fusable
// activation (Clip needs constant bounds; LeakyRelu / HardSigmoid carry their attributes;
// Gelu only in its exact, erf form).
std::optional<ir::Epilogue> activation_of(const ir::Graph& g, const ir::Node& n);

// When the single user of value `y` is a fusable activation not yet absorbed (or y's two users
// are the Sigmoid and Mul of y * Sigmoid(y), SiLU), absorbs it: marks it dead, moves `y` to its
// output, appends its label to `what` and returns its epilogue.
std::optional<ir::Epilogue> absorb_activation(const ir::Graph& g, const std::vector<std::vector<int>>& users,
                                              std::vector<bool>& dead, int& y, std::string& what);

// Claims a matched subgraph for a rewrite: false when `last` or one of `others` is already
// `dead` (claimed by an earlier match); else marks `others` dead and returns their labels and
// `last`'s, comma-separated, in `what` (`last` is the node the caller rewrites in place).
bool claim_match(std::vector<bool>& dead, const ir::Node& last, const std::vector<ir::Node*>& others, std::string& what);

// ---- pattern vocabulary ----
// A node of the default domain with op `op`, one output, and `n_inputs` inputs (-1: any).
bool is_op(const ir::Node& n, ir::OpKind op, int n_inputs = -1);
// The node producing `v`, or nullptr (graph inputs, constants).
ir::Node* producer_of(ir::Graph& g, int v);
// The only node consuming `v` when `v` has a single user and is not a graph output, else nullptr.
ir::Node* sole_user(ir::Graph& g, const std::vector<std::vector<int>>& users, int v);
// For a binary node with `v` as one input: the other input (kNoValue when both are `v`).
int other_input(const ir::Node& n, int v);
// True when `v` is a constant with one element equal to `want` within a relative `rel_tol`.
bool is_scalar_constant(const ir::Graph& g, int v, double want, double rel_tol = 1e-5);
// Both types fully known and equal in rank and dims.
bool same_known_shape(const ir::ValueType& a, const ir::ValueType& b);
// The dims of value `v` when all are known, else nullopt (also for kNoValue).
std::optional<std::vector<int64_t>> known_shape(const ir::Graph& g, int v);
// An integer / float attribute of `n`, or `def` when absent or of another type.
int64_t int_attr(const ir::Node& n, const char* key, int64_t def);
float float_attr(const ir::Node& n, const char* key, float def);
// The last dim of `t` when known, else -1.
int64_t last_dim(const ir::ValueType& t);
// A Gemm that is a plain product of a 2-D A: transA = 0, alpha = beta = 1 (transB and C vary).
bool is_plain_gemm(const ir::Graph& g, const ir::Node& n);
// The `perm` of a Transpose node (the reversed dims when absent), or nullopt when the input's
// rank is unknown or the perm is not a permutation.
std::optional<std::vector<int64_t>> transpose_perm(const ir::Graph& g, const ir::Node& n);

}  // namespace tac::builder
