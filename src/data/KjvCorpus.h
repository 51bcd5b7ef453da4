#pragma once
// The default text corpus, `kjv`: the King James Bible exactly as the PyTorch peer
// (bench/torch_gpt.py) trains on it, produced by Debian's bible-kjv package with
//   bible -l80 "Gen1:1-Rev22:21"        (4,298,239 bytes, md5 f6da5ed3dff9e3ebfbb4fe1fcf5bd5ea)
// The output is deterministic (checked: same digest across runs, environments, locales),
// so dtrain generates it once into its cache directory and verifies size and digest,
// instead of shipping 4 MB of text.
//
// The file is written atomically (a unique temporary file, then rename), so ranks or
// processes materializing it at the same time never see a partial file; a cached copy of
// the wrong size or digest (truncated, edited) is regenerated.
//
// Errors: no `bible` program -> UsageError saying to install bible-kjv (or to pass a text
// file); a cache directory that cannot be created or written, `bible` failing, or output
// that is not the expected corpus -> dtrain::Error.
#include <cstdint>
#include <memory>
#include <string>

#include "data/TextCorpus.h"

namespace dtrain::data {

inline constexpr const char* kKjvFileName = "kjv.txt";
inline constexpr int64_t kKjvBytes = 4298239;
inline constexpr const char* kKjvMd5 = "f6da5ed3dff9e3ebfbb4fe1fcf5bd5ea";

// DTRAIN_CACHE_DIR if set and non-empty, else $XDG_CACHE_HOME/dtrain (XDG: only an
// absolute path counts), else $HOME/.cache/dtrain. Arguments are the variables' values
// (nullptr when unset), so the rule is testable without touching the environment.
// Throws UsageError when none is usable.
std::string cacheDirFrom(const char* dtrainCacheDir, const char* xdgCacheHome, const char* home);
// cacheDirFrom() of this process's environment.
std::string defaultCacheDir();

struct KjvOptions {
  std::string cacheDir;           // empty: defaultCacheDir()
  std::string program = "bible";  // looked up in PATH; tests point it at a missing program
};

// The path of the verified corpus in the cache directory, generating it first if needed.
std::string materializeKjv(const KjvOptions& options = {});
// The verified corpus, loaded.
std::shared_ptr<const TextCorpus> loadKjv(const KjvOptions& options = {});

// What `--dataset text [--text-file PATH]` loads: the file when `textFile` is non-empty,
// the kjv corpus otherwise.
std::shared_ptr<const TextCorpus> loadTextCorpus(const std::string& textFile,
                                                 const KjvOptions& kjv = {});

}  // namespace dtrain::data
