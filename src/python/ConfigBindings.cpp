// dtrain.Config: a configuration from a dict of groups (the keys of the config
// files) or a TOML file, each value checked as the CLI checks it.
#include "python/BindingHelpers.h"

#include "api/ConfigFile.h"
#include "api/Train.h"

namespace dtrain::python {

namespace {

// A Python value as the option's kind; throws UsageError naming `origin`.
api::Value toValue(const api::Option& o, const py::handle& v, const std::string& origin) {
  auto fail = [&]() -> api::Value {
    throw UsageError(origin + ": expected " + api::expectedValue(o) + ", got " +
                     std::string(py::str(v.get_type().attr("__name__"))));
  };
  auto isNumber = [](const py::handle& x) {
    return (py::isinstance<py::int_>(x) || py::isinstance<py::float_>(x)) && !py::isinstance<py::bool_>(x);
  };
  switch (o.kind) {
    case api::Kind::Bool:
      if (!py::isinstance<py::bool_>(v)) return fail();
      return v.cast<bool>();
    case api::Kind::Int:
      if (!o.zeroWord.empty() && py::isinstance<py::str>(v) && v.cast<std::string>() == o.zeroWord)
        return int64_t{0};
      if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v)) return fail();
      return v.cast<int64_t>();
    case api::Kind::Float:
      if (!isNumber(v)) return fail();
      return v.cast<double>();
    case api::Kind::String:
      if (!py::isinstance<py::str>(v)) return fail();
      return v.cast<std::string>();
    case api::Kind::IntList:
    case api::Kind::FloatList:
    case api::Kind::StringList: {
      if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v)) return fail();
      std::vector<int64_t> ints;
      std::vector<double> floats;
      std::vector<std::string> strings;
      for (const auto& e : v) {
        if (o.kind == api::Kind::IntList) {
          if (!py::isinstance<py::int_>(e)) return fail();
          ints.push_back(e.cast<int64_t>());
        } else if (o.kind == api::Kind::FloatList) {
          if (!isNumber(e)) return fail();
          floats.push_back(e.cast<double>());
        } else {
          if (!py::isinstance<py::str>(e)) return fail();
          strings.push_back(e.cast<std::string>());
        }
      }
      if (o.kind == api::Kind::IntList) return ints;
      if (o.kind == api::Kind::FloatList) return floats;
      return strings;
    }
  }
  return fail();
}

// Sets {"group": {"key": value}} on the configuration, each value checked.
void update(Config& c, const py::dict& groups) {
  const api::Schema& s = api::schema();
  for (const auto& [g, keys] : groups) {
    const std::string group = py::str(g);
    DTRAIN_CHECK_USAGE(s.group(group), "unknown group '", group, "'", s.suggestGroup(group));
    DTRAIN_CHECK_USAGE(py::isinstance<py::dict>(keys), "group '", group,
                       "' must be a dict of keys (e.g. {'", group, "': {...}})");
    for (const auto& [k, v] : keys.cast<py::dict>()) {
      const std::string key = py::str(k);
      const api::Option* o = s.find(group, key);
      DTRAIN_CHECK_USAGE(o, "unknown key '", key, "' in '", group, "'", s.suggestKey(group, key));
      const std::string origin = "[" + group + "] " + key;
      api::setChecked(c.rc, c.src, *o, toValue(*o, v, origin), origin);
    }
  }
}

}  // namespace

py::object toPython(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

void bindConfig(py::module_& m) {
  py::class_<Config>(m, "Config", "A training configuration: the groups and keys of dtrain's config files")
      .def(py::init([](py::kwargs groups) {
             Config c;
             update(c, groups);
             return c;
           }),
           "Config(optimizer={'name': 'sgd', 'lr': 0.05}, parallel={'workers': 2}, ...)")
      .def_static("load", [](const std::string& path) {
             Config c;
             api::loadConfigFile(path, c.rc, c.src);
             return c;
           }, "A configuration from a TOML file")
      .def("__copy__", [](const Config& c) { return c; })
      .def("update", [](Config& c, py::kwargs groups) { update(c, groups); return c; },
           "Sets more options (later values win)")
      .def("to_toml", [](const Config& c) { return api::configToToml(api::prepared(c.rc, c.src)); },
           "The effective configuration as TOML (what `dtrain train --print-config` prints)")
      .def("__repr__", [](const Config& c) {
        std::string given;
        for (const auto& [id, where] : c.src.where) given += (given.empty() ? "" : ", ") + id;
        return "dtrain.Config(" + given + ")";
      });
}

}  // namespace dtrain::python
