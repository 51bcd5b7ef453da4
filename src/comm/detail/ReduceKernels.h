#pragma once
// Element-wise reduction kernels of the communication layer, dispatched on dtype.
// Kept here (not in tensor/cpu) so comm depends only on the Tensor interface;
// simple loops that the compiler vectorizes (-O3 -march=native).
#include <cstddef>

#include "comm/CollectiveTypes.h"

namespace dtrain::comm::detail {

// Throws dtrain::Error when `op` cannot reduce `dtype` (f16/bf16 for now).
void checkReducible(DType dtype, ReduceOp op);

// dst[i] = dst[i] (op) src[i]. Avg reduces as Sum (scale afterwards).
void reduceInto(void* dst, const void* src, size_t count, DType dtype, ReduceOp op);

// dst[i] = a[i] (op) b[i]; dst may alias a or b.
void reduce2(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op);

// dst[i] = srcs[0][i] (op) ... (op) srcs[n-1][i], blocked so partial results stay
// in L1. dst may alias srcs[0] only.
void reduceMany(void* dst, const void* const* srcs, int n, size_t count, DType dtype, ReduceOp op);

// The Avg finishing step: data[i] /= n (integers divide, truncating).
void scaleForAvg(void* data, size_t count, DType dtype, int n);

}  // namespace dtrain::comm::detail
