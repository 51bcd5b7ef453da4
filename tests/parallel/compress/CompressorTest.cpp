// The compressors one bucket at a time, over the local backend: message sizes,
// identical results on every rank, QSGD's unbiasedness, top-k's choice, the
// error-feedback invariant, PowerSGD at full rank, `none` as the plain allreduce.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "comm/local/Local.h"
#include "core/Error.h"
#include "core/Rng.h"
#include "parallel/compress/CompressorBasics.h"
#include "parallel/compress/Compressor.h"
#include "tensor/Half.h"

namespace dtrain::parallel::compress {
namespace {

using Vec = std::vector<float>;

// A bucket shaped like the mlp's last layers plus a partial chunk: matrices,
// biases, and sizes that are not multiples of the chunk or of 8.
BucketLayout mlpLikeLayout() {
  BucketLayout l;
  l.shapes = {{10, 256}, {10}, {256, 300}, {256}, {3}};
  return l;
}

Vec randomGrad(int64_t n, uint64_t seed, float scale = 1.0f) {
  Rng r(seed);
  Vec v(static_cast<size_t>(n));
  for (auto& x : v) x = r.normal() * scale;
  return v;
}

CompressOptions named(const std::string& name) {
  CompressOptions o;
  o.name = name;
  o.startStep = 0;
  o.seed = 3;
  return o;
}

// Runs `steps` reduce() calls of one compressor per rank on `workers` ranks;
// grads(rank, step) gives each rank's gradient; returns every rank's outputs.
struct RankRun {
  std::vector<Vec> outputs;   // per step
  std::vector<int64_t> payload;  // per step
  std::vector<std::map<std::string, Vec>> states;  // per step, after it
  std::vector<uint64_t> wireBytes;  // per step, counted by the communicator
};
std::vector<RankRun> run(const CompressOptions& o, const BucketLayout& layout, int workers,
                         int steps, const std::function<Vec(int, int)>& grads) {
  std::vector<RankRun> out(static_cast<size_t>(workers));
  comm::local::runLocal(workers, [&](comm::Communicator& comm) {
    CompressOptions forRank = o;
    forRank.commRank = comm.rank();
    forRank.commSize = comm.size();
    auto c = makeCompressor(forRank, layout);
    RankRun& mine = out[static_cast<size_t>(comm.rank())];
    for (int s = 0; s < steps; ++s) {
      Vec g = grads(comm.rank(), s);
      ReduceContext ctx;
      ctx.step = s;
      const uint64_t before = comm.bytesSent();
      c->reduce(g.data(), comm, ctx);
      mine.wireBytes.push_back(comm.bytesSent() - before);
      mine.outputs.push_back(g);
      mine.payload.push_back(c->traffic().payload);
      std::map<std::string, Vec> st;
      for (auto& [name, t] : c->state()) st[name] = t->contiguous().toVector();
      mine.states.push_back(st);
    }
  });
  return out;
}

TEST(Compressor, RegistryListsEveryCompressorAndRejectsUnknownNames) {
  const auto names = compressorNames();
  for (const char* n : {"none", "fp16", "bf16", "onebit", "signsgd", "qsgd", "topk", "randomk",
                        "powersgd"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  try {
    validate(named("twobit"));
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown --compress 'twobit' (known: none, fp16"),
              std::string::npos)
        << e.what();
  }
  auto bad = named("qsgd");
  bad.bits = 0;
  EXPECT_THROW(validate(bad), UsageError);
  bad = named("topk");
  bad.ratio = 1.5;
  EXPECT_THROW(validate(bad), UsageError);
  bad = named("powersgd");
  bad.rank = 0;
  EXPECT_THROW(validate(bad), UsageError);
}

TEST(Compressor, MessageSizes) {
  const BucketLayout l = mlpLikeLayout();
  const int64_t n = l.numel();  // 2560 + 10 + 76800 + 256 + 3 = 79629
  ASSERT_EQ(n, 79629);
  // Chunks of 512 within each parameter: 5 + 1 + 150 + 1 + 1.
  const int64_t chunks = 158, k = (n + 99) / 100;  // ratio 0.01
  // powersgd rank 2: [10,256] -> (10+256)*2, [256,300] -> (256+300)*2; 1-D uncompressed.
  const int64_t powersgd = ((10 + 256) * 2 + (256 + 300) * 2 + 10 + 256 + 3) * 4;
  const std::map<std::string, int64_t> expected = {
      {"none", n * 4},
      {"fp16", n * 2},
      {"bf16", n * 2},
      {"onebit", chunks * 8 + (n + 7) / 8},
      {"signsgd", chunks * 4 + (n + 7) / 8},
      {"qsgd", chunks * 4 + (n * 5 + 7) / 8},  // 4 bits + sign
      {"topk", k * 8},
      {"randomk", k * 4},
      {"powersgd", powersgd},
  };
  for (const auto& [name, bytes] : expected) {
    auto o = named(name);
    o.rank = 2;
    auto r = run(o, l, 2, 1, [&](int rank, int) { return randomGrad(n, 10 + rank); });
    EXPECT_EQ(r[0].payload[0], bytes) << name;
    EXPECT_EQ(r[1].payload[0], bytes) << name;
    // What the simulator charges (the registry's payload) is what was sent.
    EXPECT_EQ(wireBytes(o, l), bytes) << name;
  }
  EXPECT_THROW(wireBytes(named("twobit"), l), UsageError);
}

TEST(Compressor, EveryRankGetsTheSameMeanApproximation) {
  const BucketLayout l = mlpLikeLayout();
  const int64_t n = l.numel();
  for (const auto& name : compressorNames()) {
    auto o = named(name);
    o.rank = 2;
    o.ratio = 0.1;
    auto r = run(o, l, 2, 3, [&](int rank, int s) { return randomGrad(n, 100 * s + rank); });
    for (int s = 0; s < 3; ++s) {
      EXPECT_EQ(r[0].outputs[s], r[1].outputs[s]) << name << " step " << s;
      // Every compressor's output correlates with the true mean (sanity, not accuracy).
      const Vec g0 = randomGrad(n, 100 * s), g1 = randomGrad(n, 100 * s + 1);
      double dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += (g0[i] + g1[i]) * 0.5 * r[0].outputs[s][i];
      EXPECT_GT(dot, 0) << name << " step " << s;
    }
  }
}

TEST(Compressor, NoneIsThePlainAllreduceBitwise) {
  BucketLayout l;
  l.shapes = {{1000}};
  auto r = run(named("none"), l, 3, 1, [](int rank, int) { return randomGrad(1000, 7 + rank); });
  // The reference: today's DataParallel path, allreduce(sum) then x 1/N.
  std::vector<Vec> ref(3);
  comm::local::runLocal(3, [&](comm::Communicator& comm) {
    Vec g = randomGrad(1000, 7 + comm.rank());
    comm.allreduce(g.data(), g.data(), g.size(), DType::F32);
    for (auto& x : g) x *= 1.0f / 3.0f;
    ref[comm.rank()] = g;
  });
  for (int rank = 0; rank < 3; ++rank) EXPECT_EQ(r[rank].outputs[0], ref[rank]);
}

TEST(Compressor, Fp16AndBf16AreTheMeanToTheirPrecision) {
  BucketLayout l;
  l.shapes = {{4000}};
  for (auto [name, tol] : {std::pair{"fp16", 2e-3}, std::pair{"bf16", 1.6e-2}}) {
    auto r = run(named(name), l, 2, 1, [](int rank, int) { return randomGrad(4000, 30 + rank); });
    const Vec a = randomGrad(4000, 30), b = randomGrad(4000, 31);
    for (int i = 0; i < 4000; ++i) {
      const double mean = (a[i] + b[i]) * 0.5;
      ASSERT_NEAR(r[0].outputs[0][i], mean, tol * (std::fabs(a[i]) + std::fabs(b[i])) + 1e-6)
          << name << " at " << i;
    }
  }
}

TEST(Compressor, QsgdIsUnbiased) {
  // The mean of many independent quantizations (the draws depend on the step)
  // approaches the input; with 4 bits, chunk norm ~sqrt(512) and 15 levels,
  // one value's error is at most 1.5 (std <= 0.75): 4000 draws give ~0.012.
  BucketLayout l;
  l.shapes = {{1000}};
  const Vec x = randomGrad(1000, 5);
  auto o = named("qsgd");
  o.bits = 4;
  const int draws = 4000;
  auto r = run(o, l, 1, draws, [&](int, int) { return x; });
  Vec mean(1000, 0.0f);
  for (const auto& out : r[0].outputs)
    for (int i = 0; i < 1000; ++i) mean[i] += out[i] / draws;
  double worst = 0;
  for (int i = 0; i < 1000; ++i) worst = std::max(worst, std::fabs(double(mean[i]) - x[i]));
  EXPECT_LT(worst, 0.08);
  // A single draw is really quantized (not the input itself).
  EXPECT_NE(r[0].outputs[0], x);
}

TEST(Compressor, TopKKeepsTheKLargestMagnitudes) {
  BucketLayout l;
  l.shapes = {{100}};
  Vec x = randomGrad(100, 9);
  auto o = named("topk");
  o.ratio = 0.05;  // k = 5
  auto r = run(o, l, 1, 1, [&](int, int) { return x; });
  std::vector<int> order(100);
  for (int i = 0; i < 100; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return std::fabs(x[a]) > std::fabs(x[b]); });
  const Vec& out = r[0].outputs[0];
  const Vec& residual = r[0].states[0].at("residual");
  for (int j = 0; j < 100; ++j) {
    const int i = order[j];
    if (j < 5) {
      EXPECT_EQ(out[i], x[i]) << "rank " << j;
      EXPECT_EQ(residual[i], 0.0f);
    } else {
      EXPECT_EQ(out[i], 0.0f) << "rank " << j;
      EXPECT_EQ(residual[i], x[i]);
    }
  }
}

// sent + new residual == gradient + old residual. On one rank the output is what
// was sent. The exact check uses dyadic inputs (k/8) whose arithmetic is exact in
// fp32 (chunk means over power-of-two counts); the sparsifiers are exact on any input.
void expectInvariant(const std::string& name, const BucketLayout& l,
                     const std::function<Vec(int, int)>& grads, int steps, double tol) {
  auto o = named(name);
  o.ratio = 0.1;
  o.rank = 2;
  auto r = run(o, l, 1, steps, grads);
  const int64_t n = l.numel();
  Vec old(static_cast<size_t>(n), 0.0f);
  for (int s = 0; s < steps; ++s) {
    const Vec g = grads(0, s);
    const Vec& sent = r[0].outputs[s];
    const Vec& now = r[0].states[s].at("residual");
    for (int64_t i = 0; i < n; ++i) {
      if (tol == 0) {
        ASSERT_EQ(sent[i] + now[i], g[i] + old[i]) << name << " step " << s << " at " << i;
      } else {
        ASSERT_NEAR(sent[i] + now[i], g[i] + old[i], tol) << name << " step " << s << " at " << i;
      }
    }
    old = now;
  }
}

TEST(Compressor, ErrorFeedbackInvariantIsExact) {
  // 256 values >= 0 and 256 < 0 per chunk of 512: the chunk means are dyadic.
  BucketLayout one;
  one.shapes = {{512}};
  auto dyadic = [](int, int) {
    Vec v(512);
    for (int i = 0; i < 512; ++i) v[i] = (i % 2 ? -1.0f : 1.0f) * static_cast<float>((i * 7) % 16) / 8.0f -
                                         (i % 2 ? 0.125f : 0.0f);
    return v;
  };
  expectInvariant("onebit", one, dyadic, 1, 0);
  expectInvariant("signsgd", one, dyadic, 1, 0);
  const BucketLayout l = mlpLikeLayout();
  auto random = [&](int, int s) { return randomGrad(l.numel(), 40 + s); };
  expectInvariant("topk", l, random, 4, 0);
  expectInvariant("randomk", l, random, 4, 0);
}

TEST(Compressor, ErrorFeedbackInvariantHoldsOverSteps) {
  // Random inputs, several steps: equal up to the rounding of x - sent.
  const BucketLayout l = mlpLikeLayout();
  auto random = [&](int, int s) { return randomGrad(l.numel(), 60 + s); };
  for (const char* name : {"onebit", "signsgd", "powersgd"}) expectInvariant(name, l, random, 4, 1e-5);
}

TEST(Compressor, PowerSgdAtFullRankIsTheMean) {
  // Rank >= min(rows, cols): P Q^T reproduces the mean gradient, so the output is
  // the uncompressed mean (to float rounding), also after error feedback.
  BucketLayout l;
  l.shapes = {{6, 4}, {4}, {5, 3}, {3, 2, 2}};
  auto o = named("powersgd");
  o.rank = 6;
  o.minCompressionRate = 0;  // compress the small matrices too
  const int64_t n = l.numel();
  auto r = run(o, l, 2, 3, [&](int rank, int s) { return randomGrad(n, 80 + 10 * s + rank); });
  for (int s = 0; s < 3; ++s) {
    const Vec a = randomGrad(n, 80 + 10 * s), b = randomGrad(n, 81 + 10 * s);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(r[0].outputs[s][i], (a[i] + b[i]) * 0.5f, 1e-5) << "step " << s << " at " << i;
      // Each rank keeps its gradient minus the shared approximation (the mean):
      // the residuals cancel across ranks.
      EXPECT_NEAR(r[0].states[s].at("residual")[i] + r[1].states[s].at("residual")[i], 0.0f, 1e-5);
    }
  }
}

TEST(Compressor, PowerSgdStartsWithPlainAllreduce) {
  BucketLayout l;
  l.shapes = {{64, 64}};
  auto o = named("powersgd");
  o.startStep = 2;
  auto r = run(o, l, 1, 3, [&](int, int s) { return randomGrad(64 * 64, 90 + s); });
  EXPECT_EQ(r[0].outputs[0], randomGrad(64 * 64, 90));
  EXPECT_EQ(r[0].outputs[1], randomGrad(64 * 64, 91));
  EXPECT_EQ(r[0].payload[1], 64 * 64 * 4);
  EXPECT_EQ(r[0].payload[2], (64 + 64) * 4);  // rank 1: P and Q
}

}  // namespace
}  // namespace dtrain::parallel::compress

namespace dtrain::parallel::compress {
namespace {

// The comm layer's 16-bit float sums (what fp16/bf16 rely on), for every
// allreduce algorithm of the local backend: each hop widens to fp32, adds,
// rounds back, so 3 ranks' sum is within two roundings of the exact one.
TEST(Compressor, HalfPrecisionAllreduceSumsInFp32PerHop) {
  const int n = 3, count = 1000;
  for (DType dtype : {DType::F16, DType::BF16}) {
    const bool f16 = dtype == DType::F16;
    auto narrow = [&](float x) { return f16 ? floatToHalf(x) : floatToBf16(x); };
    auto widen = [&](uint16_t b) { return f16 ? halfToFloat(b) : bf16ToFloat(b); };
    const double ulp = f16 ? 1.0 / 1024 : 1.0 / 128;
    for (auto algo : {comm::Algorithm::Ring, comm::Algorithm::Rhd, comm::Algorithm::Tree,
                      comm::Algorithm::Shm}) {
      std::vector<std::vector<float>> out(n);
      comm::local::runLocal(n, [&](comm::Communicator& comm) {
        const Vec g = randomGrad(count, 500 + comm.rank());
        std::vector<uint16_t> h(count);
        for (int i = 0; i < count; ++i) h[i] = narrow(g[i]);
        comm::Options o;
        o.algo = algo;
        comm.allreduce(h.data(), h.data(), count, dtype, o);
        for (int i = 0; i < count; ++i) out[comm.rank()].push_back(widen(h[i]));
      });
      for (int i = 0; i < count; ++i) {
        double exact = 0, scale = 0;
        for (int r = 0; r < n; ++r) {
          const float v = widen(narrow(randomGrad(count, 500 + r)[i]));
          exact += v;
          scale += std::fabs(v);
        }
        ASSERT_NEAR(out[0][i], exact, 2 * ulp * scale + 1e-6)
            << dtypeName(dtype) << " " << comm::algorithmName(algo) << " at " << i;
        ASSERT_EQ(out[0][i], out[n - 1][i]) << "ranks differ";
      }
    }
  }
}

// The point-to-point form (parameter-server pushes): over several steps, one
// codec's message decodes to exactly what the same compressor's reduce() gives
// on a single rank (its own message, decoded), is as long as the allgather
// payload, and carries the same error feedback from step to step.
TEST(MessageCodec, DecodesToWhatTheCompressorSendsAlone) {
  const BucketLayout l = mlpLikeLayout();
  for (const char* name : {"fp16", "bf16", "onebit", "signsgd", "qsgd", "topk"}) {
    CompressOptions o = named(name);
    o.ratio = 0.05;
    auto alone = run(o, l, 1, 3, [&](int, int s) { return randomGrad(l.numel(), 80 + s); });
    auto codec = makeMessageCodec(o, l);
    for (int s = 0; s < 3; ++s) {
      Vec g = randomGrad(l.numel(), 80 + s);
      std::vector<uint8_t> msg(codec->messageBytes());
      codec->encodeMessage(g.data(), msg.data(), s, 0);
      Vec decoded(static_cast<size_t>(l.numel()), 0.0f);
      codec->decodeAdd(msg.data(), decoded.data());
      EXPECT_EQ(decoded, alone[0].outputs[s]) << name << " step " << s;
      EXPECT_EQ(static_cast<int64_t>(msg.size()), alone[0].payload[s]) << name;
    }
  }
}

TEST(MessageCodec, OnlyCompressorsWhoseMessageDecodesAloneHaveOne) {
  for (const char* name : {"none", "randomk", "powersgd"}) {
    try {
      requireMessageCodec(name);
      ADD_FAILURE() << name << " has no point-to-point form but was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("parameter-server pushes"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("onebit"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(makeMessageCodec(named("powersgd"), mlpLikeLayout()), UsageError);
  EXPECT_NO_THROW(requireMessageCodec("topk"));
}

// --compress-collective two-stage (TwoStage.h): every rank ends with the same
// bits; with nothing dropped (topk keeping every value) it is the exact mean;
// from 3 ranks on it sends less than the allgather (about 2(N-1)/N messages per
// rank instead of N-1); the error feedback of both stages is in the state.
CompressOptions twoStage(const std::string& name) {
  CompressOptions o = named(name);
  o.collective = "two-stage";
  return o;
}

TEST(TwoStage, EveryRankGetsTheSameBitsCorrelatedWithTheMean) {
  const BucketLayout l = mlpLikeLayout();
  const int64_t n = l.numel();
  for (const char* name : {"onebit", "signsgd", "qsgd", "topk"}) {
    for (int ranks : {2, 3, 4}) {
      CompressOptions o = twoStage(name);
      o.ratio = 0.1;
      auto r = run(o, l, ranks, 3, [&](int rank, int s) { return randomGrad(n, 100 * s + rank); });
      for (int s = 0; s < 3; ++s) {
        for (int k = 1; k < ranks; ++k)
          EXPECT_EQ(r[k].outputs[s], r[0].outputs[s]) << name << " N=" << ranks << " step " << s;
        Vec mean(static_cast<size_t>(n), 0.0f);
        for (int k = 0; k < ranks; ++k) {
          const Vec g = randomGrad(n, 100 * s + k);
          for (int64_t i = 0; i < n; ++i) mean[i] += g[i];
        }
        double dot = 0;
        for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(mean[i]) * r[0].outputs[s][i];
        EXPECT_GT(dot, 0) << name << " N=" << ranks << " step " << s;
      }
    }
  }
}

TEST(TwoStage, TopKKeepingEveryValueIsTheExactMean) {
  const BucketLayout l = mlpLikeLayout();
  const int64_t n = l.numel();
  CompressOptions o = twoStage("topk");
  o.ratio = 1.0;
  auto r = run(o, l, 3, 2, [&](int rank, int s) { return randomGrad(n, 10 * s + rank); });
  for (int s = 0; s < 2; ++s) {
    const Vec a = randomGrad(n, 10 * s), b = randomGrad(n, 10 * s + 1), c = randomGrad(n, 10 * s + 2);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(r[0].outputs[s][i], (a[i] + b[i] + c[i]) / 3.0f, 1e-5) << "step " << s << " value " << i;
  }
}

TEST(TwoStage, SendsLessThanTheAllgatherFromFourRanks) {
  const BucketLayout l = mlpLikeLayout();
  const int64_t n = l.numel();
  auto grads = [&](int rank, int s) { return randomGrad(n, 7 * s + rank); };
  auto gathered = run(named("onebit"), l, 4, 1, grads);
  auto staged = run(twoStage("onebit"), l, 4, 1, grads);
  for (int k = 0; k < 4; ++k) {
    const double ratio = static_cast<double>(staged[k].wireBytes[0]) / gathered[k].wireBytes[0];
    // 2 * 3/4 against 3 messages: 0.5, plus the alltoall's padding to the largest partition.
    EXPECT_LT(ratio, 0.6) << "rank " << k;
    EXPECT_GT(ratio, 0.4) << "rank " << k;
  }
}

TEST(TwoStage, KeepsErrorFeedbackAtBothStagesAndRejectsOtherCompressors) {
  auto r = run(twoStage("onebit"), mlpLikeLayout(), 2, 1,
               [&](int rank, int) { return randomGrad(mlpLikeLayout().numel(), rank); });
  const auto& st = r[1].states[0];
  EXPECT_TRUE(st.count("stage1.part0.residual") && st.count("stage1.part1.residual") &&
              st.count("stage2.residual"))
      << st.size() << " state tensors";
  for (const char* name : {"fp16", "powersgd", "randomk", "none"})
    EXPECT_THROW(validate(twoStage(name)), UsageError) << name;
  CompressOptions bad = named("onebit");
  bad.collective = "tree";
  EXPECT_THROW(validate(bad), UsageError);
}

}  // namespace
}  // namespace dtrain::parallel::compress
