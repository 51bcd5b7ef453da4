#include "comm/FlightRecorder.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/Timer.h"

namespace dtrain::comm {

namespace {

thread_local std::shared_ptr<FlightRecorder> tRecorder;

std::mutex gDirMutex;
std::string gDumpDir;

template <size_t N>
void copyName(char (&dst)[N], const char* src) {
  std::strncpy(dst, src ? src : "", N - 1);
  dst[N - 1] = '\0';
}

std::string hostName() {
  char buf[64] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

}  // namespace

const char* flightKindName(FlightKind kind) {
  static const char* names[] = {"allreduce", "broadcast", "reduce", "allgather", "allgatherv",
                                "reduce_scatter", "alltoall", "barrier", "split",
                                "send", "recv", "isend", "irecv"};
  const auto i = static_cast<size_t>(kind);
  return i < std::size(names) ? names[i] : "?";
}

bool FlightState::member(uint32_t commId) const {
  return std::find(comms.begin(), comms.begin() + nComms, commId) != comms.begin() + nComms;
}

bool FlightState::enteredCall(uint32_t commId, uint64_t seq) const {
  for (int i = 0; i < nComms; ++i)
    if (comms[i] == commId) return entered[i] > seq;
  return false;
}

FlightRecorder::FlightRecorder(int rank) : rank_(rank), host_(hostName()), phaseStartUs_(nowMicros()) {
  comms_[0] = 1;  // the world
  nComms_ = 1;
}

void FlightRecorder::bindThread(std::shared_ptr<FlightRecorder> recorder) {
  tRecorder = std::move(recorder);
}

FlightRecorder* FlightRecorder::current() { return tRecorder.get(); }

uint64_t FlightRecorder::begin(FlightKind kind, uint64_t seq, uint64_t bytes, int peer,
                               uint32_t commId, int commSize) {
  const double now = nowMicros();
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t token = ++next_;
  Entry& e = ring_[token % kFlightEntries];
  e = Entry{};
  e.token = token;
  e.kind = kind;
  e.seq = seq;
  e.bytes = bytes;
  e.peer = peer;
  e.commId = commId;
  e.commSize = static_cast<uint16_t>(std::min(commSize, 65535));
  e.step = step_;
  e.phase = phase_;
  e.postUs = now;
  if (kind < FlightKind::Send)
    for (int i = 0; i < nComms_; ++i)
      if (comms_[i] == commId) entered_[i] = std::max(entered_[i], seq + 1);
  return token;
}

FlightRecorder::Entry* FlightRecorder::find(uint64_t token) {
  Entry& e = ring_[token % kFlightEntries];
  return e.token == token ? &e : nullptr;  // overwritten once 64 later calls came
}

void FlightRecorder::start(uint64_t token) {
  const double now = nowMicros();
  std::lock_guard<std::mutex> lock(mutex_);
  if (Entry* e = find(token)) e->startUs = now;
}

void FlightRecorder::end(uint64_t token, bool failed) {
  const double now = nowMicros();
  std::lock_guard<std::mutex> lock(mutex_);
  if (Entry* e = find(token)) {
    if (e->startUs == 0) e->startUs = e->postUs;
    e->endUs = now;
    e->failed = failed;
  }
}

void FlightRecorder::joinComm(uint32_t commId) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (std::find(comms_.begin(), comms_.begin() + nComms_, commId) != comms_.begin() + nComms_) return;
  if (nComms_ < static_cast<int>(comms_.size())) comms_[nComms_++] = commId;
}

void FlightRecorder::setStep(int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = step;
}

int64_t FlightRecorder::step() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return step_;
}

void FlightRecorder::enterPhase(const char* phase) {
  const double now = nowMicros();
  std::lock_guard<std::mutex> lock(mutex_);
  phase_ = phase;
  phaseStartUs_ = now;
}

FlightCall FlightRecorder::view(const Entry& e, double nowUs) const {
  FlightCall c;
  c.seq = e.seq;
  c.bytes = e.bytes;
  c.step = e.step;
  c.commId = e.commId;
  c.peer = e.peer;
  c.commSize = e.commSize;
  c.kind = e.kind;
  c.open = e.endUs == 0;
  copyName(c.phase, e.phase);
  c.ageS = static_cast<float>((nowUs - (c.open ? e.postUs : e.endUs)) / 1e6);
  c.postedAgeS = static_cast<float>((nowUs - e.postUs) / 1e6);
  return c;
}

FlightState FlightRecorder::state() const {
  const double now = nowMicros();
  std::lock_guard<std::mutex> lock(mutex_);
  FlightState s;
  s.rank = rank_;
  s.known = 1;
  s.step = step_;
  copyName(s.phase, phase_);
  s.phaseAgeS = static_cast<float>((now - phaseStartUs_) / 1e6);
  s.comms = comms_;
  s.entered = entered_;
  s.nComms = static_cast<uint8_t>(nComms_);
  copyName(s.host, host_.c_str());
  const uint64_t first = next_ > kFlightEntries ? next_ - kFlightEntries + 1 : 1;
  for (uint64_t t = first; t <= next_; ++t) {
    const Entry& e = ring_[t % kFlightEntries];
    if (e.token != t) continue;
    // Point-to-point posted asynchronously has no end the layer sees: not "open".
    const bool async = e.kind == FlightKind::Isend || e.kind == FlightKind::Irecv;
    if (!s.hasOpen && e.endUs == 0 && !async) {
      s.oldestOpen = view(e, now);
      s.hasOpen = 1;
    }
    s.latest = view(e, now);
    s.hasLatest = 1;
  }
  return s;
}

std::string FlightRecorder::json() const {
  const double now = nowMicros();
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::ordered_json calls = nlohmann::ordered_json::array();
  const uint64_t first = next_ > kFlightEntries ? next_ - kFlightEntries + 1 : 1;
  auto secondsAgo = [&](double us) { return us == 0 ? nlohmann::ordered_json() : nlohmann::ordered_json((now - us) / 1e6); };
  for (uint64_t t = first; t <= next_; ++t) {
    const Entry& e = ring_[t % kFlightEntries];
    if (e.token != t) continue;
    nlohmann::ordered_json c = {{"kind", flightKindName(e.kind)}, {"seq", e.seq}, {"bytes", e.bytes},
                        {"comm", e.commId}, {"comm_size", e.commSize}, {"step", e.step},
                        {"phase", e.phase}, {"posted_s_ago", secondsAgo(e.postUs)},
                        {"started_s_ago", secondsAgo(e.startUs)}, {"ended_s_ago", secondsAgo(e.endUs)},
                        {"failed", e.failed}};
    if (e.peer >= 0) c["peer"] = e.peer;
    calls.push_back(std::move(c));
  }
  nlohmann::ordered_json out = {{"rank", rank_}, {"host", host_}, {"step", step_}, {"phase", phase_},
                        {"phase_age_s", (now - phaseStartUs_) / 1e6},
                        {"comms", std::vector<uint32_t>(comms_.begin(), comms_.begin() + nComms_)},
                        {"calls", std::move(calls)}};
  return out.dump(1);
}

namespace flight {

void setStep(int64_t step) {
  if (FlightRecorder* r = FlightRecorder::current()) r->setStep(step);
}

void enterPhase(const char* phase) {
  if (FlightRecorder* r = FlightRecorder::current()) r->enterPhase(phase);
}

void setDumpDir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(gDirMutex);
  gDumpDir = dir;
}

std::string dumpDir() {
  std::lock_guard<std::mutex> lock(gDirMutex);
  return gDumpDir;
}

std::string dump(const FlightRecorder& recorder) {
  namespace fs = std::filesystem;
  const std::string dir = dumpDir();
  const fs::path path = fs::path(dir.empty() ? "." : dir) / ("flight-rank" + std::to_string(recorder.rank()) + ".json");
  const fs::path tmp = path.string() + ".tmp";
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  {
    std::ofstream out(tmp);
    out << recorder.json() << '\n';
    if (!out.flush()) return {};
  }
  fs::rename(tmp, path, ec);
  return ec ? std::string() : path.string();
}

bool skipHookFires(int rank, int64_t step) {
  static const std::pair<int, int64_t> hook = [] {
    const char* s = std::getenv("DTRAIN_TEST_SKIP_CALL");
    int r = -1;
    long long k = -1;
    if (!s || std::sscanf(s, "%d:%lld", &r, &k) != 2) return std::pair<int, int64_t>{-1, -1};
    return std::pair<int, int64_t>{r, k};
  }();
  return hook.first == rank && hook.second == step;
}

}  // namespace flight

}  // namespace dtrain::comm
