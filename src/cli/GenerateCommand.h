#pragma once
// `dtrain generate`: text from a language-model checkpoint (dtrain train
// --model gpt-* --save FILE). The text goes to stdout, tokens/s to stderr.
#include <CLI/CLI.hpp>

namespace dtrain::cli {

// Bad flags, a missing checkpoint, one that holds no language model, an empty
// prompt or one longer than the block throw UsageError (exit 2); a checkpoint
// that does not match its model throws dtrain::Error (exit 1).
void addGenerateCommand(CLI::App& app);

}  // namespace dtrain::cli
