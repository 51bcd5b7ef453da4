#pragma once
// Intra-op parallelism: parallelFor() splits a loop over the calling thread's
// OpenMP team, the same threads oneDNN's products run on, so every kernel uses
// one set of threads (two pools, dtrain's own and oneDNN's, would spin and
// sleep on the same cores and take them from each other). With one thread
// (the default) parallelFor runs inline with no synchronization cost. When
// several ranks run as threads in one process and call parallelFor at once,
// only one gets a team; the others run inline, so ranks never wait on each
// other's kernels.
#include <cstdint>
#include <functional>

namespace dtrain {

// Sets the number of threads kernels may use (>= 1), including the caller.
void setNumThreads(int n);
int numThreads();
// True on a thread running a part of a parallelFor (the caller's included):
// libraries with thread pools of their own (oneDNN's OpenMP) must then run on
// this thread alone, or the two pools oversubscribe the cores.
bool inParallelRegion();

// Calls fn(lo, hi) over disjoint ranges covering [begin, end). Ranges hold at
// least `grain` elements, so small loops stay on the calling thread.
void parallelFor(int64_t begin, int64_t end, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& fn);

}  // namespace dtrain
