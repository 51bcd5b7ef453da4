// dtrain.Tensor (an autograd Variable) and the differentiable ops of
// dtrain.nn.functional. NumPy arrays come in without a copy when they are
// float32 and C-contiguous (the tensor borrows the buffer and keeps the array
// alive); np.asarray(t) is a view of the tensor's memory (buffer protocol).
// Every op releases the GIL while C++ computes: the ranks of a run (threads)
// run their Python forwards interleaved, the kernels in parallel.
#include "python/BindingHelpers.h"

#include <cstring>

#include "autograd/Ops.h"
#include "tensor/Half.h"
#include "tensor/Storage.h"

namespace dtrain::python {

namespace {

std::string dtypeText(const py::handle& a) { return std::string(py::str(a.attr("dtype"))); }

// The owner of a borrowed buffer: a reference to the array, dropped with the
// GIL held (tensors die on rank threads too), or leaked once Python is gone.
std::shared_ptr<void> arrayOwner(py::object array) {
  return std::shared_ptr<void>(new py::object(std::move(array)), [](void* p) {
    auto* o = static_cast<py::object*>(p);
    if (!Py_IsInitialized()) {
      o->release();
    } else {
      py::gil_scoped_acquire gil;
      o->dec_ref();
      o->release();
    }
    delete o;
  });
}

// A float32 C-contiguous array as a tensor over its memory.
Tensor borrow(py::array_t<float> a) {
  Shape shape;
  for (py::ssize_t d = 0; d < a.ndim(); ++d) shape.push_back(a.shape(d));
  void* ptr = const_cast<void*>(static_cast<const void*>(a.data()));
  auto storage = std::make_shared<Storage>(ptr, static_cast<size_t>(a.nbytes()), arrayOwner(a));
  return Tensor::fromStorage(std::move(storage), shape, DType::F32);
}

const char* bufferFormat(DType d) {
  switch (d) {
    case DType::F32: return "f";
    case DType::I32: return "i";
    case DType::I64: return "q";
    case DType::U8: return "B";
    default: throw UsageError("dtrain.Tensor: 16-bit tensors have no NumPy view (use .numpy())");
  }
}

Variable needData(const Variable& v, const char* what) {
  DTRAIN_CHECK_USAGE(v.defined() && v.data().defined(), what, ": the tensor holds no data");
  return v;
}

// NumPy's names of the dtypes.
const char* numpyName(DType d) {
  switch (d) {
    case DType::F32: return "float32";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::U8: return "uint8";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    default: return "unknown";
  }
}

std::string shapeTuple(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// A Python number or tensor as a Variable shaped like `like` (scalars broadcast).
Variable operand(const py::handle& v, const Variable& like) {
  if (py::isinstance<Variable>(v)) return v.cast<Variable>();
  if (py::isinstance<py::float_>(v) || py::isinstance<py::int_>(v))
    return Variable(Tensor::full(like.shape(), v.cast<float>()));
  return Variable(tensorFromArray(v, "operand"));
}

// a op b with both operands broadcast to their common shape (NumPy's rules).
template <typename Op>
Variable broadcasting(const Variable& a, const Variable& b, Op op) {
  return asUsage([&] {
    if (a.shape() == b.shape()) return op(a, b);
    const Shape shape = autograd::broadcastShape(a.shape(), b.shape());
    return op(autograd::broadcastTo(a, shape), autograd::broadcastTo(b, shape));
  });
}

Tensor labelsOf(const py::handle& v) {
  Tensor t = py::isinstance<Variable>(v) ? v.cast<Variable>().data() : tensorFromArray(v, "labels");
  DTRAIN_CHECK_USAGE(t.dtype() == DType::I32, "labels: expected integer class indices (got float)");
  return t;
}

}  // namespace

Tensor tensorFromArray(const py::handle& value, const std::string& what) {
  if (py::isinstance<Variable>(value)) return value.cast<Variable>().data();
  py::array a = py::array::ensure(value);
  DTRAIN_CHECK_USAGE(a, what, ": expected a NumPy array (got ",
                     std::string(py::str(value.get_type().attr("__name__"))), ")");
  const char kind = a.dtype().kind();
  if (kind == 'f') {
    // float32 and C-contiguous: borrowed; else one copy into a float32 array, then borrowed.
    return borrow(py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(a));
  }
  if (kind == 'i' || kind == 'u' || kind == 'b') {
    auto ints = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    Shape shape;
    for (py::ssize_t d = 0; d < ints.ndim(); ++d) shape.push_back(ints.shape(d));
    Tensor t = Tensor::empty(shape, DType::I32);
    int32_t* dst = t.data<int32_t>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      const int64_t x = ints.data()[i];
      DTRAIN_CHECK_USAGE(x >= INT32_MIN && x <= INT32_MAX, what, ": integer ", x, " at flat index ", i,
                         " does not fit int32");
      dst[i] = static_cast<int32_t>(x);
    }
    return t;
  }
  throw UsageError(what + ": expected a float or integer array (got dtype " + dtypeText(a) + ")");
}

py::array arrayCopy(const Tensor& t) {
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
      throw Error("a tensor of an unsupported dtype");
  }
}

Tensor arrayAs(const py::handle& value, DType dtype, const std::string& what) {
  py::array a = py::isinstance<Variable>(value) ? py::array(py::cast(value.cast<Variable>()))
                                                : py::array::ensure(value);
  DTRAIN_CHECK_USAGE(a, what, ": expected an array");
  const char kind = a.dtype().kind();
  DTRAIN_CHECK_USAGE(kind == 'f' || kind == 'i' || kind == 'u', what, ": expected a float or integer array (got dtype ",
                     dtypeText(a), ")");
  Shape shape;
  for (py::ssize_t d = 0; d < a.ndim(); ++d) shape.push_back(a.shape(d));
  Tensor t = Tensor::empty(shape, dtype);
  if (dtype == DType::F32) {
    auto f = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(a);
    std::memcpy(t.rawData(), f.data(), t.nbytes());
  } else if (dtype == DType::I64) {
    auto f = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    std::memcpy(t.rawData(), f.data(), t.nbytes());
  } else if (dtype == DType::I32) {
    auto f = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(a);
    std::memcpy(t.rawData(), f.data(), t.nbytes());
  } else {
    throw UsageError(what + ": cannot load into a tensor of this dtype");
  }
  return t;
}

void bindTensors(py::module_& m) {
  using namespace autograd;
  using Release = py::call_guard<py::gil_scoped_release>;
  py::class_<Variable>(m, "Tensor", py::buffer_protocol(),
                       "A dtrain tensor with autograd; np.asarray(t) is a view of its memory")
      .def(py::init([](const py::handle& array, bool requiresGrad) {
             return Variable(tensorFromArray(array, "dtrain.Tensor"), requiresGrad);
           }),
           py::arg("array"), py::arg("requires_grad") = false,
           "From a NumPy array: float32 C-contiguous arrays are shared, not copied")
      .def_buffer([](Variable& v) -> py::buffer_info {
        Tensor& t = needData(v, "buffer").data();
        std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end()), strides;
        const auto item = static_cast<py::ssize_t>(dtypeSize(t.dtype()));
        for (int64_t s : t.strides()) strides.push_back(s * item);
        return py::buffer_info(t.rawData(), item, bufferFormat(t.dtype()), t.dim(), shape, strides);
      })
      .def_property_readonly("shape", [](const Variable& v) {
        return py::tuple(py::cast(std::vector<int64_t>(v.shape().begin(), v.shape().end())));
      })
      .def_property_readonly("dtype", [](const Variable& v) { return std::string(numpyName(v.data().dtype())); })
      .def_property("requires_grad", &Variable::requiresGrad, &Variable::setRequiresGrad)
      .def_property_readonly("is_leaf", &Variable::isLeaf)
      .def_property_readonly("grad", [](const Variable& v) -> py::object {
        if (!v.requiresGrad() || !v.isLeaf() || !v.impl()->grad.defined()) return py::none();
        return py::cast(Variable(v.impl()->grad, false));
      }, "The accumulated gradient (a Tensor sharing .grad's memory), None before backward")
      .def("numpy", [](py::object self) { return py::array(self); }, "A NumPy view of the memory")
      .def("item", [](const Variable& v) { return asUsage([&] { return v.item(); }); })
      .def("backward", [](Variable& v) { asUsage([&] { v.backward(); }); }, Release(),
           "Backward from this scalar: .grad of every leaf that requires it")
      .def("zero_grad", [](Variable& v) { v.zeroGrad(); })
      .def("detach", &Variable::detach)
      .def("__deepcopy__", [](const Variable& v, py::dict) {
        return Variable(needData(v, "copy").data().clone(), v.requiresGrad());
      })
      .def("reshape", [](const Variable& v, py::args shape) {
             Shape s;
             for (auto d : (shape.size() == 1 && py::isinstance<py::sequence>(shape[0]) ? shape[0].cast<py::tuple>() : shape))
               s.push_back(d.cast<int64_t>());
             py::gil_scoped_release r;
             return asUsage([&] { return reshape(v, s); });
           })
      .def("flatten", [](const Variable& v, int64_t start) { return asUsage([&] { return flatten(v, start); }); },
           py::arg("start_dim") = 1, Release())
      .def("sum", [](const Variable& v) { return asUsage([&] { return sum(v); }); }, Release())
      .def("mean", [](const Variable& v) { return asUsage([&] { return mean(v); }); }, Release())
      .def("relu", [](const Variable& v) { return relu(v); }, Release())
      .def("__add__", [](const Variable& a, const py::handle& b) { Variable o = operand(b, a); py::gil_scoped_release r; return broadcasting(a, o, add); })
      .def("__radd__", [](const Variable& a, const py::handle& b) { Variable o = operand(b, a); py::gil_scoped_release r; return broadcasting(o, a, add); })
      .def("__sub__", [](const Variable& a, const py::handle& b) { Variable o = operand(b, a); py::gil_scoped_release r; return broadcasting(a, o, sub); })
      .def("__rsub__", [](const Variable& a, const py::handle& b) { Variable o = operand(b, a); py::gil_scoped_release r; return broadcasting(o, a, sub); })
      .def("__mul__", [](const Variable& a, const py::handle& b) {
        if (py::isinstance<py::float_>(b) || py::isinstance<py::int_>(b)) { float s = b.cast<float>(); py::gil_scoped_release r; return scale(a, s); }
        Variable o = operand(b, a); py::gil_scoped_release r; return broadcasting(a, o, mul); })
      .def("__rmul__", [](const Variable& a, float s) { return scale(a, s); }, Release())
      .def("__truediv__", [](const Variable& a, float s) { return scale(a, 1.0f / s); }, Release())
      .def("__neg__", [](const Variable& a) { return scale(a, -1.0f); }, Release())
      .def("__matmul__", [](const Variable& a, const Variable& b) { return asUsage([&] { return matmul(a, b); }); }, Release())
      .def("__len__", [](const Variable& v) { return v.shape().empty() ? 0 : v.shape()[0]; })
      .def("__repr__", [](const Variable& v) {
        if (!v.defined()) return std::string("dtrain.Tensor(undefined)");
        return "dtrain.Tensor(shape=" + shapeTuple(v.shape()) + ", dtype=" + numpyName(v.data().dtype()) +
               (v.requiresGrad() ? ", requires_grad=True" : "") + ")";
      });
  m.def("tensor", [](const py::handle& array, bool requiresGrad) {
        return Variable(tensorFromArray(array, "dtrain.tensor"), requiresGrad);
      }, py::arg("array"), py::arg("requires_grad") = false,
      "A Tensor over a NumPy array (float32 C-contiguous: shared memory, no copy)");

  // dtrain.nn.functional: each op records its backward (in C++) when an input requires grad.
  py::module_ f = m.def_submodule("functional", "Differentiable ops (kernels and backward in C++)");
  auto op = [&](const char* name, auto fn, const char* doc, auto... args) { f.def(name, fn, Release(), doc, args...); };
  op("linear", [](const Variable& x, const Variable& w, const Variable* b) {
       return asUsage([&] { return linear(x, w, b ? *b : Variable()); });
     }, "x W^T + b (x [..., in], W [out, in], b [out] or None)", py::arg("x"), py::arg("weight"), py::arg("bias") = nullptr);
  op("matmul", [](const Variable& a, const Variable& b) { return asUsage([&] { return matmul(a, b); }); }, "[M, K] x [K, N]");
  op("add", [](const Variable& a, const Variable& b) { return broadcasting(a, b, add); }, "a + b (broadcast as NumPy)");
  op("mul", [](const Variable& a, const Variable& b) { return broadcasting(a, b, mul); }, "a * b (broadcast as NumPy)");
  op("relu", [](const Variable& x) { return relu(x); }, "max(x, 0)");
  op("gelu", [](const Variable& x) { return gelu(x); }, "GELU (tanh approximation as GPT-2)");
  op("sigmoid", [](const Variable& x) { return sigmoid(x); }, "1 / (1 + exp(-x))");
  op("tanh", [](const Variable& x) { return autograd::tanh(x); }, "tanh(x)");
  op("softmax", [](const Variable& x) { return asUsage([&] { return softmax(x); }); }, "row-wise, 2-d");
  op("log_softmax", [](const Variable& x) { return asUsage([&] { return logSoftmax(x); }); }, "row-wise, 2-d");
  op("flatten", [](const Variable& x, int64_t start) { return asUsage([&] { return flatten(x, start); }); }, "dims from start_dim on, into one", py::arg("x"), py::arg("start_dim") = 1);
  op("conv2d", [](const Variable& x, const Variable& w, const Variable* b, int64_t stride, int64_t padding) {
       return asUsage([&] { return conv2d(x, w, b ? *b : Variable(), stride, padding); });
     }, "NCHW convolution", py::arg("x"), py::arg("weight"), py::arg("bias") = nullptr, py::arg("stride") = 1, py::arg("padding") = 0);
  op("max_pool2d", [](const Variable& x, int64_t k, int64_t stride, int64_t padding) {
       return asUsage([&] { return maxPool2d(x, k, stride ? stride : k, padding); });
     }, "max pooling (stride 0: the kernel)", py::arg("x"), py::arg("kernel_size"), py::arg("stride") = 0, py::arg("padding") = 0);
  op("avg_pool2d", [](const Variable& x, int64_t k, int64_t stride, int64_t padding) {
       return asUsage([&] { return avgPool2d(x, k, stride ? stride : k, padding); });
     }, "average pooling (stride 0: the kernel)", py::arg("x"), py::arg("kernel_size"), py::arg("stride") = 0, py::arg("padding") = 0);
  op("global_avg_pool2d", [](const Variable& x) { return asUsage([&] { return globalAvgPool2d(x); }); }, "[N, C, H, W] -> [N, C]");
  op("layer_norm", [](const Variable& x, const Variable& w, const Variable& b, float eps) {
       return asUsage([&] { return layerNorm(x, w, b, eps); });
     }, "over the last dim", py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("eps") = 1e-5f);
  op("causal_self_attention", [](const Variable& qkv, int64_t nHead) {
       return asUsage([&] { return causalSelfAttention(qkv, nHead); });
     }, "GPT's fused attention: qkv [B, T, 3C] -> [B, T, C]");
  f.def("cross_entropy", [](const Variable& logits, const py::handle& labels) {
        Tensor y = labelsOf(labels);
        py::gil_scoped_release r;
        return asUsage([&] { return crossEntropy(logits, y); });
      }, "mean cross-entropy of logits [..., classes] and integer labels [...]");
  f.def("mse_loss", [](const Variable& pred, const py::handle& target) {
        Tensor t = py::isinstance<Variable>(target) ? target.cast<Variable>().data() : tensorFromArray(target, "target");
        py::gil_scoped_release r;
        return asUsage([&] { return mseLoss(pred, t); });
      }, "mean squared error");
  f.def("embedding", [](const py::handle& indices, const Variable& weight) {
        Tensor i = labelsOf(indices);
        py::gil_scoped_release r;
        return asUsage([&] { return embedding(i, weight); });
      }, "rows of weight [V, D] at integer indices");
}

}  // namespace dtrain::python
