// Plan files (.plan): versioned, checksummed, stamped with the tool version, the device
// fingerprint, the model hash and the route. A corrupt, foreign or mismatched plan is refused
// with a clear error.
#pragma once

#include <string>

#include "builder/plan.h"

namespace tac::builder {

// 2: each value's layout (ir/layout.h) after its kind (buffer sizes follow it); dynamic values
// and steps (PlanValue::Kind::dynamic, PlanStep::dynamic); bound symbolic dims.
// 3: shape ranges (Plan::ranges) and, with them, the source model, after the pass log.
inline constexpr uint32_t kPlanFormatVersion = 3;

Status save_plan(const Plan& plan, const std::string& path);
// Loads and re-links a plan (tactics by name); fails when the file is corrupt, from another
// format or tool version, or built for another device. A plan is input: every offset, size,
// count, index, type and tactic the runtime relies on is checked against the plan's own graph
// before it is returned (validate_plan in plan_file.cc).
Result<Plan> load_plan(const std::string& path);
// The same from the file's bytes; `path` names the plan in errors.
Result<Plan> load_plan_from_bytes(const std::string& bytes, const std::string& path);

}  // namespace tac::builder
