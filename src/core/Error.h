#pragma once
// Errors are exceptions whose message names what failed and why. The CLI maps
// UsageError to exit code 2 and every other dtrain::Error to exit code 1.
#include <sstream>
#include <stdexcept>
#include <string>

namespace dtrain {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Bad flags, configuration or arguments given by the user (exit code 2).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& msg) : Error(msg) {}
};

// A collective or blocking call that did not complete in time.
class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& msg) : Error(msg) {}
};

// A wait given up because a peer sent no heartbeat (--comm-timeout): its message
// names that peer, and no caller replaces it with "who never arrived".
class PeerSilentError : public TimeoutError {
 public:
  explicit PeerSilentError(const std::string& msg) : TimeoutError(msg) {}
};

namespace detail {
// Builds a message from any streamable pieces: concat("rank ", 3, ": bad").
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace dtrain

// DTRAIN_CHECK(cond, pieces...): throws dtrain::Error("pieces...") when cond is false.
#define DTRAIN_CHECK(cond, ...)                                        \
  do {                                                                 \
    if (!(cond)) [[unlikely]]                                          \
      throw ::dtrain::Error(::dtrain::detail::concat(__VA_ARGS__));    \
  } while (0)

// DTRAIN_CHECK_USAGE: the same, but the failure is the user's input (exit code 2).
#define DTRAIN_CHECK_USAGE(cond, ...)                                   \
  do {                                                                  \
    if (!(cond)) [[unlikely]]                                           \
      throw ::dtrain::UsageError(::dtrain::detail::concat(__VA_ARGS__)); \
  } while (0)
