#pragma once
// OpenMP's idle threads (oneDNN's team and dtrain's parallel loops) spin after
// each parallel region by default. On cores another process uses, a spinning
// thread holds the core its descheduled teammate needs, and every region waits
// for a time slice: 10-100x slower (issue 61). A passive wait policy sleeps at
// once instead. libgomp reads OMP_WAIT_POLICY when it is loaded, before main, so
// the dtrain program sets it and starts itself again: only when the user set
// neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT, and where a team may have more than
// one thread (OMP_NUM_THREADS=1, as the test suite sets, needs no restart).

namespace dtrain::cli {

// Restarts this process (the same argv) under OMP_WAIT_POLICY=passive where
// that applies; returns when it does not apply or the restart failed.
void restartWithPassiveOpenMpWait(char** argv);

}  // namespace dtrain::cli
