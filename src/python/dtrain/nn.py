"""dtrain.nn: the layers (C++ modules: Linear, Conv2d, ...), Sequential, and
Module, the base of a model whose forward is written in Python.

A Module's attributes that are modules or parameters (Parameter(array)) become
its children and parameters, in the order they are set (torch's names:
"conv1.weight"); forward composes layers and dtrain.nn.functional ops, whose
kernels and backward run in C++."""
import copy as _copy

from . import _dtrain
from ._dtrain import Tensor
from ._dtrain.nn import (Layer, Linear, Conv2d, MaxPool2d, AvgPool2d, ReLU, GELU, Sigmoid, Tanh, Flatten,
                         Dropout, BatchNorm2d, LayerNorm, Embedding, CausalSelfAttention, GptMlp, GptBlock, Gpt)
from ._dtrain import functional

__all__ = ["Module", "Sequential", "Parameter", "Layer", "Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "ReLU",
           "GELU", "Sigmoid", "Tanh", "Flatten", "Dropout", "BatchNorm2d", "LayerNorm", "Embedding",
           "CausalSelfAttention", "GptMlp", "GptBlock", "Gpt", "functional"]


def Parameter(array):
    """A trainable tensor (a float32 copy of `array`, its own memory: the optimizer
    updates it in place) to set as a Module attribute."""
    t = _copy.deepcopy(array if isinstance(array, Tensor) else Tensor(array))
    t.requires_grad = True
    return t


class Module(_dtrain.nn._ScriptModule):
    """Subclass it as torch.nn.Module: set layers and Parameters in __init__ (after
    super().__init__()), write forward(self, x). Replicas for the ranks of a run are
    copy.deepcopy's of the object (layers and parameters copied, other attributes
    deep-copied), so a model needs no constructor arguments to be re-run."""

    def __init__(self):
        _dtrain.nn._ScriptModule.__init__(self, type(self).__name__)
        object.__setattr__(self, "_dtrain_registered", set())

    def __setattr__(self, name, value):
        registered = self.__dict__.get("_dtrain_registered")
        if registered is None:
            raise TypeError("%s: call super().__init__() before setting attributes" % type(self).__name__)
        is_child = isinstance(value, Layer)
        is_param = isinstance(value, Tensor) and value.requires_grad and value.is_leaf
        if name in registered:
            raise ValueError("%s.%s is registered already: a Module's layers and parameters are set once, "
                             "in __init__" % (type(self).__name__, name))
        if is_child:
            self._add_child(name, value)
            registered.add(name)
        elif is_param:
            value = self._add_parameter(name, value)
            registered.add(name)
        super().__setattr__(name, value)

    def __deepcopy__(self, memo):
        cls = type(self)
        new = cls.__new__(cls)
        Module.__init__(new)
        memo[id(self)] = new
        for name, value in self.__dict__.items():
            if name != "_dtrain_registered":
                setattr(new, name, _copy.deepcopy(value, memo))
        new.train(self.training)
        return new


class Sequential(_dtrain.nn._Sequential):
    """Layers applied in order; children named "0", "1", ... as torch.nn.Sequential
    (pipeline parallelism cuts it into stages; Linear -> activation -> Linear runs
    are what tensor parallelism splits)."""

    def __init__(self, *layers):
        super().__init__()
        self._layers = []
        for layer in layers:
            self.append(layer)

    def append(self, layer):
        if not isinstance(layer, Layer):
            raise ValueError("Sequential: expected dtrain.nn modules (got %s)" % type(layer).__name__)
        super().append(layer)
        self._layers.append(layer)  # a Python-defined layer's forward lives in this object
        return self

    def __getitem__(self, i):
        return self._layers[i]

    def __iter__(self):
        return iter(self._layers)

    def __deepcopy__(self, memo):
        new = Sequential(*[_copy.deepcopy(layer, memo) for layer in self._layers])
        new.train(self.training)
        return new
