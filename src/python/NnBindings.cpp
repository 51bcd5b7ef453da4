// dtrain.nn: the built-in layers (C++ modules), Sequential, and the Module a
// script subclasses. A subclass's forward is Python: ScriptModule's
// trampoline calls it with the GIL taken only for the Python part (every
// layer's __call__ and every op releases it again); the kernels and backward
// are C++. Its attributes that are modules or parameters are registered as
// children in order (dtrain/nn.py's __setattr__), so names, state_dict and
// every strategy see the tree as they see a built-in model's.
#include "python/BindingHelpers.h"

#include <mutex>

#include "nn/Gpt.h"
#include "nn/Layers.h"
#include "nn/Lora.h"

namespace dtrain::python {

namespace {

// Layer initialization draws from one generator (dtrain.manual_seed), as torch's global one.
Rng& initRng() {
  static Rng rng(0);
  return rng;
}

// The C++ side of a Module defined in Python.
class ScriptModule : public nn::Module {
 public:
  explicit ScriptModule(std::string typeName) : typeName_(std::move(typeName)) {}
  Variable forward(const Variable&) override {
    throw UsageError(typeName_ + ": a dtrain.nn.Module subclass needs forward(self, x)");
  }
  std::string describe() const override { return typeName_; }
  // The layers' order in a Python forward is unknown: there is no Linear ->
  // activation -> Linear run to cut (nn/TensorParallelLayers.h).
  void tensorParallelize(const std::string&, const std::shared_ptr<nn::TensorParallelGroup>&,
                         nn::TensorParallelPlan&) override {
    throw UsageError(typeName_ + ": tensor parallelism cuts a sequence of layers; a Module with a "
                     "Python forward is not one (build the model as dtrain.nn.Sequential)");
  }
  void addChild(const std::string& name, std::shared_ptr<nn::Module> child) {
    registerModule(name, std::move(child));
  }
  Variable addParameter(const std::string& name, const Variable& v) {
    Variable p = registerParameter(name, v.data());
    p.setRequiresGrad(v.requiresGrad());
    return p;
  }
  const std::string& typeName() const { return typeName_; }

 private:
  std::string typeName_;
};

class ScriptModuleTrampoline : public ScriptModule {
 public:
  using ScriptModule::ScriptModule;
  // A forward that returns something else (a NumPy array) is told what to return,
  // not pybind11's "Unable to cast Python instance to C++ type".
  Variable forward(const Variable& x) override {
    py::gil_scoped_acquire gil;
    const py::function f = py::get_override(static_cast<const ScriptModule*>(this), "forward");
    if (!f) return ScriptModule::forward(x);
    const py::object out = f(x);
    if (py::isinstance<Variable>(out)) return out.cast<Variable>();
    throw UsageError(describe() + ".forward returned " + std::string(py::str(out.get_type().attr("__name__"))) +
                     ": return a dtrain Tensor computed from its input by dtrain's layers and operations "
                     "(dtrain.nn.functional, +, *), through which gradients flow; a NumPy array has none");
  }
};

std::mutex& builtMutex() {
  static std::mutex m;
  return m;
}
std::map<const nn::Module*, std::pair<std::weak_ptr<nn::Module>, BuiltModel>>& builtModels() {
  static std::map<const nn::Module*, std::pair<std::weak_ptr<nn::Module>, BuiltModel>> m;
  return m;
}

// A C++ layer rebuilt from its configuration (parameters copied by the caller).
std::shared_ptr<nn::Module> rebuild(const std::shared_ptr<nn::Module>& m) {
  Rng rng(0);
  if (auto l = std::dynamic_pointer_cast<nn::Linear>(m)) {
    DTRAIN_CHECK_USAGE(!l->loraA, "copying a Linear layer with LoRA adapters is not supported");
    return std::make_shared<nn::Linear>(l->weight.shape()[1], l->weight.shape()[0], rng, l->bias.defined());
  }
  if (auto c = std::dynamic_pointer_cast<nn::Conv2d>(m)) {
    const Shape& w = c->weight.shape();
    return std::make_shared<nn::Conv2d>(w[1], w[0], w[2], rng, c->stride, c->padding, c->bias.defined());
  }
  if (auto p = std::dynamic_pointer_cast<nn::MaxPool2d>(m)) return std::make_shared<nn::MaxPool2d>(p->kernel, p->stride, p->padding);
  if (auto p = std::dynamic_pointer_cast<nn::AvgPool2d>(m)) return std::make_shared<nn::AvgPool2d>(p->kernel, p->stride, p->padding);
  if (std::dynamic_pointer_cast<nn::ReLU>(m)) return std::make_shared<nn::ReLU>();
  if (std::dynamic_pointer_cast<nn::GELU>(m)) return std::make_shared<nn::GELU>();
  if (std::dynamic_pointer_cast<nn::Sigmoid>(m)) return std::make_shared<nn::Sigmoid>();
  if (std::dynamic_pointer_cast<nn::Tanh>(m)) return std::make_shared<nn::Tanh>();
  if (std::dynamic_pointer_cast<nn::Flatten>(m)) return std::make_shared<nn::Flatten>();
  if (auto d = std::dynamic_pointer_cast<nn::Dropout>(m)) {
    auto out = std::make_shared<nn::Dropout>(d->p, 0);
    out->rng = d->rng;
    return out;
  }
  if (auto b = std::dynamic_pointer_cast<nn::BatchNorm2d>(m))
    return std::make_shared<nn::BatchNorm2d>(b->weight.shape()[0], b->eps, b->momentum);
  if (auto n = std::dynamic_pointer_cast<nn::LayerNorm>(m)) return std::make_shared<nn::LayerNorm>(n->weight.shape()[0], n->eps);
  if (auto e = std::dynamic_pointer_cast<nn::Embedding>(m))
    return std::make_shared<nn::Embedding>(e->weight.shape()[0], e->weight.shape()[1], rng);
  if (auto a = std::dynamic_pointer_cast<nn::CausalSelfAttention>(m))
    return std::make_shared<nn::CausalSelfAttention>(a->cAttn->weight.shape()[1], a->nHead, rng);
  if (auto p = std::dynamic_pointer_cast<nn::GptMlp>(m)) return std::make_shared<nn::GptMlp>(p->cFc->weight.shape()[1], rng);
  if (auto b = std::dynamic_pointer_cast<nn::GptBlock>(m)) {
    nn::GptConfig c;
    c.nEmbd = b->ln1->weight.shape()[0];
    c.nHead = b->attn->nHead;
    return std::make_shared<nn::GptBlock>(c, rng);
  }
  if (auto g = std::dynamic_pointer_cast<nn::Gpt>(m)) return std::make_shared<nn::Gpt>(g->config(), 0);
  if (auto s = std::dynamic_pointer_cast<nn::Sequential>(m)) {
    auto out = std::make_shared<nn::Sequential>();
    for (const auto& [name, child] : s->children()) out->append(cloneModule(child));
    return out;
  }
  throw UsageError("cannot copy a " + m->describe() + " module (build it with dtrain.models.build or dtrain.nn)");
}

nn::Module& moduleOf(const py::handle& h) { return *h.cast<std::shared_ptr<nn::Module>>(); }

py::dict stateDict(nn::Module& m) {
  py::dict out;
  for (const auto& [name, p] : m.namedParameters()) out[py::str(name)] = arrayCopy(p.data());
  for (const auto& [name, b] : m.namedBuffers()) out[py::str(name)] = arrayCopy(*b);
  // Tied weights PyTorch lists twice (gpt's lm_head.weight): strict loading wants both.
  for (const auto& [alias, target] : m.parameterAliases())
    if (out.contains(target)) out[py::str(alias)] = out[py::str(target)];
  return out;
}

}  // namespace

std::shared_ptr<nn::Module> holdPython(py::object module) {
  auto raw = module.cast<std::shared_ptr<nn::Module>>();
  auto keeper = std::shared_ptr<py::object>(new py::object(std::move(module)), [](py::object* o) {
    if (!Py_IsInitialized()) {
      o->release();
    } else {
      py::gil_scoped_acquire gil;
      delete o;
      return;
    }
    delete o;
  });
  return std::shared_ptr<nn::Module>(keeper, raw.get());
}

std::shared_ptr<nn::Module> cloneModule(const std::shared_ptr<nn::Module>& module) {
  py::gil_scoped_acquire gil;
  if (std::dynamic_pointer_cast<ScriptModule>(module)) {
    // Defined in Python: its object (alive: its parent holds it) copies itself.
    py::object self = py::cast(module);
    return holdPython(py::module_::import("copy").attr("deepcopy")(self));
  }
  std::shared_ptr<nn::Module> out;
  if (const BuiltModel* b = builtFrom(*module)) {
    out = nn::buildModel(b->name, b->overrides, 0, b->shape);
    rememberBuilt(out, *b);
  } else {
    out = rebuild(module);
  }
  copyState(*module, *out);
  out->train(module->isTraining());
  return out;
}

void copyState(nn::Module& src, nn::Module& dst) {
  auto from = src.namedParameters();
  auto to = dst.namedParameters();
  DTRAIN_CHECK(from.size() == to.size(), "copy: ", from.size(), " parameters into ", to.size());
  for (size_t i = 0; i < from.size(); ++i) {
    DTRAIN_CHECK(from[i].first == to[i].first, "copy: parameter ", from[i].first, " into ", to[i].first);
    to[i].second.data().copyFrom(from[i].second.data());
    to[i].second.setRequiresGrad(from[i].second.requiresGrad());
  }
  auto bf = src.namedBuffers();
  auto bt = dst.namedBuffers();
  DTRAIN_CHECK(bf.size() == bt.size(), "copy: buffers differ");
  for (size_t i = 0; i < bf.size(); ++i) bt[i].second->copyFrom(*bf[i].second);
}

void loadState(nn::Module& model, const std::vector<std::pair<std::string, Tensor>>& tensors, bool strict,
               const std::string& what) {
  std::map<std::string, Tensor*> targets;
  std::vector<std::pair<std::string, Variable>> params = model.namedParameters();
  for (auto& [name, p] : params) targets[name] = &p.data();
  for (auto& [name, b] : model.namedBuffers()) targets[name] = b;
  std::map<std::string, std::string> aliases;
  for (const auto& [alias, target] : model.parameterAliases()) aliases[alias] = target;
  std::map<std::string, bool> seen;
  for (const auto& [name, t] : tensors) {
    if (aliases.count(name)) continue;
    auto it = targets.find(name);
    if (it == targets.end()) {
      DTRAIN_CHECK_USAGE(!strict, what, ": unexpected key '", name, "' (the model has no such parameter or buffer)");
      continue;
    }
    Tensor& dst = *it->second;
    DTRAIN_CHECK_USAGE(dst.shape() == t.shape(), what, ": '", name, "' has shape ", shapeStr(t.shape()),
                       ", the model's is ", shapeStr(dst.shape()));
    DTRAIN_CHECK_USAGE(dst.dtype() == t.dtype(), what, ": '", name, "' has dtype ", dtypeName(t.dtype()),
                       ", the model's is ", dtypeName(dst.dtype()));
    dst.copyFrom(t);
    seen[name] = true;
  }
  if (strict)
    for (const auto& [name, t] : targets)
      DTRAIN_CHECK_USAGE(seen.count(name), what, ": missing key '", name, "'");
}

void rememberBuilt(const std::shared_ptr<nn::Module>& model, BuiltModel built) {
  std::lock_guard<std::mutex> lock(builtMutex());
  auto& m = builtModels();
  for (auto it = m.begin(); it != m.end();) it = it->second.first.expired() ? m.erase(it) : std::next(it);
  m[model.get()] = {model, std::move(built)};
}

const BuiltModel* builtFrom(const nn::Module& model) {
  std::lock_guard<std::mutex> lock(builtMutex());
  auto it = builtModels().find(&model);
  if (it == builtModels().end() || it->second.first.expired()) return nullptr;
  return &it->second.second;
}

nn::ModelInfo modelInfoOf(const nn::Module& model) {
  if (const BuiltModel* b = builtFrom(model)) return nn::modelInfo(b->name, b->overrides);
  return nn::ModelInfo{nn::kClassificationTask, 0, 0};
}

void bindNn(py::module_& m) {
  using Release = py::call_guard<py::gil_scoped_release>;
  py::module_ nnm = m.def_submodule("nn", "Layers (C++ modules) and the Module base a script subclasses");
  m.def("manual_seed", [](uint64_t seed) { initRng().reseed(seed); }, py::arg("seed"),
        "Seeds the generator the layers draw their initial weights from");

  py::class_<nn::Module, std::shared_ptr<nn::Module>>(nnm, "Layer", py::dynamic_attr(),
                                                        "Any dtrain module (C++ or Python-defined)")
      .def("__call__", [](nn::Module& self, const Variable& x) { return asUsage([&] { return self(x); }); },
           Release())
      .def("forward", [](nn::Module& self, const Variable& x) { return asUsage([&] { return self.forward(x); }); },
           Release())
      .def("parameters", [](const nn::Module& self) { return self.parameters(); })
      .def("named_parameters", [](const nn::Module& self) { return self.namedParameters(); })
      .def("named_children", [](const nn::Module& self) { return self.children(); })
      .def("state_dict", [](nn::Module& self) { return stateDict(self); },
           "name -> NumPy array (copies): torch-style names, loadable into the equivalent torch "
           "network with load_state_dict(strict=True)")
      .def("load_state_dict", [](nn::Module& self, const py::dict& state, bool strict) {
             std::map<std::string, Tensor*> targets;
             std::vector<std::pair<std::string, Variable>> params = self.namedParameters();
             for (auto& [name, p] : params) targets[name] = &p.data();
             for (auto& [name, b] : self.namedBuffers()) targets[name] = b;
             std::vector<std::pair<std::string, Tensor>> tensors;
             for (const auto& [k, v] : state) {
               const std::string name = py::str(k);
               auto it = targets.find(name);
               const DType want = it == targets.end() ? DType::F32 : it->second->dtype();
               const std::string what = "load_state_dict: '" + name + "'";
               // Float arrays of any precision load into float tensors (as torch's copy_
               // does); integers into a float tensor, or floats into an integer one, are
               // a mistake, not a conversion.
               if (const py::array a = py::array::ensure(v); a && !py::isinstance<Variable>(v)) {
                 const bool floats = a.dtype().kind() == 'f';
                 DTRAIN_CHECK_USAGE(floats == (want == DType::F32), what, " has dtype ", std::string(py::str(a.dtype())),
                                    ", the model's is ", want == DType::F32 ? "float32" : "an integer type");
               }
               tensors.emplace_back(name, arrayAs(v, want, what));
             }
             loadState(self, tensors, strict, "load_state_dict");
           },
           py::arg("state"), py::arg("strict") = true)
      .def("train", [](nn::Module& self, bool on) { self.train(on); return &self; }, py::arg("mode") = true,
           py::return_value_policy::reference)
      .def("eval", [](nn::Module& self) { self.eval(); return &self; }, py::return_value_policy::reference)
      .def_property_readonly("training", &nn::Module::isTraining)
      .def("zero_grad", &nn::Module::zeroGrad)
      .def("parameter_count", &nn::Module::parameterCount)
      .def("__deepcopy__", [](const std::shared_ptr<nn::Module>& self, py::dict) { return cloneModule(self); })
      .def("__repr__", [](const nn::Module& self) { return self.summary(); });

  py::class_<ScriptModule, nn::Module, ScriptModuleTrampoline, std::shared_ptr<ScriptModule>>(
      nnm, "_ScriptModule", py::dynamic_attr())
      .def(py::init<std::string>())
      .def("_add_child", &ScriptModule::addChild, py::keep_alive<1, 3>())
      .def("_add_parameter", &ScriptModule::addParameter);

  auto rng = [] { return std::ref(initRng()); };
  py::class_<nn::Linear, nn::Module, std::shared_ptr<nn::Linear>>(nnm, "Linear")
      .def(py::init([rng](int64_t in, int64_t out, bool bias) {
             DTRAIN_CHECK_USAGE(in > 0 && out > 0, "Linear(", in, ", ", out, "): sizes must be positive");
             return std::make_shared<nn::Linear>(in, out, rng(), bias);
           }), py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true)
      .def_readonly("weight", &nn::Linear::weight)
      .def_readonly("bias", &nn::Linear::bias);
  py::class_<nn::Conv2d, nn::Module, std::shared_ptr<nn::Conv2d>>(nnm, "Conv2d")
      .def(py::init([rng](int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding, bool bias) {
             DTRAIN_CHECK_USAGE(in > 0 && out > 0 && k > 0 && stride > 0 && padding >= 0, "Conv2d(", in, ", ", out,
                                ", ", k, "): sizes and stride must be positive, padding >= 0");
             return std::make_shared<nn::Conv2d>(in, out, k, rng(), stride, padding, bias);
           }), py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("bias") = true)
      .def_readonly("weight", &nn::Conv2d::weight)
      .def_readonly("bias", &nn::Conv2d::bias);
  py::class_<nn::MaxPool2d, nn::Module, std::shared_ptr<nn::MaxPool2d>>(nnm, "MaxPool2d")
      .def(py::init<int64_t, int64_t, int64_t>(), py::arg("kernel_size"), py::arg("stride") = 0, py::arg("padding") = 0);
  py::class_<nn::AvgPool2d, nn::Module, std::shared_ptr<nn::AvgPool2d>>(nnm, "AvgPool2d")
      .def(py::init<int64_t, int64_t, int64_t>(), py::arg("kernel_size"), py::arg("stride") = 0, py::arg("padding") = 0);
  py::class_<nn::ReLU, nn::Module, std::shared_ptr<nn::ReLU>>(nnm, "ReLU").def(py::init<>());
  py::class_<nn::GELU, nn::Module, std::shared_ptr<nn::GELU>>(nnm, "GELU").def(py::init<>());
  py::class_<nn::Sigmoid, nn::Module, std::shared_ptr<nn::Sigmoid>>(nnm, "Sigmoid").def(py::init<>());
  py::class_<nn::Tanh, nn::Module, std::shared_ptr<nn::Tanh>>(nnm, "Tanh").def(py::init<>());
  py::class_<nn::Flatten, nn::Module, std::shared_ptr<nn::Flatten>>(nnm, "Flatten").def(py::init<>());
  py::class_<nn::Dropout, nn::Module, std::shared_ptr<nn::Dropout>>(nnm, "Dropout")
      .def(py::init([](float p, uint64_t seed) { return std::make_shared<nn::Dropout>(p, seed); }),
           py::arg("p") = 0.5f, py::arg("seed") = 0);
  py::class_<nn::BatchNorm2d, nn::Module, std::shared_ptr<nn::BatchNorm2d>>(nnm, "BatchNorm2d")
      .def(py::init<int64_t, float, float>(), py::arg("num_features"), py::arg("eps") = 1e-5f,
           py::arg("momentum") = 0.1f)
      .def_readonly("weight", &nn::BatchNorm2d::weight)
      .def_readonly("bias", &nn::BatchNorm2d::bias);
  py::class_<nn::LayerNorm, nn::Module, std::shared_ptr<nn::LayerNorm>>(nnm, "LayerNorm")
      .def(py::init<int64_t, float>(), py::arg("normalized_shape"), py::arg("eps") = 1e-5f)
      .def_readonly("weight", &nn::LayerNorm::weight)
      .def_readonly("bias", &nn::LayerNorm::bias);
  py::class_<nn::Embedding, nn::Module, std::shared_ptr<nn::Embedding>>(nnm, "Embedding")
      .def(py::init([rng](int64_t vocab, int64_t dim) { return std::make_shared<nn::Embedding>(vocab, dim, rng()); }),
           py::arg("num_embeddings"), py::arg("embedding_dim"))
      .def_readonly("weight", &nn::Embedding::weight);
  py::class_<nn::CausalSelfAttention, nn::Module, std::shared_ptr<nn::CausalSelfAttention>>(nnm, "CausalSelfAttention")
      .def(py::init([rng](int64_t nEmbd, int64_t nHead) {
             DTRAIN_CHECK_USAGE(nEmbd > 0 && nHead > 0 && nEmbd % nHead == 0, "CausalSelfAttention: n_embd ", nEmbd,
                                " must be a positive multiple of n_head ", nHead);
             return std::make_shared<nn::CausalSelfAttention>(nEmbd, nHead, rng());
           }), py::arg("n_embd"), py::arg("n_head"));
  py::class_<nn::GptMlp, nn::Module, std::shared_ptr<nn::GptMlp>>(nnm, "GptMlp")
      .def(py::init([rng](int64_t nEmbd) { return std::make_shared<nn::GptMlp>(nEmbd, rng()); }), py::arg("n_embd"));
  py::class_<nn::GptBlock, nn::Module, std::shared_ptr<nn::GptBlock>>(nnm, "GptBlock")
      .def(py::init([rng](int64_t nEmbd, int64_t nHead) {
             DTRAIN_CHECK_USAGE(nEmbd > 0 && nHead > 0 && nEmbd % nHead == 0, "GptBlock: n_embd ", nEmbd,
                                " must be a positive multiple of n_head ", nHead);
             nn::GptConfig c;
             c.nEmbd = nEmbd;
             c.nHead = nHead;
             return std::make_shared<nn::GptBlock>(c, rng());
           }), py::arg("n_embd"), py::arg("n_head"), "x + attn(ln_1(x)), then x + mlp(ln_2(x)): [B, T, C] -> [B, T, C]");
  py::class_<nn::Gpt, nn::Module, std::shared_ptr<nn::Gpt>>(nnm, "Gpt")
      .def_property_readonly("block_size", [](const nn::Gpt& g) { return g.config().blockSize; })
      .def_property_readonly("vocab_size", [](const nn::Gpt& g) { return g.config().vocab; });
  py::class_<nn::Sequential, nn::Module, std::shared_ptr<nn::Sequential>>(nnm, "_Sequential", py::dynamic_attr())
      .def(py::init<>())
      .def("append", &nn::Sequential::append, py::keep_alive<1, 2>())
      .def("__len__", &nn::Sequential::size);
}

}  // namespace dtrain::python
