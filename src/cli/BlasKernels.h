#pragma once
// Debian's OpenBLAS 0.3.21 does not recognise recent AVX-512 Xeons (e.g.
// Sapphire Rapids) and falls back to its AVX2 "Haswell" kernels, which run
// sgemm at about 60% of the speed of its AVX-512 "SkylakeX" kernels there.
// OpenBLAS picks its kernels when it is loaded, before main(), so the only
// way to choose is the OPENBLAS_CORETYPE environment variable: when the CPU
// has AVX-512 and OpenBLAS chose Haswell, dtrain sets it and re-executes
// itself once. Setting OPENBLAS_CORETYPE yourself (or DTRAIN_BLAS_AUTO=0)
// keeps OpenBLAS's own choice.

namespace dtrain::cli {

// Returns only when no re-execution is needed or possible.
void preferAvx512Blas(char** argv);

}  // namespace dtrain::cli
