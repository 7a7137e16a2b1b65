// Fuzz target: arbitrary bytes as a plan file's payload, wrapped in a valid header (magic, format
// version, size and the FNV-1a checksum, which anyone can recompute: mutations must reach the
// parser, not die at the checksum) -> load (every field validated) -> engine -> one run on seeded
// inputs. A plan that loads must run without a memory error: any crash, sanitizer report, hang or
// uncaught exception is a finding; errors are fine. Seeds: payloads of plans built on this machine
// (scripts/fuzz.sh builds them; the device fingerprint and tool version must match).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "builder/plan_file.h"
#include "runtime/engine.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string payload(reinterpret_cast<const char*>(data), size);
  uint64_t sum = 1469598103934665603ull;
  for (unsigned char c : payload) sum = (sum ^ c) * 1099511628211ull;
  const uint32_t version = tac::builder::kPlanFormatVersion;
  const uint64_t n = payload.size();
  std::string file("TACPLAN", 8);  // with its NUL
  file.append(reinterpret_cast<const char*>(&version), sizeof version);
  file.append(reinterpret_cast<const char*>(&n), sizeof n);
  file.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  file += payload;
  auto plan = tac::builder::load_plan_from_bytes(file, "fuzz.plan");
  if (!plan) return 0;
  plan->threads = 1;
  auto engine = tac::runtime::Engine::create(std::move(plan).value());
  if (!engine) return 0;
  // Harness policy, not the product's: plans whose inputs exceed 256 MiB load (that is the part
  // under test) but are not run, so that libFuzzer's memory limit flags leaks and blow-ups only.
  uint64_t input_bytes = 0;
  for (const auto& [dtype, shape] : (*engine)->input_specs())
    input_bytes += static_cast<uint64_t>(std::max<int64_t>(0, tac::shape_numel(shape))) * tac::dtype_size(dtype);
  if (input_bytes > (uint64_t{256} << 20)) return 0;
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
