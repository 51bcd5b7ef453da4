#pragma once
// A table of named entries (models, optimizers, schedules, compressors,
// strategies, backends, aggregators ...): the entries in the order given (the
// order of help texts and error messages), and one message for a name that is
// not there: UsageError "unknown <what> 'x' (known: a, b, c)".
#include <string>
#include <utility>
#include <vector>

#include "core/Error.h"

namespace dtrain {

template <typename Entry>
class NameRegistry {
 public:
  // `what` names the thing in errors, usually its flag: "--optimizer", "model".
  NameRegistry(std::string what, std::vector<std::pair<std::string, Entry>> entries)
      : what_(std::move(what)), entries_(std::move(entries)) {}

  // nullptr when unknown.
  const Entry* tryFind(const std::string& name) const {
    for (const auto& [n, e] : entries_)
      if (n == name) return &e;
    return nullptr;
  }
  bool contains(const std::string& name) const { return tryFind(name) != nullptr; }
  // Throws UsageError naming the known entries when unknown.
  const Entry& find(const std::string& name) const {
    if (const Entry* e = tryFind(name)) return *e;
    throw UsageError("unknown " + what_ + " '" + name + "' (known: " + joinedNames() + ")");
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [n, e] : entries_) out.push_back(n);
    return out;
  }
  // "a, b, c".
  std::string joinedNames() const {
    std::string out;
    for (const auto& [n, e] : entries_) out += (out.empty() ? "" : ", ") + n;
    return out;
  }
  // "name: description; ..." (flag help), for entries with a `description`.
  std::string describe() const {
    std::string out;
    for (const auto& [n, e] : entries_) out += (out.empty() ? "" : "; ") + n + ": " + e.description;
    return out;
  }
  const std::vector<std::pair<std::string, Entry>>& entries() const { return entries_; }

 private:
  std::string what_;
  std::vector<std::pair<std::string, Entry>> entries_;
};

}  // namespace dtrain
