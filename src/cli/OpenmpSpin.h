#pragma once
// libgomp's spin-wait, shortened for multi-threaded runs (see OpenmpSpin.cpp).

namespace dtrain::cli {

// With --threads N > 1 and neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT set,
// re-executes this program with GOMP_SPINCOUNT=10000 (libgomp reads it only at
// load time, before main). Returns when there is nothing to do or exec failed.
void shortenOpenmpSpin(int argc, char** argv);

}  // namespace dtrain::cli
