#pragma once
// Progress on stderr: a redrawn bar on a terminal (epoch, step, loss,
// samples/s, ETA), plain log lines otherwise, nothing when off.
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/Timer.h"

namespace dtrain::runtime {

class Progress {
 public:
  enum class Mode { Bar, Lines, Off };
  Progress(Mode mode, int64_t totalSteps, FILE* out = stderr);
  static Mode autoMode();  // Bar when stderr is a terminal, else Lines

  // Every step (cheap: redraws at most ~10 times a second; lines every logEvery).
  void update(int64_t step, int64_t epoch, double loss, double samplesPerS, bool logLine);
  void message(const std::string& line);  // a log line that does not break the bar
  void finish();

 private:
  void clearBar();
  Mode mode_;
  int64_t total_;
  FILE* out_;
  Timer clock_;
  double lastDraw_ = -1;
  bool barShown_ = false;
};

}  // namespace dtrain::runtime
