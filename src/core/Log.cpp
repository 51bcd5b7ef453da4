#include "core/Log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace dtrain::log {
namespace {
std::atomic<Level> gLevel{Level::Info};
std::mutex gMutex;
const char* name(Level l) {
  switch (l) {
    case Level::Debug: return "debug";
    case Level::Info: return "info";
    case Level::Warn: return "warn";
    default: return "error";
  }
}
}  // namespace

void setLevel(Level l) { gLevel = l; }
Level level() { return gLevel; }
void write(Level l, const std::string& msg) {
  std::lock_guard<std::mutex> lock(gMutex);
  std::fprintf(stderr, "[dtrain %s] %s\n", name(l), msg.c_str());
}

}  // namespace dtrain::log
