#include "tuner/halving.h"

#include <algorithm>

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

}  // namespace tac::tuner
