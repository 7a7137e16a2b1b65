// Fuzz target: arbitrary bytes as a plan file -> load (every field validated) -> engine -> one run
// on seeded inputs. A plan that loads must run without a memory error: any crash, sanitizer report,
// hang or uncaught exception is a finding; errors are fine. Seeds: plans built on this machine
// (scripts/fuzz.sh builds them; the device fingerprint and tool version must match to get past
// the header).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "builder/plan_file.h"
#include "runtime/engine.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto plan = tac::builder::load_plan_from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.plan");
  if (!plan) return 0;
  plan->threads = 1;
  auto engine = tac::runtime::Engine::create(std::move(plan).value());
  if (!engine) return 0;
  std::vector<tac::Tensor> inputs;
  for (const auto& [dtype, shape] : (*engine)->input_specs()) {
    auto t = tac::Tensor::create(dtype, shape);
    if (!t) return 0;
    for (int64_t i = 0; i < t->numel(); ++i) t->set_f64(i, static_cast<double>((i * 7919) % 13) - 6.0);
    inputs.push_back(std::move(t).value());
  }
  (void)(*engine)->run(inputs);
  return 0;
}
