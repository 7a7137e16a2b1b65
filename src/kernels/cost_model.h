// The default ranking's cost model: each tactic's formula (Tactic::cost, a roofline-style
// estimate in ns) times a factor fitted to isolated timings on this machine class.
//
// The factors live in cost_table.inc, written by bench/fit_costs.py from the samples of
// bench/cost_samples (every applicable tactic of every step of a set of models, timed alone);
// its header records the command, the machine, the models and the fit error. A factor is looked
// up for the tactic and the step's regime, most specific level first:
//   conv:   <geometry>/<layout>/<epilogue>, <geometry>/<layout>, <geometry>, *
//           geometry dw | dw_s2 | 1x1 | w3x3 | kxk; layout nchw | nhwc | blocked;
//           epilogue none | act (piecewise linear) | tx (transcendental: sigmoid, silu, gelu, ...)
//   matmul: <shape>/<epilogue>, <shape>, *        shape gemv (M <= 8) | dyn (B not a constant)
//                                                  | smallk (K <= 128) | big
//   other ops (family = the op's name): <layout>, *
// and is a power law of the step's sizes, factor = a * s1^b1 * s2^b2 * s3^b3, so that a formula
// off by a size-dependent amount (per-call and per-plane overheads on small steps, transforms
// that pay off on large planes, short reductions) is corrected. Sizes: conv, the output plane
// OH*OW / 1024, the reduction C/G*KH*KW / 64 and the output channels per group M/G / 64; matmul,
// M / 64, N / 64, K / 64; other ops none. A tactic with no row keeps factor 1.
#pragma once

#include <string>
#include <vector>

#include "kernels/tactic.h"

namespace tac::kernels {

// The family of the step's op in the table ("conv", "matmul", or the op's name) and its regime
// levels, most specific first, ending with "*".
struct CostRegime {
  std::string family;
  std::vector<std::string> levels;
  double sizes[3] = {1, 1, 1};
};
CostRegime cost_regime(const StepDesc& step);

// The fitted factor for `t` on `step` (1 where the table has no row for the tactic).
double cost_factor(const Tactic& t, const StepDesc& step);

// What the default ranking sorts by: t.cost(step) * cost_factor(t, step).
double estimated_cost(const Tactic& t, const StepDesc& step);

// Rows of the table that name no CPU tactic of their family (a tactic renamed or removed since the
// fit), as "family tactic regime": the table must be refitted. Empty when the table is sound.
std::vector<std::string> cost_table_problems();

}  // namespace tac::kernels
