#include "runtime/AtomicFile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/Error.h"

namespace dtrain::runtime {

namespace {
std::string osError() { return std::strerror(errno); }

bool existsAsNonRegularFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

// Test seam: DTRAIN_TEST_WRITE_LIMIT=N makes every atomic file's writes fail
// with ENOSPC after N bytes, as a disk that fills during the write would.
size_t writeLimitForTests() {
  static const size_t limit = [] {
    const char* s = std::getenv("DTRAIN_TEST_WRITE_LIMIT");
    return s ? static_cast<size_t>(std::strtoull(s, nullptr, 10)) : SIZE_MAX;
  }();
  return limit;
}
}  // namespace

AtomicFile::AtomicFile(std::string target, std::string what)
    : path_(target + ".tmp"), target_(std::move(target)), what_(std::move(what)) {
  if (existsAsNonRegularFile(target_)) {
    inPlace_ = true;
    path_ = target_;
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    DTRAIN_CHECK(fd_ >= 0, what_, " ", target_, ": cannot open it (", osError(), ")");
    return;
  }
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  DTRAIN_CHECK(fd_ >= 0, what_, " ", target_, ": cannot create ", path_, " (", osError(), ")");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !inPlace_) ::unlink(path_.c_str());
}

void AtomicFile::write(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    size_t chunk = std::min<size_t>(bytes, size_t{1} << 30);
    const size_t limit = writeLimitForTests();
    ssize_t n;
    if (written_ + chunk > limit) {
      chunk = limit - std::min(limit, written_);
      n = chunk ? ::write(fd_, p, chunk) : (errno = ENOSPC, -1);
    } else {
      n = ::write(fd_, p, chunk);
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = ENOSPC;  // a write that makes no progress: the device is full
    DTRAIN_CHECK(n > 0, what_, " ", target_, ": write to ", path_, " failed (", osError(), ")");
    p += n;
    bytes -= static_cast<size_t>(n);
    written_ += static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (inPlace_) {  // nothing to make durable or rename
    const int rc = ::close(fd_);
    fd_ = -1;
    DTRAIN_CHECK(rc == 0, what_, " ", target_, ": close failed (", osError(), ")");
    committed_ = true;
    return;
  }
  DTRAIN_CHECK(::fsync(fd_) == 0, what_, " ", target_, ": fsync of ", path_, " failed (", osError(), ")");
  const int rc = ::close(fd_);
  fd_ = -1;
  DTRAIN_CHECK(rc == 0, what_, " ", target_, ": close of ", path_, " failed (", osError(), ")");
  DTRAIN_CHECK(::rename(path_.c_str(), target_.c_str()) == 0, what_, " ", target_, ": cannot rename ",
               path_, " over it (", osError(), ")");
  committed_ = true;
  // Make the rename itself durable; failure here loses nothing already written.
  std::string dir = std::filesystem::path(target_).parent_path().string();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace dtrain::runtime
