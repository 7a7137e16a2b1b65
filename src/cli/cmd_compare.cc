// tactician compare MODEL.onnx --a SPEC --b SPEC: two engines (or an engine and the reference
// interpreter) run on the same inputs, their outputs compared with the tuner's metrics
// (tuner/accuracy.h) and judged against a tolerance; exit 1 when an output leaves it.
//
// A side is "default" (the default route), "reference" (the reference interpreter), a .plan file,
// a route file, or route text ("k=v ..."); --a-backend / --b-backend put a built side on cpu or
// cuda (CPU against CUDA: --a default --a-backend cpu --b default --b-backend cuda). The metrics
// are of A against B: B is what the relative norms divide by, as the reference is for the tuner.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "cli/args.h"
#include "cli/engine_args.h"
#include "core/json.h"
#include "io/onnx_import.h"
#include "io/tensor_io.h"
#include "io/test_case.h"
#include "reference/compare.h"
#include "reference/interpreter.h"
#include "tuner/accuracy.h"

namespace tac::cli {

namespace {

// One side of the comparison: what it is, and the arguments engine_from_args reads for it.
struct Side {
  std::string flag;   // "--a" or "--b"
  std::string spec;   // as given
  bool reference = false;
  Args args;          // --plan / --route / --route-file, --backend, and the shared engine flags
  std::string label;  // for the report, filled once the engine exists
  std::unique_ptr<runtime::Engine> engine;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Reads SPEC and --X-backend into `side`; the shared flags come from `args`.
Status parse_side(const Args& args, const std::string& name, const std::string& def, Side& side) {
  side.flag = "--" + name;
  side.spec = args.get(side.flag, def);
  const std::string backend_flag = side.flag + "-backend";
  for (const char* f : {"--threads", "--dim", "--calibration", "--calibration-cache"})
    if (args.has(f)) side.args.values[f] = args.all(f);
  if (args.has(backend_flag)) side.args.values["--backend"] = {args.get(backend_flag)};
  const std::string& s = side.spec;
  if (s == "reference") {
    side.reference = true;
    if (args.has(backend_flag))
      return invalid_argument(backend_flag + ": " + side.flag + " reference runs the reference interpreter on the host");
  } else if (s == "default") {
  } else if (ends_with(s, ".plan")) {
    side.args.values["--plan"] = {s};
  } else if (s.find('=') != std::string::npos) {
    side.args.values["--route"] = {s};
  } else if (std::filesystem::is_regular_file(s)) {
    side.args.values["--route-file"] = {s};
  } else {
    return invalid_argument(side.flag + " '" + s + "': no such file; a side is default, reference, route text "
                            "\"k=v ...\", a route file or a .plan file");
  }
  return Status::ok();
}

// The inputs: --inputs DIR (its test_data_set_*, or DIR as one set), else --input NAME=FILE for
// some and seeded random data (--seed, --dim, else the plans' sizes) for the rest.
Result<std::vector<io::TestDataSet>> gather_inputs(const Args& args, const ir::Model& m,
                                                   std::map<std::string, int64_t> dims, std::string& described) {
  const ir::Graph& g = m.graph;
  if (args.has("--inputs")) {
    if (args.has("--input")) return invalid_argument("--inputs DIR and --input NAME=FILE: give one");
    TAC_ASSIGN_OR_RETURN(std::vector<io::TestDataSet> sets, io::load_data_sets(m, args.get("--inputs")));
    described = std::to_string(sets.size()) + " input set(s) from " + args.get("--inputs");
    return sets;
  }
  std::map<std::string, std::string> given;
  for (const std::string& kv : args.all("--input")) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) return invalid_argument("--input takes NAME=FILE, got '" + kv + "'");
    const std::string name = kv.substr(0, eq);
    bool known = false;
    for (int v : g.inputs) known |= g.values[static_cast<size_t>(v)].name == name;
    if (!known) return invalid_argument("--input " + kv + ": the model has no input named '" + name + "'");
    given[name] = kv.substr(eq + 1);
  }
  TAC_ASSIGN_OR_RETURN(const auto given_dims, dims_from_args(args));
  for (const auto& [sym, n] : given_dims) dims[sym] = n;  // --dim wins over a plan's sizes
  TAC_ASSIGN_OR_RETURN(const uint64_t seed, args.get_uint("--seed", 0));
  std::mt19937_64 rng(seed);
  io::TestDataSet set;
  for (int vid : g.inputs) {
    const ir::Value& v = g.values[static_cast<size_t>(vid)];
    if (auto it = given.find(v.name); it != given.end()) {
      auto d = io::load_datum(it->second, v.type);
      if (!d) return d.status().with_context("input '" + v.name + "': ");
      set.inputs.push_back(std::move(d).value());
    } else {
      TAC_ASSIGN_OR_RETURN(Tensor t, random_tensor(v, dims, rng));
      set.inputs.push_back(Datum(std::move(t)));
    }
  }
  described = given.size() == g.inputs.size() ? "--input files"
              : given.empty()                 ? "seeded random (--seed " + std::to_string(seed) + ")"
                                              : "--input files, the rest seeded random (--seed " + std::to_string(seed) + ")";
  return std::vector<io::TestDataSet>{std::move(set)};
}

// Builds (or loads) a side's engine for the first input set's shapes.
Status prepare_side(Side& side, const ir::Model& m, const std::vector<Datum>& inputs) {
  if (side.reference) {
    side.label = "reference interpreter";
    return Status::ok();
  }
  TAC_ASSIGN_OR_RETURN(builder::BuildOptions opts, build_options_from_args(side.args));
  TAC_RETURN_IF_ERROR(builder::bind_dims(m.graph, inputs, opts));
  TAC_ASSIGN_OR_RETURN(side.engine, engine_from_args(side.args, &m, opts));
  const builder::Plan& p = side.engine->plan();
  side.label = (side.args.has("--plan") ? "plan " + side.args.get("--plan") + ", route " : std::string("route ")) +
               (p.route.empty() ? "(default)" : "'" + p.route + "'") + " on " + kernels::backend_name(p.backend) + ", " +
               std::to_string(p.steps.size()) + " steps, " + std::to_string(p.threads) + " threads";
  return Status::ok();
}

Result<std::vector<Datum>> run_side(Side& side, const ir::Model& m, const std::vector<Datum>& inputs, double& ms) {
  auto t0 = std::chrono::steady_clock::now();
  auto out = side.reference ? ref::run_model(m, inputs) : side.engine->run_values(inputs);
  ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace

int cmd_compare(int argc, char** argv) {
  Args args;
  std::string err;
  const char* help =
      "usage: tactician compare MODEL.onnx [--a SPEC] [--b SPEC] [--a-backend cpu|cuda] [--b-backend cpu|cuda]\n"
      "                         [--tolerance \"cos>=0.999,linf<=1e-2\" | --tolerance-file F]\n"
      "                         [--input NAME=FILE.pb|.npy ... | --inputs DIR] [--seed S] [--dim SYMBOL=N]\n"
      "                         [--output NAME ...] [--threads N] [--json]\n"
      "Runs two engines of MODEL on the same inputs and compares their outputs: per output the max\n"
      "absolute difference (linf), the max relative difference, the relative l1 and l2 norms, the\n"
      "cosine and l0 (the fraction of elements outside atol + rtol*|B|), of A against B, and a\n"
      "verdict against the tolerance. Exit 0 when every output is within it, 1 when one is not.\n"
      "  --a SPEC, --b SPEC     each side: default (the default route), reference (the reference\n"
      "                         interpreter), F.plan (a saved plan of MODEL), a route file, or route\n"
      "                         text \"k=v ...\"; default --a default --b reference\n"
      "  --a-backend, --b-backend cpu|cuda   where a side's engine is built and runs (default: cuda when\n"
      "                         this build has CUDA and a GPU is present); CPU against CUDA:\n"
      "                         --a default --a-backend cpu --b default --b-backend cuda\n"
      "  --tolerance TEXT       the tuner's tolerance language (default: the tuner's fp32 default,\n"
      "                         l2<=1e-5,cos>=0.99999,atol=1e-4,rtol=1e-3)\n"
      "  --inputs DIR           a test_data_set_* folder (input_K.pb), or a folder of them: every set runs\n"
      "  --input NAME=FILE      a graph input from a .pb or .npy file; inputs not given are seeded random\n"
      "                         data (--seed S, default 0; symbolic dims from --dim, else a plan's sizes, else 1)\n"
      "  --output NAME          compare only this output (repeatable; default: every output); a node's\n"
      "                         output that is not a graph output becomes one of both engines, which\n"
      "                         traces a wrong output back to the step that first leaves the tolerance\n"
      "  --threads N            threads of both engines\n"
      "  --json                 the last line of stdout is {\"a\", \"b\", \"tolerance\", \"pass\", \"sets\": [{\"name\",\n"
      "                         \"outputs\": [{\"name\", \"linf\", \"max_rel\", \"l1\", \"l2\", \"cos\", \"l0\", \"finite\",\n"
      "                         \"pass\", \"why\"}]}]} (a non-finite metric is null)\n";
  if (!parse_args(argc, argv, 2,
                  {"--a", "--b", "--a-backend", "--b-backend", "--tolerance", "--tolerance-file", "--input", "--inputs",
                   "--seed", "--dim", "--output", "--threads", "--calibration", "--calibration-cache"},
                  {"--json", "--help"}, args, err) ||
      args.positional.size() != 1 || args.has("--help")) {
    if (!err.empty()) std::fprintf(stderr, "tactician compare: %s\n", err.c_str());
    std::fprintf(args.has("--help") ? stdout : stderr, "%s", help);
    return args.has("--help") ? 0 : 2;
  }
  auto fail = [](const Status& s, int rc) {
    std::fprintf(stderr, "tactician compare: %s\n", s.to_string().c_str());
    return rc;
  };
  auto usage_rc = [](const Status& s) { return s.kind() == ErrorKind::invalid_argument ? 2 : 1; };
  if (ends_with(args.positional[0], ".plan"))
    return fail(invalid_argument(args.positional[0] + ": compare takes MODEL.onnx; give plans as --a / --b"), 2);
  auto tol_arg = tolerance_from_args(args);
  if (!tol_arg) return fail(tol_arg.status(), 2);
  const tuner::Tolerance tol = tol_arg->value_or(tuner::Tolerance::default_fp32());
  Side a, b;
  if (Status s = parse_side(args, "a", "default", a); !s) return fail(s, 2);
  if (Status s = parse_side(args, "b", "reference", b); !s) return fail(s, 2);

  auto model = io::load_model(args.positional[0]);
  if (!model) return fail(model.status(), 1);
  ir::Graph& g = model->graph;
  std::vector<size_t> outputs;  // positions among the graph's outputs
  for (const std::string& name : args.all("--output")) {
    size_t k = 0;
    while (k < g.outputs.size() && g.values[static_cast<size_t>(g.outputs[k])].name != name) ++k;
    if (k == g.outputs.size()) {
      // An intermediate value becomes an output of both engines (polygraphy's --onnx-outputs): how
      // a wrong output is traced back to the step that first leaves the tolerance.
      const int v = g.find_value(name);
      if (v < 0 || g.values[static_cast<size_t>(v)].producer < 0)
        return fail(invalid_argument("--output '" + name + "': " + model->path +
                                     " has no output or node output named so"),
                    2);
      for (const Side* s : {&a, &b})
        if (s->args.has("--plan"))
          return fail(invalid_argument("--output '" + name + "': not an output of " + model->path + ", and " + s->flag +
                                       " is a saved plan, whose outputs are fixed"),
                      2);
      g.outputs.push_back(v);
    }
    outputs.push_back(k);
  }
  if (outputs.empty())
    for (size_t k = 0; k < g.outputs.size(); ++k) outputs.push_back(k);
  if (a.reference || b.reference) {
    auto missing = ref::unsupported_nodes(g);
    if (!missing.empty())
      return fail(unsupported(model->path + ": the reference interpreter does not support " + missing[0]->label()), 1);
  }

  // Random inputs take a plan's sizes for its symbolic dims (--dim still wins): its shapes are fixed.
  std::map<std::string, int64_t> dims;
  for (Side* s : {&a, &b})
    if (s->args.has("--plan")) {
      auto plan = plan_from_args(s->args, &*model);
      if (!plan) return fail(plan.status().with_context(s->flag + " '" + s->spec + "': "), usage_rc(plan.status()));
      for (const auto& [sym, n] : plan->dims) dims.emplace(sym, n);
    }
  std::string described;
  auto sets = gather_inputs(args, *model, dims, described);
  if (!sets) return fail(sets.status(), usage_rc(sets.status()));
  if (sets->empty()) return fail(invalid_argument(args.get("--inputs") + ": no input sets"), 2);
  for (Side* s : {&a, &b})
    if (Status st = prepare_side(*s, *model, sets->front().inputs); !st)
      return fail(st.with_context(s->flag + " '" + s->spec + "': "), usage_rc(st));

  std::printf("A: %s\nB: %s\ninputs: %s\ntolerance: %s (metrics of A against B)\n", a.label.c_str(), b.label.c_str(),
              described.c_str(), tol.to_string().c_str());
  bool all_pass = true;
  std::string first_failure;
  nlohmann::ordered_json json_sets = nlohmann::ordered_json::array();
  for (size_t si = 0; si < sets->size(); ++si) {
    const io::TestDataSet& set = (*sets)[si];
    // Sets from --inputs are named by their folder; the one set of --input / random data is not.
    const std::string set_name = set.dir.empty() ? "" : std::filesystem::path(set.dir).filename().string();
    const std::string where = set_name.empty() ? "" : " on " + set_name;
    double ms_a = 0, ms_b = 0;
    auto out_a = run_side(a, *model, set.inputs, ms_a);
    if (!out_a) return fail(out_a.status().with_context("A (" + a.spec + ")" + where + ": "), 1);
    auto out_b = run_side(b, *model, set.inputs, ms_b);
    if (!out_b) return fail(out_b.status().with_context("B (" + b.spec + ")" + where + ": "), 1);
    std::printf("\n%s%sA ran in %.2f ms, B in %.2f ms (one run each)\n", set_name.c_str(), set_name.empty() ? "" : ": ",
                ms_a, ms_b);
    std::printf("  %-24s %-22s %10s %10s %10s %10s %12s %10s  %s\n", "output", "type", "max_abs", "max_rel", "l1", "l2", "cos",
                "l0", "verdict");
    nlohmann::ordered_json json_outs = nlohmann::ordered_json::array();
    for (size_t k : outputs) {
      const std::string& name = g.values[static_cast<size_t>(g.outputs[k])].name;
      const Datum& da = (*out_a)[k];
      const Datum& db = (*out_b)[k];
      std::optional<tuner::Metrics> m;
      double max_rel = 0;
      std::string why, type;
      if (da.kind == Datum::Kind::tensor && db.kind == Datum::Kind::tensor) {
        type = dtype_name(da.tensor.dtype()) + shape_to_string(da.tensor.shape());
        auto mr = tuner::compute_metrics(da.tensor, db.tensor, tol.atol, tol.rtol);
        if (!mr) {
          why = mr.status().message();
        } else {
          m = *mr;
          auto rel = tuner::max_relative_diff(da.tensor, db.tensor);  // same dtype and shape: cannot fail
          max_rel = rel ? *rel : 0;
          why = tuner::check_tolerance(tol, {*m});
          if (why.rfind("output 0: ", 0) == 0) why = why.substr(10);
        }
      } else {
        // Sequences and optionals have no metrics: elementwise, with the tolerance's atol and rtol.
        type = da.kind == Datum::Kind::sequence ? "sequence" : da.kind == Datum::Kind::tensor ? "tensor" : "optional";
        why = ref::compare_datum(da, db, ref::Tolerance{tol.rtol, tol.atol});
      }
      const bool pass = why.empty();
      if (!pass) {
        all_pass = false;
        if (first_failure.empty()) first_failure = set_name + (set_name.empty() ? "" : " ") + "output '" + name + "': " + why;
      }
      if (m)
        std::printf("  %-24s %-22s %10s %10s %10s %10s %12.8f %10s  %s\n", name.c_str(), type.c_str(), num(m->linf).c_str(),
                    num(max_rel).c_str(), num(m->l1).c_str(), num(m->l2).c_str(), m->cos, num(m->l0).c_str(),
                    pass ? "PASS" : ("FAIL: " + why).c_str());
      else
        std::printf("  %-24s %-22s %10s %10s %10s %10s %12s %10s  %s\n", name.c_str(), type.c_str(), "-", "-", "-", "-", "-",
                    "-", pass ? "PASS" : ("FAIL: " + why).c_str());
      // A non-finite metric (JSON has none) is written as null.
      nlohmann::ordered_json out = {{"name", name}};
      if (m) {
        out["linf"] = rounded(m->linf);
        out["max_rel"] = rounded(max_rel);
        out["l1"] = rounded(m->l1);
        out["l2"] = rounded(m->l2);
        out["cos"] = rounded(m->cos);
        out["l0"] = rounded(m->l0);
        out["finite"] = m->finite;
      }
      out["pass"] = pass;
      out["why"] = why;
      json_outs.push_back(std::move(out));
    }
    json_sets.push_back({{"name", set_name.empty() ? "inputs" : set_name}, {"outputs", std::move(json_outs)}});
  }
  if (all_pass)
    std::printf("\nPASS: every compared output of A is within the tolerance of B\n");
  else
    std::printf("\nFAIL: %s\n", first_failure.c_str());
  if (args.has("--json")) {
    const nlohmann::ordered_json j = {
        {"a", a.label}, {"b", b.label}, {"tolerance", tol.to_string()}, {"pass", all_pass}, {"sets", json_sets}};
    std::printf("%s\n", dump_json(j).c_str());
  }
  return all_pass ? 0 : 1;
}

}  // namespace tac::cli
