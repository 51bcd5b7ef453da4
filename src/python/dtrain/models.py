"""dtrain.models: the built-in models by name (mlp, lenet, resnet-*, gpt-*)."""
from ._dtrain.models import build, names

__all__ = ["build", "names"]
