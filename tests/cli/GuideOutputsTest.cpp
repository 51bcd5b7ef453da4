// Outputs the guide pages show are what the commands print: the page's block is
// compared with a fresh run (a cost-model change that moves them fails here,
// and the page is updated with it).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/CliRunner.h"

using namespace dtrain::test;

namespace {

// The lines of the `n`th ``` block (0: the first) after `marker` in `page`.
std::vector<std::string> blockAfter(const std::string& page, const std::string& marker, int n) {
  std::istringstream in(slurp(std::string(DTRAIN_SCRIPTS) + "/../docs/guide/" + page));
  std::vector<std::string> lines;
  bool seen = false, inside = false;
  int fences = 0;
  for (std::string line; std::getline(in, line);) {
    if (!seen) {
      seen = line.find(marker) != std::string::npos;
      continue;
    }
    if (line.rfind("```", 0) == 0) {
      inside = !inside;
      if (!inside && fences++ == n) break;
      continue;
    }
    if (inside && fences == n) lines.push_back(line);
  }
  return lines;
}

// Lines of `text` without the run's own time ("tried in 1.54 s").
std::vector<std::string> withoutTimes(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(std::regex_replace(line, std::regex(" in [0-9.]+ s:"), " in _ s:"));
  return lines;
}

}  // namespace

TEST(GuideOutputs, PlanningSevenBillionExample) {
  const std::string dir = tempDir();
  std::ofstream(dir + "/big.toml") << "[model]\nname = \"gpt-base\"\nn_layer = 36\nn_head = 32\nn_embd = 4096\n"
                                      "block_size = 1024\n[optimizer]\nname = \"adam\"\n";
  const CliResult r = runDtrain("plan --model gpt-base --config " + dir + "/big.toml --global-batch 256 --hosts 4 "
                                "--ranks-per-host 16 --machine " + std::string(DTRAIN_SCRIPTS) +
                                "/../plan/clusters/dgx2-v100.json --top 3");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string page;
  // The example's second block: what the command (its first) prints.
  for (const std::string& line : blockAfter("planning.md", "### Example: a 7B GPT", 1)) page += line + "\n";
  ASSERT_FALSE(page.empty());
  EXPECT_EQ(withoutTimes(r.out), withoutTimes(page)) << "planning.md's 7B example now prints:\n" << r.out;
}
