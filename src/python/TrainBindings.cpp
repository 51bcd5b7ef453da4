// dtrain.train and the checkpoints (dtrain.load / dtrain.save). A run trains
// the configuration's model, or a script's: that one is registered for the
// run as a model whose make() copies it (cloneModule), so every rank (threads
// of the local backend, or this process under mpirun) starts from the same
// parameters, and every strategy builds it as it builds a built-in. At the
// end the run's saved model (the --save checkpoint, a temporary file unless
// [checkpoint] save names one) is loaded back into the script's object:
// whatever the strategy sharded or cut, that file holds the whole model.
#include "python/BindingHelpers.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <optional>

#include "api/Train.h"
#include "core/StopSignal.h"
#include "data/Dataset.h"
#include "data/FiniteFeatures.h"
#include "data/TextCorpus.h"
#include "nn/Lora.h"
#include "runtime/CheckpointDir.h"
#include "runtime/LoraSetup.h"
#include "runtime/Safetensors.h"

namespace dtrain::python {

namespace {

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
  data::requireFiniteFeatures(x, what);
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

// A NumPy array as a float32 or integer tensor for a checkpoint.
Tensor checkpointTensor(const std::string& name, const py::handle& v) {
  auto a = py::array::ensure(v);
  DTRAIN_CHECK_USAGE(a, "save: '", name, "' is not an array");
  const char kind = a.dtype().kind();
  DTRAIN_CHECK_USAGE(kind == 'f' || kind == 'i' || kind == 'u', "save: '", name, "' has dtype ",
                     std::string(py::str(a.dtype())), " (floats and integers only)");
  return arrayAs(a, kind == 'f' ? DType::F32 : DType::I64, "save: '" + name + "'");
}

api::Data taskData(const py::object& data, const py::object& test, const nn::ModelInfo* info) {
  api::Data d;
  if (!data.is_none()) {
    if (py::isinstance<py::bytes>(data) || py::isinstance<py::str>(data)) {
      DTRAIN_CHECK_USAGE(!info || info->task == nn::kLanguageModelTask,
                         "data: text is for the language models (a classifier takes (features, labels))");
      std::string bytes = py::isinstance<py::bytes>(data) ? data.cast<std::string>()
                                                          : py::str(data).attr("encode")("utf-8").cast<std::string>();
      d.text = std::make_shared<data::TextCorpus>(std::vector<uint8_t>(bytes.begin(), bytes.end()), "memory");
    } else {
      d.train = dataset(data, "data");
    }
  }
  if (!test.is_none()) {
    DTRAIN_CHECK_USAGE(d.train, "test: give data=(features, labels) too");
    d.test = dataset(test, "test");
  }
  return d;
}

// Ctrl-C while C++ trains (Python's own handler cannot run: the GIL is
// released): dtrain's handlers, on the main thread only, finish the step,
// save where [checkpoint] says, then KeyboardInterrupt.
nlohmann::json runReleased(const api::RunConfig& rc, const api::Sources& src, api::Data d) {
  const py::object threading = py::module_::import("threading");
  const bool mainThread = threading.attr("current_thread")().is(threading.attr("main_thread")());
  std::optional<stop::SignalScope> signals;
  if (mainThread) signals.emplace();
  nlohmann::json result;
  {
    py::gil_scoped_release release;  // every step runs in C++
    result = api::train(rc, src, std::move(d));
  }
  signals.reset();
  if (const stop::Stopped s = stop::stopped(); s.stopped) {
    stop::clear();
    PyErr_SetString(PyExc_KeyboardInterrupt, stop::describe(s).c_str());
    throw py::error_already_set();
  }
  return result;
}

// on_metrics: called on the reporting rank's thread, with the GIL; an
// exception it raises stops the run (re-raised by dtrain.train).
std::function<void(const nlohmann::json&)> metricsSink(py::object callback) {
  if (callback.is_none()) return {};
  DTRAIN_CHECK_USAGE(PyCallable_Check(callback.ptr()), "on_metrics: expected a callable (e.g. print)");
  auto held = std::shared_ptr<py::object>(new py::object(std::move(callback)), [](py::object* o) {
    py::gil_scoped_acquire gil;
    delete o;
  });
  return [held](const nlohmann::json& record) {
    py::gil_scoped_acquire gil;
    try {
      (*held)(toPython(record));
    } catch (py::error_already_set& e) {
      throw Error("on_metrics raised " + std::string(py::str(e.type().attr("__name__"))) + ": " +
                  std::string(py::str(e.value())));
    }
  };
}

// With on_metrics, a record every 10 steps unless [logging] log_every says
// otherwise: the CLI's 100 leave a short run only its final record, no curve.
constexpr int64_t kOnMetricsLogEvery = 10;
api::RunConfig withMetricsCurve(const Config& config, const py::object& onMetrics) {
  api::RunConfig rc = config.rc;
  if (!onMetrics.is_none() && !config.src.givenFlag("--log-every")) rc.train.logEvery = kOnMetricsLogEvery;
  return rc;
}

// The registry name a script's model has during its run.
std::string runModelName(const nn::Module& model) {
  static std::atomic<int> counter{0};
  std::string kind = model.describe();
  std::replace_if(kind.begin(), kind.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '-');
  return "python-" + kind + "-" + std::to_string(++counter);
}

// Removes the run's registry entry and temporary file however the run ends.
struct RunScope {
  std::string name, tempFile;
  ~RunScope() {
    nn::unregisterModel(name);
    if (!tempFile.empty()) std::filesystem::remove(tempFile);
  }
};

// The saved run into the script's model: adapters merged into their base
// weights (a LoRA run), optimizer state and metadata left out.
void loadTrained(nn::Module& model, const std::string& path) {
  runtime::SafetensorsFile f = runtime::loadSafetensors(path);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, t] : f.tensors)
    if (name.rfind("optimizer.", 0) != 0) tensors.emplace_back(name, t);
  bool adapters = false;
  for (const auto& [name, t] : tensors) adapters = adapters || nn::isLoraParameter(name);
  if (adapters) nn::mergeLora(tensors, runtime::loraScaleFromMetadata(f.metadata, path));
  std::map<std::string, bool> known;
  for (const auto& [name, p] : model.namedParameters()) known[name] = true;
  for (const auto& [name, b] : model.namedBuffers()) known[name] = true;
  std::vector<std::pair<std::string, Tensor>> mine;
  for (auto& [name, t] : tensors)
    if (known.count(name)) mine.emplace_back(name, t);
  loadState(model, mine, true, "the trained model from " + path);
}

// Ctrl-C during a run of the script's model: the checkpoint the stop wrote
// (--checkpoint-dir's newest, else --save, a temporary file kept then) goes
// into the model, and the KeyboardInterrupt says so.
[[noreturn]] void rethrowStopped(py::error_already_set& stop, nn::Module& model, const api::RunConfig& rc,
                                 RunScope& scope) {
  if (!stop.matches(PyExc_KeyboardInterrupt)) throw stop;
  const std::string dirLatest = rc.train.checkpointDir.empty() ? "" : runtime::latestLinkPath(rc.train.checkpointDir);
  const std::string saved = !dirLatest.empty() && std::filesystem::exists(dirLatest) ? dirLatest : rc.train.save;
  if (saved.empty() || !std::filesystem::exists(saved)) throw stop;
  if (saved == scope.tempFile) scope.tempFile.clear();  // the message names it: keep it
  loadTrained(model, saved);
  const std::string line = std::string(py::str(stop.value())) + "; the model holds that step's parameters";
  PyErr_SetString(PyExc_KeyboardInterrupt, line.c_str());
  throw py::error_already_set();
}

}  // namespace

void bindTrain(py::module_& m) {
  m.def("_train_config", [](const Config& config, py::object data, py::object test, py::object onMetrics) {
        api::Data d = taskData(data, test, nullptr);
        const api::RunConfig rc = withMetricsCurve(config, onMetrics);
        d.onMetrics = metricsSink(onMetrics);
        return toPython(runReleased(rc, config.src, std::move(d)));
      },
      py::arg("config"), py::arg("data") = py::none(), py::arg("test") = py::none(),
      py::arg("on_metrics") = py::none());

  m.def("_train_model", [](py::object modelObject, const Config& config, py::object data, py::object test,
                           py::object onMetrics) {
        auto model = modelObject.cast<std::shared_ptr<nn::Module>>();
        const nn::ModelInfo info = modelInfoOf(*model);
        api::Data d = taskData(data, test, &info);
        d.onMetrics = metricsSink(onMetrics);
        RunScope scope{runModelName(*model), ""};
        nn::ModelEntry entry;
        entry.info = [info, name = scope.name](const nn::ModelOverrides& o) {
          DTRAIN_CHECK_USAGE(!o.any() && o.mlpHidden.empty(), "[model] n_layer, n_head, n_embd, block_size and "
                             "mlp_hidden build a built-in model by name; the model given to dtrain.train is built already");
          return info;
        };
        // Every rank's replica: a copy of the script's model (the seed does not
        // re-draw it: the script's initial parameters are the run's).
        entry.make = [model](const nn::ModelOverrides&, uint64_t, const nn::DataShape&) {
          return cloneModule(model);
        };
        nn::registerModel(scope.name, std::move(entry));
        api::RunConfig rc = withMetricsCurve(config, onMetrics);
        rc.train.model = scope.name;
        if (rc.train.save.empty()) {
          static std::atomic<int> runs{0};
          scope.tempFile = (std::filesystem::temp_directory_path() /
                            ("dtrain-python-" + std::to_string(::getpid()) + "-" + std::to_string(++runs) +
                             ".safetensors")).string();
          rc.train.save = scope.tempFile;
        }
        nlohmann::json result;
        try {
          result = runReleased(rc, config.src, std::move(d));
        } catch (py::error_already_set& e) {
          rethrowStopped(e, *model, rc, scope);
        }
        // The reporting process (all of them with the local backend) gets the
        // trained parameters; under mpirun the others keep theirs.
        if (std::filesystem::exists(rc.train.save) && !result.is_null()) loadTrained(*model, rc.train.save);
        if (result.is_object() && result.contains("model")) result["model"] = model->describe();
        return toPython(result);
      },
      py::arg("model"), py::arg("config"), py::arg("data") = py::none(), py::arg("test") = py::none(),
      py::arg("on_metrics") = py::none());

  m.def("load", [](const std::string& path) {
        const runtime::SafetensorsFile f = runtime::loadSafetensors(path);
        py::dict out;
        for (const auto& [name, t] : f.tensors) out[py::str(name)] = arrayCopy(t);
        return out;
      }, py::arg("path"),
      "A safetensors checkpoint (dtrain's, or a PyTorch state_dict saved as safetensors) as "
      "a dict of name -> NumPy array; the model's tensors load into the PyTorch model with "
      "load_state_dict (the optimizer. entries are dtrain's optimizer state)");
  m.def("save", [](const std::string& path, const py::dict& tensors) {
        std::vector<std::pair<std::string, Tensor>> list;
        for (const auto& [k, v] : tensors) list.emplace_back(py::str(k), checkpointTensor(py::str(k), v));
        runtime::saveSafetensors(path, list);
      }, py::arg("path"), py::arg("tensors"),
      "Writes name -> array as a safetensors file (float32 or int64), which `dtrain train "
      "--load` starts from when the names and shapes are the model's");
}

}  // namespace dtrain::python
