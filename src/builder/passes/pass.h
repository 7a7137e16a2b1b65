// Graph rewrites run by the builder, one per file, in the explicit order of pipeline.cc.
// Each pass is a knob `pass.<name>=on|off`; the pipeline re-infers shapes between passes.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tac::builder {

struct PassContext {
  ir::Model& model;
  std::vector<std::string> log;  // one line per rewrite: "fold_batchnorm: bn_3 into conv_2"
  int threads = 1;
  // The element types the model file declares for its outputs (DType::undefined where it declares
  // none), in graph output order: the types the plan hands back (passes/widen_storage.cc).
  std::vector<DType> declared_outputs;
};

struct Pass {
  const char* name;  // knob pass.<name>
  const char* help;
  bool default_on;
  Status (*run)(ir::Graph& g, PassContext& ctx);
};

// The ordered pipeline (see pipeline.cc for why the order matters).
std::span<const Pass> pass_pipeline();

// ---- helpers shared by the passes (rewrite.cc) ----
// Consumers of every value (node indices); a graph output counts as a consumer (-1).
std::vector<std::vector<int>> value_users(const ir::Graph& g);
// True when `v` is consumed by exactly one node and is not a graph output.
bool has_single_user(const std::vector<std::vector<int>>& users, int v);
// The constant data of value `v` (an initializer), or nullptr.
const Tensor* constant_of(const ir::Graph& g, int v);
// Makes `v` an initializer holding `t` (the value's type follows the tensor).
void set_constant(ir::Graph& g, int v, Tensor t);
// A new value named after `base` (unique) of type `type` (by value: it may be another value's,
// and adding a value can move them all).
int add_value(ir::Graph& g, const std::string& base, ir::ValueType type);
// A new value named after `base` (unique), holding `t` as an initializer.
int add_constant(ir::Graph& g, const std::string& base, Tensor t);
// Removes the nodes marked in `dead` and then every node none of whose outputs is used.
// Re-sorts the graph (indices change).
Status remove_nodes(ir::Graph& g, const std::vector<bool>& dead);
// Replaces every use of value `from` (node inputs, graph outputs) by `to`.
void replace_uses(ir::Graph& g, int from, int to);

// The passes.
Status widen_storage(ir::Graph& g, PassContext& ctx);
Status fold_constants(ir::Graph& g, PassContext& ctx);
Status fold_batchnorm(ir::Graph& g, PassContext& ctx);
Status eliminate_identity(ir::Graph& g, PassContext& ctx);
Status fuse_conv(ir::Graph& g, PassContext& ctx);
Status fuse_matmul(ir::Graph& g, PassContext& ctx);
Status eliminate_transpose(ir::Graph& g, PassContext& ctx);
Status merge_reshapes(ir::Graph& g, PassContext& ctx);
Status channel_gather(ir::Graph& g, PassContext& ctx);
Status fuse_layernorm(ir::Graph& g, PassContext& ctx);
Status fuse_gelu(ir::Graph& g, PassContext& ctx);
Status move_transposes(ir::Graph& g, PassContext& ctx);
Status fuse_attention(ir::Graph& g, PassContext& ctx);
Status attention_views(ir::Graph& g, PassContext& ctx);
Status fuse_elementwise(ir::Graph& g, PassContext& ctx);
Status conv1d_as_2d(ir::Graph& g, PassContext& ctx);

}  // namespace tac::builder
