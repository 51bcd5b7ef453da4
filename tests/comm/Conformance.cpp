#include "Conformance.h"

#include <gtest/gtest.h>

#include <numeric>
#include <sstream>
#include <string>

#include "core/Error.h"

namespace dtrain::comm::testing {

float contribution(int rank, size_t i) { return static_cast<float>((rank + 1) * (i % 13 + 1)); }

float expected(ReduceOp op, int n, size_t i) {
  float base = static_cast<float>(i % 13 + 1);
  switch (op) {
    case ReduceOp::Sum: return base * n * (n + 1) / 2;
    case ReduceOp::Avg: return base * (n + 1) / 2.0f;
    case ReduceOp::Min: return base;
    case ReduceOp::Max: return base * n;
  }
  return 0;
}

namespace {

std::vector<float> inputOf(int rank, size_t count, size_t offset = 0) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = contribution(rank, offset + i);
  return v;
}

// Reports the first wrong element only (a wrong buffer would flood the log).
void expectNear(const std::vector<float>& got, const std::function<float(size_t)>& want,
                const std::string& what, size_t n = SIZE_MAX) {
  n = std::min(n, got.size());
  for (size_t i = 0; i < n; ++i) {
    float w = want(i);
    if (std::abs(got[i] - w) > 1e-5f * std::max(1.0f, std::abs(w))) {
      ADD_FAILURE() << what << ": element " << i << " of " << n << " is " << got[i]
                    << ", expected " << w;
      return;
    }
  }
}

std::string label(const Communicator& c, const char* what, Algorithm a, size_t count,
                  ReduceOp op, bool inPlace) {
  std::ostringstream os;
  os << what << " " << c.backend() << " n=" << c.size() << " rank " << c.rank()
     << " algo=" << algorithmName(a) << " count=" << count << " op=" << reduceOpName(op)
     << (inPlace ? " in-place" : "");
  return os.str();
}

}  // namespace

std::vector<Algorithm> algorithmsOf(const Communicator& c) {
  std::vector<Algorithm> out;
  for (auto a : {Algorithm::Auto, Algorithm::Ring, Algorithm::Rhd, Algorithm::Tree,
                 Algorithm::Hier, Algorithm::Shm, Algorithm::Native})
    if (c.supports(a)) out.push_back(a);
  return out;
}

void allreduceCase(Communicator& c, Algorithm algo, size_t count, ReduceOp op, bool inPlace,
                   int groupSize) {
  std::vector<float> in = inputOf(c.rank(), count), out(count, -1.0f);
  Options o;
  o.op = op;
  o.algo = algo;
  o.groupSize = groupSize;
  if (inPlace) {
    c.allreduce(in.data(), in.data(), count, DType::F32, o);
    out = in;
  } else {
    c.allreduce(in.data(), out.data(), count, DType::F32, o);
    expectNear(in, [&](size_t i) { return contribution(c.rank(), i); },
               label(c, "allreduce input changed", algo, count, op, inPlace));
  }
  expectNear(out, [&](size_t i) { return expected(op, c.size(), i); },
             label(c, "allreduce", algo, count, op, inPlace));
}

void allreduceSweep(Communicator& c, const std::vector<Algorithm>& algos,
                    const std::vector<size_t>& counts) {
  for (Algorithm a : algos)
    for (size_t n : counts)
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Min, ReduceOp::Max})
        for (bool inPlace : {false, true}) allreduceCase(c, a, n, op, inPlace);
}

void allreduceInt(Communicator& c) {
  std::vector<int32_t> v(37);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(c.rank() * 100 + i);
  c.allreduce(v.data(), v.data(), v.size(), DType::I32, {.op = ReduceOp::Max});
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], static_cast<int32_t>((c.size() - 1) * 100 + i));
  std::vector<int64_t> w(5, c.rank() + 1);
  c.allreduce(w.data(), w.data(), w.size(), DType::I64);
  for (auto x : w) EXPECT_EQ(x, int64_t(c.size()) * (c.size() + 1) / 2);
}

void broadcastAllRoots(Communicator& c, size_t count) {
  for (int root = 0; root < c.size(); ++root) {
    std::vector<float> v = c.rank() == root ? inputOf(root, count) : std::vector<float>(count, -1);
    c.broadcast(v.data(), count, DType::F32, {.root = root});
    expectNear(v, [&](size_t i) { return contribution(root, i); },
               "broadcast root " + std::to_string(root) + " rank " + std::to_string(c.rank()));
  }
}

void reduceAllRoots(Communicator& c, size_t count) {
  for (int root = 0; root < c.size(); ++root)
    for (bool inPlace : {false, true})
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg}) {
        std::vector<float> in = inputOf(c.rank(), count), out(count, -1);
        float* dst = inPlace ? in.data() : (c.rank() == root ? out.data() : nullptr);
        c.reduce(in.data(), dst, count, DType::F32, {.op = op, .root = root});
        if (c.rank() == root)
          expectNear(inPlace ? in : out, [&](size_t i) { return expected(op, c.size(), i); },
                     label(c, "reduce", Algorithm::Auto, count, op, inPlace) + " root " +
                         std::to_string(root));
      }
}

void allgatherCase(Communicator& c, size_t count, bool inPlace) {
  std::vector<float> out(count * c.size(), -1);
  std::vector<float> in = inputOf(c.rank(), count, c.rank() * count);
  if (inPlace) {
    std::copy(in.begin(), in.end(), out.begin() + c.rank() * count);
    c.allgather(out.data() + c.rank() * count, out.data(), count, DType::F32);
  } else {
    c.allgather(in.data(), out.data(), count, DType::F32);
  }
  expectNear(out, [&](size_t i) { return contribution(static_cast<int>(i / std::max<size_t>(count, 1)), i); },
             "allgather rank " + std::to_string(c.rank()) + " count " + std::to_string(count));
}

void allgathervCase(Communicator& c) {
  // Uneven counts, including zeros: rank r contributes (r * 3) % 5 elements.
  std::vector<size_t> counts(c.size());
  for (int r = 0; r < c.size(); ++r) counts[r] = static_cast<size_t>(r * 3 % 5);
  size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  std::vector<size_t> owner;
  for (int r = 0; r < c.size(); ++r) owner.insert(owner.end(), counts[r], static_cast<size_t>(r));
  std::vector<float> in(counts[c.rank()]);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(c.rank() * 1000 + i);
  std::vector<float> out(total, -1);
  c.allgatherv(in.data(), out.data(), counts, DType::F32);
  size_t off = 0;
  for (int r = 0; r < c.size(); ++r)
    for (size_t i = 0; i < counts[r]; ++i, ++off)
      EXPECT_EQ(out[off], static_cast<float>(r * 1000 + i)) << "allgatherv rank " << c.rank();
}

void reduceScatterCase(Communicator& c, size_t count, ReduceOp op) {
  std::vector<float> in = inputOf(c.rank(), count * c.size()), out(count, -1);
  c.reduceScatter(in.data(), out.data(), count, DType::F32, {.op = op});
  expectNear(out, [&](size_t i) { return expected(op, c.size(), c.rank() * count + i); },
             label(c, "reduceScatter", Algorithm::Auto, count, op, false));
}

void alltoallCase(Communicator& c, size_t count) {
  const int n = c.size();
  std::vector<float> in(count * n), out(count * n, -1);
  for (int j = 0; j < n; ++j)
    for (size_t i = 0; i < count; ++i) in[j * count + i] = static_cast<float>(c.rank() * 10000 + j * 100 + i);
  c.alltoall(in.data(), out.data(), count, DType::F32);
  for (int j = 0; j < n; ++j)
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(out[j * count + i], static_cast<float>(j * 10000 + c.rank() * 100 + i))
          << "alltoall rank " << c.rank() << " block " << j;
}

void barrierCase(Communicator& c) {
  for (int i = 0; i < 20; ++i) c.barrier();
}

void asyncCase(Communicator& c) {
  const size_t count = 1001;
  std::vector<std::vector<float>> bufs(4);
  std::vector<WorkPtr> works;
  for (int k = 0; k < 4; ++k) {
    bufs[k] = inputOf(c.rank(), count);
    works.push_back(c.allreduceAsync(bufs[k].data(), bufs[k].data(), count, DType::F32,
                                     {.op = k % 2 ? ReduceOp::Max : ReduceOp::Sum}));
  }
  WorkPtr b = c.barrierAsync();
  for (auto& w : works) w->wait();
  b->wait();
  EXPECT_TRUE(b->test());
  EXPECT_EQ(b->exception(), nullptr);
  for (int k = 0; k < 4; ++k)
    expectNear(bufs[k], [&](size_t i) { return expected(k % 2 ? ReduceOp::Max : ReduceOp::Sum, c.size(), i); },
               "async allreduce " + std::to_string(k));
  // A blocking collective after async ones runs after them.
  std::vector<float> v = inputOf(c.rank(), 7);
  WorkPtr w = c.allreduceAsync(v.data(), v.data(), 7, DType::F32);
  std::vector<float> u = inputOf(c.rank(), 9);
  c.allreduce(u.data(), u.data(), 9, DType::F32);
  EXPECT_TRUE(w->test());
  w->wait();
  expectNear(v, [&](size_t i) { return expected(ReduceOp::Sum, c.size(), i); }, "async then sync");
}

void p2pRingCase(Communicator& c) {
  const int n = c.size(), r = c.rank();
  for (size_t count : {size_t{0}, size_t{3}, size_t{100000}}) {  // eager and rendezvous
    std::vector<float> s = inputOf(r, count), got(count, -1);
    WorkPtr rw = c.irecv(got.data(), count, DType::F32, (r + n - 1) % n, 5);
    WorkPtr sw = c.isend(s.data(), count, DType::F32, (r + 1) % n, 5);
    rw->wait();
    sw->wait();
    expectNear(got, [&](size_t i) { return contribution((r + n - 1) % n, i); }, "p2p ring");
  }
  if (n >= 2) {  // tags keep messages apart
    float a = 1, b = 2, x = 0, y = 0;
    if (r == 0) {
      c.send(&a, 1, DType::F32, 1, 7);
      c.send(&b, 1, DType::F32, 1, 8);
    } else if (r == 1) {
      c.recv(&y, 1, DType::F32, 0, 8);
      c.recv(&x, 1, DType::F32, 0, 7);
      EXPECT_EQ(x, 1);
      EXPECT_EQ(y, 2);
    }
  }
}

void splitCase(Communicator& c) {
  const int n = c.size(), r = c.rank();
  // Two colors, reversed order by key; the last rank opts out when n >= 3.
  int color = (n >= 3 && r == n - 1) ? -1 : r % 2;
  auto sub = c.split(color, -r);
  if (color < 0) {
    EXPECT_EQ(sub, nullptr);
  } else {
    ASSERT_NE(sub, nullptr);
    std::vector<int> members;
    for (int k = 0; k < n; ++k)
      if (!(n >= 3 && k == n - 1) && k % 2 == color) members.push_back(k);
    ASSERT_EQ(sub->size(), static_cast<int>(members.size()));
    EXPECT_EQ(members[members.size() - 1 - sub->rank()], r);  // reversed by key
    std::vector<int32_t> v{r, 1};
    sub->allreduce(v.data(), v.data(), 2, DType::I32);
    int sum = 0;
    for (int m : members) sum += m;
    EXPECT_EQ(v[0], sum);
    EXPECT_EQ(v[1], static_cast<int>(members.size()));
    sub->barrier();
  }
  c.barrier();
}

void mismatchCase(Communicator& c) {
  if (c.size() < 2) return;
  std::vector<float> v(64, 1);
  size_t count = c.rank() == 1 ? 20 : 10;
  try {
    c.allreduce(v.data(), v.data(), count, DType::F32);
    ADD_FAILURE() << "no mismatch error on rank " << c.rank();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("mismatch"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 1: allreduce(count=20"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 0: allreduce(count=10"), std::string::npos) << m;
  }
  // Different collectives, and the async path reports through Work.
  WorkPtr w = c.rank() == 0 ? c.barrierAsync() : c.broadcastAsync(v.data(), 4, DType::F32);
  EXPECT_THROW(w->wait(), Error);
  EXPECT_TRUE(w->test());
  EXPECT_NE(w->exception(), nullptr);
  // The communicator stays usable after a detected mismatch.
  allreduceCase(c, Algorithm::Auto, 5, ReduceOp::Sum, true);
}

void timeoutCase(Communicator& c) {
  if (c.size() < 2) return;
  std::vector<float> v(8, 1);
  const int late = c.size() - 1;
  if (c.rank() == late) return;  // never joins
  try {
    c.allreduce(v.data(), v.data(), 8, DType::F32, {.timeout = Millis{300}, .tag = 42});
    ADD_FAILURE() << "no timeout on rank " << c.rank();
  } catch (const TimeoutError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("allreduce"), std::string::npos) << m;
    EXPECT_NE(m.find("tag=42"), std::string::npos) << m;
    EXPECT_NE(m.find("on rank " + std::to_string(c.rank())), std::string::npos) << m;
    EXPECT_NE(m.find("rank " + std::to_string(late) + " to join"), std::string::npos) << m;
  } catch (const Error& e) {
    // Under runLocal another rank's timeout may abort this one first.
    EXPECT_NE(std::string(e.what()).find("failed"), std::string::npos) << e.what();
  }
}

void p2pTimeoutCase(Communicator& c) {
  float x = 0;
  try {
    c.recv(&x, 1, DType::F32, 0, 99, Millis{100});
    ADD_FAILURE() << "no timeout";
  } catch (const TimeoutError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("recv"), std::string::npos) << m;
    EXPECT_NE(m.find("tag 99"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 0 never sent"), std::string::npos) << m;
  }
}

}  // namespace dtrain::comm::testing
