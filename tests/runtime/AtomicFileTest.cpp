// runtime/AtomicFile: a target that is a device or a pipe is written in place,
// never replaced by the renamed temporary file (as root, `--timeline /dev/null`
// once turned /dev/null into a regular file). A FIFO stands in for the device.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "runtime/AtomicFile.h"

namespace dtrain::test {
namespace {

TEST(AtomicFile, WritesAPipeInPlaceAndLeavesItAPipe) {
  const auto dir = std::filesystem::temp_directory_path() / ("atomic-fifo-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "out").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // The reading end first (non-blocking, so that neither side waits for the
  // other); a writer that renamed a file over the FIFO would leave it empty.
  const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(fd, 0);
  {
    runtime::AtomicFile f(fifo, "writing timeline");
    f.write("hello", 5);
    f.commit();
  }
  char buf[16];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  const std::string got = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  EXPECT_EQ(got, "hello");
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << fifo << " is no longer a FIFO";
  EXPECT_FALSE(std::filesystem::exists(fifo + ".tmp"));
  std::filesystem::remove_all(dir);
}

TEST(AtomicFile, ARegularFileIsStillReplacedWhole) {
  const auto path = std::filesystem::temp_directory_path() / ("atomic-" + std::to_string(::getpid()) + ".bin");
  {
    runtime::AtomicFile f(path.string());
    f.write("abc", 3);
    f.commit();
  }
  EXPECT_EQ(std::filesystem::file_size(path), 3u);
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace dtrain::test
