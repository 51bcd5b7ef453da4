// The communicator's byte counters on the local backend: exact figures for the
// ring and the shared-memory allreduce, and conservation (what the ranks send in
// total is what they receive in total) for every collective and algorithm.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "comm/local/Local.h"

using namespace dtrain;
using namespace dtrain::comm;

namespace {

constexpr Millis kTimeout{60000};

struct Delta {
  uint64_t sent = 0, received = 0;
};

// Runs fn on n local ranks and returns what each rank's counters moved by.
std::vector<Delta> traffic(int n, const std::function<void(Communicator&)>& fn) {
  std::vector<Delta> d(n);
  local::runLocal(n, [&](Communicator& c) {
    const uint64_t s0 = c.bytesSent(), r0 = c.bytesReceived();
    fn(c);
    d[c.rank()] = {c.bytesSent() - s0, c.bytesReceived() - r0};
  }, kTimeout);
  return d;
}

void expectConserved(const std::vector<Delta>& d, const char* what) {
  uint64_t sent = 0, received = 0;
  for (auto& x : d) sent += x.sent, received += x.received;
  EXPECT_EQ(sent, received) << what << " on " << d.size() << " ranks";
  if (d.size() > 1) EXPECT_GT(sent, 0u) << what;
}

Options algo(Algorithm a) {
  Options o;
  o.algo = a;
  return o;
}

TEST(Traffic, RingAllreduceSendsTwoNMinusOneOverN) {
  const size_t count = 4 * 10000;  // divisible by 4: every block equal
  auto d = traffic(4, [&](Communicator& c) {
    std::vector<float> x(count, 1.0f);
    c.allreduce(x.data(), x.data(), count, DType::F32, algo(Algorithm::Ring));
  });
  for (auto& x : d) {
    EXPECT_EQ(x.sent, 2 * 3 * count * 4 / 4);  // 2 (N-1)/N * n * 4 bytes
    EXPECT_EQ(x.received, x.sent);
  }
}

TEST(Traffic, ShmAllreduceCountsPeerReadsAsTheRing) {
  const size_t count = 4 * 50000;  // above the small (staged) path
  auto d = traffic(4, [&](Communicator& c) {
    std::vector<float> x(count, 1.0f);
    c.allreduce(x.data(), x.data(), count, DType::F32, algo(Algorithm::Shm));
  });
  for (auto& x : d) EXPECT_EQ(x.sent, 2 * 3 * count * 4 / 4);
}

TEST(Traffic, PointToPoint) {
  auto d = traffic(2, [](Communicator& c) {
    std::array<float, 10> buf{};
    if (c.rank() == 0) c.send(buf.data(), buf.size(), DType::F32, 1, 3);
    else c.recv(buf.data(), buf.size(), DType::F32, 0, 3);
  });
  EXPECT_EQ(d[0].sent, 40u);
  EXPECT_EQ(d[0].received, 0u);
  EXPECT_EQ(d[1].sent, 0u);
  EXPECT_EQ(d[1].received, 40u);
}

TEST(Traffic, SingleRankSendsNothing) {
  auto d = traffic(1, [](Communicator& c) {
    std::vector<float> x(1000, 1.0f);
    c.allreduce(x.data(), x.data(), x.size(), DType::F32);
    c.broadcast(x.data(), x.size(), DType::F32);
  });
  EXPECT_EQ(d[0].sent, 0u);
  EXPECT_EQ(d[0].received, 0u);
}

TEST(Traffic, EveryCollectiveConserves) {
  for (int n : {2, 3, 4}) {
    for (Algorithm a : {Algorithm::Shm, Algorithm::Ring, Algorithm::Rhd, Algorithm::Tree,
                        Algorithm::Hier}) {
      for (size_t count : {size_t{7}, size_t{1003}, size_t{150001}}) {
        auto d = traffic(n, [&](Communicator& c) {
          std::vector<float> x(count, 1.0f);
          c.allreduce(x.data(), x.data(), count, DType::F32, algo(a));
        });
        expectConserved(d, algorithmName(a));
      }
    }
    const size_t k = 1001;
    expectConserved(traffic(n, [&](Communicator& c) {
      std::vector<float> x(k, 1.0f);
      Options o;
      o.root = c.size() - 1;
      c.broadcast(x.data(), k, DType::F32, o);
    }), "broadcast");
    expectConserved(traffic(n, [&](Communicator& c) {
      std::vector<float> x(k, 1.0f), y(k);
      Options o;
      o.root = 1;
      c.reduce(x.data(), y.data(), k, DType::F32, o);
    }), "reduce");
    expectConserved(traffic(n, [&](Communicator& c) {
      std::vector<float> x(k, 1.0f), y(k * c.size());
      c.allgather(x.data(), y.data(), k, DType::F32);
    }), "allgather");
    expectConserved(traffic(n, [&](Communicator& c) {
      std::vector<size_t> counts(c.size());
      size_t all = 0;
      for (int r = 0; r < c.size(); ++r) all += counts[r] = 10 + 7 * r;
      std::vector<float> x(counts[c.rank()], 1.0f), y(all);
      c.allgatherv(x.data(), y.data(), counts, DType::F32);
    }), "allgatherv");
    expectConserved(traffic(n, [&](Communicator& c) {
      std::vector<float> x(k * c.size(), 1.0f), y(k);
      c.reduceScatter(x.data(), y.data(), k, DType::F32);
    }), "reduceScatter");
    expectConserved(traffic(n, [&](Communicator& c) {
      std::vector<float> x(k * c.size(), 1.0f), y(k * c.size());
      c.alltoall(x.data(), y.data(), k, DType::F32);
    }), "alltoall");
  }
}

}  // namespace
