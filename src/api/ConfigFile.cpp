#include "api/ConfigFile.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "api/PrepareConfig.h"
#include "core/Error.h"

namespace dtrain::api {

namespace {

std::string at(const std::string& file, const toml::source_region& where) {
  return file + ":" + std::to_string(where.begin.line);
}

const char* tomlTypeName(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    default: return "a date or time";
  }
}

// The node as the option's kind; nullopt on a type mismatch.
std::optional<Value> toValue(const Option& o, const toml::node& n) {
  auto number = [](const toml::node& x) -> std::optional<double> {
    if (auto f = x.as_floating_point()) return f->get();
    if (auto i = x.as_integer()) return static_cast<double>(i->get());
    return std::nullopt;
  };
  switch (o.kind) {
    case Kind::Bool:
      if (auto b = n.as_boolean()) return Value(b->get());
      return std::nullopt;
    case Kind::Int:
      if (auto i = n.as_integer()) return Value(static_cast<int64_t>(i->get()));
      if (auto w = n.as_string(); w && !o.zeroWord.empty() && w->get() == o.zeroWord) return Value(int64_t{0});
      return std::nullopt;
    case Kind::Float:
      if (auto d = number(n)) return Value(*d);
      return std::nullopt;
    case Kind::String:
      if (auto s = n.as_string()) return Value(s->get());
      return std::nullopt;
    case Kind::IntList:
    case Kind::FloatList:
    case Kind::StringList: {
      const toml::array* a = n.as_array();
      if (!a) return std::nullopt;
      std::vector<int64_t> ints;
      std::vector<double> floats;
      std::vector<std::string> strings;
      for (const toml::node& e : *a) {
        if (o.kind == Kind::IntList) {
          auto i = e.as_integer();
          if (!i) return std::nullopt;
          ints.push_back(i->get());
        } else if (o.kind == Kind::FloatList) {
          auto d = number(e);
          if (!d) return std::nullopt;
          floats.push_back(*d);
        } else {
          auto s = e.as_string();
          if (!s) return std::nullopt;
          strings.push_back(s->get());
        }
      }
      if (o.kind == Kind::IntList) return Value(ints);
      if (o.kind == Kind::FloatList) return Value(floats);
      return Value(strings);
    }
  }
  return std::nullopt;
}

void load(const toml::table& root, const std::string& file, RunConfig& rc, Sources& src) {
  const Schema& s = schema();
  for (const auto& [groupKey, groupNode] : root) {
    const std::string group(groupKey.str());
    const std::string where = at(file, groupKey.source());
    const toml::table* table = groupNode.as_table();
    DTRAIN_CHECK_USAGE(table, where, ": '", group, "' must be a [group] of keys", s.suggestGroup(group));
    DTRAIN_CHECK_USAGE(s.group(group), where, ": unknown group [", group, "]", s.suggestGroup(group));
    for (const auto& [key, node] : *table) {
      const std::string name(key.str());
      const std::string origin = at(file, key.source()) + ": [" + group + "] " + name;
      const Option* o = s.find(group, name);
      DTRAIN_CHECK_USAGE(o, at(file, key.source()), ": unknown key '", name, "' in [", group, "]",
                         s.suggestKey(group, name));
      const std::optional<Value> v = toValue(*o, node);
      DTRAIN_CHECK_USAGE(v, origin, ": expected ", expectedValue(*o), ", got ", tomlTypeName(node));
      setChecked(rc, src, *o, *v, origin);
    }
  }
}

}  // namespace

void loadConfigText(const std::string& text, const std::string& name, RunConfig& rc, Sources& src) {
  toml::table root;
  try {
    root = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    throw UsageError(name + ":" + std::to_string(e.source().begin.line) + ": " +
                     std::string(e.description()));
  }
  load(root, name, rc, src);
}

void loadConfigFile(const std::string& path, RunConfig& rc, Sources& src) {
  std::error_code ec;
  DTRAIN_CHECK_USAGE(std::filesystem::is_regular_file(path, ec), "--config ", path,
                     ": no such file");
  std::ifstream in(path, std::ios::binary);
  DTRAIN_CHECK_USAGE(in, "--config ", path, ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  loadConfigText(text.str(), path, rc, src);
}

std::string configToToml(const RunConfig& rc) {
  std::ostringstream out;
  const std::string* group = nullptr;  // the table being written (options come group by group)
  for (const auto& [o, v] : usedValues(rc)) {
    if (!group || *group != o->group) out << (group ? "\n" : "") << "[" << o->group << "]\n";
    group = &o->group;
    const bool word = !o->zeroWord.empty() && v == Value(int64_t{0});
    out << o->key << " = " << (word ? "\"" + o->zeroWord + "\"" : toToml(v)) << "\n";
  }
  return out.str();
}

nlohmann::json toJson(const Value& v) {
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

}  // namespace dtrain::api
