// `import dtrain`: the configuration schema and api::train for Python. A
// configuration is built from a dict of groups (the keys of the config files)
// or a TOML file; data are NumPy arrays; the training runs in C++ with the GIL
// released and returns the result line as a dict. dtrain's one-line errors
// become ValueError (bad usage or configuration) or RuntimeError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "api/ConfigFile.h"
#include "api/Schema.h"
#include "api/Train.h"
#include "core/Error.h"
#include "core/StopSignal.h"
#include "data/Dataset.h"
#include "nn/ModelRegistry.h"
#include "runtime/Safetensors.h"
#include "tensor/Half.h"

namespace py = pybind11;
using namespace dtrain;

namespace {

// A Python value as the option's kind; throws UsageError naming `origin`.
api::Value toValue(const api::Option& o, const py::handle& v, const std::string& origin) {
  auto fail = [&]() -> api::Value {
    throw UsageError(origin + ": expected " + api::kindName(o.kind) + ", got " +
                     std::string(py::str(v.get_type().attr("__name__"))));
  };
  auto isNumber = [](const py::handle& x) {
    return (py::isinstance<py::int_>(x) || py::isinstance<py::float_>(x)) && !py::isinstance<py::bool_>(x);
  };
  switch (o.kind) {
    case api::Kind::Bool:
      if (!py::isinstance<py::bool_>(v)) return fail();
      return v.cast<bool>();
    case api::Kind::Int:
      if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v)) return fail();
      return v.cast<int64_t>();
    case api::Kind::Float:
      if (!isNumber(v)) return fail();
      return v.cast<double>();
    case api::Kind::String:
      if (!py::isinstance<py::str>(v)) return fail();
      return v.cast<std::string>();
    case api::Kind::IntList:
    case api::Kind::FloatList:
    case api::Kind::StringList: {
      if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v)) return fail();
      std::vector<int64_t> ints;
      std::vector<double> floats;
      std::vector<std::string> strings;
      for (const auto& e : v) {
        if (o.kind == api::Kind::IntList) {
          if (!py::isinstance<py::int_>(e)) return fail();
          ints.push_back(e.cast<int64_t>());
        } else if (o.kind == api::Kind::FloatList) {
          if (!isNumber(e)) return fail();
          floats.push_back(e.cast<double>());
        } else {
          if (!py::isinstance<py::str>(e)) return fail();
          strings.push_back(e.cast<std::string>());
        }
      }
      if (o.kind == api::Kind::IntList) return ints;
      if (o.kind == api::Kind::FloatList) return floats;
      return strings;
    }
  }
  return fail();
}

// A configuration and where its options came from (for the refusals' messages).
struct Config {
  api::RunConfig rc;
  api::Sources src;
};

// Sets {"group": {"key": value}} on the configuration, each value checked.
void update(Config& c, const py::dict& groups) {
  const api::Schema& s = api::schema();
  for (const auto& [g, keys] : groups) {
    const std::string group = py::str(g);
    DTRAIN_CHECK_USAGE(s.group(group), "unknown group '", group, "'", s.suggestGroup(group));
    DTRAIN_CHECK_USAGE(py::isinstance<py::dict>(keys), "group '", group,
                       "' must be a dict of keys (e.g. {'", group, "': {...}})");
    for (const auto& [k, v] : keys.cast<py::dict>()) {
      const std::string key = py::str(k);
      const api::Option* o = s.find(group, key);
      DTRAIN_CHECK_USAGE(o, "unknown key '", key, "' in '", group, "'", s.suggestKey(group, key));
      const std::string origin = "[" + group + "] " + key;
      api::setChecked(c.rc, c.src, *o, toValue(*o, v, origin), origin);
    }
  }
}

// float32 samples [N, ...] and integer labels [N] as a dataset (copied: the
// trainer's ranks read it from other threads while Python may change the arrays).
std::shared_ptr<data::Dataset> dataset(const py::handle& pair, const char* what) {
  DTRAIN_CHECK_USAGE(py::isinstance<py::tuple>(pair) && py::len(pair) == 2, what,
                     ": expected a tuple (features, labels) of NumPy arrays");
  auto xs = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(pair[py::int_(0)]);
  auto ys = py::array::ensure(pair[py::int_(1)]);
  DTRAIN_CHECK_USAGE(xs && ys, what, ": expected NumPy arrays (features, labels)");
  DTRAIN_CHECK_USAGE(ys.dtype().kind() == 'i' || ys.dtype().kind() == 'u', what,
                     ": labels must be integers (got dtype ", std::string(py::str(ys.dtype())), ")");
  auto labels = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(ys);
  DTRAIN_CHECK_USAGE(xs.ndim() >= 2 && labels.ndim() == 1 && xs.shape(0) == labels.shape(0) && xs.shape(0) > 0,
                     what, ": features [N, ...] and labels [N] with the same N > 0 (got ",
                     xs.ndim(), "-d features of ", xs.ndim() ? xs.shape(0) : 0, " rows and ",
                     labels.ndim(), "-d labels of ", labels.ndim() ? labels.shape(0) : 0, ")");
  Shape shape;
  for (py::ssize_t d = 0; d < xs.ndim(); ++d) shape.push_back(xs.shape(d));
  Tensor x = Tensor::empty(shape);
  std::memcpy(x.data<float>(), xs.data(), static_cast<size_t>(x.numel()) * sizeof(float));
  const int64_t n = labels.shape(0);
  Tensor y = Tensor::empty({n}, DType::I32);
  int64_t top = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = labels.at(i);
    DTRAIN_CHECK_USAGE(v >= 0 && v < (1 << 16), what, ": label ", v, " at index ", i,
                       " is out of range (class indices 0, 1, ...)");
    y.data<int32_t>()[i] = static_cast<int32_t>(v);
    top = std::max(top, v);
  }
  return std::make_shared<data::TensorDataset>(x, y, static_cast<int>(top + 1));
}

// A tensor of a checkpoint as a NumPy array (a copy: the file's buffer goes away).
py::array toNumpy(const Tensor& t) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  const Tensor c = t.contiguous();
  switch (c.dtype()) {
    case DType::F32: return py::array_t<float>(shape, c.data<float>());
    case DType::I32: return py::array_t<int32_t>(shape, c.data<int32_t>());
    case DType::I64: return py::array_t<int64_t>(shape, static_cast<const int64_t*>(c.rawData()));
    case DType::U8: return py::array_t<uint8_t>(shape, static_cast<const uint8_t*>(c.rawData()));
    case DType::F16:
    case DType::BF16: {
      // 16-bit floats (bf16 has no NumPy dtype): widened to float32.
      py::array_t<float> out(shape);
      const auto* bits = static_cast<const uint16_t*>(c.rawData());
      float* dst = out.mutable_data();
      for (int64_t i = 0; i < c.numel(); ++i)
        dst[i] = c.dtype() == DType::F16 ? halfToFloat(bits[i]) : bf16ToFloat(bits[i]);
      return out;
    }
    default:
      throw Error("load: a tensor of an unsupported dtype");
  }
}

// A NumPy array as a float32 or integer tensor for a checkpoint.
Tensor fromNumpy(const std::string& name, const py::handle& v) {
  auto a = py::array::ensure(v);
  DTRAIN_CHECK_USAGE(a, "save: '", name, "' is not an array");
  Shape shape;
  for (py::ssize_t d = 0; d < a.ndim(); ++d) shape.push_back(a.shape(d));
  const char kind = a.dtype().kind();
  if (kind == 'i' || kind == 'u') {
    auto ints = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    Tensor t = Tensor::empty(shape, DType::I64);
    std::memcpy(t.rawData(), ints.data(), static_cast<size_t>(t.numel()) * sizeof(int64_t));
    return t;
  }
  DTRAIN_CHECK_USAGE(kind == 'f', "save: '", name, "' has dtype ", std::string(py::str(a.dtype())),
                     " (floats and integers only)");
  auto floats = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(a);
  Tensor t = Tensor::empty(shape);
  std::memcpy(t.data<float>(), floats.data(), static_cast<size_t>(t.numel()) * sizeof(float));
  return t;
}

py::object toPython(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

}  // namespace

PYBIND11_MODULE(dtrain, m) {
  m.doc() = "dtrain: distributed and parallel deep-learning training (C++), from Python";
  // One-line errors: bad usage or configuration -> ValueError, the rest -> RuntimeError.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const stop::Interrupted& e) {  // Ctrl-C in a run that saves nothing (ps, fedavg)
      PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
    } catch (const UsageError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  py::class_<Config>(m, "Config", "A training configuration: the groups and keys of dtrain's config files")
      .def(py::init([](py::kwargs groups) {
             Config c;
             update(c, groups);
             return c;
           }),
           "Config(optimizer={'name': 'sgd', 'lr': 0.05}, parallel={'workers': 2}, ...)")
      .def_static("load", [](const std::string& path) {
             Config c;
             api::loadConfigFile(path, c.rc, c.src);
             return c;
           }, "A configuration from a TOML file")
      .def("update", [](Config& c, py::kwargs groups) { update(c, groups); return c; },
           "Sets more options (later values win)")
      .def("to_toml", [](const Config& c) { return api::configToToml(api::prepared(c.rc, c.src)); },
           "The effective configuration as TOML (what `dtrain train --print-config` prints)")
      .def("__repr__", [](const Config& c) {
        std::string given;
        for (const auto& [id, where] : c.src.where) given += (given.empty() ? "" : ", ") + id;
        return "dtrain.Config(" + given + ")";
      });

  m.def("train", [](const Config& config, py::object data, py::object test) {
        api::Data d;
        if (!data.is_none()) d.train = dataset(data, "data");
        if (!test.is_none()) {
          DTRAIN_CHECK_USAGE(d.train, "test: give data too");
          d.test = dataset(test, "test");
        }
        // Ctrl-C while C++ trains (Python's own handler cannot run: the GIL is
        // released): dtrain's handlers, on the main thread only, finish the step,
        // save where --checkpoint-dir / --save say, then KeyboardInterrupt.
        const py::object threading = py::module_::import("threading");
        const bool mainThread = threading.attr("current_thread")().is(threading.attr("main_thread")());
        std::optional<stop::SignalScope> signals;
        if (mainThread) signals.emplace();
        nlohmann::json result;
        {
          py::gil_scoped_release release;  // every step runs in C++
          result = api::train(config.rc, config.src, std::move(d));
        }
        signals.reset();
        if (const stop::Stopped s = stop::stopped(); s.stopped) {
          stop::clear();
          PyErr_SetString(PyExc_KeyboardInterrupt, stop::describe(s).c_str());
          throw py::error_already_set();
        }
        return toPython(result);
      },
      py::arg("config"), py::arg("data") = py::none(), py::arg("test") = py::none(),
      "Trains under the configuration's strategy; returns the result line as a dict");
  m.def("load", [](const std::string& path) {
        const runtime::SafetensorsFile f = runtime::loadSafetensors(path);
        py::dict out;
        for (const auto& [name, t] : f.tensors) out[py::str(name)] = toNumpy(t);
        return out;
      }, py::arg("path"),
      "A safetensors checkpoint (dtrain's, or a PyTorch state_dict saved as safetensors) as "
      "a dict of name -> NumPy array; the model's tensors load into the PyTorch model with "
      "load_state_dict (the optimizer. entries are dtrain's optimizer state)");
  m.def("save", [](const std::string& path, const py::dict& tensors) {
        std::vector<std::pair<std::string, Tensor>> list;
        for (const auto& [k, v] : tensors) list.emplace_back(py::str(k), fromNumpy(py::str(k), v));
        runtime::saveSafetensors(path, list);
      }, py::arg("path"), py::arg("tensors"),
      "Writes name -> array as a safetensors file (float32 or int64), which `dtrain train "
      "--load` starts from when the names and shapes are the model's");
  m.def("models", [] { return nn::registeredModelNames(); }, "The models dtrain can build by name");
}
