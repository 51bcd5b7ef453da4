#pragma once
// Tensor fusion (Horovod): gradients packed into a few contiguous buckets so
// that one allreduce moves many small tensors at once. Parameters are assigned
// in the order backward produces their gradients (the reverse of the model's
// registration order), so a bucket becomes complete as early as possible, and
// each parameter's .grad is made a view into its bucket (setGradBuffer): backward
// writes straight into the buffer that is communicated, with no packing copy.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "autograd/Variable.h"
#include "tensor/Tensor.h"

namespace dtrain::parallel {

struct FusionBucket {
  Tensor buffer;                           // flat f32, the bucket's gradients back to back
  std::vector<autograd::Variable> params;  // in bucket order
  int64_t numel() const { return buffer.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * sizeof(float); }
};

// The grouping rule alone, for tensors of `bytes` in launch order (the
// reverse of registration): the index each bucket starts at. A bucket closes
// once it holds at least `bucketBytes`; a tensor `alone` marks gets one of
// its own (empty: none). The simulator (plan/MemoryModel.cpp) groups its
// profile's tensors by it too.
std::vector<size_t> fusionBucketStarts(const std::vector<double>& bytes, double bucketBytes,
                                       const std::vector<char>& alone = {});

// Splits `params` (model registration order) into buckets of about `bucketBytes`:
// a bucket is closed once it holds at least that many bytes, so a tensor larger
// than the limit gets a bucket of its own and none is ever split. Installs the
// gradient buffers. Returns the buckets in launch order. Each buffer is padded
// with zeros to a multiple of padTo floats (ZeRO splits it into equal slices).
// A parameter `isolate` names gets a bucket of its own (ZeRO: the same layout
// on every rank that holds it, whatever else each holds).
std::vector<FusionBucket> makeFusionBuckets(
    const std::vector<autograd::Variable>& params, size_t bucketBytes, int64_t padTo = 1,
    const std::function<bool(const autograd::Variable&)>& isolate = nullptr);

}  // namespace dtrain::parallel
