#pragma once
// Token shards for language models, in nanoGPT's format: each file a headerless array of
// little-endian uint16 token ids (train.bin, val.bin, or many shards), memory-mapped and read
// where the windows fall, never loaded whole. A `meta.json` beside the files ({"vocab_size":
// 256}, written by `dtrain data pack --text`) gives the vocabulary; without one every token
// read is checked against the model's.
//
// Windows of block + 1 tokens never cross a file boundary: a window start is drawn uniformly
// among all files' valid starts, as nanoGPT draws offsets into its one train.bin.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/Dataset.h"

namespace dtrain::data {

class TokenShards {
 public:
  // Maps `files` (UsageError for a missing file; BadData for an odd size or an unreadable
  // meta.json). `name` is the flag that named them, for messages.
  TokenShards(const std::vector<std::string>& files, const std::string& name);
  ~TokenShards();
  TokenShards(const TokenShards&) = delete;
  TokenShards& operator=(const TokenShards&) = delete;

  int64_t tokens() const { return total_; }
  int64_t files() const { return static_cast<int64_t>(files_.size()); }
  int vocabSize() const { return vocab_; }  // 0: no meta.json
  // Valid window starts for `block` (block + 1 tokens each) over every file.
  int64_t windowStarts(int64_t block) const;

  // Windows at window-start indices `starts` (each < windowStarts(block)) as x = tokens
  // [i, i + block) and y = [i + 1, i + block + 1), I32 [count, block]. Throws BadData naming
  // the file and the offset of a token >= `vocab`.
  void fill(const std::vector<int64_t>& starts, int64_t block, int vocab, Batch& out) const;

 private:
  struct File {
    std::string path;
    const uint16_t* tokens = nullptr;
    int64_t count = 0;
    size_t mappedBytes = 0;
  };
  std::vector<File> files_;
  int64_t total_ = 0;
  int vocab_ = 0;
};

// Writes `bytes` as token shards PREFIX-000000.bin ... of at most `shardTokens` tokens (each
// byte one token) and PREFIX's directory's meta.json (vocab_size 256). Returns the files.
std::vector<std::string> packTextTokens(const std::vector<uint8_t>& bytes, const std::string& prefix,
                                        int64_t shardTokens);

}  // namespace dtrain::data
