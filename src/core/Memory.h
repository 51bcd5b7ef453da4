#pragma once
// Memory accounting: every tensor allocation goes through allocate()/release(),
// which count current and peak bytes per device. Memory optimizations (ZeRO,
// recomputation, offload) are judged by these numbers.
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
// Aligned host allocation, counted against `device` (CPU today).
void* allocate(size_t bytes, DeviceType device = DeviceType::CPU);
void release(void* ptr, size_t bytes, DeviceType device = DeviceType::CPU);
MemoryStats stats(DeviceType device = DeviceType::CPU);
// Resets the peak to the current value (to measure one phase).
void resetPeak(DeviceType device = DeviceType::CPU);
}  // namespace memory

}  // namespace dtrain
