// The C++ side of bench/api_overhead.py: median wall time of Engine::run through the public API
// (by name, host tensors) on a model's test input, after warm-up.
//   api_overhead MODEL_DIR RUNS      -> prints "cpp_run_us <median> <p10> <p90>"
#include <tactician/tactician.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: api_overhead MODEL_DIR RUNS\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int runs = std::max(10, std::atoi(argv[2]));
  auto model = tac::Model::load(dir);
  if (!model) return std::fprintf(stderr, "%s\n", model.status().to_string().c_str()), 1;
  std::map<std::string, tac::Tensor> inputs;
  std::map<std::string, int64_t> dims;  // the model's symbolic dims, bound to the test data's sizes
  for (size_t k = 0; k < model->inputs().size(); ++k) {
    auto t = tac::load_tensor(dir + "/test_data_set_0/input_" + std::to_string(k) + ".pb");
    if (!t) return std::fprintf(stderr, "%s\n", t.status().to_string().c_str()), 1;
    const tac::TensorInfo& info = model->inputs()[k];
    for (size_t d = 0; d < info.dim_names.size() && d < t->shape().size(); ++d)
      if (!info.dim_names[d].empty()) dims[info.dim_names[d]] = t->shape()[d];
    inputs[info.name] = *t;
  }
  auto engine = tac::Engine::build(*model, {.backend = "cpu", .threads = 1, .dims = dims});
  if (!engine) return std::fprintf(stderr, "%s\n", engine.status().to_string().c_str()), 1;
  std::vector<double> us;
  for (int i = 0; i < runs + runs / 5; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto out = engine->run(inputs);
    auto t1 = std::chrono::steady_clock::now();
    if (!out) return std::fprintf(stderr, "%s\n", out.status().to_string().c_str()), 1;
    if (i >= runs / 5) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  std::printf("cpp_run_us %.3f %.3f %.3f\n", us[us.size() / 2], us[us.size() / 10], us[us.size() * 9 / 10]);
  return 0;
}
