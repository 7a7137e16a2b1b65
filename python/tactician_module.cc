// `import tactician`: the public C++ API (include/tactician/tactician.h) for Python, over NumPy.
//
//   import numpy as np, tactician
//   engine = tactician.build("model.onnx", route="precision.default=bf16")
//   out = engine.run({"input": np.random.rand(1, 3, 224, 224).astype(np.float32)})
//
// Inputs that are C-contiguous arrays of the engine's dtype are read in place (no copy); outputs
// are arrays over the engine's result tensors (no copy). Errors raise tactician.Error (a
// RuntimeError) carrying the command line's message and the error kind. Builds, runs and tunes
// release the GIL.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <tactician/tactician.h>

namespace py = pybind11;

namespace {

PyObject* g_error = nullptr;  // tactician.Error (the module holds the reference)

// Raises tactician.Error with the command line's message ("<kind>: <message>") and `.kind`.
[[noreturn]] void raise(const tac::Status& s) {
  py::object e = py::reinterpret_borrow<py::object>(g_error)(s.to_string());
  e.attr("kind") = py::str(tac::error_kind_name(s.kind()));
  PyErr_SetObject(g_error, e.ptr());
  throw py::error_already_set();
}

void raise_if_error(const tac::Status& s) {
  if (!s.is_ok()) raise(s);
}

template <class T>
T value_or_raise(tac::Result<T> r) {
  if (!r.is_ok()) raise(r.status());
  return std::move(r).value();
}

// NumPy's spelling of a dtype; bfloat16 has none (its arrays travel as their uint16 bits).
py::dtype numpy_dtype(tac::DType t) {
  switch (t) {
    case tac::DType::float32: return py::dtype::of<float>();
    case tac::DType::float64: return py::dtype::of<double>();
    case tac::DType::float16: return py::dtype("float16");
    case tac::DType::bfloat16: return py::dtype::of<uint16_t>();
    case tac::DType::int8: return py::dtype::of<int8_t>();
    case tac::DType::uint8: return py::dtype::of<uint8_t>();
    case tac::DType::int16: return py::dtype::of<int16_t>();
    case tac::DType::uint16: return py::dtype::of<uint16_t>();
    case tac::DType::int32: return py::dtype::of<int32_t>();
    case tac::DType::uint32: return py::dtype::of<uint32_t>();
    case tac::DType::int64: return py::dtype::of<int64_t>();
    case tac::DType::uint64: return py::dtype::of<uint64_t>();
    case tac::DType::boolean: return py::dtype::of<bool>();
    default: raise(tac::unsupported("no NumPy dtype for " + tac::dtype_name(t)));
  }
}

py::dict info_dict(const tac::TensorInfo& t) {
  py::dict d;
  d["name"] = t.name;
  d["dtype"] = tac::dtype_name(t.dtype);
  py::list shape;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] >= 0) shape.append(t.shape[i]);
    else if (i < t.dim_names.size() && !t.dim_names[i].empty()) shape.append(t.dim_names[i]);
    else shape.append(py::none());
  }
  d["shape"] = shape;
  return d;
}

py::list infos(const std::vector<tac::TensorInfo>& v) {
  py::list l;
  for (const tac::TensorInfo& t : v) l.append(info_dict(t));
  return l;
}

// An input array as a tensor: the array's own memory when it is C-contiguous with the engine's
// dtype (`keep` holds the array for the call), else a converted copy NumPy makes.
tac::Tensor input_tensor(const std::string& name, py::handle obj, const tac::TensorInfo& info,
                         std::vector<py::array>& keep) {
  py::dtype want = numpy_dtype(info.dtype);
  py::array a = py::array::ensure(obj);
  if (!a) raise(tac::invalid_argument("input '" + name + "': not an array"));
  if (!a.dtype().equal(want) || !(a.flags() & py::array::c_style)) {
    py::module_ np = py::module_::import("numpy");
    if (!np.attr("can_cast")(a.dtype(), want, "same_kind").cast<bool>())
      raise(tac::invalid_argument("input '" + name + "': the engine takes " + tac::dtype_name(info.dtype) +
                                  ", got a NumPy array of " + std::string(py::str(a.dtype()))));
    a = np.attr("ascontiguousarray")(a, want);
  }
  keep.push_back(a);
  tac::Shape shape(a.shape(), a.shape() + a.ndim());
  return tac::Tensor::wrap(const_cast<void*>(a.data()), info.dtype, std::move(shape));
}

// An output tensor as an array over its own storage: the capsule keeps a copy of the tensor (which
// shares the storage) alive as long as the array.
py::array output_array(const tac::Tensor& t) {
  auto* owner = new tac::Tensor(t);
  py::capsule free_when_done(owner, [](void* p) { delete static_cast<tac::Tensor*>(p); });
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  return py::array(numpy_dtype(t.dtype()), shape, owner->raw(), free_when_done);
}

tac::Model load_model(const std::string& path) {
  tac::Result<tac::Model> m = [&] {
    py::gil_scoped_release nogil;
    return tac::Model::load(path);
  }();
  return value_or_raise(std::move(m));
}

// A model object or a path.
tac::Model as_model(py::handle m) {
  if (py::isinstance<tac::Model>(m)) return m.cast<tac::Model>();
  return load_model(py::str(m));
}

tac::Engine build(py::handle model, const std::string& route, const std::string& backend, int threads,
                  const std::map<std::string, int64_t>& dims, const std::string& shapes) {
  tac::Model m = as_model(model);
  tac::Result<tac::Engine> e = [&] {
    py::gil_scoped_release nogil;
    return tac::Engine::build(m, {.route = route, .backend = backend, .threads = threads, .dims = dims, .shapes = shapes});
  }();
  return value_or_raise(std::move(e));
}

tac::Engine load_plan(const std::string& plan, py::handle model) {
  std::optional<tac::Model> m;
  if (!model.is_none()) m = as_model(model);
  tac::Result<tac::Engine> e = [&] {
    py::gil_scoped_release nogil;
    return m ? tac::Engine::load(plan, *m) : tac::Engine::load(plan);
  }();
  return value_or_raise(std::move(e));
}

py::dict run(const tac::Engine& e, const py::dict& feeds) {
  const std::vector<tac::TensorInfo>& ins = e.inputs();
  std::vector<tac::Tensor> inputs(ins.size());
  std::vector<py::array> keep;
  keep.reserve(ins.size());
  size_t given = 0;
  for (size_t i = 0; i < ins.size(); ++i) {
    py::str key(ins[i].name);
    if (!feeds.contains(key))
      raise(tac::invalid_argument("Engine.run: input '" + ins[i].name + "' is missing (" + tac::dtype_name(ins[i].dtype) +
                                  tac::shape_to_string(ins[i].shape) + ")"));
    inputs[i] = input_tensor(ins[i].name, feeds[key], ins[i], keep);
    ++given;
  }
  if (given != feeds.size())
    for (auto item : feeds) {
      const std::string name = py::str(item.first);
      bool known = false;
      for (const tac::TensorInfo& t : ins) known |= t.name == name;
      if (!known) raise(tac::invalid_argument("Engine.run: the engine has no input '" + name + "'"));
    }
  tac::Result<std::vector<tac::Tensor>> outs = [&] {
    py::gil_scoped_release nogil;
    return e.run(inputs);
  }();
  std::vector<tac::Tensor> out = value_or_raise(std::move(outs));
  py::dict d;
  for (size_t i = 0; i < out.size(); ++i) d[py::str(e.outputs()[i].name)] = output_array(out[i]);
  return d;
}

py::list knobs(py::handle model, const std::string& backend) {
  tac::Model m = as_model(model);
  tac::Result<std::vector<tac::KnobInfo>> k = [&] {
    py::gil_scoped_release nogil;
    return m.knobs(backend);
  }();
  py::list l;
  for (const tac::KnobInfo& knob : value_or_raise(std::move(k))) {
    py::dict d;
    d["name"] = knob.name;
    d["values"] = knob.values;
    d["default"] = knob.default_value;
    d["help"] = knob.help;
    d["per_node"] = knob.per_node;
    l.append(d);
  }
  return l;
}

py::dict tune(const std::string& model, double budget, const std::string& tolerance, const std::string& backend,
              const std::string& route, const std::vector<std::string>& knob_globs, int threads, int64_t max_candidates,
              uint64_t seed, const std::string& out_dir, const std::string& db, const std::string& strategy,
              const std::string& shapes, py::object progress) {
  tac::TuneOptions o;
  o.budget_seconds = budget;
  o.tolerance = tolerance;
  o.backend = backend;
  o.route = route;
  o.knobs = knob_globs;
  o.threads = threads;
  o.max_candidates = max_candidates;
  o.seed = seed;
  o.out_dir = out_dir;
  o.db_path = db;
  o.strategy = strategy;
  o.shapes = shapes;
  if (!progress.is_none())
    o.progress = [progress](const std::string& line) {
      py::gil_scoped_acquire gil;
      progress(line);
    };
  tac::Result<tac::TuneResult> r = [&] {
    py::gil_scoped_release nogil;
    return tac::tune(model, o);
  }();
  tac::TuneResult t = value_or_raise(std::move(r));
  py::dict d = py::module_::import("json").attr("loads")(t.summary_json);
  d["best_route"] = t.best_route;
  d["best_is_default"] = t.best_is_default;
  return d;
}

}  // namespace

PYBIND11_MODULE(tactician, m) {
  m.doc() = "Tactician: an inference compiler for ONNX models with a global performance tuner.";
  static py::exception<std::runtime_error> error(m, "Error", PyExc_RuntimeError);
  g_error = error.ptr();
  m.attr("__version__") = tac::version();
  m.def("available_backends", &tac::available_backends, "The backends this build can run here.");

  py::class_<tac::Model>(m, "Model", "An ONNX model, imported and checked.")
      .def(py::init(&load_model), py::arg("path"), "Loads a .onnx file, or a folder holding model.onnx.")
      .def_property_readonly("path", &tac::Model::path)
      .def_property_readonly("hash", &tac::Model::hash)
      .def_property_readonly("inputs", [](const tac::Model& m) { return infos(m.inputs()); })
      .def_property_readonly("outputs", [](const tac::Model& m) { return infos(m.outputs()); })
      .def("knobs", [](const tac::Model& m, const std::string& backend) { return knobs(py::cast(m), backend); },
           py::arg("backend") = "");

  py::class_<tac::Engine>(m, "Engine", "A built engine: run it on a dict of NumPy arrays.")
      .def("run", &run, py::arg("inputs"), "Runs on {input name: array}; returns {output name: array}.")
      .def("prepare", [](const tac::Engine& e, const std::map<std::string, int64_t>& dims) {
             raise_if_error([&] {
               py::gil_scoped_release nogil;
               return e.prepare(dims);
             }());
           }, py::arg("dims"), "Builds the engine for these sizes of a shape-ranged engine now ({'batch': 3}).")
      .def("save", [](const tac::Engine& e, const std::string& path) {
             raise_if_error(e.save(path));
           }, py::arg("path"))
      .def_property_readonly("inputs", [](const tac::Engine& e) { return infos(e.inputs()); })
      .def_property_readonly("outputs", [](const tac::Engine& e) { return infos(e.outputs()); })
      .def_property_readonly("backend", &tac::Engine::backend)
      .def_property_readonly("device", &tac::Engine::device)
      .def_property_readonly("route", &tac::Engine::route)
      .def_property_readonly("threads", &tac::Engine::threads);

  m.def("build", &build, py::arg("model"), py::kw_only(), py::arg("route") = "", py::arg("backend") = "",
        py::arg("threads") = 0, py::arg("dims") = std::map<std::string, int64_t>{}, py::arg("shapes") = "",
        "Builds an engine for a route (default: the default route) from a Model or a path; shapes=\"batch=1..8:4\" "
        "makes it run every size in the ranges.");
  m.def("load", &load_plan, py::arg("plan"), py::arg("model") = py::none(),
        "Loads a saved .plan; with `model`, refuses a plan built from another model.");
  m.def("knobs", &knobs, py::arg("model"), py::arg("backend") = "", "The model's knobs, as `tactician knobs`.");
  m.def("tune", &tune, py::arg("model"), py::kw_only(), py::arg("budget") = 60.0, py::arg("tolerance") = "",
        py::arg("backend") = "", py::arg("route") = "", py::arg("knobs") = std::vector<std::string>{},
        py::arg("threads") = 0, py::arg("max_candidates") = -1, py::arg("seed") = 0, py::arg("out_dir") = "",
        py::arg("db") = "", py::arg("strategy") = "tpe", py::arg("shapes") = "", py::arg("progress") = py::none(),
        "Tunes the model (budget in seconds); returns the summary as a dict (summary.json's fields, "
        "best_route and best_is_default).");
  m.def("load_tensor", [](const std::string& path) {
          tac::Result<tac::Tensor> t = tac::load_tensor(path);
          return output_array(value_or_raise(std::move(t)));
        }, py::arg("path"), "Reads an ONNX TensorProto (.pb) or .npy file into an array.");
}
