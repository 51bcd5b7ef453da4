#include "core/Memory.h"

#include <malloc.h>
#include <sys/mman.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <cstdlib>
#include <new>

#include "core/Error.h"
#include "core/Offload.h"

namespace dtrain::memory {
namespace {
struct Counters {
  std::atomic<int64_t> current{0};
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> allocations{0};
};
Counters gCounters[kMaxDevices];

void updatePeak(Counters& c, int64_t now) {
  int64_t prev = c.peak.load(std::memory_order_relaxed);
  while (now > prev && !c.peak.compare_exchange_weak(prev, now, std::memory_order_relaxed)) {
  }
}
// glibc hands every block above its mmap threshold back to the kernel when it is
// freed, and trims the heap's top past 128 KiB: a training step that frees and
// reallocates its activations then page-faults them in again, zeroed, every
// step (thousands of faults a step for a small GPT). Keeping freed
// memory in the heap makes the steady state fault-free; the peak is what the
// step needs anyway.
constexpr size_t kMmapThreshold = 32u << 20;  // glibc's largest allowed value
const bool gMallocTuned = [] {
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMmapThreshold));
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  return true;
}();

// Blocks from the mmap threshold up (datasets, large weights) are asked
// for 2 MiB pages (MADV_HUGEPAGE: the kernel's "madvise" mode, Debian's
// default, backs only advised ranges). A data loader gathers samples from
// random rows of its dataset: with 4 KiB pages each row is a TLB miss, and on
// a paravirtualized VM a miss the shadow page tables do not hold costs
// microseconds, as long as the batch's compute; 2 MiB pages make the misses
// rare. The heap below the threshold is left to the kernel's default.
void adviseHugePages(void* p, size_t bytes) {
  constexpr uintptr_t kHuge = 2u << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  // Advice only: a kernel without transparent huge pages answers EINVAL.
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

}  // namespace

void* allocate(size_t bytes, DeviceType device) {
  DTRAIN_CHECK(device == DeviceType::CPU, "memory::allocate: only CPU allocation is built in");
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (!p) throw Error(dtrain::detail::concat("out of memory allocating ", bytes, " bytes on CPU"));
  if (rounded >= kMmapThreshold) adviseHugePages(p, rounded);
  auto& c = gCounters[static_cast<int>(device)];
  int64_t now = c.current.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed) +
                static_cast<int64_t>(bytes);
  c.allocations.fetch_add(1, std::memory_order_relaxed);
  updatePeak(c, now);
  return p;
}

namespace {
thread_local Domain* tDomain = nullptr;
thread_local Category tCategory = Category::Other;
thread_local OffloadFile* tOffload = nullptr;

void raise(std::atomic<int64_t>& peak, int64_t now) {
  int64_t prev = peak.load(std::memory_order_relaxed);
  while (now > prev && !peak.compare_exchange_weak(prev, now, std::memory_order_relaxed)) {
  }
}
}  // namespace

const char* categoryName(Category c) {
  static constexpr const char* kNames[kCategories] = {"parameters", "gradients",
                                                      "optimizer_state", "activations", "other"};
  return kNames[static_cast<int>(c)];
}

Domain* newDomain() {
  // Leaked on purpose (see Memory.h): a function-local static is never destroyed
  // before a tensor released at exit could still count into its domain.
  static auto* domains = new std::deque<Domain>;  // addresses stay put as it grows
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  return &domains->emplace_back();
}

RankMemory snapshot(const Domain& d) {
  RankMemory m;
  for (int i = 0; i < kCategories; ++i) m.current[i] = d.current[i].load();
  m.activationsPeak = d.peak[static_cast<int>(Category::Activations)].load();
  m.peak = d.totalPeak.load();
  m.offloaded = d.offloaded.load();
  return m;
}

std::array<int64_t, RankMemory::kFields> RankMemory::toArray() const {
  std::array<int64_t, kFields> a{};
  for (int i = 0; i < kCategories; ++i) a[i] = current[i];
  a[kCategories] = activationsPeak;
  a[kCategories + 1] = peak;
  a[kCategories + 2] = offloaded;
  return a;
}

RankMemory RankMemory::fromArray(const std::array<int64_t, kFields>& a) {
  RankMemory m;
  for (int i = 0; i < kCategories; ++i) m.current[i] = a[i];
  m.activationsPeak = a[kCategories];
  m.peak = a[kCategories + 1];
  m.offloaded = a[kCategories + 2];
  return m;
}

Tag currentTag() { return {tDomain, tCategory, tOffload}; }
OffloadFile* detail::currentOffload() { return tOffload; }
void detail::setCurrentOffload(OffloadFile* file) { tOffload = file; }
Domain* currentDomain() { return tDomain; }

DomainScope::DomainScope(Domain* d) : previous_(tDomain) { tDomain = d; }
DomainScope::~DomainScope() { tDomain = previous_; }
CategoryScope::CategoryScope(Category c) : previous_(tCategory) { tCategory = c; }
CategoryScope::~CategoryScope() { tCategory = previous_; }

void* allocate(size_t bytes, DeviceType device, const Tag& tag) {
  if (tag.offload) {  // a file's mapping: counted apart, it is not held in memory
    void* p = tag.offload->allocate(bytes);
    if (Domain* d = tag.domain) d->offloaded.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
    return p;
  }
  void* p = allocate(bytes, device);
  if (Domain* d = tag.domain) {
    const auto n = static_cast<int64_t>(bytes);
    const int c = static_cast<int>(tag.category);
    raise(d->peak[c], d->current[c].fetch_add(n, std::memory_order_relaxed) + n);
    raise(d->totalPeak, d->total.fetch_add(n, std::memory_order_relaxed) + n);
  }
  return p;
}

void release(void* ptr, size_t bytes, DeviceType device, const Tag& tag) {
  if (!ptr) return;
  if (tag.offload) {
    if (Domain* d = tag.domain) d->offloaded.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
    return tag.offload->release(ptr, bytes);
  }
  if (Domain* d = tag.domain) {
    const auto n = static_cast<int64_t>(bytes);
    d->current[static_cast<int>(tag.category)].fetch_sub(n, std::memory_order_relaxed);
    d->total.fetch_sub(n, std::memory_order_relaxed);
  }
  release(ptr, bytes, device);
}

void release(void* ptr, size_t bytes, DeviceType device) {
  if (!ptr) return;
  std::free(ptr);
  gCounters[static_cast<int>(device)].current.fetch_sub(static_cast<int64_t>(bytes),
                                                        std::memory_order_relaxed);
}

MemoryStats stats(DeviceType device) {
  auto& c = gCounters[static_cast<int>(device)];
  return {c.current.load(), c.peak.load(), c.allocations.load()};
}

void resetPeak(DeviceType device) {
  auto& c = gCounters[static_cast<int>(device)];
  c.peak = c.current.load();
}

}  // namespace dtrain::memory
