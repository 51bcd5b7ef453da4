#include "api/Schema.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

#include "api/StrategyRegistry.h"
#include "core/Error.h"

namespace dtrain::api {

void Schema::addGroup(std::string name, std::string title) {
  groups_.push_back({std::move(name), std::move(title)});
}

Option& Schema::add(const std::string& group, std::string key, std::string flag,
                    std::string help) {
  DTRAIN_CHECK(this->group(group), "schema: option ", key, " of an undeclared group ", group);
  DTRAIN_CHECK(!find(group, key), "schema: option [", group, "] ", key, " declared twice");
  Option& o = options_.emplace_back();
  o.group = group;
  o.key = std::move(key);
  o.flag = std::move(flag);
  o.help = std::move(help);
  return o;
}

const OptionGroup* Schema::group(const std::string& name) const {
  for (const auto& g : groups_)
    if (g.name == name) return &g;
  return nullptr;
}

const Option* Schema::find(const std::string& group, const std::string& key) const {
  for (const auto& o : options_)
    if (o.group == group && o.key == key) return &o;
  return nullptr;
}

const Option* Schema::findFlag(const std::string& flag) const {
  for (const auto& o : options_)
    if (o.flag == flag || o.negFlag == flag) return &o;
  return nullptr;
}

size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {
// The nearest of `names` to `name`, when near enough to be a likely typo.
std::string nearest(const std::string& name, const std::vector<std::string>& names) {
  std::string best;
  size_t bestD = std::numeric_limits<size_t>::max();
  for (const auto& n : names) {
    const size_t d = editDistance(name, n);
    if (d < bestD) bestD = d, best = n;
  }
  return bestD <= std::max<size_t>(2, name.size() / 3) ? best : std::string();
}
}  // namespace

// "[ps] servers or [sandblaster] servers": every group but `except` with the key.
std::string Schema::groupsWithKey(const std::string& key, const std::string& except) const {
  std::vector<std::string> found;
  for (const auto& o : options_)
    if (o.key == key && o.group != except) found.push_back("[" + o.group + "] " + key);
  std::sort(found.begin(), found.end());  // by group name, not registration order
  std::string names;
  for (size_t i = 0; i < found.size(); ++i)
    names += (i == 0 ? "" : i + 1 == found.size() ? " or " : ", ") + found[i];
  return names;
}

std::string Schema::suggestKey(const std::string& group, const std::string& key) const {
  // A key of another group (e.g. `workers` under [training]) is the likeliest mistake.
  if (const std::string there = groupsWithKey(key, group); !there.empty())
    return "; did you mean " + there + "?";
  std::vector<std::string> keys;
  for (const auto& o : options_)
    if (o.group == group) keys.push_back(o.key);
  const std::string n = nearest(key, keys);
  if (!n.empty()) return "; did you mean " + n + "?";
  std::string all;
  for (const auto& k : keys) all += (all.empty() ? "" : ", ") + k;
  return " (keys of [" + group + "]: " + all + ")";
}

std::string Schema::suggestGroup(const std::string& name) const {
  std::vector<std::string> names;
  for (const auto& g : groups_) names.push_back(g.name);
  if (const std::string there = groupsWithKey(name, ""); !there.empty())
    return "; did you mean " + there + "?";
  const std::string n = nearest(name, names);
  if (!n.empty()) return "; did you mean [" + n + "]?";
  std::string all;
  for (const auto& g : names) all += (all.empty() ? "" : ", ") + g;
  return " (groups: " + all + ")";
}

bool Sources::givenFlag(const std::string& flag) const {
  const Option* o = schema().findFlag(flag);
  return o && given(*o);
}

std::string Sources::of(const Option& o) const {
  auto it = where.find(o.id());
  return it == where.end() ? o.name() : it->second;
}

std::string kindName(Kind k) {
  switch (k) {
    case Kind::Bool: return "a boolean";
    case Kind::Int: return "an integer";
    case Kind::Float: return "a number";
    case Kind::String: return "a string";
    case Kind::IntList: return "a list of integers";
    case Kind::FloatList: return "a list of numbers";
    case Kind::StringList: return "a list of strings";
  }
  return "a value";
}

std::string expectedValue(const Option& o) {
  return kindName(o.kind) + (o.zeroWord.empty() ? "" : " or \"" + o.zeroWord + "\"");
}

namespace {

int64_t parseInt(const std::string& flag, const std::string& t) {
  try {
    size_t used = 0;
    const long long v = std::stoll(t, &used);
    if (used == t.size()) return v;
  } catch (const std::exception&) {
  }
  throw UsageError(flag + " " + t + ": expected an integer");
}

double parseFloat(const std::string& flag, const std::string& t) {
  try {
    size_t used = 0;
    const double v = std::stod(t, &used);
    if (used == t.size()) return v;
  } catch (const std::exception&) {
  }
  throw UsageError(flag + " " + t + ": expected a number");
}

std::vector<std::string> splitCommas(const std::string& t) {
  std::vector<std::string> parts;
  std::string cur;
  std::istringstream in(t);
  while (std::getline(in, cur, ',')) parts.push_back(cur);
  return parts;
}

// The shortest text that reads back as the same double.
std::string formatNumber(double v) {
  std::string s;
  for (int digits = 6; digits <= 17; ++digits) {
    std::ostringstream os;
    os << std::setprecision(digits) << v;
    s = os.str();
    if (std::stod(s) == v) break;
  }
  // TOML floats need a '.' or an exponent; inf/nan have their own spelling.
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out + "\"";
}

}  // namespace

Value parseText(const Option& o, const std::string& flag, const std::vector<std::string>& texts) {
  DTRAIN_CHECK(!texts.empty(), "parseText: no value for ", flag);
  const std::string& t = texts.back();  // a repeated flag takes its last value
  switch (o.kind) {
    case Kind::Bool: {
      if (t == "true" || t == "1" || t.empty()) return flag == o.negFlag ? false : true;
      if (t == "false" || t == "0") return flag == o.negFlag ? true : false;
      throw UsageError(flag + " " + t + ": expected true or false");
    }
    case Kind::Int:
      if (o.zeroWord.empty()) return parseInt(flag, t);
      if (t == o.zeroWord) return int64_t{0};
      try {
        return parseInt(flag, t);
      } catch (const UsageError&) {  // the word is valid too: say so ("--threads many")
        throw UsageError(flag + " " + t + ": expected an integer or " + o.zeroWord);
      }
    case Kind::Float: return parseFloat(flag, t);
    case Kind::String: return t;
    case Kind::IntList: {
      std::vector<int64_t> v;
      for (const auto& p : splitCommas(t)) v.push_back(parseInt(flag, p));
      return v;
    }
    case Kind::FloatList: {
      std::vector<double> v;
      for (const auto& p : splitCommas(t)) v.push_back(parseFloat(flag, p));
      return v;
    }
    case Kind::StringList:
      if (o.repeatable) return texts;
      return splitCommas(t);
  }
  return t;
}

std::string checkValue(const Option& o, const Value& v) {
  auto inRange = [&o](double x, bool integer = false) -> std::string {
    const bool low = o.min && (o.minExclusive ? x <= *o.min : x < *o.min);
    const bool high = o.max && x > *o.max;
    if (!std::isnan(x) && !low && !high) return "";
    std::ostringstream os;
    os << "{} must be ";
    if (o.min && o.max) os << (o.minExclusive ? "in (" : "in [") << *o.min << ", " << *o.max << "]";
    else if (o.min) os << (o.minExclusive ? "> " : ">= ") << *o.min;
    else os << "<= " << *o.max;
    os << " (got " << x << ")";
    return os.str();
  };
  if (auto* i = std::get_if<int64_t>(&v)) return inRange(static_cast<double>(*i), true);
  if (auto* d = std::get_if<double>(&v)) {
    if (!std::isfinite(*d)) return "{} must be a finite number (got " + formatNumber(*d) + ")";
    return inRange(*d);
  }
  if (auto* s = std::get_if<std::string>(&v)) {
    if (!o.choices) return "";
    const auto names = o.choices();
    if (std::find(names.begin(), names.end(), *s) != names.end()) return "";
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    return "unknown {} '" + *s + "' (known: " + known + ")";
  }
  if (auto* l = std::get_if<std::vector<int64_t>>(&v))
    for (int64_t x : *l)
      if (auto p = inRange(static_cast<double>(x), true); !p.empty()) return p;
  if (auto* l = std::get_if<std::vector<double>>(&v))
    for (double x : *l)
      if (auto p = inRange(x); !p.empty()) return p;
  return "";
}

std::string describe(const std::string& origin, const std::string& problem) {
  const auto hole = problem.find("{}");
  if (hole == std::string::npos) return origin + " " + problem;
  // "run.toml:3: [training] batch_size" -> "run.toml:3: " and "[training] batch_size".
  const auto bracket = origin.find(": [");
  const std::string where = bracket == std::string::npos ? "" : origin.substr(0, bracket + 2);
  const std::string name = bracket == std::string::npos ? origin : origin.substr(bracket + 2);
  return where + problem.substr(0, hole) + name + problem.substr(hole + 2);
}

void setChecked(RunConfig& rc, Sources& src, const Option& o, const Value& v, std::string origin) {
  const std::string problem = checkValue(o, v);
  DTRAIN_CHECK_USAGE(problem.empty(), describe(origin, problem));
  try {
    o.set(rc, v);
  } catch (const UsageError& e) {
    throw UsageError(origin + " " + e.what());
  }
  src.where[o.id()] = std::move(origin);
}

std::string toToml(const Value& v) {
  struct Visit {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return formatNumber(d); }
    std::string operator()(const std::string& s) const { return quote(s); }
    std::string operator()(const std::vector<int64_t>& l) const {
      std::string out = "[";
      for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + std::to_string(l[i]);
      return out + "]";
    }
    std::string operator()(const std::vector<double>& l) const {
      std::string out = "[";
      for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + formatNumber(l[i]);
      return out + "]";
    }
    std::string operator()(const std::vector<std::string>& l) const {
      std::string out = "[";
      for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + quote(l[i]);
      return out + "]";
    }
  };
  return std::visit(Visit{}, v);
}

const Schema& schema() {
  static const Schema s = [] {
    Schema s;
    addModelOptions(s);
    addDataOptions(s);
    addTrainingOptions(s);
    addOptimizerOptions(s);
    addParallelOptions(s);
    addAllreduceOptions(s);
    addCompressOptions(s);
    addMemoryOptions(s);
    addLoraOptions(s);
    addPsOptions(s);
    addCheckpointOptions(s);
    addEvalOptions(s);
    addLoggingOptions(s);
    addFaultOptions(s);
    // The groups of strategies that declare their own (src/parallel/<name>/<Name>Spec.cpp).
    for (const std::string& name : strategyNames())
      if (const StrategyEntry& e = strategyEntry(name); e.addOptions) e.addOptions(s);
    return s;
  }();
  return s;
}

}  // namespace dtrain::api
