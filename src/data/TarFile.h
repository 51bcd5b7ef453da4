#pragma once
// POSIX ustar archives, read and written sequentially: the container of WebDataset-style
// shards (data/ShardReader.h). A shard is read front to back once per epoch, so the
// reader never seeks backwards and holds one member's bytes at a time.
//
// Read: 512-byte headers (checksum checked), regular files ('0' or NUL type), GNU long
// names ('L') and pax path records ('x'); directories and other entries are skipped.
// Sizes in octal or GNU base-256. The archive ends at the first zero block or at the end
// of the file after a whole member (tar's second zero block is optional here, as in
// Python's tarfile).
//
// Every problem (truncated header or data, a bad checksum, a bad size field) throws
// BadData naming the file, the member where one is known, and what is wrong.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/Error.h"

namespace dtrain::data {

// Bad contents of a data file (the user's input: exit code 2). `file` and `member` say
// where; what() is the whole one-line message.
class BadData : public UsageError {
 public:
  BadData(std::string file, std::string member, const std::string& problem);
  const std::string& file() const { return file_; }
  const std::string& member() const { return member_; }

 private:
  std::string file_, member_;
};

struct TarEntry {
  std::string name;
  int64_t size = 0;
};

class TarReader {
 public:
  // Throws UsageError when `path` cannot be opened.
  explicit TarReader(const std::string& path);

  // The next regular file's header, or false at the end of the archive. Its data must be
  // consumed (readData or skipData) before the next call; an unconsumed member is skipped.
  bool next(TarEntry& entry);
  // The current member's bytes into `out` (resized), or past them.
  void readData(std::vector<uint8_t>& out);
  // Only its first min(size, limit) bytes (a header to check), skipping the rest.
  void readPrefix(std::vector<uint8_t>& out, int64_t limit);
  void skipData();

  const std::string& path() const { return path_; }

 private:
  bool readHeader(std::vector<uint8_t>& block, const std::string& after);
  std::string readLongName(int64_t size, bool pax);
  void readExactly(void* out, size_t bytes, const char* what);
  void skipBytes(int64_t bytes, const char* what);

  std::string path_;
  std::unique_ptr<FILE, int (*)(FILE*)> file_;
  std::vector<char> buffer_;
  TarEntry current_;
  int64_t unread_ = 0;    // data bytes of the current member not yet consumed
  int64_t padding_ = 0;   // zero bytes after them, to the next 512-byte block
  int64_t pos_ = 0, fileSize_ = 0;
};

// Writes ustar archives (dtrain data pack, tests). Names up to 100 bytes.
class TarWriter {
 public:
  explicit TarWriter(const std::string& path);
  ~TarWriter();
  void add(const std::string& name, const void* data, size_t size);
  // Writes the two zero blocks and closes the file (throws on a write error).
  void close();

 private:
  void write(const void* data, size_t size);
  std::string path_;
  FILE* file_ = nullptr;
};

}  // namespace dtrain::data
