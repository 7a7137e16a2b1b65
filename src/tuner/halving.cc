#include "tuner/halving.h"

#include <algorithm>
#include <cmath>

namespace tac::tuner {

std::optional<std::pair<size_t, int>> next_promotion(const std::vector<std::vector<double>>& scores, size_t incumbent,
                                                     int eta, int top_rung, double noise,
                                                     const std::vector<bool>& busy) {
  if (incumbent >= scores.size() || scores[incumbent].empty() || eta < 2) return std::nullopt;
  for (int r = top_rung - 1; r >= 0; --r) {
    const size_t ru = static_cast<size_t>(r);
    std::vector<double> at_r;
    for (const std::vector<double>& s : scores)
      if (s.size() > ru) at_r.push_back(s[ru]);
    std::sort(at_r.begin(), at_r.end());
    const size_t top = at_r.size() / static_cast<size_t>(eta);
    const std::vector<double>& inc = scores[incumbent];
    const double inc_r = inc[std::min(ru, inc.size() - 1)];
    std::optional<size_t> best;
    for (size_t i = 0; i < scores.size(); ++i) {
      if (i == incumbent || scores[i].size() != ru + 1 || (i < busy.size() && busy[i])) continue;
      const double v = scores[i][ru];
      const bool clearly_faster = v < inc_r * (1 - noise);
      const bool in_top = top > 0 && v <= at_r[top - 1] && v < inc_r * (1 + noise);
      if ((clearly_faster || in_top) && (!best || v < scores[*best][ru])) best = i;
    }
    if (best) return std::make_pair(*best, r + 1);
  }
  return std::nullopt;
}

double paired_noise(const std::vector<double>& ratios) {
  const size_t n = ratios.size();
  if (n < 2) return 1;
  // One-sided 95% quantiles of Student's t by degrees of freedom (1..10); the normal's beyond.
  static constexpr double kT95[] = {6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812};
  const double t = n - 1 <= 10 ? kT95[n - 2] : 1.645 + 1.7 / static_cast<double>(n - 1);
  double mean = 0;
  for (double r : ratios) mean += std::log(r);
  mean /= static_cast<double>(n);
  double sq = 0;
  for (double r : ratios) sq += (std::log(r) - mean) * (std::log(r) - mean);
  const double sd = std::sqrt(sq / static_cast<double>(n - 1));
  return std::exp(t * sd / std::sqrt(static_cast<double>(n))) - 1;
}

bool challenger_wins(double paired_low, double paired_ratio, double noise) {
  return paired_low > 1 && paired_ratio > 1 + std::max(0.01, noise);
}

}  // namespace tac::tuner
