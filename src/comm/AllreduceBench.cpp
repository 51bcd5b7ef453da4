#include "comm/AllreduceBench.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "comm/Communicator.h"
#include "comm/BackendRegistry.h"
#include "comm/local/Local.h"
#include "core/Error.h"
#include "core/Timer.h"

namespace dtrain::comm {

using dtrain::detail::concat;

std::vector<Algorithm> parseAlgorithms(const std::string& list) {
  std::vector<Algorithm> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(algorithmFromName(item));
  DTRAIN_CHECK_USAGE(!out.empty(), "--algo needs at least one algorithm");
  return out;
}

void validate(const AllreduceBenchConfig& c) {
  requireBackend(c.backend);
  DTRAIN_CHECK_USAGE(c.workers >= 1 || (c.backend != "local" && c.workers == 0),
                     "--workers must be >= 1 (got ", c.workers, ")");
  DTRAIN_CHECK_USAGE(c.minBytes >= 4 && c.minBytes % 4 == 0, "--min-bytes must be a positive "
                     "multiple of 4 (f32 elements), got ", c.minBytes);
  DTRAIN_CHECK_USAGE(c.maxBytes % 4 == 0, "--max-bytes must be a multiple of 4, got ", c.maxBytes);
  DTRAIN_CHECK_USAGE(c.minBytes <= c.maxBytes, "--min-bytes (", c.minBytes,
                     ") must not exceed --max-bytes (", c.maxBytes, ")");
  DTRAIN_CHECK_USAGE(c.maxBytes <= (size_t{1} << 31), "--max-bytes must be at most 2 GiB");
  DTRAIN_CHECK_USAGE(c.stepFactor >= 2, "--step-factor must be >= 2");
  DTRAIN_CHECK_USAGE(c.iters >= 0 && c.runs >= 1, "--iters must be >= 0 and --runs >= 1");
  DTRAIN_CHECK_USAGE(c.idleMs >= 0 && c.idleMs <= 10000, "--idle-ms must be in [0, 10000], got ", c.idleMs);
  DTRAIN_CHECK_USAGE(c.busyMs >= 0 && c.busyMs <= 10000, "--busy-ms must be in [0, 10000], got ", c.busyMs);
  DTRAIN_CHECK_USAGE(c.idleMs == 0 || c.busyMs == 0, "--idle-ms and --busy-ms exclude each other");
  DTRAIN_CHECK_USAGE(!c.algos.empty(), "--algo needs at least one algorithm");
  for (Algorithm a : c.algos) {
    bool ok = a != Algorithm::Native || c.backend == "mpi";
    DTRAIN_CHECK_USAGE(ok, "--algo native is the MPI library's MPI_Allreduce: it needs --backend mpi");
  }
}

namespace {

// Computes until the calling thread has had `ms` of CPU time: the same work
// however many processes share its core (their wall-clock time then grows).
void computeFor(double ms) {
  auto cpuMs = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
  };
  const double until = cpuMs() + ms;
  volatile float x = 1;
  while (cpuMs() < until)
    for (int i = 0; i < 4096; ++i) x = x * 1.0000001f + 1e-7f;
}

int itersFor(const AllreduceBenchConfig& c, size_t bytes) {
  if (c.iters > 0) return c.iters;
  return static_cast<int>(std::clamp<size_t>((size_t{256} << 20) / bytes, 5, 200));
}

// One rank's part: returns rows on rank 0.
std::vector<AllreduceBenchRow> benchRank(Communicator& comm, const AllreduceBenchConfig& cfg) {
  const int n = comm.size();
  std::vector<AllreduceBenchRow> rows;
  std::vector<float> buf(cfg.maxBytes / 4);
  for (Algorithm algo : cfg.algos) {
    DTRAIN_CHECK_USAGE(comm.supports(algo), "algorithm '", algorithmName(algo),
                       "' is not available on backend '", comm.backend(), "' here",
                       algo == Algorithm::Shm ? " (shm needs every rank on one node)" : "");
    for (size_t bytes = cfg.minBytes; bytes <= cfg.maxBytes; bytes *= cfg.stepFactor) {
      const size_t count = bytes / 4;
      Options o;
      o.algo = algo;
      // Correctness first: a closed-form check of this size with this algorithm.
      for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((comm.rank() + 1) * (i % 13 + 1));
      comm.allreduce(buf.data(), buf.data(), count, DType::F32, o);
      int32_t bad = 0;
      for (size_t i = 0; i < count && !bad; ++i)
        bad = buf[i] != static_cast<float>(n * (n + 1) / 2 * (i % 13 + 1));
      comm.allreduce(&bad, &bad, 1, DType::I32, {.op = ReduceOp::Max});
      // Timed runs (in place, like the peers); values stay finite-ish or inf,
      // both cost the same.
      const int iters = itersFor(cfg, bytes);
      std::vector<float> times;  // microseconds per allreduce, slowest rank
      int64_t sent = 0;          // bytes per allreduce, the rank that sent most
      for (int run = 0; run < cfg.runs; ++run) {
        std::fill(buf.begin(), buf.begin() + count, 1.0f);
        comm.allreduce(buf.data(), buf.data(), count, DType::F32, o);  // warm-up
        comm.barrier();
        const uint64_t sent0 = comm.bytesSent();
        double seconds = 0;
        if (cfg.idleMs > 0 || cfg.busyMs > 0) {
          // As in training, where a call comes after compute: the ranks meet,
          // the links idle (an emulated link's token bucket refills) or the
          // ranks compute, then one call.
          for (int it = 0; it < iters; ++it) {
            comm.barrier();
            if (cfg.busyMs > 0)
              computeFor(cfg.busyMs);
            else
              std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(cfg.idleMs));
            Timer t;
            comm.allreduce(buf.data(), buf.data(), count, DType::F32, o);
            seconds += t.seconds();
          }
        } else {
          Timer t;
          for (int it = 0; it < iters; ++it)
            comm.allreduce(buf.data(), buf.data(), count, DType::F32, o);
          seconds = t.seconds();
        }
        float us = static_cast<float>(seconds * 1e6 / iters);
        sent = static_cast<int64_t>((comm.bytesSent() - sent0) / iters);
        comm.allreduce(&us, &us, 1, DType::F32, {.op = ReduceOp::Max});
        comm.allreduce(&sent, &sent, 1, DType::I64, {.op = ReduceOp::Max});
        times.push_back(us);
      }
      std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
      if (comm.rank() != 0) continue;
      AllreduceBenchRow row;
      row.algo = algorithmName(algo);
      row.resolved = algorithmName(algo == Algorithm::Auto ? comm.chooseAllreduce(bytes) : algo);
      row.bytes = bytes;
      row.micros = times[times.size() / 2];
      row.algbw = static_cast<double>(bytes) / (row.micros * 1e-6) / 1e9;
      row.busbw = n > 1 ? row.algbw * 2.0 * (n - 1) / n : row.algbw;
      row.ok = bad == 0;
      row.sentBytes = static_cast<uint64_t>(sent);
      rows.push_back(row);
    }
  }
  return rows;
}

void print(const AllreduceBenchConfig& cfg, int n, const std::vector<AllreduceBenchRow>& rows,
           std::ostream& out) {
  if (cfg.json) {
    nlohmann::json j;
    j["bench"] = "allreduce";
    j["backend"] = cfg.backend;
    j["workers"] = n;
    j["dtype"] = "F32";
    j["op"] = "sum";
    j["call_checks"] = cfg.callChecks || cfg.backend == "local";
    j["rows"] = nlohmann::json::array();
    for (auto& r : rows)
      j["rows"].push_back({{"algo", r.algo}, {"resolved", r.resolved}, {"bytes", r.bytes},
                           {"us", r.micros}, {"algbw_GBs", r.algbw}, {"busbw_GBs", r.busbw},
                           {"sent_bytes", r.sentBytes}, {"ok", r.ok}});
    out << j.dump() << "\n";
    return;
  }
  char line[256];
  std::snprintf(line, sizeof line, "# dtrain bench allreduce: backend=%s workers=%d dtype=f32 op=sum%s\n",
                cfg.backend.c_str(), n,
                cfg.backend == "mpi" && !cfg.callChecks ? " call-checks=off" : "");
  out << line;
  std::snprintf(line, sizeof line, "%12s %12s %8s %12s %11s %11s %6s\n", "bytes", "count", "algo",
                "time_us", "algbw_GB/s", "busbw_GB/s", "check");
  out << line;
  for (auto& r : rows) {
    std::string algo = r.algo == r.resolved ? r.algo : r.algo + ":" + r.resolved;
    std::snprintf(line, sizeof line, "%12zu %12zu %8s %12.2f %11.2f %11.2f %6s\n", r.bytes,
                  r.bytes / 4, algo.c_str(), r.micros, r.algbw, r.busbw, r.ok ? "ok" : "FAIL");
    out << line;
  }
  out.flush();
}

}  // namespace

std::vector<AllreduceBenchRow> runAllreduceBench(const AllreduceBenchConfig& cfg,
                                                 std::ostream& out) {
  validate(cfg);
  std::vector<AllreduceBenchRow> rows;
  int n = 0;
  if (cfg.backend == "local") {
    n = cfg.workers;
    std::mutex m;
    local::runLocal(cfg.workers, [&](Communicator& comm) {
      auto r = benchRank(comm, cfg);
      if (comm.rank() == 0) {
        std::lock_guard<std::mutex> lock(m);
        rows = std::move(r);
      }
    });
  } else {
    auto comm = makeCommunicator(cfg.backend);
    n = comm->size();
    DTRAIN_CHECK_USAGE(cfg.workers == 0 || cfg.workers == n, "--workers ", cfg.workers,
                       " does not match the ", n, " ranks started (use mpirun -np ", cfg.workers,
                       ")");
    comm->setCallChecks(cfg.callChecks);
    rows = benchRank(*comm, cfg);
    if (comm->rank() != 0) return {};
  }
  print(cfg, n, rows, out);
  for (auto& r : rows)
    DTRAIN_CHECK(r.ok, "bench allreduce: wrong result for ", r.bytes, " bytes with algorithm ",
                 r.algo, " on ", n, " ranks");
  return rows;
}

}  // namespace dtrain::comm
