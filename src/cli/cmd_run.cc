// tactician run MODEL.onnx [--input NAME=FILE]... [--random-inputs] --output-dir DIR
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>

#include "builder/plan_file.h"
#include "cli/args.h"
#include "cli/engine_args.h"
#include "io/onnx_import.h"
#include "io/tensor_io.h"
#include "reference/interpreter.h"

namespace tac::cli {

namespace {

std::string file_name_for(const std::string& value_name) {
  std::string s;
  for (char c : value_name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return s.empty() ? "output" : s;
}

}  // namespace

int cmd_run(int argc, char** argv) {
  Args args;
  std::string err;
  const char* help =
      "usage: tactician run MODEL.onnx|MODEL.plan [--input NAME=FILE.pb|FILE.npy]... [--random-inputs [--seed S]\n"
      "                     [--dim SYMBOL=N]...] [--output-dir DIR [--format pb|npy]]\n"
      "                     [--plan F.plan | --route \"k=v ...\" | --route-file F | --reference] [--threads N]\n"
      "Runs the model and writes every output to DIR as <output name>.pb (ONNX TensorProto) or .npy.\n"
      "The engine is built for the default route unless --route/--route-file say otherwise, or\n"
      "loaded with --plan (or given as MODEL.plan, alone: inputs and outputs are the plan's, random inputs\n"
      "take the sizes it was built for); --reference runs the reference interpreter instead.\n"
      "  --input NAME=FILE   a graph input from a .pb (TensorProto) or .npy file\n"
      "  --random-inputs     fill inputs not given with seeded random data of the declared type/shape\n"
      "  --seed S            seed for --random-inputs (default 0)\n"
      "  --dim SYMBOL=N      value of a symbolic dimension for random inputs (default 1)\n"
      "  --backend cuda|cpu     where the engine runs (default: cuda when this build has CUDA and a GPU is present)\n";
  std::set<std::string> flags = kEngineFlags;
  for (const char* f : {"--input", "--output-dir", "--format", "--seed"}) flags.insert(f);
  if (!parse_args(argc, argv, 2, flags, {"--random-inputs", "--reference", "--help"}, args, err) ||
      args.positional.size() != 1 || args.has("--help")) {
    if (!err.empty()) std::fprintf(stderr, "tactician run: %s\n", err.c_str());
    std::fprintf(args.has("--help") ? stdout : stderr, "%s", help);
    return args.has("--help") ? 0 : 2;
  }
  std::string format = args.get("--format", "pb");
  if (format != "pb" && format != "npy") {
    std::fprintf(stderr, "tactician run: --format must be pb or npy, got '%s'\n", format.c_str());
    return 2;
  }
  // MODEL.plan alone: the plan carries its graph (after passes; inputs and outputs unchanged).
  std::optional<builder::Plan> plan;
  Result<ir::Model> loaded = ir::Model{};
  const std::string& path = args.positional[0];
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".plan") == 0) {
    if (args.has("--plan") || args.has("--reference")) {
      std::fprintf(stderr, "tactician run: %s is a plan: --%s needs MODEL.onnx\n", path.c_str(),
                   args.has("--plan") ? "plan" : "reference");
      return 2;
    }
    args.values["--plan"] = {path};
    auto p = plan_from_args(args, nullptr);
    if (!p) {
      std::fprintf(stderr, "tactician run: %s\n", p.status().to_string().c_str());
      return p.status().kind() == ErrorKind::invalid_argument ? 2 : 1;
    }
    plan = std::move(p).value();
  } else {
    loaded = io::load_model(path);
    if (!loaded) {
      std::fprintf(stderr, "tactician run: %s\n", loaded.status().to_string().c_str());
      return 1;
    }
  }
  const ir::Model& m = plan ? plan->model : *loaded;
  const ir::Graph& g = m.graph;  // a plan's moves into its engine below: read what is needed first
  std::vector<std::string> output_names;
  for (int v : g.outputs) output_names.push_back(g.values[static_cast<size_t>(v)].name);

  std::map<std::string, std::string> given;
  for (const std::string& kv : args.all("--input")) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "tactician run: --input takes NAME=FILE, got '%s'\n", kv.c_str());
      return 2;
    }
    std::string name = kv.substr(0, eq);
    bool known = false;
    for (int v : g.inputs) known |= g.values[static_cast<size_t>(v)].name == name;
    if (!known) {
      std::fprintf(stderr, "tactician run: the model has no input named '%s'\n", name.c_str());
      return 2;
    }
    given[name] = kv.substr(eq + 1);
  }
  auto given_dims = dims_from_args(args);
  if (!given_dims) {
    std::fprintf(stderr, "tactician run: %s\n", given_dims.status().message().c_str());
    return 2;
  }
  std::map<std::string, int64_t> dims = std::move(given_dims).value();
  if (plan)
    for (const auto& [sym, n] : plan->dims) dims.emplace(sym, n);  // the sizes it was built for
  const auto seed = args.get_uint("--seed", 0);
  if (!seed) return usage_error("run", seed.status());
  std::mt19937_64 rng(*seed);
  std::vector<Datum> inputs;
  for (int vid : g.inputs) {
    const ir::Value& v = g.values[static_cast<size_t>(vid)];
    if (auto it = given.find(v.name); it != given.end()) {
      auto d = io::load_datum(it->second, v.type);
      if (!d) {
        std::fprintf(stderr, "tactician run: input '%s': %s\n", v.name.c_str(), d.status().to_string().c_str());
        return 1;
      }
      inputs.push_back(std::move(d).value());
    } else if (args.has("--random-inputs")) {
      auto t = random_tensor(v, dims, rng);
      if (!t) {
        std::fprintf(stderr, "tactician run: %s\n", t.status().to_string().c_str());
        return 1;
      }
      inputs.push_back(Datum(std::move(t).value()));
    } else {
      std::fprintf(stderr, "tactician run: input '%s' (%s) is not given; use --input %s=FILE or --random-inputs\n",
                   v.name.c_str(), v.type.to_string().c_str(), v.name.c_str());
      return 2;
    }
  }
  Result<std::vector<Datum>> outs = std::vector<Datum>{};
  double ms = 0;
  if (args.has("--reference")) {
    if (args.has("--plan") || args.has("--route") || args.has("--route-file")) {
      std::fprintf(stderr, "tactician run: --reference runs the interpreter: --plan/--route do not apply\n");
      return 2;
    }
    auto t0 = std::chrono::steady_clock::now();
    outs = ref::run_model(m, inputs);
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!outs) {
      std::fprintf(stderr, "tactician run: %s\n", outs.status().to_string().c_str());
      return 1;
    }
    std::printf("ran %s with the reference interpreter in %.1f ms\n", m.path.c_str(), ms);
  } else {
    if (Status ok = ref::check_inputs(g, inputs); !ok) {
      std::fprintf(stderr, "tactician run: %s\n", ok.to_string().c_str());
      return 2;
    }
    builder::BuildOptions opts;
    opts.dims = dims;
    if (!args.has("--plan")) {
      auto backend = backend_from_args(args);
      if (!backend) {
        std::fprintf(stderr, "tactician run: %s\n", backend.status().to_string().c_str());
        return 2;
      }
      opts.backend = *backend;
    }
    opts.calibration_dir = args.get("--calibration");
    opts.calibration_cache = args.get("--calibration-cache");
    Status bound = builder::bind_dims(g, inputs, opts);
    if (!bound) {
      std::fprintf(stderr, "tactician run: %s\n", bound.to_string().c_str());
      return 2;
    }
    auto engine = plan ? runtime::Engine::create(std::move(*plan)) : engine_from_args(args, &m, opts);
    if (!engine) {
      std::fprintf(stderr, "tactician run: %s\n", engine.status().to_string().c_str());
      return engine.status().kind() == ErrorKind::invalid_argument ? 2 : 1;
    }
    auto t0 = std::chrono::steady_clock::now();
    auto r = (*engine)->run_values(inputs);
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!r) {
      std::fprintf(stderr, "tactician run: %s\n", r.status().to_string().c_str());
      return 1;
    }
    outs = std::move(r).value();
    std::printf("ran %s with a built engine (%zu steps, route: %s) in %.1f ms\n", path.c_str(),
                (*engine)->plan().steps.size(), (*engine)->plan().route.empty() ? "default" : (*engine)->plan().route.c_str(), ms);
  }
  std::string dir = args.get("--output-dir");
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      std::fprintf(stderr, "tactician run: cannot create %s: %s\n", dir.c_str(), ec.message().c_str());
      return 1;
    }
  }
  for (size_t i = 0; i < outs->size(); ++i) {
    const std::string& name = output_names.at(i);
    const Datum& d = (*outs)[i];
    if (d.kind != Datum::Kind::tensor) {
      std::printf("  %-24s %s\n", name.c_str(), d.kind == Datum::Kind::sequence ? "sequence" : "empty optional");
      continue;
    }
    const Tensor& t = d.tensor;
    std::printf("  %-24s %s%s", name.c_str(), dtype_name(t.dtype()).c_str(), shape_to_string(t.shape()).c_str());
    for (int64_t k = 0; k < std::min<int64_t>(t.numel(), 5); ++k) std::printf(" %.6g", t.get_f64(k));
    std::printf(t.numel() > 5 ? " ...\n" : "\n");
    if (dir.empty()) continue;
    std::string path = dir + "/" + file_name_for(name) + "." + format;
    Status st = format == "pb" ? io::save_tensor_pb(t, name, path) : io::save_npy(t, path);
    if (!st) {
      std::fprintf(stderr, "tactician run: %s\n", st.to_string().c_str());
      return 1;
    }
  }
  if (!dir.empty()) std::printf("outputs written to %s\n", dir.c_str());
  return 0;
}

}  // namespace tac::cli
