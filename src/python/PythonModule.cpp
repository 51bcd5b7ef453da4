// The extension module dtrain._dtrain; the package dtrain (src/python/dtrain/)
// re-exports it with the parts written in Python (nn.Module's attribute
// registration, Sequential, models). Each topic binds itself (Common.h).
#include "python/BindingHelpers.h"

#include "core/StopSignal.h"

PYBIND11_MODULE(_dtrain, m) {
  using namespace dtrain;
  namespace py = pybind11;
  m.doc() = "dtrain: distributed and parallel deep-learning training (C++), from Python";
  m.attr("__version__") = DTRAIN_VERSION;
  // One-line errors: bad usage, configuration, shapes or dtypes -> ValueError, the rest -> RuntimeError.
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
  python::bindTensors(m);
  python::bindNn(m);
  python::bindModels(m);
  python::bindConfig(m);
  python::bindTrain(m);
}
