#pragma once
// A byte-level text corpus for language models: any file read as bytes (tokens are the
// byte values, vocabulary 256), split as the PyTorch peer (bench/torch_gpt.py) splits it:
// the first floor(0.9 * n) bytes train, the rest validate.
//
// The corpus is held once in memory and shared (read-only, so thread-safe) by every
// rank of the `local` backend and by the batchers that cut windows out of it.
//
// Errors: a path that does not exist or is a directory, an empty file, and splits too
// short for the model's block throw UsageError (the user's input: fix the flags, exit
// code 2); a file that exists but cannot be read throws dtrain::Error (exit code 1).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace dtrain::data {

// Byte tokens: every file is valid input, no tokenizer to ship.
inline constexpr int kTextVocab = 256;

class TextCorpus {
 public:
  // `name` is what error messages call the corpus (its path, or "kjv").
  TextCorpus(std::vector<uint8_t> bytes, std::string name);

  // Reads the whole file.
  static std::shared_ptr<const TextCorpus> fromFile(const std::string& path);

  const std::string& name() const { return name_; }
  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }
  std::span<const uint8_t> bytes() const { return bytes_; }

  // The peer's int(0.9 * n), computed as it computes it (in double), so the splits agree
  // by construction rather than by an argument about rounding.
  static int64_t trainSizeFor(int64_t n) {
    return static_cast<int64_t>(0.9 * static_cast<double>(n));
  }
  int64_t trainSize() const { return trainSize_; }
  int64_t validationSize() const { return size() - trainSize_; }
  std::span<const uint8_t> train() const { return bytes().first(static_cast<size_t>(trainSize_)); }
  std::span<const uint8_t> validation() const {
    return bytes().subspan(static_cast<size_t>(trainSize_));
  }

  // Throws UsageError unless both splits hold at least one window of block + 1 bytes
  // (block inputs and their next-byte targets), naming the split that is too short.
  void requireWindows(int64_t block) const;

 private:
  std::vector<uint8_t> bytes_;
  std::string name_;
  int64_t trainSize_;
};

}  // namespace dtrain::data
