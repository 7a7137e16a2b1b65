#include "kernels/cost_model.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>

#include "kernels/conv/conv_common.h"
#include "kernels/gemm/problem.h"

namespace tac::kernels {

namespace {

// One fitted row: factor = a * sizes[0]^b[0] * sizes[1]^b[1] * sizes[2]^b[2] over `n` samples.
struct CostRow {
  const char* family;
  const char* tactic;
  const char* regime;
  double a, b[3];
  int n;
};

constexpr CostRow kCostTable[] = {
#include "kernels/cost_table.inc"
};

const char* layout_level(ir::Layout l) {
  switch (l) {
    case ir::Layout::nchw: return "nchw";
    case ir::Layout::nhwc: return "nhwc";
    default: return "blocked";
  }
}

const char* epilogue_level(const ir::Epilogue& ep) {
  using A = ir::Epilogue::Act;
  switch (ep.act) {
    case A::none: return "none";
    case A::relu:
    case A::clip:
    case A::leaky_relu:
    case A::hard_sigmoid:
    case A::hard_swish: return "act";
    default: return "tx";
  }
}

std::vector<std::string> nest(std::vector<std::string> parts) {
  std::vector<std::string> levels;
  for (size_t n = parts.size(); n > 0; --n) {
    std::string key = parts[0];
    for (size_t i = 1; i < n; ++i) key += "/" + parts[i];
    levels.push_back(key);
  }
  levels.push_back("*");
  return levels;
}

using TableIndex = std::unordered_map<std::string, const CostRow*>;
const TableIndex& table_index() {
  static const TableIndex index = [] {
    TableIndex m;
    for (const CostRow& r : kCostTable) m[std::string(r.family) + "|" + r.tactic + "|" + r.regime] = &r;
    return m;
  }();
  return index;
}

const CostRow* find_row(const CostRegime& r, const Tactic& t) {
  const TableIndex& index = table_index();
  for (const std::string& level : r.levels)
    if (auto it = index.find(r.family + "|" + t.name + "|" + level); it != index.end()) return it->second;
  return nullptr;
}

}  // namespace

std::vector<std::string> cost_table_problems() {
  auto ops_of = [](std::string_view family) -> std::vector<ir::OpKind> {
    if (family == "conv") return {ir::OpKind::Conv, ir::OpKind::FusedConv};
    if (family == "matmul") return {ir::OpKind::MatMul, ir::OpKind::FusedMatMul, ir::OpKind::Gemm};
    for (int k = 0; k < static_cast<int>(ir::OpKind::kCount); ++k)
      if (family == ir::op_name(static_cast<ir::OpKind>(k))) return {static_cast<ir::OpKind>(k)};
    return {};
  };
  std::vector<std::string> problems;
  for (const CostRow& r : kCostTable) {
    if (!*r.family) continue;  // the empty table's placeholder row
    bool found = false;
    for (ir::OpKind op : ops_of(r.family)) found |= find_tactic(op, r.tactic) != nullptr;
    if (!found) problems.push_back(std::string(r.family) + " " + r.tactic + " " + r.regime);
  }
  return problems;
}

CostRegime cost_regime(const StepDesc& s) {
  const ir::OpKind op = s.node->op;
  if (op == ir::OpKind::Conv || op == ir::OpKind::FusedConv) {
    if (auto g = conv::conv_geom(s)) {
      const bool dw = g->G > 1 && g->G == g->C && g->G == g->M;
      const bool one = g->KH == 1 && g->KW == 1 && g->PT == 0 && g->PL == 0 && g->PB == 0 && g->PR == 0;
      const bool w3 = g->G == 1 && g->KH == 3 && g->KW == 3 && g->SH == 1 && g->SW == 1 && g->DH == 1 && g->DW == 1;
      const char* geom = dw ? (g->SH > 1 || g->SW > 1 ? "dw_s2" : "dw") : one ? "1x1" : w3 ? "w3x3" : "kxk";
      return {"conv",
              nest({geom, layout_level(s.out_layout(0)), epilogue_level(g->ep)}),
              {static_cast<double>(g->ohw()) / 1024.0, static_cast<double>(g->Cg() * g->KH * g->KW) / 64.0,
               static_cast<double>(g->Mg()) / 64.0}};
    }
    return {"conv", {"*"}};
  }
  if (op == ir::OpKind::MatMul || op == ir::OpKind::FusedMatMul || op == ir::OpKind::Gemm) {
    gemm::Problem p;
    if (gemm::analyze_problem(s, p).is_ok()) {
      const char* shape = !p.b_const ? "dyn" : p.M <= 8 ? "gemv" : p.K <= 128 ? "smallk" : "big";
      return {"matmul",
              nest({shape, epilogue_level(p.act)}),
              {static_cast<double>(p.M) / 64.0, static_cast<double>(p.N) / 64.0, static_cast<double>(p.K) / 64.0}};
    }
    return {"matmul", {"*"}};
  }
  return {ir::op_name(op), nest({layout_level(s.out_layouts.empty() ? ir::Layout::nchw : s.out_layout(0))})};
}

double cost_factor(const Tactic& t, const StepDesc& s) {
  const double formula = t.cost(s);
  const double est = estimated_cost(t, s);
  return formula > 0 && std::isfinite(formula) ? est / formula : 1.0;
}

double estimated_cost(const Tactic& t, const StepDesc& s) {
  const double formula = t.cost(s);
  if (!(formula > 0) || !std::isfinite(formula) || formula >= 1e29) return formula;
  const CostRegime regime = cost_regime(s);
  const CostRow* row = find_row(regime, t);
  if (!row) return formula;
  double f = row->a;
  for (int i = 0; i < 3; ++i) f *= std::pow(std::max(regime.sizes[i], 1e-6), row->b[i]);
  return formula * f;
}

}  // namespace tac::kernels
