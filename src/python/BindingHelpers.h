#pragma once
// What the binding files of `import dtrain` share (src/python): the topics are
//   ConfigBindings.cpp  dtrain.Config (the config files' groups and keys)
//   TrainBindings.cpp   dtrain.train, load/save (safetensors <-> NumPy)
//   TensorBindings.cpp  dtrain.Tensor (buffer protocol) and nn.functional's ops
//   NnBindings.cpp      dtrain.nn: the layers, Sequential, the Module a script subclasses
//   ModelBindings.cpp   dtrain.models (built-ins by name), dtrain.generate
// Errors are dtrain's one-line messages: UsageError -> ValueError, Error -> RuntimeError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/Schema.h"
#include "autograd/Variable.h"
#include "core/Error.h"
#include "nn/ModelRegistry.h"
#include "nn/Module.h"
#include "tensor/Tensor.h"

namespace dtrain::python {

namespace py = pybind11;
using autograd::Variable;

// A configuration and where its options came from (for the refusals' messages).
struct Config {
  api::RunConfig rc;
  api::Sources src;
};

py::object toPython(const nlohmann::json& j);

// NumPy -> tensor. float32 C-contiguous arrays are borrowed (no copy: the
// tensor keeps the array alive); other float layouts and dtypes are copied to
// float32, integer arrays to int32 (indices, labels). Anything else:
// UsageError naming `what` and the dtype.
Tensor tensorFromArray(const py::handle& value, const std::string& what);
// A copy of `t` as a NumPy array (16-bit floats widened to float32).
py::array arrayCopy(const Tensor& t);
// An array as a tensor of `dtype` (a copy), for loading into a model.
Tensor arrayAs(const py::handle& value, DType dtype, const std::string& what);

// Runs `f`, turning dtrain's errors in an op (shapes, dtypes) into UsageError
// (-> ValueError) with the same line.
template <class F> auto asUsage(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

// Models: a copy of a module with the same parameters and buffers (each rank's
// replica of a script's model). Holds the GIL. C++ layers are rebuilt from
// their configuration; a Python-defined Module is copied with copy.deepcopy
// (its __deepcopy__, dtrain/nn.py); a model of dtrain.models.build is rebuilt by
// its registry name.
std::shared_ptr<nn::Module> cloneModule(const std::shared_ptr<nn::Module>& module);
// The Python object of a module built in Python (its forward), kept alive with the
// returned pointer: what a C++ owner (the trainer) must hold.
std::shared_ptr<nn::Module> holdPython(py::object module);
// Copies parameters and buffers by name into `dst` (the same architecture).
void copyState(nn::Module& src, nn::Module& dst);
// Loads name -> tensor into `model` (shapes must match; aliases of tied
// weights accepted). strict: every parameter and buffer present, no other
// names. Throws UsageError naming the first problem.
void loadState(nn::Module& model, const std::vector<std::pair<std::string, Tensor>>& tensors,
               bool strict, const std::string& what);

// Models built by dtrain.models.build remember their registry name, so that a
// replica and the trainer's model facts (task, block size) come from the registry.
struct BuiltModel {
  std::string name;
  nn::ModelOverrides overrides;
  nn::DataShape shape;
};
void rememberBuilt(const std::shared_ptr<nn::Module>& model, BuiltModel built);
const BuiltModel* builtFrom(const nn::Module& model);
// The registry facts of a script's model: a built-in's own, else a classifier.
nn::ModelInfo modelInfoOf(const nn::Module& model);

void bindTensors(py::module_& m);
void bindNn(py::module_& m);
void bindModels(py::module_& m);
void bindConfig(py::module_& m);
void bindTrain(py::module_& m);

}  // namespace dtrain::python
