#include "parallel/hogwild/Hogwild.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "core/Error.h"
#include "core/Timer.h"
#include "parallel/MemoryGather.h"

// Under ThreadSanitizer a rank's memory accesses during its update are not
// recorded: Hogwild!'s updates race with the other ranks' reads and updates by
// design (lock-free SGD). A suppression alone (tests/sanitizers/tsan.supp)
// still has TSan examine every racing float before dropping the report, which
// made a 40-step mlp run take minutes (CleanStop.ParameterServersStopWithoutSaving
// timed out). Everything else the ranks do stays checked.
#if defined(__SANITIZE_THREAD__)
#define DTRAIN_HOGWILD_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DTRAIN_HOGWILD_TSAN 1
#endif
#endif
#ifdef DTRAIN_HOGWILD_TSAN
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

namespace dtrain::parallel {

namespace {
constexpr int kSetupTag = (1 << 20) + 40;
constexpr int kFinishTag = (1 << 20) + 41;

std::string joined(const std::vector<std::string>& names) {
  std::ostringstream os;
  for (size_t i = 0; i < names.size(); ++i) os << (i ? ", " : "") << names[i];
  return os.str();
}

// The lock-free update, unchecked by ThreadSanitizer (above); nothing elsewhere.
struct HogwildRaceByDesign {
#ifdef DTRAIN_HOGWILD_TSAN
  HogwildRaceByDesign() {
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  }
  ~HogwildRaceByDesign() {
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  }
#endif
};

// Parameters are prefixed so that a buffer and a parameter never collide.
std::string paramKey(const std::string& name) { return "param:" + name; }
std::string bufferKey(const std::string& name) { return "buffer:" + name; }

// Makes `local` (a rank's own tensor) the shared tensor `key`, after checking
// that it is the same tensor in shape and dtype.
void adopt(const HogwildShared& shared, const std::string& key, const std::string& what,
           Tensor& local, int rank) {
  Tensor t = shared.get(key);
  DTRAIN_CHECK(t.shape() == local.shape() && t.dtype() == local.dtype(), "hogwild setup: rank ",
               rank, "'s ", what, " has shape ", shapeStr(local.shape()), " ",
               dtypeName(local.dtype()), " but rank 0 published ", shapeStr(t.shape()), " ",
               dtypeName(t.dtype()), " (every rank must build the same model)");
  local = std::move(t);
}
}  // namespace

// --- HogwildShared ---------------------------------------------------------

HogwildShared::HogwildShared(int worldSize)
    : perRank_(static_cast<size_t>(std::max(0, worldSize)), 0) {}

void HogwildShared::publish(const std::string& name, Tensor value) {
  DTRAIN_CHECK(value.defined(), "hogwild: cannot publish an undefined tensor as ", name);
  std::lock_guard<std::mutex> lock(mu_);
  tensors_[name] = std::move(value);
}

Tensor HogwildShared::get(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    std::vector<std::string> known;
    for (const auto& [n, t] : tensors_) known.push_back(n);
    throw Error(detail::concat("hogwild: no shared tensor '", name, "' (rank 0 published ",
                               known.size(), ": ", joined(known),
                               "); every rank must build the same model"));
  }
  return it->second;
}

bool HogwildShared::contains(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return tensors_.count(name) > 0;
}

std::vector<std::string> HogwildShared::names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [n, t] : tensors_) out.push_back(n);
  return out;
}

void HogwildShared::recordUpdates(int rank, int64_t updates) {
  DTRAIN_CHECK(rank >= 0, "hogwild: negative rank ", rank);
  std::lock_guard<std::mutex> lock(mu_);
  if (perRank_.size() <= static_cast<size_t>(rank))
    perRank_.resize(static_cast<size_t>(rank) + 1, 0);
  perRank_[static_cast<size_t>(rank)] = updates;
}

std::vector<int64_t> HogwildShared::updatesPerRank() const {
  std::lock_guard<std::mutex> lock(mu_);
  return perRank_;
}

// Sequentially consistent on purpose: the overlap test below reasons about one
// total order of begins and ends (three atomic operations per step: nothing).
int64_t HogwildShared::beginUpdate() {
  const int othersActive = active_.fetch_add(1);
  const int64_t seq = started_.fetch_add(1);
  // Token: this update's sequence number, negated (minus one) when another
  // update was already running.
  return othersActive > 0 ? -seq - 1 : seq;
}

bool HogwildShared::endUpdate(int64_t token) {
  const bool overlappedAtStart = token < 0;
  const int64_t seq = overlappedAtStart ? -token - 1 : token;
  // Any update begun after ours and before our end overlapped us.
  const bool begunSince = started_.load() > seq + 1;
  active_.fetch_sub(1);
  return overlappedAtStart || begunSince;
}

// --- Hogwild ---------------------------------------------------------------

Hogwild::Hogwild(comm::Communicator& comm, std::shared_ptr<HogwildShared> shared)
    : comm_(comm), shared_(std::move(shared)) {
  DTRAIN_CHECK(shared_ != nullptr, "hogwild: rank ", comm_.rank(), " got no shared parameter set");
  DTRAIN_CHECK_USAGE(std::string(comm_.backend()) == "local",
                     "--strategy hogwild shares one parameter set between threads of one "
                     "process: use --backend local (got ",
                     comm_.backend(), ")");
}

void Hogwild::setup(nn::Module& model, optim::Optimizer& optimizer) {
  DTRAIN_CHECK(!setUp_, "Hogwild::setup called twice on rank ", comm_.rank());
  (void)optimizer;  // holds the same Variables: it updates whatever data() is
  if (comm_.rank() == 0) {
    // Clones, so that the shared set owns fresh contiguous storage; rank 0
    // then adopts them like everyone else.
    for (auto& [name, p] : model.namedParameters())
      shared_->publish(paramKey(name), p.data().clone());
    for (auto& [name, t] : model.namedBuffers()) shared_->publish(bufferKey(name), t->clone());
  }
  comm::Options o;
  o.tag = kSetupTag;
  comm_.barrier(o);
  for (auto& [name, p] : model.namedParameters())
    adopt(*shared_, paramKey(name), "parameter " + name, p.data(), comm_.rank());
  for (auto& [name, t] : model.namedBuffers())
    adopt(*shared_, bufferKey(name), "buffer " + name, *t, comm_.rank());
  setUp_ = true;
  startUs_ = lastUs_ = nowMicros();
}

void Hogwild::applyUpdate(optim::Optimizer& optimizer) {
  // No lock: other ranks read and write the same floats meanwhile (see the
  // header for what that means). Momentum buffers are this rank's own.
  const int64_t token = shared_->beginUpdate();
  {
    [[maybe_unused]] HogwildRaceByDesign unchecked;  // empty outside TSan builds
    optimizer.step();
  }
  if (shared_->endUpdate(token)) ++overlapped_;
  ++updates_;
  lastUs_ = nowMicros();
}

void Hogwild::finish(nn::Module&, optim::Optimizer&) {
  shared_->recordUpdates(comm_.rank(), updates_);
  comm::Options o;
  o.tag = kFinishTag;
  comm_.barrier(o);
  perRank_ = shared_->updatesPerRank();
}

std::map<std::string, double> Hogwild::stats() const {
  const double seconds = (lastUs_ - startUs_) / 1e6;
  return {{"hogwild_updates", static_cast<double>(updates_)},
          {"hogwild_updates_per_s", seconds > 0 ? static_cast<double>(updates_) / seconds : 0.0},
          {"hogwild_overlap_fraction",
           updates_ > 0 ? static_cast<double>(overlapped_) / static_cast<double>(updates_) : 0.0},
          {"hogwild_total_updates", static_cast<double>(shared_->totalUpdates())}};
}

std::vector<memory::RankMemory> Hogwild::gatherMemory(const memory::RankMemory& mine) {
  return allgatherMemory(comm_, mine);  // every rank calls it once, after finish()
}

nlohmann::json Hogwild::report() const {
  if (perRank_.empty()) return nlohmann::json::object();
  return {{"hogwild_updates_per_worker", perRank_}};
}

}  // namespace dtrain::parallel
