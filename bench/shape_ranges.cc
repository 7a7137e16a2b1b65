// The C++ side of bench/shape_ranges.py (issue 29, measured item 2), for machines whose Python
// cannot load the module (the lent GPUs): bert-toy built once over shape ranges against engines
// built for exactly one shape, at every (batch, seq) in {1,3,8}x{16,100,256} and the opt shape:
// outputs compared (max |diff|), both timed in interleaved rounds (median of per-round medians,
// Engine::run on host tensors, so a CUDA engine's copies are in both), and the first run at a new
// size (which builds the engine for it).
//   shape_ranges MODEL_DIR BACKEND [ROUTE] [ROUNDS] [RUNS]
#include <tactician/tactician.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr const char* kShapes = "batch=1..8:4,max_seq_len_in_batch=16..256:128";

int fail(const tac::Status& s) {
  std::fprintf(stderr, "%s\n", s.to_string().c_str());
  return 1;
}

std::map<std::string, tac::Tensor> feeds(int64_t batch, int64_t seq, unsigned seed) {
  std::mt19937 rng(seed);
  auto ints = [&](int64_t hi) {
    tac::Tensor t = tac::Tensor::create(tac::DType::int64, {batch, seq}).value();
    for (int64_t i = 0; i < batch * seq; ++i) t.data<int64_t>()[i] = static_cast<int64_t>(rng() % static_cast<unsigned>(hi));
    return t;
  };
  tac::Tensor mask = tac::Tensor::create(tac::DType::int64, {batch, seq}).value();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s) mask.data<int64_t>()[b * seq + s] = s < seq - seq / 4 ? 1 : 0;
  return {{"input_ids", ints(99)}, {"token_type_ids", ints(2)}, {"input_mask", mask}};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double elapsed_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Median wall time of `runs` runs, in ms; <0 when a run fails.
double median_ms(const tac::Engine& e, const std::map<std::string, tac::Tensor>& in, int runs) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (!e.run(in)) return -1;
    t.push_back(elapsed_ms(t0));
  }
  return median(t);
}

double max_abs_diff(const std::map<std::string, tac::Tensor>& a, const std::map<std::string, tac::Tensor>& b) {
  double m = 0;
  for (const auto& [name, t] : b) {
    const tac::Tensor& u = a.at(name);
    if (t.dtype() != tac::DType::float32 || u.shape() != t.shape()) return INFINITY;
    for (int64_t i = 0; i < t.numel(); ++i)
      m = std::max(m, static_cast<double>(std::fabs(u.data<float>()[i] - t.data<float>()[i])));
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: shape_ranges MODEL_DIR BACKEND [ROUTE] [ROUNDS] [RUNS]\n");
    return 2;
  }
  const std::string backend = argv[2], route = argc > 3 ? argv[3] : "";
  const int rounds = argc > 4 ? std::max(1, std::atoi(argv[4])) : 5, runs = argc > 5 ? std::max(3, std::atoi(argv[5])) : 50;
  auto model = tac::Model::load(argv[1]);
  if (!model) return fail(model.status());
  auto ranged = tac::Engine::build(*model, {.route = route, .backend = backend, .threads = 1, .shapes = kShapes});
  if (!ranged) return fail(ranged.status());
  std::printf("%s, %s, route \"%s\", 1 thread, --shapes %s; medians of %d interleaved rounds of %d runs\n", argv[1],
              backend.c_str(), route.c_str(), kShapes, rounds, runs);
  std::printf("%5s %4s %12s %10s %9s %12s %10s\n", "batch", "seq", "first run ms", "ranged ms", "exact ms", "ranged/exact",
              "max |diff|");
  std::vector<std::pair<int64_t, int64_t>> sizes;
  for (int64_t b : {1, 3, 8})
    for (int64_t s : {16, 100, 256}) sizes.emplace_back(b, s);
  sizes.emplace_back(4, 128);
  double log_sum = 0, worst = 0;
  for (auto [batch, seq] : sizes) {
    const auto in = feeds(batch, seq, static_cast<unsigned>(batch * 1000 + seq));
    auto t0 = std::chrono::steady_clock::now();
    auto got = ranged->run(in);
    const double first = elapsed_ms(t0);
    if (!got) return fail(got.status());
    auto exact = tac::Engine::build(
        *model, {.route = route, .backend = backend, .threads = 1, .dims = {{"batch", batch}, {"max_seq_len_in_batch", seq}}});
    if (!exact) return fail(exact.status());
    auto want = exact->run(in);
    if (!want) return fail(want.status());
    std::vector<double> r_ms, e_ms;
    for (int r = 0; r < rounds; ++r) {
      r_ms.push_back(median_ms(*ranged, in, runs));
      e_ms.push_back(median_ms(*exact, in, runs));
    }
    const double r = median(r_ms), e = median(e_ms);
    if (r < 0 || e < 0)
      return std::fprintf(stderr, "a timed run failed at batch %lld seq %lld\n", (long long)batch, (long long)seq), 1;
    log_sum += std::log(r / e);
    worst = std::max(worst, r / e);
    std::printf("%5lld %4lld %12.3f %10.3f %9.3f %12.3f %10.2e%s\n", (long long)batch, (long long)seq, first, r, e, r / e,
                max_abs_diff(*got, *want), batch == 4 && seq == 128 ? "  (opt)" : "");
  }
  std::printf("ranged/exact: geomean %.3f, worst %.3f\n", std::exp(log_sum / static_cast<double>(sizes.size())), worst);
  return 0;
}
