// `dtrain bench allreduce` logic: usage errors and a small run (no timing asserted).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "comm/AllreduceBench.h"
#include "core/Timer.h"
#include "comm/Communicator.h"
#include "core/Error.h"

using namespace dtrain;
using namespace dtrain::comm;

namespace {

AllreduceBenchConfig small() {
  AllreduceBenchConfig c;
  c.workers = 3;
  c.minBytes = 4096;
  c.maxBytes = 65536;
  c.iters = 2;
  c.runs = 1;
  return c;
}

void expectUsage(const AllreduceBenchConfig& c, const std::string& needle) {
  try {
    validate(c);
    ADD_FAILURE() << "no UsageError for " << needle;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(AllreduceBench, UsageErrors) {
  auto c = small();
  c.workers = 0;
  expectUsage(c, "--workers");
  c = small();
  c.minBytes = 1 << 20;
  c.maxBytes = 4096;
  expectUsage(c, "must not exceed --max-bytes");
  c = small();
  c.minBytes = 6;
  expectUsage(c, "multiple of 4");
  c = small();
  c.backend = "smoke-signals";
  expectUsage(c, "unknown communication backend 'smoke-signals' (known: local");
  c = small();
  c.algos = {Algorithm::Native};
  expectUsage(c, "needs --backend mpi");
  c = small();
  c.idleMs = -1;
  expectUsage(c, "--idle-ms");
  c = small();
  c.busyMs = 20000;
  expectUsage(c, "--busy-ms must be in [0, 10000]");
  c = small();
  c.idleMs = 1;
  c.busyMs = 1;
  expectUsage(c, "--idle-ms and --busy-ms exclude each other");
  EXPECT_THROW(parseAlgorithms("ring,fastest"), UsageError);
  EXPECT_EQ(parseAlgorithms("ring,shm").size(), 2u);
}

TEST(AllreduceBench, TableRowsAndBusbw) {
  auto c = small();
  c.algos = {Algorithm::Auto, Algorithm::Ring};
  std::ostringstream out;
  auto rows = runAllreduceBench(c, out);
  ASSERT_EQ(rows.size(), 6u);  // 4, 16, 64 KiB x 2 algorithms
  for (auto& r : rows) {
    EXPECT_TRUE(r.ok);
    EXPECT_GT(r.micros, 0);
    EXPECT_NEAR(r.busbw, r.algbw * 2.0 * 2 / 3, 1e-9 * r.algbw + 1e-12);
  }
  EXPECT_EQ(rows[0].resolved, "shm");
  EXPECT_NE(out.str().find("busbw_GB/s"), std::string::npos) << out.str();
}

TEST(AllreduceBench, Json) {
  auto c = small();
  c.json = true;
  c.workers = 2;
  std::ostringstream out;
  runAllreduceBench(c, out);
  auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["workers"], 2);
  EXPECT_EQ(j["rows"].size(), 3u);
  EXPECT_EQ(j["rows"][0]["bytes"], 4096);
  EXPECT_TRUE(j["rows"][0]["ok"].get<bool>());
}

TEST(AllreduceBench, IdleLinksBeforeEachCallLeaveTheResultsChecked) {
  // --idle-ms: each timed call after a barrier and that much idle time, which
  // the time per call leaves out (2 calls after 200 ms idle each, a 4 KiB call
  // itself microseconds on the local backend; the check still runs).
  auto c = small();
  c.workers = 2;
  c.maxBytes = 4096;
  c.idleMs = 200;
  std::ostringstream out;
  const auto rows = runAllreduceBench(c, out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].ok);
  EXPECT_GT(rows[0].micros, 0);
  EXPECT_LT(rows[0].micros, 200000);
}

TEST(AllreduceBench, ComputeBeforeEachCallIsLeftOutOfItsTime) {
  // --busy-ms: each timed call after a barrier and that much compute (CPU
  // time), which the time per call leaves out: 3 calls after 100 ms of compute
  // each, the 4 KiB sum itself microseconds on the local backend.
  auto c = small();
  c.workers = 2;
  c.maxBytes = 4096;
  c.iters = 3;
  c.runs = 1;
  c.busyMs = 100;
  std::ostringstream out;
  Timer wall;
  const auto rows = runAllreduceBench(c, out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].ok);
  EXPECT_GT(rows[0].micros, 0);
  // The compute ran (300 ms of CPU time is at least 300 ms of wall-clock
  // time) and the calls' time is what is left of the run beside it.
  const double seconds = wall.seconds();
  EXPECT_GE(seconds, 0.3);
  EXPECT_LE(rows[0].micros * 3, (seconds - 0.3) * 1e6);
}

}  // namespace

TEST(AllreduceAuto, RecursiveHalvingOnlyWhereItsSavedLatencyCounts) {
  const auto a = [](size_t bytes, int ranks, int perHost) {
    return std::string(algorithmName(Communicator::autoAllreduce(bytes, ranks, perHost)));
  };
  EXPECT_EQ(a(4096, 4, 1), "tree");
  EXPECT_EQ(a(4100, 4, 1), "rhd");
  EXPECT_EQ(a(16384, 4, 1), "rhd");
  EXPECT_EQ(a(16388, 4, 1), "rhd");
  // Up to 16 KiB a rank: 64 KiB over 4 ranks, 1 MiB over 64 and more.
  EXPECT_EQ(a(65536, 4, 1), "rhd");
  EXPECT_EQ(a(65540, 4, 1), "ring");
  EXPECT_EQ(a(262144, 4, 1), "ring");
  EXPECT_EQ(a(1048576, 64, 1), "rhd");
  EXPECT_EQ(a(1048576, 128, 1), "rhd");
  EXPECT_EQ(a(1048580, 128, 1), "ring");
  // Several ranks a host: the tree up to 16 KiB, then the hierarchical
  // allreduce (halving's first steps all cross at once, the flat ring sends
  // more across each host's link); all on one host, the ring.
  EXPECT_EQ(a(4100, 8, 2), "tree");
  EXPECT_EQ(a(16384, 8, 2), "tree");
  EXPECT_EQ(a(16388, 8, 2), "hier");
  EXPECT_EQ(a(64 << 20, 16, 4), "hier");
  EXPECT_EQ(a(32768, 2, 2), "ring");
}
