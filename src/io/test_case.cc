#include "io/test_case.h"

#include <algorithm>
#include <filesystem>

#include "io/tensor_io.h"

namespace fs = std::filesystem;

namespace tac::io {

bool is_test_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(path) / "model.onnx", ec);
}

std::vector<std::string> find_test_dirs(const std::string& path) {
  std::vector<std::string> out;
  if (is_test_dir(path)) return {path};
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory(ec) && is_test_dir(it->path().string())) {
      out.push_back(it->path().string());
      it.disable_recursion_pending();
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// One data set: <dir>/input_K.pb and output_K.pb, typed by the model's inputs and outputs.
Result<TestDataSet> load_data_set(const ir::Model& m, const std::string& s) {
  const ir::Graph& g = m.graph;
  TestDataSet ds;
  ds.dir = s;
  for (size_t k = 0;; ++k) {
    std::string p = s + "/input_" + std::to_string(k) + ".pb";
    if (!fs::exists(p)) break;
    if (k >= g.inputs.size())
      return invalid_argument(p + ": the model has only " + std::to_string(g.inputs.size()) + " inputs");
    TAC_ASSIGN_OR_RETURN(Datum d, load_datum(p, g.values[static_cast<size_t>(g.inputs[k])].type));
    ds.inputs.push_back(std::move(d));
  }
  for (size_t k = 0;; ++k) {
    std::string p = s + "/output_" + std::to_string(k) + ".pb";
    if (!fs::exists(p)) break;
    if (k >= g.outputs.size())
      return invalid_argument(p + ": the model has only " + std::to_string(g.outputs.size()) + " outputs");
    TAC_ASSIGN_OR_RETURN(Datum d, load_datum(p, g.values[static_cast<size_t>(g.outputs[k])].type));
    ds.outputs.push_back(std::move(d));
  }
  return ds;
}

}  // namespace

Result<std::vector<TestDataSet>> load_test_data(const ir::Model& m, const std::string& dir) {
  std::vector<std::string> sets;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path().string());
  if (ec) return io_error(dir + ": " + ec.message());
  std::sort(sets.begin(), sets.end());
  std::vector<TestDataSet> out;
  for (const std::string& s : sets) {
    TAC_ASSIGN_OR_RETURN(TestDataSet ds, load_data_set(m, s));
    out.push_back(std::move(ds));
  }
  return out;
}

Result<std::vector<TestDataSet>> load_data_sets(const ir::Model& m, const std::string& dir) {
  TAC_ASSIGN_OR_RETURN(std::vector<TestDataSet> sets, load_test_data(m, dir));
  if (!sets.empty()) return sets;
  if (!fs::exists(dir + "/input_0.pb"))
    return invalid_argument(dir + ": holds neither test_data_set_*/ folders nor input_0.pb");
  TAC_ASSIGN_OR_RETURN(TestDataSet ds, load_data_set(m, dir));
  if (ds.inputs.size() != m.graph.inputs.size())
    return invalid_argument(dir + ": " + std::to_string(ds.inputs.size()) + " input_K.pb file(s) for a model of " +
                            std::to_string(m.graph.inputs.size()) + " inputs");
  sets.push_back(std::move(ds));
  return sets;
}

}  // namespace tac::io
