#pragma once
// What oneDNN's matmuls (Onednn.cpp) and convolutions (OnednnConv.cpp) share:
// one engine and stream per calling thread, and the OpenMP team size their
// primitives run with. Internal to src/tensor/cpu (it includes dnnl.hpp).
#include <cstddef>

#include <dnnl.hpp>

namespace dtrain::kernels::onednn::detail {

struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  int threads = -1;  // the team size last set on this thread
};

// This thread's context, with OpenMP's team size set for the next primitive:
// setThreads()'s count, or 1 inside one of dtrain's parallel loops (which
// already uses every thread: a team nested in it would oversubscribe the
// cores). Per thread: ranks that are threads of one process never share a
// stream, and caches keyed by context().threads need no lock.
Context& context();

// FNV-1a over a primitive cache key's bytes (the keys have no padding: their
// equality is memcmp).
struct BytewiseHash {
  template <typename Key>
  size_t operator()(const Key& k) const {
    size_t h = 1469598103934665603ull;
    const auto* p = reinterpret_cast<const unsigned char*>(&k);
    for (size_t i = 0; i < sizeof(Key); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
  }
};

}  // namespace dtrain::kernels::onednn::detail
