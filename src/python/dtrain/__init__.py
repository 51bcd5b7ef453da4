"""dtrain from Python: configurations, NumPy data, models defined in Python or
built by name, and training under every strategy; each step runs in C++
(the extension module dtrain._dtrain). See docs/guide/python.md."""
import os as _os

# OpenMP threads that spin while they wait collapse on cores another process
# uses (10-100x): sleep instead, unless the user chose (cli/WaitPolicy.h).
# libgomp reads the policy when it loads, with the extension module below.
if not _os.environ.get("OMP_WAIT_POLICY") and not _os.environ.get("GOMP_SPINCOUNT"):
    _os.environ["OMP_WAIT_POLICY"] = "passive"

from . import _dtrain
from ._dtrain import __version__, Config, Tensor, load, save, tensor, manual_seed, generate
from . import nn, models, data as _data_sources
data = _data_sources  # dtrain.data.Shards, dtrain.data.ImageFolder

__all__ = ["Config", "Tensor", "tensor", "train", "load", "save", "generate", "manual_seed", "nn", "models", "data"]


def train(model=None, data=None, test=None, config=None, on_metrics=None):
    """Trains under the configuration's strategy; returns the result line as a dict
    (None on the processes of an mpirun that do not report).

    train(model, data=(x, y), test=(x, y), config=cfg, on_metrics=print): trains the
    given model (a dtrain.nn module or dtrain.models.build's); afterwards it holds
    the trained parameters. train(cfg, data=...): the configuration's model by name.
    data: (features [N, ...], integer labels [N]) NumPy arrays, text (str/bytes)
    for a language model, a streamed source (dtrain.data.Shards, ImageFolder:
    its options go into a copy of the configuration); None: the configuration's
    [data]. on_metrics: called with each metrics record (dict), on one thread,
    with the GIL held."""
    if isinstance(data, _data_sources._Source):
        if test is not None:
            raise ValueError("train: a streamed source names its own test set (Shards(test=...), ImageFolder's val folder)")
        if isinstance(model, Config):
            model = data._configured(model)
        else:
            config = data._configured(config if config is not None else Config())
        data = None
    if isinstance(model, Config):
        if config is not None:
            raise ValueError("train: give the configuration once (train(cfg, ...) or train(model, config=cfg))")
        return _dtrain._train_config(model, data, test, on_metrics)
    if model is None:
        return _dtrain._train_config(config if config is not None else Config(), data, test, on_metrics)
    if not isinstance(model, nn.Layer):
        raise ValueError("train: expected a dtrain.nn module or a dtrain.Config (got %s)" % type(model).__name__)
    return _dtrain._train_model(model, config if config is not None else Config(), data, test, on_metrics)
