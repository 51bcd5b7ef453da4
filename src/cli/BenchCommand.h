#pragma once
// `dtrain bench allreduce`: allreduce time, algbw and busbw per message size
// (the benchmark itself lives in comm/AllreduceBench).
#include <CLI/CLI.hpp>

namespace dtrain::cli {

// Adds `bench` with its `allreduce` subcommand; the callback runs the benchmark
// when parsed. Bad flags throw dtrain::UsageError (exit 2); a wrong allreduce
// result throws dtrain::Error (exit 1).
void addBenchCommand(CLI::App& app);

}  // namespace dtrain::cli
