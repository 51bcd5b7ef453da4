// Configuration files (dtrain train --config): TOML syntax (toml++), unknown
// groups and keys, value kinds, ranges and choices, the checks across options
// (prepare); a file that passes prints (--print-config) as a file that loads
// and prepares to the same configuration.
#include "api/ConfigFile.h"
#include "api/PrepareConfig.h"
#include "fuzz/FuzzInput.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtrain::api;
  const std::string text(reinterpret_cast<const char*>(data), size);
  RunConfig rc;
  Sources src;
  bool loaded = false;
  dtrain::fuzz::expectErrorsOnly([&] {
    loadConfigText(text, "fuzz.toml", rc, src);
    prepare(rc, src, /*workersKnown=*/true);
    loaded = true;
  });
  if (!loaded) return 0;
  // What loaded prints as a file that loads to the same configuration
  // (--print-config's promise); an exception here is a finding, not bad input.
  const std::string printed = configToToml(rc);
  RunConfig again;
  Sources againSrc;
  loadConfigText(printed, "printed.toml", again, againSrc);
  prepare(again, againSrc, /*workersKnown=*/true);
  if (configToToml(again) != printed) __builtin_trap();
  return 0;
}
