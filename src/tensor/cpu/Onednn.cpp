#include "tensor/cpu/Onednn.h"

#include <omp.h>

#include <atomic>
#include <cstring>
#include <dnnl.hpp>
#include <unordered_map>

#include "core/Error.h"
#include "core/ThreadPool.h"
#include "tensor/cpu/OnednnContext.h"

namespace dtrain::kernels::onednn {
namespace {

using dnnl::memory;
using Dt = memory::data_type;

std::atomic<int> gThreads{1};

// Everything that makes two products need different primitives. alpha and beta
// are part of the key: a model uses a handful of values (1, 0, 1/sqrt(d)).
struct Key {
  bool ta, tb, bf16;  // bf16: A and B are bf16, C stays fp32
  int threads;        // a primitive may fix its blocking for the threads it was made for
  int64_t M, N, K, lda, ldb, ldc;
  float alpha, beta;
  bool operator==(const Key& o) const { return std::memcmp(this, &o, sizeof(Key)) == 0; }
};

// A ready primitive and memory objects whose data handles are swapped per call:
// creating a primitive (JIT code generation) and even a memory object cost
// too much for a 64x64 attention tile that computes in a few microseconds.
struct Entry {
  dnnl::matmul prim;
  memory a, b, c;
};

using Cache = std::unordered_map<Key, Entry, detail::BytewiseHash>;

Cache& cache() {
  thread_local Cache c;  // per thread, as the context: no lock
  return c;
}

memory::desc matrix(int64_t rows, int64_t cols, int64_t ld, bool transposed, Dt dt = Dt::f32) {
  // op(X) is [rows, cols]; stored transposed, its elements are (r, c) at c*ld + r.
  return memory::desc({rows, cols}, dt, transposed ? memory::dims{1, ld} : memory::dims{ld, 1});
}

Entry makeEntry(const detail::Context& s, const Key& k) {
  // Zero-padded keys make memcmp equality safe.
  const Dt in = k.bf16 ? Dt::bf16 : Dt::f32;
  const memory::desc ad = matrix(k.M, k.K, k.lda, k.ta, in);
  const memory::desc bd = matrix(k.K, k.N, k.ldb, k.tb, in);
  const memory::desc cd = matrix(k.M, k.N, k.ldc, false);
  dnnl::primitive_attr attr;
  if (k.alpha != 1.f) attr.set_output_scales(0, {k.alpha});
  if (k.beta != 0.f) {
    dnnl::post_ops ops;
    ops.append_sum(k.beta);
    attr.set_post_ops(ops);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), attr, s.engine);
  return Entry{dnnl::matmul(pd), memory(ad, s.engine, DNNL_MEMORY_NONE),
               memory(bd, s.engine, DNNL_MEMORY_NONE), memory(cd, s.engine, DNNL_MEMORY_NONE)};
}

}  // namespace

namespace {

void run(bool bf16, bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
         const void* A, int64_t lda, const void* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  detail::Context& s = detail::context();
  Cache& cached = cache();
  Key k;
  std::memset(&k, 0, sizeof k);
  k.ta = transA, k.tb = transB, k.bf16 = bf16, k.threads = s.threads, k.M = M, k.N = N, k.K = K, k.lda = lda, k.ldb = ldb, k.ldc = ldc;
  k.alpha = alpha, k.beta = beta;
  auto it = cached.find(k);
  if (it == cached.end()) {
    // Bound the cache: shapes are few in training, but a long generation run
    // sees one attention shape per position.
    if (cached.size() >= 4096) cached.clear();
    try {
      it = cached.emplace(k, makeEntry(s, k)).first;
    } catch (const dnnl::error& e) {
      throw Error(std::string("oneDNN ") + (bf16 ? "bf16 " : "") + "matmul " + std::to_string(M) + "x" + std::to_string(N) +
                  "x" + std::to_string(K) + ": " + e.what());
    }
  }
  Entry& e = it->second;
  e.a.set_data_handle(const_cast<void*>(A));
  e.b.set_data_handle(const_cast<void*>(B));
  e.c.set_data_handle(C);
  e.prim.execute(s.stream, {{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}});
}

}  // namespace

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  run(false, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemmBf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
              const void* A, int64_t lda, const void* B, int64_t ldb, float beta, float* C,
              int64_t ldc) {
  run(true, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

bool supportsBf16() {
  static const bool yes = [] {
    try {
      dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      const memory::desc a({16, 16}, Dt::bf16, memory::dims{16, 1});
      const memory::desc c({16, 16}, Dt::f32, memory::dims{16, 1});
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, a, c), engine);
      return true;
    } catch (const dnnl::error&) {
      return false;  // no bf16 kernels below AVX-512
    }
  }();
  return yes;
}

void setThreads(int n) { gThreads.store(n < 1 ? 1 : n, std::memory_order_relaxed); }

bool hasAvx512() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return yes;
}

size_t cachedPrimitives() { return cache().size(); }

detail::Context& detail::context() {
  thread_local Context c;
  // Inside one of dtrain's parallel loops (the attention's tiles) the loop
  // already uses every thread: OpenMP teams nested in it would oversubscribe.
  const int want = inParallelRegion() ? 1 : gThreads.load(std::memory_order_relaxed);
  if (c.threads != want) {
    omp_set_num_threads(want);
    c.threads = want;
  }
  return c;
}

}  // namespace dtrain::kernels::onednn
