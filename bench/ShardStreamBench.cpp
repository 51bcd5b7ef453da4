// Samples streamed from shards per second and MB/s on one rank (no training): the scan
// first, then, with the page cache dropped (root: --drop-caches), one epoch through
// ShardStream. bench/shard_read_rate.sh compares it with dd's sequential read of the files.
//   shard_stream_bench PATTERN LOADER_THREADS [--drop-caches]   prints one JSON line
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "data/ShardList.h"
#include "data/ShardStream.h"

using namespace dtrain::data;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: shard_stream_bench PATTERN LOADER_THREADS [--drop-caches]\n");
    return 2;
  }
  const auto files = expandShardPattern(argv[1], "PATTERN");
  auto set = ShardSet::scan(files, false);
  int64_t bytes = 0;
  for (const auto& f : files) bytes += static_cast<int64_t>(std::filesystem::file_size(f));
  if (argc > 3 && std::strcmp(argv[3], "--drop-caches") == 0) {
    std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
  }
  ShardStreamConfig c;
  c.threads = std::stoi(argv[2]);
  c.shuffleBuffer = 1000;
  c.queueSamples = 256;
  const auto start = std::chrono::steady_clock::now();
  ShardStream stream(set, c, 0);
  int64_t n = 0;
  for (Sample s; stream.next(s);) ++n;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("{\"samples\": %lld, \"seconds\": %.3f, \"samples_per_s\": %.0f, \"mb_per_s\": %.1f}\n",
              static_cast<long long>(n), secs, n / secs, bytes / secs / 1e6);
  return 0;
}
