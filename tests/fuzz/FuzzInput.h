#pragma once
// Shared by the fuzz targets: the parsers under test read files, so each input
// is written to a file of this process's own (in /dev/shm when it exists: no
// disk traffic at libFuzzer's thousands of inputs per second), and the
// exceptions a parser throws on bad input (dtrain::Error, UsageError,
// nlohmann's parse errors, toml++'s) are the expected outcome: what a target
// must never do is crash, read or write out of bounds, leak, or hang.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

namespace dtrain::fuzz {

// A path of this process's, holding `size` bytes of `data` (overwritten on each call).
inline const std::string& inputFile(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string path = [&] {
    const char* dir = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    return std::string(dir) + "/dtrain-fuzz-" + std::to_string(::getpid()) + suffix;
  }();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::terminate();  // the harness itself is broken: stop loudly
  if (size && std::fwrite(data, 1, size, f) != size) std::terminate();
  std::fclose(f);
  return path;
}

// Runs fn(), swallowing the exceptions bad input is allowed to raise
// (DTRAIN_FUZZ_VERBOSE=1 prints each: which check an input reached).
template <class Fn>
void expectErrorsOnly(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    static const bool verbose = std::getenv("DTRAIN_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "rejected: %s\n", e.what());
  }
}

}  // namespace dtrain::fuzz
