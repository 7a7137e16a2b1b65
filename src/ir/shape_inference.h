// Static shape inference over the IR, with symbolic dims ("batch", "seq").
#pragma once

#include "ir/graph.h"

namespace tac::ir {

// Infers the element type and shape of every value the main graph computes, from the declared
// types of the graph inputs and initializers and one rule per op (src/ir/shape_inference.cc).
// A value whose shape depends on data the rules cannot see keeps its declared type (from
// value_info), or stays unknown. Fails naming the node when the shapes are inconsistent
// (e.g. Add of [2,3] and [4], a Conv whose weights do not match its input channels).
Status infer_shapes(Model& m);

// Number of values of the main graph with a known dtype and rank (dims may be symbolic).
int count_known_shapes(const Graph& g);

}  // namespace tac::ir
