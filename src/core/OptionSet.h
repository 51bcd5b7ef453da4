#pragma once
// Option structs kept by type: where the run configuration holds the options of
// a strategy that declares them in its own folder (src/parallel/<name>/), so
// that adding a strategy adds no field to the configuration's struct. A struct
// never set reads as its defaults.
#include <any>
#include <map>
#include <typeindex>

namespace dtrain {

class OptionSet {
 public:
  template <typename T>
  T& mut() {
    std::any& a = items_[std::type_index(typeid(T))];
    if (!a.has_value()) a = T{};
    return std::any_cast<T&>(a);
  }
  template <typename T>
  const T& get() const {
    auto it = items_.find(std::type_index(typeid(T)));
    if (it == items_.end()) {
      static const T defaults{};
      return defaults;
    }
    return std::any_cast<const T&>(it->second);
  }

 private:
  std::map<std::type_index, std::any> items_;
};

}  // namespace dtrain
