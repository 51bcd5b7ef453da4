#include "core/Offload.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/Error.h"
#include "core/Memory.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older kernels answer EINVAL
#endif

namespace dtrain::memory {
namespace {
const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

char* pageDown(const void* p) {
  return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(p) / kPage * kPage);
}
char* pageUp(const void* p) {
  return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(p) + kPage - 1) / kPage * kPage);
}

int64_t statusField(const char* key) {
  std::ifstream in("/proc/self/status");
  const size_t n = std::strlen(key);
  for (std::string line; std::getline(in, line);)
    if (line.compare(0, n, key) == 0) return std::stoll(line.substr(n)) * 1024;  // kB
  return 0;
}
}  // namespace

OffloadFile::OffloadFile(const std::string& dir) : dir_(dir) {
  // O_TMPFILE: a file with no name, gone when closed; else a named one, unlinked at once.
  fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    std::string path = dir + "/dtrain-offload-XXXXXX";
    fd_ = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd_ >= 0) ::unlink(path.c_str());
  }
  DTRAIN_CHECK_USAGE(fd_ >= 0, "--offload-dir ", dir, ": cannot create a file there (",
                     std::strerror(errno), ")");
  for (Lane& lane : lanes_) lane.thread = std::thread([this, &lane] { run(lane); });
}

OffloadFile::~OffloadFile() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (Lane& lane : lanes_) lane.thread.join();
  for (const Mapping& m : maps_) ::munmap(m.begin, m.bytes);
  ::close(fd_);
}

void* OffloadFile::allocate(size_t bytes) {
  const size_t n = std::max<size_t>(kPage, (bytes + kPage - 1) / kPage * kPage);
  std::lock_guard<std::mutex> lock(mutex_);
  // Each allocation its own range at the file's end (a new file range reads as zeros).
  const off_t offset = static_cast<off_t>(fileSize_);
  if (::ftruncate(fd_, offset + static_cast<off_t>(n)) != 0)
    throw Error(dtrain::detail::concat("offload: cannot grow the file in ", dir_, " to ", offset + n,
                               " bytes (", std::strerror(errno), ")"));
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, offset);
  if (p == MAP_FAILED)
    throw Error(dtrain::detail::concat("offload: cannot map ", n, " bytes of the file in ", dir_, " (",
                               std::strerror(errno), ")"));
  // No readahead on faults: it would bring the neighbouring allocations (the
  // file's next ranges) into the page cache; prefetch reads what is needed.
  ::madvise(p, n, MADV_RANDOM);
  fileSize_ += static_cast<int64_t>(n);
  maps_.push_back({static_cast<char*>(p), n, offset});
  return p;
}

void OffloadFile::release(void* p, size_t bytes) {
  const size_t n = std::max<size_t>(kPage, (bytes + kPage - 1) / kPage * kPage);
  std::unique_lock<std::mutex> lock(mutex_);
  // No job may touch the range once it is unmapped: drop the queued ones, wait for a running one.
  char* b = static_cast<char*>(p);
  for (Lane& lane : lanes_) {
    auto& jobs = lane.jobs;
    auto dropped = std::stable_partition(jobs.begin(), jobs.end(),
                                         [&](const Job& j) { return j.begin < b || j.begin >= b + n; });
    for (auto it = dropped; it != jobs.end(); ++it)
      if (it->evict) pendingEvict_ -= static_cast<size_t>(it->end - it->begin);
    jobs.erase(dropped, jobs.end());
  }
  idle_.notify_all();
  idle_.wait(lock, [&] { return !lanes_[0].busy && !lanes_[1].busy; });
  ::munmap(p, n);
  auto it = std::find_if(maps_.begin(), maps_.end(), [&](const Mapping& m) { return m.begin == b; });
  if (it == maps_.end()) return;
  // The disk blocks go back too (the file's size stays).
  ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, it->offset, static_cast<off_t>(n));
  maps_.erase(it);
}

void OffloadFile::prefetch(const void* p, size_t bytes) { queue(false, p, bytes); }
void OffloadFile::evict(const void* p, size_t bytes) { queue(true, p, bytes); }

void OffloadFile::queue(bool evict, const void* p, size_t bytes) {
  if (bytes == 0) return;
  const char* b = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(mutex_);
  // Only this file's memory (a tensor allocated before offloading began is not).
  auto m = std::find_if(maps_.begin(), maps_.end(), [&](const Mapping& m) {
    return b >= m.begin && b + bytes <= m.begin + m.bytes;
  });
  if (m == maps_.end()) return;
  char* begin = pageDown(b);
  Lane& lane = lanes_[evict ? 1 : 0];
  lane.jobs.push_back({evict, begin, pageUp(b + bytes), m->offset + (begin - m->begin)});
  if (evict) pendingEvict_ += static_cast<size_t>(lane.jobs.back().end - lane.jobs.back().begin);
  wake_.notify_all();
}

void OffloadFile::throttle(size_t bytes) {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return pendingEvict_ <= bytes; });
}

void OffloadFile::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return idle(); });
}

void OffloadFile::run(Lane& lane) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !lane.jobs.empty(); });
    if (lane.jobs.empty()) return;  // stopping, nothing left
    // Everything queued, as one batch: writes merge into fewer, larger I/Os.
    std::vector<Job> batch(lane.jobs.begin(), lane.jobs.end());
    lane.jobs.clear();
    lane.busy = true;
    lock.unlock();
    if (&lane == &lanes_[0]) read(batch);
    else write(batch);
    lock.lock();
    for (const Job& job : batch)
      if (job.evict) pendingEvict_ -= static_cast<size_t>(job.end - job.begin);
    lane.busy = false;
    idle_.notify_all();
  }
}

void OffloadFile::read(const std::vector<Job>& batch) {
  // Read ahead (large I/Os), then make sure every page is in (MADV_WILLNEED's
  // readahead may stop short of the whole range) without reading the memory
  // from this thread: the trainer may be writing it meanwhile (an optimizer
  // updating the state it prefetched early), and a read here would race with
  // that write (ThreadSanitizer: Offload.OneProcessOptimizerStateIsBitwiseUnchanged).
  // MADV_POPULATE_READ (Linux 5.14) faults the pages in inside the kernel; on
  // older kernels the file range is read through the page cache into a
  // scratch buffer, so that the trainer's touch is a minor fault.
  for (const Job& job : batch) ::madvise(job.begin, static_cast<size_t>(job.end - job.begin), MADV_WILLNEED);
  std::vector<char> scratch;
  for (const Job& job : batch) {
    const auto bytes = static_cast<size_t>(job.end - job.begin);
    if (::madvise(job.begin, bytes, MADV_POPULATE_READ) == 0) continue;
    scratch.resize(std::min<size_t>(bytes, size_t{1} << 20));
    for (size_t done = 0; done < bytes;) {
      const ssize_t got = ::pread(fd_, scratch.data(), std::min(scratch.size(), bytes - done),
                                  job.offset + static_cast<off_t>(done));
      if (got <= 0) break;  // a prefetch only: the trainer's own touch reads what is missing
      done += static_cast<size_t>(got);
    }
  }
}

void OffloadFile::write(const std::vector<Job>& batch) {
  // Ranges that follow each other in the file (an optimizer's slots,
  // allocated in order) go out in one call; only the data (msync would commit
  // the file system's journal every time). MADV_PAGEOUT then drops the pages,
  // now clean: it reclaims clean pages only.
  std::vector<const Job*> out;
  for (const Job& job : batch) out.push_back(&job);
  std::sort(out.begin(), out.end(), [](const Job* a, const Job* b) { return a->offset < b->offset; });
  constexpr unsigned kFlags =
      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;
  for (size_t k = 0; k < out.size();) {
    off_t begin = out[k]->offset, end = begin + (out[k]->end - out[k]->begin);
    size_t next = k + 1;
    for (; next < out.size() && out[next]->offset <= end; ++next)
      end = std::max<off_t>(end, out[next]->offset + (out[next]->end - out[next]->begin));
    ::sync_file_range(fd_, begin, end - begin, kFlags);
    for (; k < next; ++k)
      ::madvise(out[k]->begin, static_cast<size_t>(out[k]->end - out[k]->begin), MADV_PAGEOUT);
  }
}

int64_t OffloadFile::mappedBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fileSize_;
}

int64_t OffloadFile::residentBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t resident = 0;
  std::vector<unsigned char> pages;
  for (const Mapping& m : maps_) {
    pages.resize(m.bytes / kPage);
    if (::mincore(m.begin, m.bytes, pages.data()) != 0) continue;
    for (unsigned char c : pages) resident += (c & 1) ? static_cast<int64_t>(kPage) : 0;
  }
  return resident;
}

OffloadScope::OffloadScope(OffloadFile* file) : previous_(detail::currentOffload()) {
  detail::setCurrentOffload(file);
}
OffloadScope::~OffloadScope() { detail::setCurrentOffload(previous_); }

int64_t residentSetBytes() { return statusField("VmRSS:"); }
int64_t residentSetPeakBytes() { return statusField("VmHWM:"); }

}  // namespace dtrain::memory
