#include "data/ShardList.h"

#include <glob.h>

#include <cstdio>
#include <filesystem>

#include "core/Error.h"

namespace dtrain::data {
namespace {

bool isNumber(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// The alternatives of one brace body: "0000..0127" (a range) or "a,b,c" (a list).
std::vector<std::string> alternatives(const std::string& body, const std::string& pattern) {
  const size_t dots = body.find("..");
  if (dots != std::string::npos) {
    const std::string lo = body.substr(0, dots), hi = body.substr(dots + 2);
    DTRAIN_CHECK_USAGE(isNumber(lo) && isNumber(hi) && lo.size() < 10 && hi.size() < 10,
                       "shard pattern ", pattern, ": {", body,
                       "} is not a range of non-negative numbers like {0000..0127}");
    const long long a = std::stoll(lo), b = std::stoll(hi);
    DTRAIN_CHECK_USAGE(a <= b, "shard pattern ", pattern, ": the range {", body, "} is empty");
    DTRAIN_CHECK_USAGE(b - a < 10'000'000, "shard pattern ", pattern, ": the range {", body,
                       "} is too long");
    std::vector<std::string> out;
    for (long long v = a; v <= b; ++v) {
      char text[32];
      std::snprintf(text, sizeof text, "%0*lld", static_cast<int>(lo.size()), v);
      out.emplace_back(text);
    }
    return out;
  }
  std::vector<std::string> out;
  for (size_t at = 0;;) {
    const size_t comma = body.find(',', at);
    out.push_back(body.substr(at, comma - at));
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

bool hasGlob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::vector<std::string> globFiles(const std::string& pattern, const std::string& flag) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  DTRAIN_CHECK_USAGE(!out.empty(), flag, " ", pattern, ": no file matches");
  return out;  // glob(3) sorts
}

// Splits on spaces and commas that are not inside braces.
std::vector<std::string> splitPatterns(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char ch : s) {
    depth += ch == '{' ? 1 : ch == '}' ? -1 : 0;
    if (depth == 0 && (ch == ' ' || ch == ',')) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

}  // namespace

std::vector<std::string> expandBraces(const std::string& pattern) {
  const size_t open = pattern.find('{');
  if (open == std::string::npos) return {pattern};
  const size_t close = pattern.find('}', open);
  DTRAIN_CHECK_USAGE(close != std::string::npos, "shard pattern ", pattern, ": unclosed '{'");
  const std::string head = pattern.substr(0, open);
  const std::vector<std::string> tails = expandBraces(pattern.substr(close + 1));
  std::vector<std::string> out;
  for (const std::string& alt : alternatives(pattern.substr(open + 1, close - open - 1), pattern))
    for (const std::string& tail : tails) out.push_back(head + alt + tail);
  return out;
}

std::vector<std::string> expandShardPattern(const std::string& patterns, const std::string& flag) {
  std::vector<std::string> files;
  const std::vector<std::string> parts = splitPatterns(patterns);
  DTRAIN_CHECK_USAGE(!parts.empty(), flag, ": no shard files given");
  for (const std::string& part : parts) {
    for (const std::string& name : expandBraces(part)) {
      if (hasGlob(name)) {
        for (std::string& f : globFiles(name, flag)) files.push_back(std::move(f));
        continue;
      }
      std::error_code ec;
      DTRAIN_CHECK_USAGE(std::filesystem::is_regular_file(name, ec), flag, " ", part, ": ", name,
                         std::filesystem::exists(name, ec) ? " is not a file" : ": no such file");
      files.push_back(name);
    }
  }
  return files;
}

}  // namespace dtrain::data
