// Helpers for the tactic tests that feed small constants and the ONNX node suite's one-node tests
// to check_tactic (tests/unit/pad_tactics_test.cc, resize_tactics_test.cc, cuda_backend_test.cc).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "io/test_case.h"
#include "ir/graph.h"

namespace tac::test {

// A 1-D int64 / float32 tensor of `v`.
inline Tensor int64s(const std::vector<int64_t>& v) {
  Tensor t = Tensor::create(DType::int64, {static_cast<int64_t>(v.size())}).value();
  for (size_t i = 0; i < v.size(); ++i) t.set_i64(static_cast<int64_t>(i), v[i]);
  return t;
}
inline Tensor floats(const std::vector<double>& v) {
  Tensor t = Tensor::create(DType::float32, {static_cast<int64_t>(v.size())}).value();
  for (size_t i = 0; i < v.size(); ++i) t.set_f64(static_cast<int64_t>(i), v[i]);
  return t;
}

// The ONNX backend node suite at its default place (TAC_ONNX_BACKEND_DIR in CMakeLists.txt:
// ../shared beside the source tree); the caller skips when it does not exist.
inline std::filesystem::path onnx_node_suite() {
  return std::filesystem::path(TAC_TEST_DATA_DIR).parent_path().parent_path().parent_path() / "shared/onnx-backend/node";
}

// The inputs of `n`, the one node of graph `g`, for data set `ds`: the data set's tensor where the
// input is a graph input, the initializer where it is a constant (empty where omitted); every input
// after the first marked constant in `cmask` (as the builder sees scales, sizes and pads).
inline void single_node_inputs(const ir::Graph& g, const ir::Node& n, const io::TestDataSet& ds, std::vector<Tensor>& in,
                               std::vector<bool>& cmask) {
  in.clear();
  cmask.clear();
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    Tensor t;
    for (size_t k = 0; k < g.inputs.size(); ++k)
      if (n.inputs[i] != ir::kNoValue && g.inputs[k] == n.inputs[i]) t = ds.inputs[k].tensor;
    if (n.inputs[i] != ir::kNoValue && g.values[static_cast<size_t>(n.inputs[i])].initializer)
      t = *g.values[static_cast<size_t>(n.inputs[i])].initializer;
    in.push_back(t);
    cmask.push_back(i > 0);
  }
}

}  // namespace tac::test
