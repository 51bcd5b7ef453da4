#pragma once
// Helpers for the data tests: a per-test scratch directory and error capture.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/Error.h"

namespace dtrain::data::test {

// A fresh directory unique to this process and test, removed afterwards (ctest may
// run tests in parallel).
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("dtrain_data_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" +
             info->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline void writeBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<uint8_t> readBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// The message of the E that f() throws; a test failure if it throws nothing.
template <typename E = Error, typename F>
std::string errorOf(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

}  // namespace dtrain::data::test

// EXPECT that string `s` contains `sub`, printing both when it does not.
#define EXPECT_CONTAINS(s, sub)                                    \
  do {                                                             \
    const std::string s_ = (s), sub_ = (sub);                      \
    EXPECT_NE(s_.find(sub_), std::string::npos)                    \
        << "message: " << s_ << "\nexpected to contain: " << sub_; \
  } while (0)
