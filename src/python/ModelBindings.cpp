// dtrain.models: the registry's models by name (nn/ModelRegistry.h), and
// dtrain.generate: sampling from a GPT (runtime/Generate.h).
#include "python/BindingHelpers.h"

#include "nn/Gpt.h"
#include "runtime/Generate.h"

namespace dtrain::python {

namespace {

std::vector<int32_t> promptTokens(const py::handle& prompt) {
  std::string bytes;
  if (py::isinstance<py::bytes>(prompt)) bytes = prompt.cast<std::string>();
  else if (py::isinstance<py::str>(prompt)) bytes = py::str(prompt).attr("encode")("utf-8").cast<std::string>();
  else throw UsageError("generate: the prompt must be str or bytes");
  std::vector<int32_t> tokens;
  for (char c : bytes) tokens.push_back(static_cast<unsigned char>(c));
  return tokens;
}

}  // namespace

void bindModels(py::module_& m) {
  py::module_ models = m.def_submodule("models", "The built-in models by name");
  models.def("names", [] { return nn::registeredModelNames(); }, "The models dtrain can build by name");
  models.def("build", [](const std::string& name, uint64_t seed, std::optional<std::vector<int64_t>> sampleShape,
                         std::optional<int64_t> classes, std::optional<int64_t> nLayer, std::optional<int64_t> nHead,
                         std::optional<int64_t> nEmbd, std::optional<int64_t> blockSize,
                         std::vector<int64_t> mlpHidden) {
        BuiltModel b;
        b.name = name;
        b.overrides.nLayer = nLayer;
        b.overrides.nHead = nHead;
        b.overrides.nEmbd = nEmbd;
        b.overrides.blockSize = blockSize;
        b.overrides.mlpHidden = std::move(mlpHidden);
        if (sampleShape) b.shape.sample = *sampleShape;
        if (classes) b.shape.classes = *classes;
        nn::modelInfo(name, b.overrides);  // unknown names and bad overrides: UsageError
        auto model = nn::buildModel(name, b.overrides, seed, b.shape);
        rememberBuilt(model, b);
        return model;
      },
      py::arg("name"), py::arg("seed") = 0, py::arg("sample_shape") = py::none(), py::arg("classes") = py::none(),
      py::arg("n_layer") = py::none(), py::arg("n_head") = py::none(), py::arg("n_embd") = py::none(),
      py::arg("block_size") = py::none(), py::arg("mlp_hidden") = std::vector<int64_t>{},
      "A built-in model with the initial weights `dtrain train --model NAME --seed SEED` starts from "
      "(classifiers: for samples of sample_shape and `classes` classes; Fashion-MNIST's by default)");

  m.def("generate", [](const std::shared_ptr<nn::Module>& model, const py::handle& prompt, int64_t maxNewTokens,
                       double temperature, int64_t topK, uint64_t seed) {
        int64_t blockSize = modelInfoOf(*model).blockSize;
        if (auto g = std::dynamic_pointer_cast<nn::Gpt>(model)) blockSize = g->config().blockSize;
        DTRAIN_CHECK_USAGE(blockSize > 0, "generate: ", model->describe(),
                           " is not a language model (build one with dtrain.models.build('gpt-small'))");
        runtime::GenerateOptions o;
        o.maxNewTokens = maxNewTokens;
        o.temperature = temperature;
        o.topK = topK;
        o.seed = seed;
        std::vector<int32_t> tokens = promptTokens(prompt);
        {
          py::gil_scoped_release release;
          tokens = runtime::generate(*model, blockSize, tokens, o);
        }
        std::string bytes;
        for (int32_t t : tokens) bytes.push_back(static_cast<char>(t));
        return py::bytes(bytes).attr("decode")("utf-8", "replace");
      },
      py::arg("model"), py::arg("prompt"), py::arg("max_new_tokens") = 200, py::arg("temperature") = 0.8,
      py::arg("top_k") = 40, py::arg("seed") = 1,
      "The prompt and max_new_tokens sampled bytes as text (as `dtrain generate`; deterministic for a seed)");
}

}  // namespace dtrain::python
