#pragma once
// Helpers shared by the runtime tests: a scratch directory and small files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace dtrain::testing {

// A fresh directory under the system temp dir, removed with the fixture.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("dtrain_runtime_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
             std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::string readBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The source tree (scripts/, ../shared/): DTRAIN_SOURCE_DIR, else where it was built from.
inline std::string sourceDir() {
  const char* src = std::getenv("DTRAIN_SOURCE_DIR");
  return src ? src : DTRAIN_TEST_SOURCE_DIR;
}

// Whether Debian's /usr/bin/python3 has torch and numpy (the interop tests skip otherwise).
inline bool haveTorch() {
  static const bool have =
      std::system("/usr/bin/python3 -c 'import torch, numpy' > /dev/null 2>&1") == 0;
  return have;
}

}  // namespace dtrain::testing
