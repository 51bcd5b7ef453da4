#pragma once
// One option of the configuration schema: where it lives in a config file
// ([group] key), its flag, help, type, valid values, the RunConfig field it
// sets, and when it means something. Flags, TOML files, --print-config and the
// result line are all generated from these descriptions (api/Schema.h).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "api/RunConfig.h"

namespace dtrain::api {

enum class Kind { Bool, Int, Float, String, IntList, FloatList, StringList };

using Value = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                           std::vector<double>, std::vector<std::string>>;

// How a field type reads and writes a Value.
template <typename T, typename = void>
struct ValueTraits;

template <>
struct ValueTraits<bool> {
  static constexpr Kind kind = Kind::Bool;
  static void assign(bool& f, const Value& v) { f = std::get<bool>(v); }
  static std::optional<Value> read(const bool& f) { return Value(f); }
};
template <typename T>
struct ValueTraits<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static constexpr Kind kind = Kind::Int;
  static void assign(T& f, const Value& v) { f = static_cast<T>(std::get<int64_t>(v)); }
  static std::optional<Value> read(const T& f) { return Value(static_cast<int64_t>(f)); }
};
template <>
struct ValueTraits<double> {
  static constexpr Kind kind = Kind::Float;
  static void assign(double& f, const Value& v) { f = std::get<double>(v); }
  static std::optional<Value> read(const double& f) { return Value(f); }
};
template <>
struct ValueTraits<std::string> {
  static constexpr Kind kind = Kind::String;
  static void assign(std::string& f, const Value& v) { f = std::get<std::string>(v); }
  static std::optional<Value> read(const std::string& f) {
    if (f.empty()) return std::nullopt;  // empty: not set
    return Value(f);
  }
};
template <>
struct ValueTraits<std::vector<int>> {
  static constexpr Kind kind = Kind::IntList;
  static void assign(std::vector<int>& f, const Value& v) {
    f.clear();
    for (int64_t x : std::get<std::vector<int64_t>>(v)) f.push_back(static_cast<int>(x));
  }
  static std::optional<Value> read(const std::vector<int>& f) {
    if (f.empty()) return std::nullopt;
    return Value(std::vector<int64_t>(f.begin(), f.end()));
  }
};
template <typename T>
struct ValueTraits<std::optional<T>> {
  static constexpr Kind kind = ValueTraits<T>::kind;
  static void assign(std::optional<T>& f, const Value& v) {
    T t{};
    ValueTraits<T>::assign(t, v);
    f = t;
  }
  static std::optional<Value> read(const std::optional<T>& f) {
    if (!f) return std::nullopt;
    return ValueTraits<T>::read(*f);
  }
};

struct Option {
  std::string group, key;  // config files: [group] key = value
  std::string flag;        // "--batch-size"; for booleans the flag that sets true ("" none)
  std::string negFlag;     // booleans: the flag that sets false ("--no-shuffle"; "" none)
  std::string help;
  Kind kind = Kind::String;
  bool repeatable = false;  // StringList flags: each occurrence adds one element
  std::function<std::vector<std::string>()> choices;  // strings: the valid values
  std::optional<double> min, max;  // numbers (and list elements): the range
  bool minExclusive = false;       // min itself is out of range (> 0, not >= 0)
  std::string resultKey;  // field of the result line when the option applies ("" none)
  std::string zeroWord;   // Int options: a word that stands for 0 ("auto" for --threads)
  std::function<void(RunConfig&, const Value&)> set;
  std::function<std::optional<Value>(const RunConfig&)> get;  // nullopt: not set
  // "" when the option means something in this configuration, else why not
  // (e.g. "applies to --schedule step"): giving it then is an error.
  std::function<std::string(const RunConfig&)> unusedBecause;

  std::string id() const { return group + "." + key; }
  // The flag users see in messages.
  const std::string& name() const { return flag.empty() ? negFlag : flag; }

  template <typename T>
  Option& train(T runtime::TrainConfig::*m) { return bindTo(&RunConfig::train, m); }
  template <typename T>
  Option& fed(T federated::FederatedOptions::*m) { return bindTo(&RunConfig::federated, m); }
  // A field of a strategy's own options struct (TrainConfig::strategyOptions).
  template <typename S, typename T>
  Option& strategy(T S::*m) {
    kind = ValueTraits<T>::kind;
    set = [m](RunConfig& r, const Value& v) { ValueTraits<T>::assign(r.train.strategyOptions.mut<S>().*m, v); };
    get = [m](const RunConfig& r) { return ValueTraits<T>::read(r.train.strategyOptions.get<S>().*m); };
    return *this;
  }
  Option& range(double lo, std::optional<double> hi = std::nullopt) {
    min = lo;
    max = hi;
    return *this;
  }
  Option& above(double lo, std::optional<double> hi = std::nullopt) {  // > lo (and <= hi)
    min = lo;
    max = hi;
    minExclusive = true;
    return *this;
  }
  Option& oneOf(std::vector<std::string> values) {
    choices = [values = std::move(values)] { return values; };
    return *this;
  }
  Option& oneOf(std::function<std::vector<std::string>()> values) {
    choices = std::move(values);
    return *this;
  }
  Option& zeroMeans(std::string word) {
    zeroWord = std::move(word);
    return *this;
  }
  Option& result(std::string k) {
    resultKey = std::move(k);
    return *this;
  }
  Option& when(std::function<std::string(const RunConfig&)> f) {
    unusedBecause = std::move(f);
    return *this;
  }
  Option& negated(std::string f) {
    negFlag = std::move(f);
    return *this;
  }

 private:
  template <typename Part, typename T>
  Option& bindTo(Part RunConfig::*part, T Part::*m) {
    kind = ValueTraits<T>::kind;
    set = [part, m](RunConfig& r, const Value& v) { ValueTraits<T>::assign(r.*part.*m, v); };
    get = [part, m](const RunConfig& r) { return ValueTraits<T>::read(r.*part.*m); };
    return *this;
  }
};

}  // namespace dtrain::api
