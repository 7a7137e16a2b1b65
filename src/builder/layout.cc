#include "builder/layout.h"

#include <algorithm>
#include <set>

#include "builder/builder.h"
#include "kernels/tactic.h"

namespace tac::builder {

namespace {

using ir::Layout;
using ir::OpKind;

const ir::Value& value(const ir::Graph& g, int v) { return g.values[static_cast<size_t>(v)]; }
bool is_const(const ir::Graph& g, int v) { return v != ir::kNoValue && value(g, v).initializer.has_value(); }
bool is_conv(const ir::Node& n) { return n.op == OpKind::Conv || n.op == OpKind::FusedConv; }

// A 4-D float activation of known shape the backend's layouts take: fp32 and bf16 (CUDA: fp16 too).
bool float_rank4(const ir::Graph& g, int v, kernels::Backend b) {
  if (v == ir::kNoValue) return false;
  const ir::ValueType& t = value(g, v).type;
  const bool dtype_ok = t.dtype == DType::float32 || t.dtype == DType::bfloat16 ||
                        (b == kernels::Backend::cuda && t.dtype == DType::float16);
  if (t.kind != ir::ValueKind::tensor || !dtype_ok || !t.has_shape || t.dims.size() != 4) return false;
  for (const ir::Dim& d : t.dims)
    if (!d.known() || d.value <= 0) return false;
  return true;
}

Result<Layout> layout_of_value(const std::string& knob, const std::string& v, kernels::Backend b) {
  if (v == "nchw") return Layout::nchw;
  if (v == "nhwc") return Layout::nhwc;
  if (v == "blocked" && b == kernels::Backend::cpu) return blocked_layout();
  if (v == "blocked") return invalid_argument("route: " + knob + "=blocked: blocked layouts are the CPU's; cuda takes nchw or nhwc");
  return invalid_argument("route: " + knob + "=" + v + ": expected nchw, nhwc or blocked");
}

// Ops other than convolutions that some layout tactic may run in nhwc / blocked.
bool layout_op(const ir::Node& n, kernels::Backend b) {
  if (!n.domain.empty() && n.domain != ir::kInternalDomain) return false;
  if (is_conv(n) || n.op == OpKind::Reformat) return false;
  for (const kernels::Tactic* t : kernels::tactics_for(n.op, b))
    if (t->layouts) return true;
  return false;
}

// Whether some layout tactic (or `pinned`, when given) runs `n` reading its inputs in `in` and
// writing `out` (only output 0 may be non-nchw).
bool runs_in(const ir::Graph& g, const ir::Node& n, const std::vector<Layout>& in, Layout out, int threads,
             const kernels::Tactic* pinned, kernels::Backend b) {
  kernels::StepDesc s = step_desc(g, n, n.inputs, threads);
  s.in_layouts = in;
  s.out_layouts.assign(n.outputs.size(), Layout::nchw);
  if (!s.out_layouts.empty()) s.out_layouts[0] = out;
  if (pinned) return pinned->layouts && pinned->applies(s).is_ok();
  for (const kernels::Tactic* t : kernels::tactics_for(n.op, b))
    if (t->layouts && t->applies(s).is_ok()) return true;
  return false;
}

// Per node: the layout of its output 0 and the layout it reads each input in.
struct Assignment {
  std::vector<Layout> out;
  std::vector<std::vector<Layout>> in;
};

// `target`: per node, the layout a convolution should run in (nchw for the rest). Pure: the
// graph is only read.
Assignment assign(const ir::Graph& g, const std::vector<Layout>& target, const std::vector<const kernels::Tactic*>& pinned,
                  int threads, kernels::Backend b) {
  Assignment a;
  a.out.assign(g.nodes.size(), Layout::nchw);
  a.in.resize(g.nodes.size());
  std::vector<Layout> cur(g.values.size(), Layout::nchw);  // layout each value is produced in
  for (const ir::Node& n : g.nodes) {
    const size_t i = static_cast<size_t>(n.index);
    std::vector<Layout>& in = a.in[i];
    in.assign(n.inputs.size(), Layout::nchw);
    auto cur_of = [&](int v) { return v == ir::kNoValue ? Layout::nchw : cur[static_cast<size_t>(v)]; };
    Layout out = Layout::nchw;
    if (target[i] != Layout::nchw) {
      const Layout L = target[i];
      const int x = n.inputs[0];
      const int64_t c = value(g, x).type.dims[1].value;
      // CPU: a plain input of few channels is read as it is (oneDNN's first-layer kernels).
      in[0] = b == kernels::Backend::cpu && cur_of(x) == Layout::nchw && c < 8 ? Layout::nchw : L;
      if (n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue) in[3] = L;
      if (runs_in(g, n, in, L, threads, pinned[i], b)) out = L;
      else in.assign(n.inputs.size(), Layout::nchw);
    } else if (layout_op(n, b) && n.outputs.size() >= 1 && float_rank4(g, n.outputs[0], b)) {
      // The layout most activation inputs are in, if it costs no more reformats than nchw.
      std::map<Layout, int> count;
      int acts = 0;
      for (int v : n.inputs)
        if (v != ir::kNoValue && !is_const(g, v)) {
          ++acts;
          ++count[cur_of(v)];
        }
      Layout best = Layout::nchw;
      int best_n = 0;
      for (const auto& [l, k] : count)
        if (l != Layout::nchw && k > best_n) best = l, best_n = k;
      if (best != Layout::nchw && acts - best_n <= acts - count[Layout::nchw]) {
        // First reading every input as it is (a squeeze-excitation scale stays plain), then
        // every activation in `best`.
        std::vector<Layout> as_is(n.inputs.size(), Layout::nchw), try_in(n.inputs.size(), Layout::nchw);
        for (size_t k = 0; k < n.inputs.size(); ++k)
          if (n.inputs[k] != ir::kNoValue && !is_const(g, n.inputs[k])) {
            as_is[k] = cur_of(n.inputs[k]);
            try_in[k] = best;
          }
        if (as_is != try_in && runs_in(g, n, as_is, best, threads, pinned[i], b)) {
          in = as_is;
          out = best;
        } else if (runs_in(g, n, try_in, best, threads, pinned[i], b)) {
          in = try_in;
          out = best;
        }
      }
    }
    a.out[i] = out;
    if (!n.outputs.empty() && n.outputs[0] != ir::kNoValue) cur[static_cast<size_t>(n.outputs[0])] = out;
  }
  return a;
}

// Whether conv `n`'s output, followed through the ops that keep its layout (pools, Concats,
// elementwise), reaches another convolution in that layout without a Reformat.
bool reaches_conv_in_layout(const ir::Graph& g, const std::vector<std::vector<int>>& users, const Assignment& a,
                            const std::vector<Layout>& target, const ir::Node& n) {
  const Layout l = a.out[static_cast<size_t>(n.index)];
  std::vector<int> todo = {n.outputs[0]};
  std::set<int> seen;
  while (!todo.empty()) {
    const int y = todo.back();
    todo.pop_back();
    if (!seen.insert(y).second) continue;
    for (int u : users[static_cast<size_t>(y)]) {
      const ir::Node& c = g.nodes[static_cast<size_t>(u)];
      bool reads_l = false;
      for (size_t k = 0; k < c.inputs.size(); ++k) reads_l |= c.inputs[k] == y && a.in[static_cast<size_t>(u)][k] == l;
      if (!reads_l || a.out[static_cast<size_t>(u)] != l) continue;
      if (is_conv(c) && target[static_cast<size_t>(u)] != Layout::nchw) return true;
      if (!c.outputs.empty() && c.outputs[0] != ir::kNoValue) todo.push_back(c.outputs[0]);
    }
  }
  return false;
}

}  // namespace

std::vector<std::string> layout_values(kernels::Backend backend) {
  if (backend == kernels::Backend::cuda) return {"nchw", "nhwc"};
  return {"nchw", "nhwc", "blocked"};
}

// nhwc on both: CPU 0.59-0.90 of nchw's time on the zoo CNNs (bench/results/layout-cpu-*); CUDA
// fp16 ResNet-50 0.639 -> 0.447 ms at batch 1, 3.994 -> 3.281 at batch 32 on an H200 (cuDNN's
// tensor-core kernels read nhwc natively; bench/results/cuda-2026-12-03-nhwc.md).
std::string default_layout(kernels::Backend backend) {
  (void)backend;
  return "nhwc";
}

Layout blocked_layout() { return kernels::cpu_features().avx512 ? Layout::nchw16c : Layout::nchw8c; }

bool layout_candidate(const ir::Graph& g, const ir::Node& n, kernels::Backend backend) {
  if (!is_conv(n) || n.inputs.size() < 2 || n.outputs.empty()) return false;
  if (n.attr("x_scale")) return false;  // int8 (precision rewrite)
  return float_rank4(g, n.inputs[0], backend) && float_rank4(g, n.outputs[0], backend) && is_const(g, n.inputs[1]);
}

namespace {

// What the route asks of each node: the layout it should run in (convolutions and the layout
// candidates), whether layout.<node> set it, and a pinned tactic.
struct Targets {
  std::vector<Layout> layout;
  std::vector<bool> pinned_layout;
  std::vector<const kernels::Tactic*> pinned_tactic;
  bool any = false;  // some node leaves nchw
};
Result<Targets> layout_targets(const ir::Graph& g, const RouteView& route, Layout def, LayoutReport* report,
                               kernels::Backend backend) {
  Targets t{std::vector<Layout>(g.nodes.size(), Layout::nchw), std::vector<bool>(g.nodes.size(), false),
            std::vector<const kernels::Tactic*>(g.nodes.size(), nullptr)};
  for (const ir::Node& n : g.nodes) {
    const size_t i = static_cast<size_t>(n.index);
    for (const auto& [k, a] : n.attrs)
      if (a.g || !a.graphs.empty()) {  // subgraphs read outer values: all stays nchw
        t.any = false;
        return t;
      }
    const std::string knob = "layout." + n.name, v = route.get_node(knob::kLayout, n.name);
    const bool explicit_layout = !v.empty() && v != "default";
    // A pinned tactic decides whether its node can follow a layout (pools, Concats and
    // elementwise ops too: a pin on a tactic that reads nchw only keeps the node nchw).
    const std::string tactic = route.get_node(knob::kTactic, n.name);
    if (!tactic.empty() && tactic != "auto") t.pinned_tactic[i] = kernels::find_tactic(n.op, tactic, backend);
    if (!layout_candidate(g, n, backend)) {
      if (!explicit_layout || v == "nchw") continue;
      // The precision rewrite made it int8: precision.<node> wins.
      if (!(is_conv(n) && n.attr("x_scale")))
        return invalid_argument("route: " + knob + "=" + v + ": " + n.label() +
                                " cannot change layout (layouts apply to 2-D " +
                                (backend == kernels::Backend::cpu ? "fp32/bf16" : "fp32/fp16/bf16") +
                                " convolutions with constant weights)");
      report->log.push_back("layout: " + n.name + " stays nchw: it computes in int8 (precision.*)");
      continue;
    }
    Layout l = def;
    if (explicit_layout) {
      TAC_ASSIGN_OR_RETURN(l, layout_of_value(knob, v, backend));
    }
    if (l != Layout::nchw && t.pinned_tactic[i] && !t.pinned_tactic[i]->layouts) {
      report->log.push_back("layout: " + n.name + " stays nchw: tactic." + n.name + "=" + tactic + " reads nchw only");
      l = Layout::nchw;
    }
    t.layout[i] = l;
    t.pinned_layout[i] = explicit_layout;
    t.any |= l != Layout::nchw;
  }
  return t;
}

// The assignment of layouts to every node; a default-layout convolution that enters the layout
// while no convolution after it reads it goes back to nchw (repeated until nothing changes).
Assignment settle(const ir::Graph& g, Targets& t, int threads, LayoutReport* report, kernels::Backend backend) {
  const std::vector<std::vector<int>> users = g.consumers();
  std::vector<int> producer(g.values.size(), -1);
  for (const ir::Node& n : g.nodes)
    if (!n.outputs.empty() && n.outputs[0] != ir::kNoValue) producer[static_cast<size_t>(n.outputs[0])] = n.index;
  Assignment a;
  for (size_t round = 0; round <= g.nodes.size(); ++round) {
    a = assign(g, t.layout, t.pinned_tactic, threads, backend);
    bool changed = false;
    for (const ir::Node& n : g.nodes) {
      const size_t i = static_cast<size_t>(n.index);
      if (t.layout[i] == Layout::nchw || t.pinned_layout[i] || a.out[i] == Layout::nchw) continue;
      const int p = producer[static_cast<size_t>(n.inputs[0])];
      const Layout x_layout = p >= 0 ? a.out[static_cast<size_t>(p)] : Layout::nchw;
      const bool reformat_in = a.in[i][0] != x_layout;
      // It enters the layout here (its input read in another) and no convolution after it
      // reads the layout: the layout buys Reformats and no convolution in it but this one.
      const bool enters = reformat_in || a.in[i][0] != a.out[i];
      if (enters && !reaches_conv_in_layout(g, users, a, t.layout, n)) {
        t.layout[i] = Layout::nchw;
        changed = true;
        report->log.push_back("layout: " + n.name + " stays nchw (it enters the layout and no convolution after it reads it)");
      }
    }
    if (!changed) break;
  }
  return a;
}

// The graph rewritten to an assignment: each node reads its inputs in the layouts it was
// assigned (a Reformat of a value made once per layout) and writes output 0 in its own; graph
// outputs stay nchw (the node writes a new value, a Reformat writes the output).
class Rewriter {
 public:
  Rewriter(ir::Graph& g, LayoutReport* report) : g_(g), report_(report), held_(g.values.size()) {
    for (size_t v = 0; v < g.values.size(); ++v) held_[v][Layout::nchw] = static_cast<int>(v);
    for (const ir::Node& n : g.nodes) node_names_.insert(n.name);
  }

  Status run(const Assignment& a, Layout def) {
    std::vector<bool> graph_output(g_.values.size(), false);
    for (int v : g_.outputs) graph_output[static_cast<size_t>(v)] = true;
    std::map<std::string, int> moved;
    for (size_t i = 0, n_nodes = g_.nodes.size(); i < n_nodes; ++i) {
      for (size_t k = 0; k < g_.nodes[i].inputs.size(); ++k) {
        const int v = g_.nodes[i].inputs[k];
        if (v != ir::kNoValue && !is_const(g_, v)) g_.nodes[i].inputs[k] = in_layout(v, a.in[i][k]);
      }
      const Layout l = a.out[i];
      const int y = g_.nodes[i].outputs.empty() ? ir::kNoValue : g_.nodes[i].outputs[0];
      if (l == Layout::nchw || y == ir::kNoValue) continue;
      ++moved[std::string(g_.nodes[i].op_type)];
      report_->nodes.push_back(g_.nodes[i].name + ": " + ir::layout_name(l));
      held_[static_cast<size_t>(y)].clear();
      if (graph_output[static_cast<size_t>(y)]) {
        const int y2 = new_value(y, value(g_, y).name + "." + ir::layout_name(l), l);
        g_.nodes[i].outputs[0] = y2;
        reformat(y2, l, y, Layout::nchw);
        held_[static_cast<size_t>(y)][l] = y2;
        held_[static_cast<size_t>(y)][Layout::nchw] = y;
      } else {
        g_.values[static_cast<size_t>(y)].layout = l;
        held_[static_cast<size_t>(y)][l] = y;
      }
    }
    for (ir::Node& r : added_) {
      r.index = static_cast<int>(g_.nodes.size());
      g_.nodes.push_back(std::move(r));
    }
    TAC_RETURN_IF_ERROR(g_.sort_topologically());
    std::string line = "layout:";
    for (const auto& [op, k] : moved) line += " " + std::to_string(k) + " " + op;
    report_->log.push_back(line + " off nchw (layout.default=" + ir::layout_name(def) + "); " +
                           std::to_string(report_->reformats) + " reformats");
    return Status::ok();
  }

 private:
  std::string unique_node(const std::string& base) {
    std::string s = base;
    for (int k = 2; node_names_.count(s); ++k) s = base + "_" + std::to_string(k);
    node_names_.insert(s);
    return s;
  }
  int new_value(int like, const std::string& base, Layout l) {
    std::string name = base;
    for (int k = 2; g_.find_value(name) != ir::kNoValue; ++k) name = base + "_" + std::to_string(k);
    const ir::ValueType t = value(g_, like).type;  // copy first: get_or_add_value grows g.values
    const int v = g_.get_or_add_value(name);
    g_.values[static_cast<size_t>(v)].type = t;
    g_.values[static_cast<size_t>(v)].layout = l;
    held_.resize(g_.values.size());
    return v;
  }
  void reformat(int src, Layout from, int dst, Layout to) {
    ir::Node r;
    r.name = unique_node(value(g_, src).name + ".to_" + ir::layout_name(to));
    r.op = OpKind::Reformat;
    r.op_type = ir::op_name(OpKind::Reformat);
    r.domain = ir::kInternalDomain;
    r.opset = 1;
    r.inputs = {src};
    r.outputs = {dst};
    for (const auto& [key, l] : {std::pair{"from", from}, std::pair{"to", to}}) {
      ir::Attribute at;
      at.type = ir::Attribute::Type::s;
      at.s = ir::layout_name(l);
      r.attrs[key] = at;
    }
    added_.push_back(std::move(r));
    ++report_->reformats;
  }
  // The value holding `v` in layout `l` (a Reformat of it, made once).
  int in_layout(int v, Layout l) {
    std::map<Layout, int>& h = held_[static_cast<size_t>(v)];
    if (auto it = h.find(l); it != h.end()) return it->second;
    const auto [from, src] = *h.begin();  // every value is held in exactly one layout before this
    const int dst = new_value(v, value(g_, v).name + "." + ir::layout_name(l), l);
    reformat(src, from, dst, l);
    held_[static_cast<size_t>(v)][l] = dst;
    return dst;
  }

  ir::Graph& g_;
  LayoutReport* report_;
  std::vector<std::map<Layout, int>> held_;  // per value, the value holding it in each layout made so far
  std::vector<ir::Node> added_;
  std::set<std::string> node_names_;
};

}  // namespace

Status apply_layouts(ir::Model& m, const RouteView& route, int threads, LayoutReport* report, kernels::Backend backend) {
  ir::Graph& g = m.graph;
  LayoutReport local;
  if (!report) report = &local;
  const std::string def_text = route.get(knob::kLayoutDefault);
  TAC_ASSIGN_OR_RETURN(const Layout def, layout_of_value("layout.default", def_text.empty() ? "nchw" : def_text, backend));
  TAC_ASSIGN_OR_RETURN(Targets t, layout_targets(g, route, def, report, backend));
  if (!t.any) return Status::ok();
  const Assignment a = settle(g, t, threads, report, backend);
  for (const ir::Node& n : g.nodes) {
    const size_t i = static_cast<size_t>(n.index);
    if (t.pinned_layout[i] && t.layout[i] != Layout::nchw && a.out[i] != t.layout[i])
      return invalid_argument("route: layout." + n.name + "=" + route.get_node(knob::kLayout, n.name) + ": " + n.label() +
                              " has no tactic in that layout here");
  }
  return Rewriter(g, report).run(a, def);
}

}  // namespace tac::builder
