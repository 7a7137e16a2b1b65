// Test directories in the ONNX backend layout:
//   <dir>/model.onnx, <dir>/test_data_set_<N>/input_<K>.pb, output_<K>.pb
#pragma once

#include <string>
#include <vector>

#include "core/datum.h"
#include "ir/graph.h"

namespace tac::io {

struct TestDataSet {
  std::string dir;
  std::vector<Datum> inputs;   // by position among the graph's (non-initializer) inputs
  std::vector<Datum> outputs;  // by position among the graph's outputs
};

bool is_test_dir(const std::string& path);
// `path` itself when it is a test directory, else every test directory below it, sorted.
std::vector<std::string> find_test_dirs(const std::string& path);
// Loads every test_data_set_* of `dir`, typing files by the model's inputs and outputs.
Result<std::vector<TestDataSet>> load_test_data(const ir::Model& m, const std::string& dir);
// Data given by a user (--inputs, --calibration): the test_data_set_* of `dir`, or else `dir`
// itself as one set of input_K.pb [+ output_K.pb]; an error naming `dir` when it holds neither.
Result<std::vector<TestDataSet>> load_data_sets(const ir::Model& m, const std::string& dir);

}  // namespace tac::io
