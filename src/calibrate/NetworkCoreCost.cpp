#include "calibrate/NetworkCoreCost.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "comm/BackendRegistry.h"
#include "core/Error.h"

namespace dtrain::calibrate {

namespace {

// Steady-clock seconds from the clock's own epoch, not a process's start
// (nowMicros): the ranks' logs and the parent's windows are compared across
// processes of this machine.
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

// One unit of probe work: ~20 us of multiply-adds on an L1-resident array (the
// compiler keeps it in vector registers; what matters is core time, not its rate).
float unit(float* x, int n) {
  float acc = 0;
  for (int rep = 0; rep < 64; ++rep)
    for (int i = 0; i < n; ++i) {
      x[i] = x[i] * 0.999f + 0.001f;
      acc += x[i];
    }
  return acc;
}

constexpr size_t kMessageBytes = size_t{1} << 20;

}  // namespace

double computeProbe(int threads, double seconds) {
  std::atomic<bool> stop{false};
  std::vector<double> units(threads, 0);
  std::vector<std::thread> pool;
  std::atomic<float> sink{0};
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      float x[256];
      for (int i = 0; i < 256; ++i) x[i] = static_cast<float>(i) / 256;
      float acc = 0;
      double done = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        acc += unit(x, 256);
        ++done;
      }
      units[t] = done;
      sink.store(acc, std::memory_order_relaxed);
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : pool) th.join();
  double total = 0;
  for (double u : units) total += u;
  return total;
}

double bytesBetween(const std::vector<StreamLog>& logs, double t0, double t1) {
  auto at = [](const StreamLog& log, double t) {
    if (log.empty() || t <= log.front().first) return log.empty() ? 0.0 : log.front().second;
    for (size_t i = 1; i < log.size(); ++i)
      if (t <= log[i].first) {
        const auto& [ta, ba] = log[i - 1];
        const auto& [tb, bb] = log[i];
        return tb > ta ? ba + (bb - ba) * (t - ta) / (tb - ta) : bb;
      }
    return log.back().second;
  };
  double bytes = 0;
  for (const auto& log : logs) bytes += at(log, t1) - at(log, t0);
  return bytes;
}

void runStreamRank(const std::string& file, double maxSeconds) {
  auto comm = comm::makeCommunicator("mpi");
  const int n = comm->size(), r = comm->rank();
  DTRAIN_CHECK(n >= 2, "calibrate: the network's core cost needs at least 2 ranks, got ", n);
  std::vector<float> out(kMessageBytes / 4, 1.0f), in(kMessageBytes / 4);
  StreamLog log;
  const double start = now();
  double sent = 0;
  log.emplace_back(start, 0);
  for (bool first = true;;) {
    // Rank 0 decides (0 stream, 1 stop, 2 pause); the others hear it before each exchange.
    int state = 0;
    if (r == 0) state = exists(file + ".stop") || now() - start > maxSeconds ? 1 : exists(file + ".pause") ? 2 : 0;
    comm->broadcast(&state, 1, DType::I32);
    if (state == 1) break;
    if (state == 2) {
      log.emplace_back(now(), sent);  // flat while paused, not a line to the next message
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    log.emplace_back(now(), sent);  // each message's bytes spread over its own time only
    auto send = comm->isend(out.data(), out.size(), DType::F32, (r + 1) % n, 7);
    comm->recv(in.data(), in.size(), DType::F32, (r + n - 1) % n, 7);
    send->wait();
    sent += static_cast<double>(kMessageBytes);
    log.emplace_back(now(), sent);
    if (r == 0 && first) std::ofstream(file + ".started") << "1\n";
    first = false;
  }
  std::ofstream o(file + "." + std::to_string(r));
  o << nlohmann::json(log).dump() << "\n";
  DTRAIN_CHECK(o.good(), "calibrate: cannot write ", file, ".", r);
}

std::vector<ProbePair> probeBesideStreams(const std::string& file, int threads, double seconds, int pairs,
                                          double waitSeconds, const std::function<bool()>& failed) {
  std::vector<ProbePair> out;
  const double deadline = now() + waitSeconds;
  while (!exists(file + ".started")) {
    if (failed() || now() > deadline) {
      std::ofstream(file + ".stop") << "1\n";
      return out;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int i = 0; i < pairs; ++i) {
    ProbePair p;
    // Paused: the message in flight drains first (1 MiB at 100 Mbit/s: 84 ms).
    std::ofstream(file + ".pause") << "1\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    p.aloneT0 = now();
    p.aloneWork = computeProbe(threads, seconds);
    p.aloneS = now() - p.aloneT0;
    std::remove((file + ".pause").c_str());
    // The first messages after a pause drain the links' token buckets at memory speed: past them.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    p.t0 = now();
    p.busyWork = computeProbe(threads, seconds);
    p.t1 = now();
    out.push_back(p);
  }
  std::ofstream(file + ".stop") << "1\n";
  return out;
}

double lostCoreSeconds(const ProbePair& pair, int threads) {
  if (!(pair.aloneWork > 0) || !(pair.aloneS > 0)) return 0;
  const double perCoreSecond = pair.aloneWork / (pair.aloneS * threads);
  return threads * (pair.t1 - pair.t0) - pair.busyWork / perCoreSecond;
}

double coreSecondsPerByte(const ProbePair& pair, int threads, double bytes) {
  if (!(bytes > 0) || !(pair.t1 > pair.t0)) return 0;
  return std::max(0.0, lostCoreSeconds(pair, threads) / bytes);
}

std::vector<StreamLog> readStreamLogs(const std::string& file, int ranks) {
  std::vector<StreamLog> logs;
  for (int r = 0; r < ranks; ++r) {
    const std::string path = file + "." + std::to_string(r);
    std::ifstream in(path);
    DTRAIN_CHECK(in, "calibrate: the streaming rank ", r, " left no log in ", path);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    DTRAIN_CHECK(!j.is_discarded() && j.is_array(), "calibrate: unreadable streaming log ", path);
    logs.push_back(j.get<StreamLog>());
    std::remove(path.c_str());
  }
  for (const char* marker : {".started", ".stop", ".pause"}) std::remove((file + marker).c_str());
  return logs;
}

}  // namespace dtrain::calibrate
