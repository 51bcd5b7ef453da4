#pragma once
// The configuration schema: every option of a training run, in groups (one per
// concern: model, data, training, optimizer, parallel, ...). Each group's file
// under api/groups/ declares its options with their defaults (RunConfig's),
// help, valid values, result fields and when they apply. The CLI's flags, config
// files (api/ConfigFile.h), --print-config and the result line are generated
// from it, so an option is described once.
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "api/Option.h"

namespace dtrain::api {

struct OptionGroup {
  std::string name;   // [name] in config files
  std::string title;  // heading of the group in --help
};

class Schema {
 public:
  void addGroup(std::string name, std::string title);
  // Declares an option of an existing group; returns it for the fluent setters.
  Option& add(const std::string& group, std::string key, std::string flag, std::string help);

  const std::vector<OptionGroup>& groups() const { return groups_; }
  const std::deque<Option>& options() const { return options_; }
  const OptionGroup* group(const std::string& name) const;
  const Option* find(const std::string& group, const std::string& key) const;
  const Option* findFlag(const std::string& flag) const;  // either of a boolean's flags
  // "unknown key 'x' in [g]" completed with the nearest valid name, for messages.
  std::string suggestKey(const std::string& group, const std::string& key) const;
  std::string suggestGroup(const std::string& name) const;
  std::string groupsWithKey(const std::string& key, const std::string& except) const;

 private:
  std::vector<OptionGroup> groups_;
  std::deque<Option> options_;  // a deque: add() hands out references that stay valid
};

// Every option dtrain has (built once).
const Schema& schema();

// Where each given option came from: "--batch-size" or "run.toml:3: [training] batch_size".
struct Sources {
  std::map<std::string, std::string> where;  // option id -> origin
  bool given(const Option& o) const { return where.count(o.id()) > 0; }
  bool givenFlag(const std::string& flag) const;
  std::string of(const Option& o) const;  // the origin, or the flag when not given
};

// The value of a flag's text; throws UsageError naming the flag.
Value parseText(const Option& o, const std::string& flag, const std::vector<std::string>& texts);
// "" when the value is valid for the option, else the problem, with {} where the
// option's name goes ("{} must be >= 1 (got 0)", "unknown {} 'x' (known: a, b)").
std::string checkValue(const Option& o, const Value& v);
// The one-line message of a problem of the option given at `origin`
// ("--lr", or "run.toml:4: [optimizer] lr", whose location leads the line).
std::string describe(const std::string& origin, const std::string& problem);
// Sets the option, checked; `origin` names it in the error ("--lr", "run.toml:4: [optimizer] lr").
void setChecked(RunConfig& rc, Sources& src, const Option& o, const Value& v, std::string origin);
std::string kindName(Kind k);
// What a value of `o` may be: its kind, and the word that stands for 0 ("an integer or \"auto\"").
std::string expectedValue(const Option& o);
std::string toToml(const Value& v);  // a TOML value literal
// Levenshtein distance (for "did you mean").
size_t editDistance(const std::string& a, const std::string& b);

// The group registrations (api/groups/*.cpp), called by schema().
void addModelOptions(Schema& s);
void addDataOptions(Schema& s);
void addTrainingOptions(Schema& s);
void addOptimizerOptions(Schema& s);
void addParallelOptions(Schema& s);
void addAllreduceOptions(Schema& s);
void addCompressOptions(Schema& s);
void addMemoryOptions(Schema& s);
void addLoraOptions(Schema& s);
void addPsOptions(Schema& s);
void addCheckpointOptions(Schema& s);
void addEvalOptions(Schema& s);
void addLoggingOptions(Schema& s);
void addFaultOptions(Schema& s);

}  // namespace dtrain::api
