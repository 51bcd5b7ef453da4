#pragma once
// Offload (--offload; ZeRO-Infinity's NVMe tier on a machine whose device
// memory is host memory): tensors whose memory is a shared mapping of a file
// on disk instead of the heap. Between uses their pages are written back and
// dropped from memory (evict: msync + MADV_PAGEOUT, so neither the process nor
// the page cache holds them), and read back ahead of the next use (prefetch).
// Both run on the file's own I/O threads (one reads, one writes), so writing
// one parameter's state back overlaps the update of the next and reading the
// next one in; the calls only queue work. Correctness never depends on them: a page
// that is touched is there (the kernel faults it in from the file).
//
// Allocations go to a file while an OffloadScope is open on the thread
// (memory::allocate sees it in the thread's Tag; an OffloadFile is always
// owned by a shared_ptr, and each Storage in it keeps it alive); each is a mapping of its own
// page-aligned range of one unnamed file per OffloadFile (created unlinked:
// nothing stays behind, whatever ends the process).
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <sys/types.h>

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dtrain::memory {

class OffloadFile : public std::enable_shared_from_this<OffloadFile> {
 public:
  // Throws UsageError when `dir` cannot hold an unnamed file.
  explicit OffloadFile(const std::string& dir);
  ~OffloadFile();
  OffloadFile(const OffloadFile&) = delete;
  OffloadFile& operator=(const OffloadFile&) = delete;

  void* allocate(size_t bytes);  // zeroed, page-aligned
  void release(void* p, size_t bytes);
  // Queued for the I/O thread; ignored unless [p, p + bytes) is memory of this file.
  void prefetch(const void* p, size_t bytes);
  void evict(const void* p, size_t bytes);
  // Waits until every queued prefetch and eviction is done.
  void drain();
  // Waits until at most `bytes` of evictions are queued or running: what the
  // caller touched and evicted is then out of memory but for that much
  // (without it, a loop that touches faster than the disk writes would have
  // everything in memory at once).
  void throttle(size_t bytes);

  const std::string& dir() const { return dir_; }
  int64_t mappedBytes() const;
  // Bytes of this file's mappings that are in memory now (mincore).
  int64_t residentBytes() const;

 private:
  struct Job {
    bool evict;
    char* begin;
    char* end;
    off_t offset;  // of begin, in the file
  };
  void queue(bool evict, const void* p, size_t bytes);
  void read(const std::vector<Job>& batch);
  void write(const std::vector<Job>& batch);

  std::string dir_;
  int fd_ = -1;
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  // Two I/O threads, so that reading the next state in overlaps writing the
  // last one out: lane 0 reads (prefetch), lane 1 writes (evict).
  struct Lane {
    std::deque<Job> jobs;
    bool busy = false;
    std::thread thread;
  };
  Lane lanes_[2];
  bool stop_ = false;
  void run(Lane& lane);  // an I/O thread
  bool idle() const { return lanes_[0].jobs.empty() && lanes_[1].jobs.empty() && !lanes_[0].busy && !lanes_[1].busy; }
  size_t pendingEvict_ = 0;  // bytes of evictions queued or running
  int64_t fileSize_ = 0;
  struct Mapping {
    char* begin;
    size_t bytes;
    off_t offset;  // in the file
  };
  std::deque<Mapping> maps_;  // live mappings
};

// Allocations of this thread go to `file` (null: the heap) until the scope ends.
class OffloadScope {
 public:
  explicit OffloadScope(OffloadFile* file);
  ~OffloadScope();
  OffloadScope(const OffloadScope&) = delete;
  OffloadScope& operator=(const OffloadScope&) = delete;

 private:
  OffloadFile* previous_;
};

// The process's resident set now and at its peak (VmRSS, VmHWM), in bytes.
int64_t residentSetBytes();
int64_t residentSetPeakBytes();

}  // namespace dtrain::memory
