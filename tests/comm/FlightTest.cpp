// The flight recorder (a rank's last calls, in a fixed ring) and the hang
// diagnosis made from every rank's state (comm/FlightRecorder.h,
// comm/HangDiagnosis.h, comm/HangReport.h).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "comm/HangDiagnosis.h"
#include "comm/HangReport.h"
#include "comm/local/Local.h"
#include "core/Error.h"

using namespace dtrain;
using namespace dtrain::comm;

namespace {

FlightCall call(FlightKind kind, uint64_t seq, int64_t step, bool open, float ageS) {
  FlightCall c;
  c.kind = kind;
  c.seq = seq;
  c.step = step;
  c.commId = 1;
  c.commSize = 4;
  c.open = open;
  c.ageS = ageS;
  c.postedAgeS = ageS + 0.1f;
  std::strcpy(c.phase, "backward");
  return c;
}

FlightState waitingIn(int rank, const FlightCall& c) {
  FlightState s;
  s.rank = rank;
  s.known = 1;
  s.nComms = 1;
  s.comms[0] = 1;
  s.step = c.step;
  std::strcpy(s.phase, "backward");
  s.phaseAgeS = 20;
  s.oldestOpen = s.latest = c;
  s.hasOpen = s.hasLatest = 1;
  s.entered[0] = c.seq + 1;
  std::strcpy(s.host, "h0");
  return s;
}

TEST(HangDiagnosis, NamesTheRankThatNeverEnteredTheCallAndWhatItLastDid) {
  const FlightCall hung = call(FlightKind::Allreduce, 1042, 311, true, 15.0f);
  std::vector<FlightState> ranks = {waitingIn(0, hung), waitingIn(1, hung), waitingIn(2, hung),
                                    waitingIn(3, hung)};
  // Rank 3 finished allreduce #1041 and went into backward of step 311 14.2 s ago.
  FlightState& late = ranks[3];
  late.hasOpen = 0;
  late.latest = call(FlightKind::Allreduce, 1041, 310, false, 16.0f);
  late.entered[0] = 1042;
  late.step = 311;
  late.phaseAgeS = 14.2f;
  std::strcpy(late.host, "h1");
  EXPECT_EQ(diagnoseHang(ranks),
            "rank 3 (host h1) never entered allreduce #1042 of step 311 (last: backward of step 311, "
            "14.2 s ago); ranks 0-2 wait in it");
}

TEST(HangDiagnosis, ASilentRankIsDescribedAsOfItsLastBeat) {
  const FlightCall hung = call(FlightKind::Barrier, 7, 2, true, 3.0f);
  std::vector<FlightState> ranks = {waitingIn(0, hung), waitingIn(1, hung), waitingIn(2, hung)};
  ranks[0].hasOpen = 0;
  ranks[0].latest = call(FlightKind::Allreduce, 6, 2, false, 4.5f);
  ranks[0].entered[0] = 7;
  ranks[0].phaseAgeS = 5.0f;  // it entered its phase before that call ended
  ranks[0].silentS = 4.5f;
  ranks[0].silent = 1;
  EXPECT_EQ(diagnoseHang(ranks),
            "rank 0 (host h0) never entered barrier #7 of step 2 (no heartbeat for 4.5 s: stopped, dead "
            "or cut off; at its last one it had ended allreduce #6 of step 2, 4.5 s ago); ranks 1, 2 wait in it");
}

TEST(HangDiagnosis, ARankWaitingElsewhereAndOneNeverHeardOf) {
  const FlightCall hung = call(FlightKind::Allreduce, 5, 1, true, 2.0f);
  std::vector<FlightState> ranks = {waitingIn(0, hung), waitingIn(1, hung), FlightState{}, waitingIn(3, hung)};
  FlightCall recv = call(FlightKind::Recv, 9, 1, true, 2.5f);
  recv.peer = 0;
  ranks[1].oldestOpen = ranks[1].latest = recv;
  ranks[1].entered[0] = 5;
  EXPECT_EQ(diagnoseHang(ranks),
            "rank 1 (host h0) never entered allreduce #5 of step 1 (waits in recv from rank 0 (tag 9) "
            "of step 1 since 2.5 s); rank 2 never entered allreduce #5 of step 1 (none of its calls is "
            "known); ranks 0, 3 wait in it");
  // On a sub-communicator an unknown rank may not be a member: said apart.
  for (FlightState& s : ranks) {
    s.oldestOpen.commId = s.latest.commId = 7;
    s.comms[1] = 7;
    s.entered[1] = s.entered[0];
    s.nComms = 2;
  }
  ranks[1].hasOpen = 0;
  ranks[1].latest.open = 0;
  ranks[1].phaseAgeS = 9;
  ranks[1].entered[1] = 6;
  ranks[2].silent = 1;
  ranks[2].silentS = 3;
  EXPECT_EQ(diagnoseHang(ranks),
            "every rank known entered allreduce #5 of step 1 on a group of 4 ranks; ranks 0, 3 wait in it"
            "\n  also: rank 1 is past it (last: recv from rank 0 (tag 9) of step 1 on a group of 4 ranks, "
            "ended 2.5 s ago); rank 2: nothing heard (no heartbeat carried its calls)");
}

TEST(HangDiagnosis, RankRanges) {
  EXPECT_EQ(rankRanges({0, 1, 2, 3, 4, 6, 7}), "0-4, 6, 7");
  EXPECT_EQ(rankRanges({5}), "5");
  EXPECT_EQ(rankRanges({}), "");
}

// The ring keeps the last 64 calls with their step and phase, oldest first.
TEST(FlightRecorder, KeepsTheLastCallsWithTheirStepAndPhase) {
  local::runLocal(2, [](Communicator& c) {
    float x = 1;
    for (int step = 1; step <= 50; ++step) {
      flight::setStep(step);
      flight::enterPhase("backward");
      c.allreduce(&x, &x, 1, DType::F32);
      c.barrier();
    }
    if (c.rank() != 1) return;
    const nlohmann::json j = nlohmann::json::parse(c.flightRecorder().json());
    EXPECT_EQ(j["rank"], 1);
    EXPECT_EQ(j["step"], 50);
    ASSERT_EQ(j["calls"].size(), static_cast<size_t>(kFlightEntries));
    const auto& last = j["calls"].back();
    EXPECT_EQ(last["kind"], "barrier");
    EXPECT_EQ(last["seq"], 99);
    EXPECT_EQ(last["step"], 50);
    EXPECT_EQ(last["phase"], "backward");
    EXPECT_FALSE(last["ended_s_ago"].is_null());
    EXPECT_EQ(j["calls"].front()["seq"], 100 - kFlightEntries);
    const FlightState s = c.flightRecorder().state();
    EXPECT_FALSE(s.hasOpen);
    EXPECT_EQ(s.latest.seq, 99u);
  });
}

// A wait that times out in a local run dumps every rank's recorder and prints
// the diagnosis: rank 2 waits in a receive that never comes instead of the
// allreduce the others wait in.
TEST(HangReport, LocalTimeoutDumpsEveryRankAndNamesTheOneMissing) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("dtrain-flight-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  flight::enableReports(dir.string());
  ::testing::internal::CaptureStderr();
  EXPECT_THROW(local::runLocal(3, [](Communicator& c) {
    flight::setStep(4);
    float x = 1;
    if (c.rank() == 2) {
      flight::enterPhase("data");
      c.recv(&x, 1, DType::F32, 0, 9);  // rank 0 never sends: the world's abort ends it
    } else {
      flight::enterPhase("backward");
      c.allreduce(&x, &x, 1, DType::F32);
    }
  }, Millis{500}), Error);
  const std::string err = ::testing::internal::GetCapturedStderr();
  flight::disableReports();
  EXPECT_NE(err.find("dtrain: hang: rank 2 (host "), std::string::npos) << err;
  EXPECT_NE(err.find(") never entered allreduce #0 of step 4 (waits in recv from rank 0 (tag 9) of step 4 since "),
            std::string::npos) << err;
  EXPECT_NE(err.find("); ranks 0, 1 wait in it"), std::string::npos) << err;
  for (int r = 0; r < 3; ++r) {
    std::ifstream in(dir / ("flight-rank" + std::to_string(r) + ".json"));
    ASSERT_TRUE(in) << "rank " << r << "'s file";
    EXPECT_EQ(nlohmann::json::parse(in)["rank"], r);
  }
  fs::remove_all(dir);
}

}  // namespace
