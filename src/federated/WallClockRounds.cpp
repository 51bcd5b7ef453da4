#include "federated/WallClockRounds.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/Error.h"
#include "federated/ClientMessages.h"

namespace dtrain::federated {
namespace {

constexpr int kRoundTag = 7101;   // server -> host: [round][global model]; round -1: stop
constexpr int kUpdateTag = 7102;  // host -> server: [round][index][loss][steps][delta]
constexpr size_t kRoundHeader = 2;   // floats: one int64
constexpr size_t kUpdateHeader = kUpdateHeaderFloats;
using Clock = std::chrono::steady_clock;

}  // namespace

RoundServer::RoundServer(comm::Communicator& comm, size_t modelSize)
    : comm_(comm), modelSize_(modelSize) {
  const auto p = static_cast<size_t>(comm.size());
  outstanding_.assign(p, 0);
  inbox_.resize(p);
  outbox_.resize(p);
  receiving_.resize(p);
  sending_.resize(p);
  for (int h = 1; h < comm.size(); ++h) {
    inbox_[h].resize(kUpdateHeader + modelSize);
    outbox_[h].resize(kRoundHeader + modelSize);
    post(h);
  }
}

RoundServer::~RoundServer() {
  for (auto& w : receiving_)
    if (w) w->cancelIfPending();
}

void RoundServer::post(int host) {
  receiving_[host] = comm_.irecv(inbox_[host].data(), inbox_[host].size(), DType::F32, host,
                                 kUpdateTag);
}

void RoundServer::take(int host, int64_t round, std::vector<ClientResult>& results,
                       std::vector<char>& arrived, int& expecting) {
  receiving_[host]->wait();
  const float* m = inbox_[host].data();
  DTRAIN_CHECK(outstanding_[host] > 0, "fedavg: host ", host, " sent an update it was not asked for");
  --outstanding_[host];
  // nullopt: a late update of an earlier round, dropped.
  if (auto update = readClientUpdate(m, modelSize_, round, results.size(), host)) {
    const size_t i = update->first;
    results[i] = std::move(update->second);
    arrived[i] = 1;
    --expecting;
  }
  post(host);
}

std::vector<char> RoundServer::collect(int64_t round, std::span<const float> global,
                                       const std::vector<int>& owners, double deadlineS,
                                       std::vector<ClientResult>& results) {
  const auto start = Clock::now();
  std::vector<int> count(outstanding_.size(), 0);
  for (int h : owners) ++count[h];
  std::vector<char> arrived(owners.size(), 0);
  int expecting = 0;
  for (int h = 1; h < comm_.size(); ++h) {
    if (count[h] == 0 || outstanding_[h] > 0) continue;  // nothing to do, or still busy
    if (sending_[h]) sending_[h]->wait();  // the host took it: it answered that round
    putField(outbox_[h].data(), round);
    std::copy(global.begin(), global.end(), outbox_[h].begin() + kRoundHeader);
    sending_[h] = comm_.isend(outbox_[h].data(), outbox_[h].size(), DType::F32, h, kRoundTag);
    outstanding_[h] = count[h];
    expecting += count[h];
  }
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(deadlineS));
  while (expecting > 0) {
    // The clock first: an update the server sees only after the deadline is
    // late, even if it arrived while the server was not looking (a loaded
    // machine can deschedule it for longer than the deadline).
    const auto now = Clock::now();
    if (deadlineS > 0 && now >= deadline) break;
    bool any = false;
    for (int h = 1; h < comm_.size(); ++h)
      if (outstanding_[h] > 0 && receiving_[h]->test()) {
        take(h, round, results, arrived, expecting);
        any = true;
      }
    if (any) continue;
    // Sleep on one host's receive in short slices, so that the others' are seen soon.
    auto slice = std::chrono::milliseconds(2);
    if (deadlineS > 0)
      slice = std::min(slice, std::chrono::ceil<std::chrono::milliseconds>(deadline - now));
    for (int h = 1; h < comm_.size(); ++h)
      if (outstanding_[h] > 0) {
        receiving_[h]->waitFor(slice);
        break;
      }
  }
  return arrived;
}

void RoundServer::finish() {
  if (finished_) return;
  finished_ = true;
  std::vector<ClientResult> none;
  std::vector<char> noneArrived;
  int expecting = 0;
  for (int h = 1; h < comm_.size(); ++h)
    while (outstanding_[h] > 0) take(h, -1, none, noneArrived, expecting);
  for (int h = 1; h < comm_.size(); ++h) {
    if (sending_[h]) sending_[h]->wait();
    putField(outbox_[h].data(), int64_t{-1});
    sending_[h] = comm_.isend(outbox_[h].data(), outbox_[h].size(), DType::F32, h, kRoundTag);
  }
  for (int h = 1; h < comm_.size(); ++h) {
    sending_[h]->wait();
    receiving_[h]->cancelIfPending();  // no host sends after its stop
    receiving_[h].reset();
  }
}

RoundHost::RoundHost(comm::Communicator& comm, size_t modelSize)
    : comm_(comm), modelSize_(modelSize), inbox_(kRoundHeader + modelSize) {}

RoundHost::~RoundHost() = default;

std::optional<int64_t> RoundHost::next(std::vector<float>& global) {
  auto w = comm_.irecv(inbox_.data(), inbox_.size(), DType::F32, 0, kRoundTag);
  // Idle hosts wait as long as the server's rounds take (a host with no clients
  // may sit out many), so no timeout here; a failed server aborts the job.
  while (!w->waitFor(std::chrono::seconds(1))) {
  }
  const auto round = getField<int64_t>(inbox_.data());
  if (round < 0) return std::nullopt;
  global.assign(inbox_.begin() + kRoundHeader, inbox_.end());
  return round;
}

void RoundHost::send(int64_t round, size_t index, const ClientResult& result) {
  // Reap the updates that have left, so that memory holds only those in flight.
  std::erase_if(sent_, [](auto& s) { return s.second->test(); });
  std::vector<float> m(kUpdateHeader + modelSize_);
  putField(m.data(), round);
  putField(m.data() + 2, static_cast<int64_t>(index));
  putField(m.data() + 4, result.meanLoss);
  putField(m.data() + 6, result.steps);
  std::copy(result.delta.begin(), result.delta.end(), m.begin() + kUpdateHeader);
  auto w = comm_.isend(m.data(), m.size(), DType::F32, 0, kUpdateTag);
  sent_.emplace_back(std::move(m), std::move(w));
}

void RoundHost::flush() {
  for (auto& s : sent_) s.second->wait();
  sent_.clear();
}

}  // namespace dtrain::federated
