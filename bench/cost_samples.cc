// The samples the default ranking's cost model is fitted to (bench/fit_costs.py): for every
// Conv / MatMul / Gemm step of each model's plan, every applicable tactic timed alone on the step
// (builder::time_tactic_isolated: random inputs, real weights, warm, median), beside its formula
// (Tactic::cost) and the estimate the builder ranks by today (kernels::estimated_cost).
//
//   build/cost_samples [--threads N] [--route "k=v ..."]... MODEL.onnx... > samples.tsv
//
// Each --route adds a build of every model (default: the default route, then layout.default=nchw
// so that the nchw tactics of convolutions are timed too). Steps with the same op, attributes,
// shapes and layouts are timed once per model. Columns (tab-separated, header first): model,
// route, node, family, regime (most specific level), tactic, formula_ns, estimate_ns, measured_ns,
// chosen (1: the plan's tactic for the step), s1, s2, s3 (the regime's sizes, kernels/cost_model.h), count (the model's steps with this step's signature).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "builder/builder.h"
#include "io/onnx_import.h"
#include "kernels/cost_model.h"

using namespace tac;

namespace {

std::string signature(const kernels::StepDesc& s) {
  std::string sig = s.node->op_type;
  for (const auto& [name, a] : s.node->attrs) {
    sig += "|" + name + "=";
    if (a.type == ir::Attribute::Type::i) sig += std::to_string(a.i);
    else if (a.type == ir::Attribute::Type::f) sig += std::to_string(a.f);
    else if (a.type == ir::Attribute::Type::s) sig += a.s;
    else if (a.type == ir::Attribute::Type::ints)
      for (int64_t v : a.ints) sig += std::to_string(v) + ",";
  }
  for (size_t i = 0; i < s.in_shapes.size(); ++i) {
    sig += "|i" + std::string(s.constants[i] ? "c" : "") + std::to_string(static_cast<int>(s.in_dtypes[i])) + ":";
    for (int64_t d : s.in_shapes[i]) sig += std::to_string(d) + "x";
    sig += ir::layout_name(s.in_layout(i));
  }
  for (size_t i = 0; i < s.out_shapes.size(); ++i) {
    sig += "|o:";
    for (int64_t d : s.out_shapes[i]) sig += std::to_string(d) + "x";
    sig += ir::layout_name(s.out_layout(i));
  }
  return sig + "|t" + std::to_string(s.threads);
}

bool sampled_op(ir::OpKind op) {
  return op == ir::OpKind::Conv || op == ir::OpKind::FusedConv || op == ir::OpKind::MatMul ||
         op == ir::OpKind::FusedMatMul || op == ir::OpKind::Gemm;
}

}  // namespace

int main(int argc, char** argv) {
  std::string threads = "1";
  std::vector<std::string> routes, models;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--threads" || a == "--route") && i + 1 < argc) (a == "--threads" ? threads : routes.emplace_back()) = argv[++i];
    else if (a.rfind("--", 0) == 0) return std::fprintf(stderr, "cost_samples: unknown flag %s\n", a.c_str()), 2;
    else models.push_back(a);
  }
  if (models.empty()) return std::fprintf(stderr, "usage: cost_samples [--threads N] [--route R]... MODEL.onnx...\n"), 2;
  if (routes.empty()) routes = {"", "layout.default=nchw"};
  std::printf("model\troute\tnode\tfamily\tregime\ttactic\tformula_ns\testimate_ns\tmeasured_ns\tchosen\ts1\ts2\ts3\tcount\n");
  for (const std::string& path : models) {
    auto model = io::load_model(path);
    if (!model) return std::fprintf(stderr, "cost_samples: %s\n", model.status().to_string().c_str()), 1;
    std::set<std::string> seen;
    for (const std::string& r : routes) {
      auto route = builder::Route::parse(r + " threads=" + threads);
      if (!route) return std::fprintf(stderr, "cost_samples: %s\n", route.status().to_string().c_str()), 1;
      auto plan = builder::build_plan(*model, *route, {});
      if (!plan) return std::fprintf(stderr, "cost_samples: %s: %s\n", path.c_str(), plan.status().to_string().c_str()), 1;
      std::map<std::string, int> count;
      for (size_t i = 0; i < plan->steps.size(); ++i)
        if (plan->steps[i].tactic && sampled_op(plan->steps[i].tactic->op)) ++count[signature(builder::step_desc_of(*plan, i))];
      for (size_t i = 0; i < plan->steps.size(); ++i) {
        const builder::PlanStep& step = plan->steps[i];
        if (!step.tactic || !sampled_op(step.tactic->op)) continue;
        const kernels::StepDesc desc = builder::step_desc_of(*plan, i);
        const std::string sig = signature(desc);
        if (!seen.insert(sig).second) continue;
        const kernels::CostRegime regime = kernels::cost_regime(desc);
        for (const kernels::Tactic* t : kernels::tactics_for(desc.node->op)) {
          if (t->fallback || t->approximate) continue;
          if (!(desc.plain() || t->layouts) || !t->applies(desc).is_ok()) continue;
          const double measured = builder::time_tactic_isolated(*t, desc);
          std::printf("%s\t%s\t%s\t%s\t%s\t%s\t%.6g\t%.6g\t%.6g\t%d\t%.6g\t%.6g\t%.6g\t%d\n", path.c_str(), r.empty() ? "default" : r.c_str(),
                      desc.node->name.c_str(), regime.family.c_str(), regime.levels.front().c_str(), t->name,
                      t->cost(desc), kernels::estimated_cost(*t, desc), measured, t == step.tactic ? 1 : 0, regime.sizes[0], regime.sizes[1], regime.sizes[2], count[sig]);
        }
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
