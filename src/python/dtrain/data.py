"""Streamed data sources for dtrain.train(data=...): the [data] options of
--dataset shards and --dataset imagefolder as objects (docs/guide/your-data.md).
The samples are read, decoded and shuffled in C++ loader threads, as from the
command line; the configuration given to train is copied, not changed."""
import copy as _copy

__all__ = ["Shards", "ImageFolder"]


def _normalize(value):
    if value is None or isinstance(value, str):
        return value
    return ",".join(str(float(v)) for v in value)


class _Source:
    dataset = None

    def __init__(self, **options):
        self._options = {k: v for k, v in options.items() if v is not None}

    def _configured(self, config):
        c = _copy.copy(config)
        c.update(data=dict(name=self.dataset, **self._options))
        return c

    def __repr__(self):
        items = ", ".join("%s=%r" % kv for kv in sorted(self._options.items()))
        return "dtrain.data.%s(%s)" % (type(self).__name__, items)


class Shards(_Source):
    """WebDataset-style tar shards: Shards('DIR/train-{0000..0127}.tar',
    test='DIR/test-*.tar', loader_threads=2, shuffle_buffer=1000,
    skip_bad_samples=False, image_size=None (for .jpg/.png members), normalize=None
    ((mean, std) or three means then three stds), augment=None)."""
    dataset = "shards"

    def __init__(self, train, test=None, loader_threads=None, shuffle_buffer=None,
                 skip_bad_samples=None, image_size=None, normalize=None, augment=None):
        super().__init__(train_data=train, test_data=test, loader_threads=loader_threads,
                         shuffle_buffer=shuffle_buffer, skip_bad_samples=skip_bad_samples,
                         image_size=image_size, normalize=_normalize(normalize), augment=augment)


class ImageFolder(_Source):
    """ImageNet's layout: ImageFolder('D', image_size=224) reads D/train/<class>/*
    and D/val/<class>/* (JPEG, PNG), classes sorted by name as torchvision's
    ImageFolder; augment='resized-crop,flip' for RandomResizedCrop and flips."""
    dataset = "imagefolder"

    def __init__(self, root, image_size, normalize=None, augment=None, loader_threads=None,
                 shuffle_buffer=None, skip_bad_samples=None):
        super().__init__(dir=root, image_size=image_size, normalize=_normalize(normalize),
                         augment=augment, loader_threads=loader_threads,
                         shuffle_buffer=shuffle_buffer, skip_bad_samples=skip_bad_samples)
