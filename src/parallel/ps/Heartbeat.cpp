#include "parallel/ps/Heartbeat.h"

#include <algorithm>

namespace dtrain::parallel::ps {

namespace {
constexpr int kBeatTag = 7100;
using Clock = std::chrono::steady_clock;
}  // namespace

double Heartbeat::intervalFor(double timeoutS) { return std::min(1.0, timeoutS / 10); }

Heartbeat::Heartbeat(std::unique_ptr<comm::Communicator> comm, std::vector<int> peers,
                     double timeoutS)
    : comm_(std::move(comm)),
      peers_(std::move(peers)),
      interval_(static_cast<int64_t>(intervalFor(timeoutS) * 1e6)),
      start_(Clock::now()),
      lastNs_(new std::atomic<int64_t>[peers_.size()]),
      received_(new std::atomic<int64_t>[peers_.size()]),
      sent_(new std::atomic<int64_t>[peers_.size()]),
      latched_(new std::atomic<int64_t>[peers_.size()]),
      inBuf_(peers_.size(), 0),
      outBuf_(peers_.size(), 0),
      inWork_(peers_.size()),
      outWork_(peers_.size()) {
  for (size_t i = 0; i < peers_.size(); ++i) {
    lastNs_[i].store(0);
    received_[i].store(0);
    sent_[i].store(0);
    latched_[i].store(0);
    post(static_cast<int>(i));
  }
  thread_ = std::thread([this] { loop(); });
}

Heartbeat::~Heartbeat() { stop(); }

double Heartbeat::silentFor(int i) const {
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_);
  // After this process was stopped and continued (core/Resumed.h) every peer
  // counts as heard now: the silence was this process's own.
  if (resumed_.continued())
    for (size_t k = 0; k < peers_.size(); ++k) lastNs_[k].store(now.count(), std::memory_order_release);
  return static_cast<double>(now.count() - lastNs_[i].load(std::memory_order_acquire)) * 1e-9;
}

void Heartbeat::post(int i) {
  inWork_[i] = comm_->irecv(&inBuf_[i], 1, DType::I64, peers_[i], kBeatTag);
}

void Heartbeat::beat(int i) {
  // A beat still in flight (a peer that does not drain) is not repeated: beats
  // must never pile up behind a peer that stopped listening.
  if (outWork_[i] && !outWork_[i]->test()) return;
  outBuf_[i] = sent_[i].load(std::memory_order_acquire);
  outWork_[i] = comm_->isend(&outBuf_[i], 1, DType::I64, peers_[i], kBeatTag);
}

void Heartbeat::loop() {
  // Receive often (a peer's beat should count when it arrives), send every interval.
  const auto poll = std::max(std::chrono::microseconds(1000), interval_ / 4);
  auto nextBeat = Clock::now();
  try {
    for (;;) {
      bool heard = false;
      for (size_t i = 0; i < peers_.size(); ++i) {
        while (inWork_[i]->test()) {
          inWork_[i]->wait();  // rethrows a failure
          lastNs_[i].store(
              std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count(),
              std::memory_order_release);
          received_[i].store(inBuf_[i], std::memory_order_release);
          latched_[i].fetch_or(inBuf_[i], std::memory_order_acq_rel);
          post(static_cast<int>(i));
          heard = true;
        }
      }
      std::unique_lock<std::mutex> lock(mutex_);
      if (heard) cv_.notify_all();
      const bool last = stop_;
      if (last || (Clock::now() >= nextBeat && sending_.load(std::memory_order_acquire))) {
        lock.unlock();
        for (size_t i = 0; i < peers_.size(); ++i) beat(static_cast<int>(i));
        nextBeat = Clock::now() + interval_;
        if (last) break;
        lock.lock();
      }
      // Woken by stop(); waiters of waitUntil re-check their predicate every poll.
      cv_.wait_for(lock, poll, [&] { return stop_; });
      cv_.notify_all();
    }
  } catch (const std::exception&) {
    // The job's communicator was aborted (another rank failed): the training
    // thread learns it from its own operations; beats just end.
  }
  for (auto& w : inWork_)
    if (w) w->cancelIfPending();
  // The last beats are small (delivered eagerly): let them leave before their
  // buffers go.
  for (auto& w : outWork_) {
    try {
      if (w) w->waitFor(std::chrono::milliseconds(100));
    } catch (const std::exception&) {
    }
  }
}

void Heartbeat::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace dtrain::parallel::ps
