// Offload files (core/Offload.h): allocations inside an OffloadScope live in
// the file (zeroed, counted as offloaded, not as memory); evict takes them out
// of memory and leaves their contents intact; prefetch brings them back; a
// tensor outliving its OffloadFile's owner still releases safely; a directory
// that cannot hold a file is a usage error.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>

#include "core/Error.h"
#include "core/Memory.h"
#include "core/Offload.h"

namespace dtrain::memory {
namespace {

std::string testDir() {
  auto dir = std::filesystem::temp_directory_path() / ("dtrain-offload-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

TEST(Offload, EvictedMemoryLeavesRamAndKeepsItsContents) {
  const std::string dir = testDir();
  auto file = std::make_shared<OffloadFile>(dir);
  Domain* domain = newDomain();
  constexpr size_t kBytes = 8 << 20;
  void* p;
  {
    DomainScope rank(domain);
    OffloadScope offloaded(file.get());
    p = allocate(kBytes, DeviceType::CPU, currentTag());
  }
  EXPECT_EQ(domain->offloaded.load(), static_cast<int64_t>(kBytes));
  EXPECT_EQ(domain->total.load(), 0);  // not memory
  EXPECT_GE(file->mappedBytes(), static_cast<int64_t>(kBytes));
  auto* f = static_cast<float*>(p);
  for (size_t i = 0; i < kBytes / 4; ++i) ASSERT_EQ(f[i], 0.0f) << i;  // zeroed
  for (size_t i = 0; i < kBytes / 4; ++i) f[i] = static_cast<float>(i);
  EXPECT_GE(file->residentBytes(), static_cast<int64_t>(kBytes));

  file->evict(p, kBytes);
  file->drain();
  EXPECT_LT(file->residentBytes(), static_cast<int64_t>(kBytes / 8));

  file->prefetch(p, kBytes);
  file->drain();
  EXPECT_GE(file->residentBytes(), static_cast<int64_t>(kBytes));
  for (size_t i = 0; i < kBytes / 4; ++i) ASSERT_EQ(f[i], static_cast<float>(i)) << i;

  // Memory that is not the file's is left alone.
  std::vector<float> heap(1024, 1.0f);
  file->evict(heap.data(), heap.size() * 4);
  file->drain();
  EXPECT_EQ(heap[7], 1.0f);

  Tag tag{domain, Category::OptimizerState, file.get()};
  release(p, kBytes, DeviceType::CPU, tag);
  EXPECT_EQ(domain->offloaded.load(), 0);
  EXPECT_EQ(file->residentBytes(), 0);
  file.reset();
  std::filesystem::remove_all(dir);
  // The file had no name: nothing stays behind in the directory.
}

TEST(Offload, ThrottleBoundsTheEvictionsInFlight) {
  const std::string dir = testDir();
  auto file = std::make_shared<OffloadFile>(dir);
  std::vector<void*> blocks;
  {
    OffloadScope offloaded(file.get());
    for (int i = 0; i < 8; ++i) blocks.push_back(allocate(1 << 20, DeviceType::CPU, currentTag()));
  }
  for (void* b : blocks) {
    std::memset(b, 1, 1 << 20);
    file->evict(b, 1 << 20);
    file->throttle(2 << 20);
    // What the loop touched stays within the window (plus the block just written).
    EXPECT_LE(file->residentBytes(), (3 << 20) + 4096 * 4);
  }
  file->throttle(0);
  EXPECT_LT(file->residentBytes(), 1 << 20);
  for (void* b : blocks) {
    EXPECT_EQ(static_cast<unsigned char*>(b)[12345], 1);
    release(b, 1 << 20, DeviceType::CPU, Tag{nullptr, Category::Other, file.get()});
  }
  file.reset();
  std::filesystem::remove_all(dir);
}

TEST(Offload, ADirectoryThatCannotHoldAFileIsAUsageError) {
  try {
    OffloadFile file("/nonexistent-dtrain-dir/offload");
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--offload-dir /nonexistent-dtrain-dir/offload"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dtrain::memory
