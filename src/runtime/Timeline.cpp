#include "runtime/Timeline.h"

#include "runtime/AtomicFile.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/Error.h"

namespace dtrain::runtime {

class Timeline::RankRecorder final : public parallel::SpanRecorder {
 public:
  RankRecorder(Timeline& t, int rank) : timeline_(t), rank_(rank) {}
  int rank() const { return rank_; }
  void span(std::string_view name, std::string_view category, parallel::Lane lane, double startUs,
            double endUs) override {
    timeline_.add(rank_, lane, name, category, startUs, endUs);
  }

 private:
  Timeline& timeline_;
  int rank_;
};

Timeline::Timeline() = default;
Timeline::~Timeline() = default;

parallel::SpanRecorder* Timeline::recorder(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& r : recorders_)
    if (r->rank() == rank) return r.get();
  recorders_.push_back(std::make_unique<RankRecorder>(*this, rank));
  return recorders_.back().get();
}

void Timeline::add(int pid, parallel::Lane lane, std::string_view name, std::string_view category,
                   double startUs, double endUs) {
  Event e{pid, static_cast<int>(lane), std::string(name), std::string(category), startUs,
          endUs - startUs};
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
}

namespace {
constexpr int kFirstWorkerTid = 2;  // after the Lane values
}  // namespace

void Timeline::addWorkerSpan(int pid, int worker, std::string_view name,
                             std::string_view category, double startUs, double endUs) {
  Event e{pid, kFirstWorkerTid + worker, std::string(name), std::string(category), startUs,
          endUs - startUs};
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
}

size_t Timeline::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

std::string Timeline::serialize() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json arr = nlohmann::json::array();
  std::set<int> pids;
  std::set<std::pair<int, int>> workerLanes;
  for (const Event& e : events_) {
    pids.insert(e.pid);
    if (e.tid >= kFirstWorkerTid) workerLanes.emplace(e.pid, e.tid);
    arr.push_back({{"name", e.name}, {"cat", e.category}, {"ph", "X"}, {"pid", e.pid},
                   {"tid", e.tid}, {"ts", e.ts - origin_}, {"dur", e.dur}});
  }
  for (int pid : pids) {
    arr.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                   {"args", {{"name", "rank " + std::to_string(pid)}}}});
    arr.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                   {"args", {{"sort_index", pid}}}});
    arr.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                   {"args", {{"name", "compute"}}}});
    arr.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 1},
                   {"args", {{"name", "comm"}}}});
  }
  for (const auto& [pid, tid] : workerLanes)
    arr.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid},
                   {"args", {{"name", "worker " + std::to_string(tid - kFirstWorkerTid)}}}});
  return arr.dump();
}

void Timeline::writeGathered(comm::Communicator& comm, const std::string& path) const {
  // Rank 0 writes every rank's events: gather the serialized parts.
  const std::string mine = serialize();
  int64_t len = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lens(comm.size());
  comm.allgather(&len, lens.data(), 1, DType::I64);
  std::vector<size_t> counts(lens.begin(), lens.end());
  size_t totalLen = 0;
  for (size_t n : counts) totalLen += n;
  std::string all(totalLen, '\0');
  comm.allgatherv(mine.data(), all.data(), counts, DType::U8);
  if (comm.rank() != 0) return;
  std::vector<std::string> parts;
  for (size_t off = 0, r = 0; r < counts.size(); off += counts[r], ++r)
    parts.push_back(all.substr(off, counts[r]));
  write(path, parts);
}

void Timeline::write(const std::string& path, const std::vector<std::string>& parts) {
  nlohmann::json all = nlohmann::json::array();
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    for (auto& e : nlohmann::json::parse(p)) all.push_back(std::move(e));
  }
  nlohmann::json doc{{"traceEvents", std::move(all)}, {"displayTimeUnit", "ms"}};
  const std::string text = doc.dump() + "\n";
  AtomicFile f(path, "writing timeline");  // a full disk: one line, no partial file
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace dtrain::runtime
