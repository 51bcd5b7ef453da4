#include "runtime/Progress.h"

#include <unistd.h>

#include <cmath>

namespace dtrain::runtime {

namespace {
std::string clock(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  char buf[32];
  int t = static_cast<int>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%02d:%02d", t / 60, t % 60);
  return buf;
}
}  // namespace

Progress::Progress(Mode mode, int64_t totalSteps, FILE* out)
    : mode_(mode), total_(totalSteps), out_(out) {}

Progress::Mode Progress::autoMode() { return isatty(STDERR_FILENO) ? Mode::Bar : Mode::Lines; }

void Progress::update(int64_t step, int64_t epoch, double loss, double samplesPerS, bool logLine) {
  if (mode_ == Mode::Off) return;
  const double elapsed = clock_.seconds();
  const double eta = step > 0 ? elapsed / step * (total_ - step) : NAN;
  if (mode_ == Mode::Lines) {
    if (logLine)
      std::fprintf(out_, "epoch %lld step %lld/%lld loss %.4f samples/s %.0f eta %s\n",
                   static_cast<long long>(epoch + 1), static_cast<long long>(step),
                   static_cast<long long>(total_), loss, samplesPerS, clock(eta).c_str());
    return;
  }
  if (elapsed - lastDraw_ < 0.1 && step < total_) return;
  lastDraw_ = elapsed;
  const int width = 30;
  const int filled = total_ > 0 ? static_cast<int>(width * step / total_) : 0;
  std::string bar(filled, '#');
  bar.resize(width, '.');
  std::fprintf(out_, "\r\033[Kepoch %lld [%s] %lld/%lld loss %.4f %.0f samples/s ETA %s",
               static_cast<long long>(epoch + 1), bar.c_str(), static_cast<long long>(step),
               static_cast<long long>(total_), loss, samplesPerS, clock(eta).c_str());
  std::fflush(out_);
  barShown_ = true;
}

void Progress::clearBar() {
  if (barShown_) std::fprintf(out_, "\r\033[K");
}

void Progress::message(const std::string& line) {
  if (mode_ == Mode::Off) return;
  clearBar();
  std::fprintf(out_, "%s\n", line.c_str());
  lastDraw_ = -1;  // redraw the bar at the next update
}

void Progress::finish() {
  if (mode_ == Mode::Bar && barShown_) std::fprintf(out_, "\n");
  barShown_ = false;
  std::fflush(out_);
}

}  // namespace dtrain::runtime
