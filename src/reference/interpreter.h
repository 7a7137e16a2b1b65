// The reference interpreter: runs a model node by node with the kernels of src/reference.
// Naive and exact (float64 accumulation): the accuracy oracle for every engine Tactician builds.
#pragma once

#include <functional>
#include <vector>

#include "core/datum.h"
#include "ir/graph.h"

namespace tac::ref {

// Nodes (recursively, including subgraphs) that the reference interpreter cannot run.
std::vector<const ir::Node*> unsupported_nodes(const ir::Graph& g);

// The inputs match the graph's declared inputs (count, tensor dtype, known dims); errors name
// the input.
Status check_inputs(const ir::Graph& g, const std::vector<Datum>& inputs);

// Called after each node of the main graph runs, with its outputs (one per declared output,
// empty Datum where omitted): lets tools compare every layer, check shapes, profile.
using NodeObserver = std::function<void(const ir::Node&, const std::vector<Datum>& outputs)>;

// Runs the model's main graph. `inputs` are bound to Graph::inputs by position; the result
// holds one Datum per graph output. Errors name the node and the reason.
Result<std::vector<Datum>> run_model(const ir::Model& m, const std::vector<Datum>& inputs,
                                     const NodeObserver& observer = {});

// Values of one graph execution. Enclosing frames resolve outer-scope names (If/Loop bodies).
class Frame {
 public:
  Frame(const ir::Graph& g, const Frame* parent) : graph(g), parent(parent), values(g.values.size()) {}
  const ir::Graph& graph;
  const Frame* parent;
  std::vector<Datum> values;
  std::vector<bool> defined = std::vector<bool>(values.size(), false);
  const NodeObserver* observer = nullptr;  // main graph only
  // The datum named `name` here or in an enclosing frame; nullptr when not defined.
  const Datum* lookup(const std::string& name) const;
};

// Runs `g` in `frame` (inputs already bound). Throws KernelError, for use inside kernels.
void run_frame(Frame& frame);

}  // namespace tac::ref
