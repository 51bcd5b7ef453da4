#include "cli/dashboard/RunFiles.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/Error.h"

namespace dtrain::cli::dashboard {
namespace fs = std::filesystem;

namespace {

bool isRunDir(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(dir / "metrics.jsonl", ec) || fs::exists(dir / "config.toml", ec);
}

Run runOf(const fs::path& dir) {
  return {fs::absolute(dir).lexically_normal().filename().string(), dir.string(),
          (dir / "metrics.jsonl").string()};
}

// Names shown twice get the suffixes -2, -3... in the order given.
void makeNamesUnique(std::vector<Run>& runs) {
  std::map<std::string, int> seen;
  for (Run& r : runs) {
    if (r.name.empty()) r.name = "run";
    if (const int n = ++seen[r.name]; n > 1) r.name += "-" + std::to_string(n);
  }
}

}  // namespace

void checkSources(const std::vector<std::string>& sources) {
  for (const std::string& s : sources) {
    std::error_code ec;
    DTRAIN_CHECK_USAGE(fs::exists(s, ec), "dtrain dashboard: ", s,
                       ": no such run directory or metrics file");
  }
}

std::vector<Run> findRuns(const std::vector<std::string>& sources) {
  std::vector<Run> runs;
  for (const std::string& s : sources) {
    std::error_code ec;
    const fs::path p(s);
    if (!fs::is_directory(p, ec)) {
      runs.push_back({p.stem().string(), "", s});
      continue;
    }
    if (isRunDir(p) || fs::is_empty(p, ec)) {  // empty: a run about to start
      runs.push_back(runOf(p));
      continue;
    }
    std::vector<fs::path> children;
    for (const auto& e : fs::directory_iterator(p, ec))
      if (e.is_directory(ec) && isRunDir(e.path())) children.push_back(e.path());
    std::sort(children.begin(), children.end());
    for (const fs::path& c : children) runs.push_back(runOf(c));
  }
  makeNamesUnique(runs);
  return runs;
}

MetricsChunk readMetrics(const std::string& path, uint64_t since, uint64_t maxBytes) {
  MetricsChunk out;
  out.next = since;
  std::ifstream in(path, std::ios::binary);
  if (!in) return out;
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  if (since >= size) {
    // A file rewritten by a new run is shorter than where the page was: start over.
    if (since > size) out.next = 0;
    return out;
  }
  std::string text(std::min(size - since, maxBytes), '\0');
  in.seekg(static_cast<std::streamoff>(since));
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = text.substr(start, end - start);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto rec = nlohmann::json::parse(line, nullptr, false);
    if (rec.is_object()) out.records.push_back(std::move(rec));
    else ++out.badLines;
  }
  out.next = since + start;  // a half-written last line waits for its newline
  return out;
}

std::optional<std::string> readFile(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json describeRun(const Run& run) {
  std::error_code ec;
  const auto has = [&](const char* leaf) { return !run.dir.empty() && fs::exists(run.file(leaf), ec); };
  return {{"name", run.name},
          {"path", run.dir.empty() ? run.metrics : run.dir},
          {"finished", has("result.json")},
          {"has_timeline", has("timeline.json")},
          {"has_config", has("config.toml")},
          {"has_machine", has("machine.json")}};
}

}  // namespace dtrain::cli::dashboard
