#pragma once
// Memory accounting: every tensor allocation goes through allocate()/release(),
// which count current and peak bytes per device. Memory optimizations (ZeRO,
// recomputation, offload) are judged by these numbers.
//
// Per rank and by category (--backend local runs ranks as threads of one
// process): a rank's thread installs its accounting Domain (DomainScope), code
// that allocates model states says what they are (CategoryScope), and each
// Storage remembers the Tag it was allocated under so that it releases to the
// same domain and category whichever thread frees it. The hot path is a few
// relaxed atomic additions: no locks.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace dtrain {

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };
constexpr int kMaxDevices = 2;

struct MemoryStats {
  int64_t currentBytes = 0;
  int64_t peakBytes = 0;
  int64_t allocations = 0;
};

namespace memory {
constexpr size_t kAlignment = 64;  // cache line and AVX-512 vector
class OffloadFile;  // core/Offload.h

// What an allocation holds (ZeRO's model states, and the rest).
enum class Category : uint8_t { Parameters, Gradients, OptimizerState, Activations, Other };
constexpr int kCategories = 5;
const char* categoryName(Category c);

// One rank's counters. Domains live until the process exits (newDomain() keeps
// each in a process-wide list, a few hundred bytes per rank per run): a tensor
// may outlive the trainer that made it (checkpoint state, Hogwild!'s shared
// parameters) and still release. Kept reachable, so LeakSanitizer stays quiet.
struct Domain {
  std::array<std::atomic<int64_t>, kCategories> current{};
  std::array<std::atomic<int64_t>, kCategories> peak{};
  std::atomic<int64_t> total{0};
  std::atomic<int64_t> totalPeak{0};
  std::atomic<int64_t> offloaded{0};  // in offload files (core/Offload.h), not in memory
};
Domain* newDomain();

// One rank's figures: current bytes per category, the activations' and the
// total peak.
struct RankMemory {
  std::array<int64_t, kCategories> current{};
  int64_t activationsPeak = 0;
  int64_t peak = 0;
  int64_t offloaded = 0;

  // As fixed-size integers, to travel in a message header (parameter servers).
  static constexpr size_t kFields = kCategories + 3;
  std::array<int64_t, kFields> toArray() const;
  static RankMemory fromArray(const std::array<int64_t, kFields>& a);
};
RankMemory snapshot(const Domain& d);

// Where the current thread's allocations count.
struct Tag {
  Domain* domain = nullptr;  // null: process-wide counters only
  Category category = Category::Other;
  OffloadFile* offload = nullptr;  // non-null: the memory is a mapping of this file
};
Tag currentTag();
Domain* currentDomain();

// Installs `d` as this thread's domain until the scope ends (a rank's thread,
// and the threads a rank starts for itself).
class DomainScope {
 public:
  explicit DomainScope(Domain* d);
  ~DomainScope();
  DomainScope(const DomainScope&) = delete;
  DomainScope& operator=(const DomainScope&) = delete;

 private:
  Domain* previous_;
};
// Allocations of this thread count as `c` until the scope ends.
class CategoryScope {
 public:
  explicit CategoryScope(Category c);
  ~CategoryScope();
  CategoryScope(const CategoryScope&) = delete;
  CategoryScope& operator=(const CategoryScope&) = delete;

 private:
  Category previous_;
};

// Aligned host allocation, counted against `device` (CPU today) and, with a
// tag, against its domain and category (release with the same tag).
void* allocate(size_t bytes, DeviceType device = DeviceType::CPU);
void release(void* ptr, size_t bytes, DeviceType device = DeviceType::CPU);
void* allocate(size_t bytes, DeviceType device, const Tag& tag);
void release(void* ptr, size_t bytes, DeviceType device, const Tag& tag);
MemoryStats stats(DeviceType device = DeviceType::CPU);

namespace detail {  // OffloadScope's thread-local state
OffloadFile* currentOffload();
void setCurrentOffload(OffloadFile* file);
}  // namespace detail
// Resets the peak to the current value (to measure one phase).
void resetPeak(DeviceType device = DeviceType::CPU);
}  // namespace memory

}  // namespace dtrain
