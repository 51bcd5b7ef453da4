#pragma once
// Where strategies (and the trainer) record timed spans for a timeline. The
// runtime implements it (runtime/Timeline.h writes Chrome trace-event JSON);
// parallel/ only sees this interface, because parallel sits below runtime.
#include <string_view>

#include "comm/FlightRecorder.h"
#include "core/Timer.h"

namespace dtrain::parallel {

// Lanes of one rank in the timeline (trace-event "tid").
enum class Lane : int { Compute = 0, Comm = 1 };

class SpanRecorder {
 public:
  virtual ~SpanRecorder() = default;
  // One finished span on `lane`, times in microseconds since nowMicros()'s origin.
  // Must be safe to call from several threads at once.
  virtual void span(std::string_view name, std::string_view category, Lane lane, double startUs,
                    double endUs) = 0;
};

// A span on the compute lane when a recorder is given (one branch otherwise).
// Its name is also the rank's phase in its flight recorder (what a hang's
// diagnosis says a rank last did), with or without a timeline.
struct SpanScope {
  SpanRecorder* rec;
  const char* name;
  double t0;
  SpanScope(SpanRecorder* r, const char* n) : rec(r), name(n), t0(r ? nowMicros() : 0) {
    comm::flight::enterPhase(n);
  }
  ~SpanScope() {
    if (rec) rec->span(name, "compute", Lane::Compute, t0, nowMicros());
  }
};

}  // namespace dtrain::parallel
