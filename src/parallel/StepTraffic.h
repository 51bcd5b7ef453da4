#pragma once
// What a data-parallel strategy reports per step in its stats() (the result
// line's fields, the same for allreduce and ZeRO): the bytes this rank sent
// and received, and the times of compute (step start to backward's end) and
// of communication, hidden under backward or exposed after it.
#include <cstdint>
#include <map>
#include <string>

#include "comm/Communicator.h"
#include "core/Timer.h"

namespace dtrain::parallel {

class StepTraffic {
 public:
  // At a step's start: its clock and the communicator's byte counts.
  void beginStep(const comm::Communicator& comm) {
    startUs_ = nowMicros();
    sentAt_ = comm.bytesSent();
    receivedAt_ = comm.bytesReceived();
  }
  // Backward ended at `backwardEndUs`: the step's compute.
  void computedUntil(double backwardEndUs) { computeUs_ += backwardEndUs - startUs_; }
  // Communication that ran `us` microseconds, `hiddenUs` of them under backward.
  void communicated(double us, double hiddenUs) {
    commUs_ += us;
    hiddenUs_ += hiddenUs;
  }
  // Time the step waited for communication after backward.
  void exposed(double us) { exposedUs_ += us; }
  // At a step's end, once its communication has completed: its bytes.
  void endStep(const comm::Communicator& comm) {
    ++steps_;
    sent_ += comm.bytesSent() - sentAt_;
    received_ += comm.bytesReceived() - receivedAt_;
  }

  int64_t steps() const { return steps_; }
  // Per-step means of the figures, in the result line's units (ms, bytes).
  void report(std::map<std::string, double>& out) const {
    const double n = static_cast<double>(steps_ > 0 ? steps_ : 1);
    out["compute_ms"] = computeUs_ / n / 1e3;
    out["comm_ms"] = commUs_ / n / 1e3;
    out["hidden_ms"] = hiddenUs_ / n / 1e3;
    out["exposed_comm_ms"] = exposedUs_ / n / 1e3;
    out["bytes_sent_per_worker"] = static_cast<double>(sent_) / n;
    out["bytes_received_per_worker"] = static_cast<double>(received_) / n;
  }

 private:
  double startUs_ = 0;
  uint64_t sentAt_ = 0, receivedAt_ = 0;
  int64_t steps_ = 0;
  uint64_t sent_ = 0, received_ = 0;
  double computeUs_ = 0, commUs_ = 0, hiddenUs_ = 0, exposedUs_ = 0;
};

}  // namespace dtrain::parallel
