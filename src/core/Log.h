#pragma once
// Minimal leveled logging to stderr; the level is process-wide.
#include <string>

#include "core/Error.h"

namespace dtrain::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

void setLevel(Level level);
Level level();
void write(Level level, const std::string& msg);

template <typename... Args>
void info(const Args&... args) {
  if (level() <= Level::Info) write(Level::Info, detail::concat(args...));
}
template <typename... Args>
void warn(const Args&... args) {
  if (level() <= Level::Warn) write(Level::Warn, detail::concat(args...));
}
template <typename... Args>
void debug(const Args&... args) {
  if (level() <= Level::Debug) write(Level::Debug, detail::concat(args...));
}

}  // namespace dtrain::log
