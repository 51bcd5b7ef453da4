// What parameter servers and Sandblaster's ranks do with a corrupt message
// from a peer: one line naming the sender (or message) and the field, never
// an out-of-range cast, index or allocation. tests/fuzz (FuzzPsMessages,
// FuzzSandblaster) feeds arbitrary bytes to the same decoders.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "comm/local/Local.h"
#include "core/Error.h"
#include "parallel/PsTestUtil.h"
#include "parallel/ps/Protocol.h"
#include "parallel/sandblaster/ShardState.h"
#include "parallel/sandblaster/UnitProtocol.h"

namespace dtrain::parallel {
namespace {

// The error decoding `h` as `expected` raises ("" when it is accepted).
std::string psDecodeError(const ps::Header& h, std::initializer_list<ps::Kind> expected) {
  std::vector<float> buf(ps::kHeaderFloats);
  ps::writeHeader(buf.data(), h);
  try {
    ps::decodeHeader(buf.data(), expected, "worker 1 (rank 3)");
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(WireProtocol, PsHeadersFromPeersAreCheckedFieldByField) {
  ps::Header push;
  push.kind = ps::Kind::Push;
  push.worker = 1;
  push.step = 5;
  push.seq = 5;
  push.version = 4;
  push.lr = 0.1;
  push.flags = ps::kWantParams;
  EXPECT_EQ(psDecodeError(push, {ps::Kind::Push}), "");
  // A reply of a server with no live worker left carries the largest minClock.
  ps::Header params;
  params.kind = ps::Kind::Params;
  params.minClock = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(psDecodeError(params, {ps::Kind::Params}), "");

  struct Case {
    const char* field;
    void (*corrupt)(ps::Header&);
  };
  const Case cases[] = {
      {"kind 5", [](ps::Header& h) { h.kind = ps::Kind::Params; }},
      {"worker -2", [](ps::Header& h) { h.worker = -2; }},
      {"step -1", [](ps::Header& h) { h.step = -1; }},
      {"version 9223372036854775807", [](ps::Header& h) { h.version = std::numeric_limits<int64_t>::max(); }},
      {"seq -7", [](ps::Header& h) { h.seq = -7; }},
      {"minClock -1", [](ps::Header& h) { h.minClock = -1; }},
      {"optimizer slots 9", [](ps::Header& h) { h.slots = 9; }},
      {"statistics bytes -1", [](ps::Header& h) { h.extra = -1; }},
      {"learning rate nan", [](ps::Header& h) { h.lr = std::nan(""); }},
      {"wait seconds -1", [](ps::Header& h) { h.waitS = -1; }},
      {"flags 64", [](ps::Header& h) { h.flags = 64; }},
  };
  for (const Case& c : cases) {
    ps::Header h = push;
    c.corrupt(h);
    const std::string err = psDecodeError(h, {ps::Kind::Push});
    EXPECT_EQ(err, std::string("parameter server protocol: malformed message from worker 1 (rank 3): ") + c.field);
  }
}

// A sync server takes its first push's step as where the run starts (a
// resumed run starts past 0): a step number from a peer must not size its
// per-step statistics (step 2^50 once asked for 8 PB and died of bad_alloc).
// One hand-written worker (rank 1) speaks the protocol to one real server.
TEST(WireProtocol, APsServerStartingAtAHugeStepAllocatesNothingByIt) {
  runtime::TrainConfig c = smallConfig("mlp", 16);
  c.strategy = "ps";
  auto o = test::psOptions(c, 1, ps::Consistency::Sync);
  o.workers = 1;
  const int64_t start = ps::kMaxCount - 10;
  ps::ServerStats stats;
  comm::local::runLocal(2, [&](comm::Communicator& comm) {
    auto model = nn::makeModel("mlp", 7);
    if (comm.rank() == 0) {
      stats = ps::ParameterServer(comm, *model, o).run();
      return;
    }
    auto beats = comm.split(0, comm.rank());  // as PsWorker: the servers' heartbeats travel there
    int64_t n = 0;
    for (const auto& [name, p] : model->namedParameters()) n += p.numel();
    std::vector<float> msg(ps::kHeaderFloats + n, 0.0f);
    ps::Header h;
    h.kind = ps::Kind::Init;
    h.total = n;
    ps::writeHeader(msg.data(), h);
    comm.send(msg.data(), msg.size(), DType::F32, 0, ps::kInitTag);
    for (int64_t step = start; step < start + 2; ++step) {
      h = ps::Header{};
      h.kind = ps::Kind::Push;
      h.step = step;
      h.seq = step - start;
      h.lr = 0.1;
      h.flags = ps::kWantParams;
      ps::writeHeader(msg.data(), h);
      comm.send(msg.data(), msg.size(), DType::F32, 0, ps::kPushTag);
      comm.recv(msg.data(), msg.size(), DType::F32, 0, ps::kReplyTag);
      EXPECT_EQ(ps::decodeHeader(msg.data(), {ps::Kind::Params}, "server").step, step + 1);
    }
    std::vector<float> ctrl(ps::kHeaderFloats);
    h = ps::Header{};
    h.kind = ps::Kind::Done;
    h.step = start + 2;
    h.seq = 2;
    ps::writeHeader(ctrl.data(), h);
    comm.send(ctrl.data(), ctrl.size(), DType::F32, 0, ps::kCtrlTag);
    // The final state: header, parameters and optimizer state, statistics.
    comm.recv(ctrl.data(), ctrl.size(), DType::F32, 0, ps::kFinalTag);
    const ps::Header fin = ps::decodeHeader(ctrl.data(), {ps::Kind::Final}, "server");
    std::vector<float> payload((1 + fin.slots) * n);
    comm.recv(payload.data(), payload.size(), DType::F32, 0, ps::kFinalTag);
    std::vector<uint8_t> json(fin.extra);
    comm.recv(json.data(), json.size(), DType::U8, 0, ps::kFinalTag);
  });
  EXPECT_EQ(stats.updates, 2);
  EXPECT_EQ(stats.appliedPerStep, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(stats.droppedPerStep, (std::vector<int64_t>{0, 0}));
}

TEST(WireProtocol, SandblasterNumbersAreWholeAndInRangeBeforeTheyIndex) {
  using sandblaster::shard::wholeNumber;
  EXPECT_EQ(wholeNumber(3.0, 0, 5, "unit"), 3);
  EXPECT_EQ(wholeNumber(-1.0, -1, 5, "evaluation"), -1);
  for (double bad : {std::nan(""), 2.5, 6.0, -1.0, 1e300, -std::numeric_limits<double>::infinity()}) {
    try {
      wholeNumber(bad, 0, 5, "a gradient head's unit");
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("sandblaster: malformed message: a gradient head's unit is "),
                std::string::npos)
          << e.what();
    }
  }
  sandblaster::shard::Command nan{std::nan(""), 0, 0, 0};
  EXPECT_THROW(sandblaster::shard::opOf(nan), Error);
  sandblaster::shard::Command past{18, 0, 0, 0};  // one past kDone
  EXPECT_THROW(sandblaster::shard::opOf(past), Error);
}

// A shard's link that records replies and has no vectors to give.
class RecordingShardLink : public sandblaster::ShardLink {
 public:
  void reply(sandblaster::shard::Reply r) override { replies.push_back(r); }
  void sendVector(const std::vector<float>&) override {}
  void recvVector(std::vector<float>& v) override { v.assign(3, 1.0f); }
  std::vector<sandblaster::shard::Reply> replies;
};

TEST(WireProtocol, ShardCommandsOutOfOrderOrRangeFailWithOneLine) {
  using sandblaster::shard::Command;
  using sandblaster::shard::Op;
  auto command = [](Op op, double a = 0, double b = 0, double c = 0) {
    return Command{static_cast<double>(op), a, b, c};
  };
  RecordingShardLink link;
  sandblaster::ShardState shard(3, link);
  // One history pair (s, y), kept with capacity 2.
  shard.handle(command(Op::kInit, 1, 2));
  EXPECT_EQ(link.replies.back().pairs, 1);
  EXPECT_THROW(shard.handle(command(Op::kBack, 1, 0.5)), Error);     // pair 1 of 1
  EXPECT_THROW(shard.handle(command(Op::kForward, -1, 0.5)), Error);
  EXPECT_THROW(shard.handle(command(Op::kPairDots, 0.5)), Error);
  EXPECT_THROW(shard.handle(command(Op::kKeepPair)), Error);          // no kPair before it
  EXPECT_THROW(shard.handle(command(Op::kEvalBegin, 1, 0, 8)), Error);  // 0 units
  EXPECT_THROW(shard.handle(command(Op::kEvalBegin, 1, 4, 3)), Error);  // fewer samples than units
  // A command the coordinator never sends first computes on zeros, in bounds.
  shard.handle(command(Op::kSetX, 0.5));
  EXPECT_EQ(shard.parameters(), std::vector<float>(3, 0.0f));
  // An evaluation of 2 units: a unit out of range is dropped, not written.
  shard.handle(command(Op::kEvalBegin, 1, 2, 8));
  std::vector<float> g(3, 1.0f);
  EXPECT_TRUE(shard.acceptGradient({1, 5}, g));
  EXPECT_EQ(shard.stats().dropped, 1);
  EXPECT_THROW(sandblaster::shard::decodeGradHead(std::array<double, 2>{1, -3}.data()), Error);
  EXPECT_TRUE(sandblaster::shard::decodeGradHead(std::array<double, 2>{-1, -1}.data()).goodbye());
}

TEST(WireProtocol, UnitHeadersAndAnswersAreChecked) {
  using namespace sandblaster::unit;
  std::vector<int64_t> h(kHeaderSize, 0);
  h[kKind] = kCompute;
  h[kEvaluation] = 1;
  h[kUnit] = 2;
  h[kParamsFollow] = kFromCoordinator;
  h[kXMeta] = static_cast<int64_t>(DType::F32);
  h[kXMeta + 1] = 2;
  h[kXMeta + 2] = 4;
  h[kXMeta + 3] = 3;
  h[kYMeta] = static_cast<int64_t>(DType::I64);
  h[kYMeta + 1] = 1;
  h[kYMeta + 2] = 4;
  const UnitHeader u = decodeUnitHeader(h.data(), 0);
  EXPECT_EQ(u.x.shape, (Shape{4, 3}));
  EXPECT_EQ(u.y.dtype, DType::I64);
  EXPECT_THROW(decodeUnitHeader(h.data(), 2), Error);  // with shards the parameters come from them
  auto rejects = [&](size_t field, int64_t value) {
    std::vector<int64_t> bad = h;
    bad[field] = value;
    EXPECT_THROW(decodeUnitHeader(bad.data(), 0), Error) << "field " << field << " = " << value;
  };
  rejects(kKind, 2);
  rejects(kUnit, -1);
  rejects(kXMeta, 6);         // no such dtype
  rejects(kXMeta + 1, 7);     // more dimensions than the header holds
  rejects(kXMeta + 2, -4);
  rejects(kXMeta + 2, int64_t{1} << 62);  // bytes past kMaxSampleBytes (no overflow on the way)
  rejects(kSamples, 2);
  // A unit the worker reads itself: samples [lo, hi) of a step's batch.
  std::vector<int64_t> r = h;
  r[kSamples] = kWorkerReads;
  r[kBatchEpoch] = 1;
  r[kBatchStep] = 7;
  r[kBatchSamples] = 512;
  r[kUnitLo] = 64;
  r[kUnitHi] = 128;
  const UnitHeader read = decodeUnitHeader(r.data(), 0);
  EXPECT_TRUE(read.workerReads);
  EXPECT_EQ(read.step, 7);
  EXPECT_EQ(read.hi - read.lo, 64);
  auto readRejects = [&](size_t field, int64_t value) {
    std::vector<int64_t> bad = r;
    bad[field] = value;
    EXPECT_THROW(decodeUnitHeader(bad.data(), 0), Error) << "field " << field << " = " << value;
  };
  readRejects(kBatchStep, -1);
  readRejects(kBatchSamples, 0);
  readRejects(kUnitLo, 512);  // past the batch
  readRejects(kUnitHi, 64);   // empty
  readRejects(kUnitHi, 513);
  EXPECT_EQ(decodeAnswer({1, 2, 0.5}, 0).unit, 2);
  EXPECT_THROW(decodeAnswer({1, 1e300, 0.5}, 0), Error);
  EXPECT_THROW(decodeAnswer({std::nan(""), 0, 0.5}, 0), Error);
}

}  // namespace
}  // namespace dtrain::parallel
