// TuneSession, group then refine (DESIGN.md section 3, "Structure of the search space"): the
// strategy first searches the space where same-signature nodes share one knob; once
// `refine_after` of the budget is spent (or that space is exhausted), the incumbent is profiled
// and the groups that carry the most time are split into one knob per node, searched by a fresh
// instance of the same strategy around the incumbent. Profiles order the work; the verdict stays
// end to end. Only for strategies that refine (Strategy::refines).
#include "tuner/session.h"

namespace tac::tuner {

bool TuneSession::refine_due() const { return can_refine_ && (spent() >= opts_.refine_after || exhausted_); }

// With the incumbent's profile (`prof`, of route `inc_text`): the refinement space and its strategy.
Status TuneSession::start_refining(const EvalResult& prof, const std::string& inc_text) {
  if (prof.status != "ok") {
    line("refinement skipped: profiling the incumbent failed (" + prof.reason + ")");
    return Status::ok();
  }
  TAC_ASSIGN_OR_RETURN(builder::Route inc_route, builder::Route::parse(inc_text));
  inc_route.values.erase("threads");
  TAC_ASSIGN_OR_RETURN(refined_, make_refine_space(space_, knobs_, inc_route, prof.node_ms, opts_.refine_groups));
  if (refined_.dims.empty()) return Status::ok();
  weigh_by_time(refined_, prof.node_ms);
  if (isolated_.status == "ok") set_value_priors(refined_, isolated_.costs);
  TAC_ASSIGN_OR_RETURN(refiner_, make_strategy(opts_.strategy, refined_, opts_.seed + 1));
  cur_space_ = &refined_;
  cur_history_ = &refined_history_;
  cur_ = refiner_.get();
  who_ = opts_.strategy + "/refine";
  proposals_.clear();
  exhausted_ = false;
  sum_.refined_knobs = refined_.dims.size();
  line("refining per node: " + std::to_string(refined_.dims.size()) + " knobs of the groups carrying the most time");
  return Status::ok();
}

}  // namespace tac::tuner
