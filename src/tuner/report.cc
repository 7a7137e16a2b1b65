#include "tuner/report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "builder/knobs.h"
#include "tuner/accuracy.h"
#include "tuner/database.h"

namespace tac::tuner {

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

std::string num(double v, int prec = 3) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*g", prec, v);
  return b;
}

// The first output's l2 from a metrics JSON list (validated with the record), or NaN.
double first_l2(const std::string& json) {
  Result<std::vector<Metrics>> m = parse_metrics_json(json);
  return m && !m->empty() ? (*m)[0].l2 : NAN;
}

// A route (validated: it parses) that sets builder.selection=isolated and pins no tactic. Read as
// knobs, not by a search in the text (a knob or value may contain the words).
bool is_isolated_selection(const std::string& route_text) {
  Result<builder::Route> route = builder::Route::parse(route_text);
  if (!route) return false;
  auto sel = route->values.find("builder.selection");
  if (sel == route->values.end() || sel->second != "isolated") return false;
  return std::none_of(route->values.begin(), route->values.end(),
                      [](const auto& kv) { return kv.first.rfind("tactic.", 0) == 0; });
}

struct Axis {
  double lo, hi;
  bool log;
  double map(double v, double a, double b) const {
    double t = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
    if (!std::isfinite(t)) t = 0.5;
    return a + t * (b - a);
  }
};

// A scatter / step plot: points (x, y) in an SVG of fixed size with labelled axes.
std::string svg_plot(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                     const std::vector<std::pair<double, double>>& pts, bool xlog, bool step,
                     const std::vector<std::string>& colors = {}, double vline = NAN) {
  const double W = 520, H = 300, L = 60, R = 15, T = 30, B = 45;
  std::ostringstream os;
  os << "<svg width='" << W << "' height='" << H << "' xmlns='http://www.w3.org/2000/svg' style='background:#fff'>";
  os << "<text x='" << W / 2 << "' y='18' text-anchor='middle' font-size='14'>" << esc(title) << "</text>";
  if (pts.empty()) return os.str() + "<text x='20' y='60'>no data</text></svg>";
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (auto [x, y] : pts) {
    if (xlog && !(x > 0)) continue;
    x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  }
  if (std::isfinite(vline) && (!xlog || vline > 0)) x0 = std::min(x0, vline), x1 = std::max(x1, vline);
  if (!(x1 > x0)) x1 = x0 + 1;
  if (!(y1 > y0)) y1 = y0 + 1;
  double pad = (y1 - y0) * 0.05;
  Axis ax{x0, x1, xlog}, ay{y0 - pad, y1 + pad, false};
  os << "<line x1='" << L << "' y1='" << H - B << "' x2='" << W - R << "' y2='" << H - B << "' stroke='#444'/>";
  os << "<line x1='" << L << "' y1='" << T << "' x2='" << L << "' y2='" << H - B << "' stroke='#444'/>";
  for (int i = 0; i <= 4; ++i) {
    double yv = ay.lo + (ay.hi - ay.lo) * i / 4, yp = ay.map(yv, H - B, T);
    os << "<text x='" << L - 5 << "' y='" << yp + 4 << "' text-anchor='end' font-size='10'>" << num(yv) << "</text>";
    double xv = xlog ? std::pow(10, std::log10(x0) + (std::log10(x1) - std::log10(x0)) * i / 4) : x0 + (x1 - x0) * i / 4;
    double xp = ax.map(xv, L, W - R);
    os << "<text x='" << xp << "' y='" << H - B + 14 << "' text-anchor='middle' font-size='10'>" << num(xv, 2) << "</text>";
  }
  os << "<text x='" << (L + W - R) / 2 << "' y='" << H - 8 << "' text-anchor='middle' font-size='11'>" << esc(xlabel) << "</text>";
  os << "<text x='14' y='" << (T + H - B) / 2 << "' font-size='11' transform='rotate(-90 14 " << (T + H - B) / 2
     << ")' text-anchor='middle'>" << esc(ylabel) << "</text>";
  if (std::isfinite(vline) && (!xlog || vline > 0)) {
    const double vx = ax.map(vline, L, W - R);
    os << "<line x1='" << vx << "' y1='" << T << "' x2='" << vx << "' y2='" << H - B
       << "' stroke='#d62728' stroke-dasharray='5,4'/>";
  }
  if (step) {
    os << "<polyline fill='none' stroke='#1f77b4' stroke-width='2' points='";
    double prev_y = NAN;
    for (auto [x, y] : pts) {
      double px = ax.map(x, L, W - R), py = ay.map(y, H - B, T);
      if (!std::isnan(prev_y)) os << px << "," << prev_y << " ";
      os << px << "," << py << " ";
      prev_y = py;
    }
    os << "'/>";
  } else {
    for (size_t i = 0; i < pts.size(); ++i) {
      auto [x, y] = pts[i];
      if (xlog && !(x > 0)) continue;
      os << "<circle cx='" << ax.map(x, L, W - R) << "' cy='" << ay.map(y, H - B, T) << "' r='3' fill='"
         << (i < colors.size() ? colors[i] : "#1f77b4") << "' fill-opacity='0.7'/>";
    }
  }
  return os.str() + "</svg>";
}

std::string svg_bars(const std::string& title, const std::vector<std::pair<std::string, double>>& bars,
                     const std::string& unit) {
  const double W = 520, row = 22, L = 230;
  double hmax = 0;
  for (const auto& [k, v] : bars) hmax = std::max(hmax, v);
  std::ostringstream os;
  os << "<svg width='" << W << "' height='" << 40 + row * static_cast<double>(bars.size())
     << "' xmlns='http://www.w3.org/2000/svg' style='background:#fff'>";
  os << "<text x='" << W / 2 << "' y='18' text-anchor='middle' font-size='14'>" << esc(title) << "</text>";
  for (size_t i = 0; i < bars.size(); ++i) {
    double y = 30 + row * static_cast<double>(i), w = hmax > 0 ? (W - L - 60) * bars[i].second / hmax : 0;
    os << "<text x='" << L - 5 << "' y='" << y + 14 << "' text-anchor='end' font-size='11'>" << esc(bars[i].first.substr(0, 38))
       << "</text><rect x='" << L << "' y='" << y + 3 << "' width='" << w << "' height='" << row - 6
       << "' fill='#2ca02c'/><text x='" << L + w + 4 << "' y='" << y + 14 << "' font-size='11'>" << num(bars[i].second, 4)
       << " " << unit << "</text>";
  }
  return os.str() + "</svg>";
}

}  // namespace

Status write_report(const std::string& db_path, const std::string& html_path, std::vector<std::string>* skipped,
                    const ReportVerdict* verdict) {
  TAC_ASSIGN_OR_RETURN(auto db, Database::open(db_path, Database::Mode::read_only));
  std::vector<std::string> left_out;
  TAC_ASSIGN_OR_RETURN(std::vector<CandidateRecord> rows, db->everything(&left_out));
  const std::vector<CandidateRecord> all = usable_candidates(std::move(rows), db_path, left_out);
  if (skipped) skipped->insert(skipped->end(), left_out.begin(), left_out.end());
  std::map<std::string, std::vector<CandidateRecord>> by_model;
  for (const CandidateRecord& r : all) by_model[r.model_hash + " | " + r.device + " | tactician " + r.tool_version].push_back(r);
  std::ostringstream h;
  h << "<!doctype html><html><head><meta charset='utf-8'><title>Tactician tuning report</title><style>"
       "body{font-family:sans-serif;margin:2em;max-width:1150px}table{border-collapse:collapse;font-size:12px}"
       "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}.plots{display:flex;flex-wrap:wrap;gap:12px}"
       "code{font-size:11px}</style></head><body><h1>Tactician tuning report</h1><p>Database <code>"
    << esc(db_path) << "</code>: " << all.size() << " candidates.</p>";
  if (!left_out.empty()) {
    h << "<h2>Rows left out</h2><p>" << left_out.size()
      << " rows of the database cannot be read or make no sense (the file was edited or damaged):</p><ul>";
    for (const std::string& why : left_out) h << "<li><code>" << esc(why) << "</code></li>";
    h << "</ul>";
  }
  for (const auto& [key, recs] : by_model) {
    const CandidateRecord* def = nullptr;
    for (const CandidateRecord& r : recs)
      if (r.strategy == "default" && r.status == "ok") def = &r;
    std::vector<std::pair<double, double>> best_curve, scatter;
    std::vector<std::string> colors;
    double best = INFINITY, t0 = recs.front().unix_time;
    int ok = 0, rejected = 0, failed = 0;
    const CandidateRecord* best_rec = nullptr;
    const CandidateRecord* isolated = nullptr;
    for (const CandidateRecord& r : recs) {
      if (r.status == "ok") {
        ++ok;
        if (r.median_ms < best) {
          best = r.median_ms;
          best_rec = &r;
        }
        // Isolated selection: the tuner's seed (its choices pinned per node), or a searched
        // builder.selection=isolated route without pins.
        const bool iso = r.strategy == "isolated" || is_isolated_selection(r.route);
        if (iso && (!isolated || r.median_ms < isolated->median_ms)) isolated = &r;
      } else if (r.status == "rejected") ++rejected;
      else ++failed;
      if (std::isfinite(best)) best_curve.emplace_back(r.unix_time - t0, best);
      double l2 = first_l2(r.metrics_json);
      if ((r.status == "ok" || r.status == "rejected") && r.median_ms > 0 && std::isfinite(l2)) {
        scatter.emplace_back(std::max(l2, 1e-12), r.median_ms);
        colors.push_back(r.status == "ok" ? "#1f77b4" : "#d62728");
      }
      if (r.status == "rejected" && std::isfinite(l2) && r.median_ms <= 0) {  // rejected before timing
        scatter.emplace_back(std::max(l2, 1e-12), def ? def->median_ms : 1.0);
        colors.push_back("#d62728");
      }
    }
    const ReportVerdict* v = verdict && recs.front().model_hash == verdict->model_hash ? verdict : nullptr;
    h << "<h2>" << esc(key) << "</h2>";
    if (v) {
      h << "<p style='font-size:16px;border:2px solid #2ca02c;padding:8px'><b>The tuner " << esc(v->verdict)
        << ".</b><br>Every accepted candidate kept each output within the tolerance <code>" << esc(v->tolerance)
        << "</code>.</p>";
      if (!v->time.empty()) h << "<p>" << esc(v->time) << "</p>";
      for (const std::string& w : v->warnings)
        h << "<p style='border:2px solid #d62728;padding:6px'><b>Warning:</b> " << esc(w) << "</p>";
    }
    h << "<p>" << recs.size() << " candidates: " << ok << " ok, " << rejected
      << " rejected by the accuracy gate, " << failed << " failed (build, run, crash or timeout).";
    if (def && best_rec)
      h << " In the search's single cheap measurements: default " << num(def->median_ms, 4) << " ms, fastest candidate "
        << num(best, 4) << " ms (" << num(def->median_ms / best, 3) << "x); "
        << (v ? "the verdict above comes from the final interleaved comparison, which decides."
              : "the tuner's final interleaved comparison, which decides, is in its summary.json.");
    h << "</p><div class='plots'>";
    h << svg_plot("best so far", "seconds since the first candidate", "median ms", best_curve, false, true);
    h << svg_plot(v && std::isfinite(v->l2_bound) ? "latency against accuracy (blue ok, red rejected; dashed: the l2 bound)"
                                                 : "latency against accuracy (blue ok, red rejected)",
                  "relative L2 error of output 0 (log)", "median ms", scatter, true, false, colors,
                  v ? v->l2_bound : NAN);
    std::vector<std::pair<std::string, double>> cmp;
    if (def) cmp.emplace_back("default route", def->median_ms);
    if (isolated) cmp.emplace_back("isolated selection", isolated->median_ms);
    if (best_rec) cmp.emplace_back("best found", best_rec->median_ms);
    h << svg_bars("default vs isolated vs tuned", cmp, "ms");
    // Per-knob effect: median latency of ok candidates with knob=value over the default's.
    std::map<std::string, std::vector<double>> with;
    for (const CandidateRecord& r : recs) {
      if (r.status != "ok") continue;
      auto route = builder::Route::parse(r.route);
      if (!route) continue;
      for (const auto& [k, v] : route->values)
        if (k != "threads") with[k + "=" + v].push_back(r.median_ms);
    }
    std::vector<std::pair<std::string, double>> effect;
    for (auto& [kv, v] : with) {
      if (v.size() < 2 || !def) continue;
      std::sort(v.begin(), v.end());
      effect.emplace_back(kv + " (" + std::to_string(v.size()) + ")", def->median_ms / v[v.size() / 2]);
    }
    std::sort(effect.begin(), effect.end(), [](auto& a, auto& b) { return a.second > b.second; });
    if (effect.size() > 16) effect.resize(16);
    h << svg_bars("per-knob effect: default ms / median ms of candidates setting it", effect, "x");
    h << "</div><h3>Fastest candidates</h3><table><tr><th>#</th><th>median ms</th><th>cv</th><th>strategy</th><th>route</th></tr>";
    std::vector<const CandidateRecord*> sorted;
    for (const CandidateRecord& r : recs)
      if (r.status == "ok") sorted.push_back(&r);
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->median_ms < b->median_ms; });
    for (size_t i = 0; i < std::min<size_t>(10, sorted.size()); ++i)
      h << "<tr><td>" << sorted[i]->id << "</td><td>" << num(sorted[i]->median_ms, 4) << "</td><td>" << num(sorted[i]->cv, 2)
        << "</td><td>" << esc(sorted[i]->strategy) << "</td><td><code>" << esc(sorted[i]->route) << "</code></td></tr>";
    h << "</table><h3>Failures</h3><table><tr><th>#</th><th>status</th><th>reason</th><th>route</th></tr>";
    int shown = 0;
    for (const CandidateRecord& r : recs)
      if (r.status != "ok" && shown++ < 20)
        h << "<tr><td>" << r.id << "</td><td>" << esc(r.status) << "</td><td>" << esc(r.reason.substr(0, 200))
          << "</td><td><code>" << esc(r.route.substr(0, 200)) << "</code></td></tr>";
    h << "</table>";
  }
  h << "</body></html>\n";
  std::ofstream out(html_path);
  if (!out) return io_error(html_path + ": cannot write the report");
  out << h.str();
  return out ? Status::ok() : io_error(html_path + ": write failed");
}

}  // namespace tac::tuner
