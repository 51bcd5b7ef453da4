#include <gtest/gtest.h>

#include "core/NameRegistry.h"

using namespace dtrain;

namespace {
struct Described {
  int value;
  std::string description;
};
}  // namespace

TEST(NameRegistry, FindsEntriesAndNamesTheKnownOnesInOrderOtherwise) {
  const NameRegistry<int> r("--color", {{"red", 1}, {"green", 2}, {"blue", 3}});
  EXPECT_EQ(r.find("green"), 2);
  EXPECT_TRUE(r.contains("blue"));
  EXPECT_EQ(r.tryFind("purple"), nullptr);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"red", "green", "blue"}));
  try {
    r.find("purple");
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "unknown --color 'purple' (known: red, green, blue)");
  }
}

TEST(NameRegistry, DescribesEntriesForHelp) {
  const NameRegistry<Described> r("thing", {{"a", {1, "first"}}, {"b", {2, "second"}}});
  EXPECT_EQ(r.describe(), "a: first; b: second");
  EXPECT_EQ(r.find("b").value, 2);
}
