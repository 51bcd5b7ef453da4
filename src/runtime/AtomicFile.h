#pragma once
// A file written whole or not at all: the bytes go to `target` + ".tmp", are
// fsynced, and the file is renamed over `target` (then the directory fsynced).
// Any failure (a full disk, a read-only directory, a crash) leaves `target` as it
// was (the previous checkpoint whole) and no temporary file behind; the error is
// one dtrain::Error line naming `what` `target`, the step that failed and the OS
// error ("saving ckpt/step-9.safetensors: write to ...tmp failed (No space left
// on device)"). Checkpoints (Safetensors) and timelines use it.
#include <cstddef>
#include <string>

namespace dtrain::runtime {

class AtomicFile {
 public:
  // `what`: how the message begins ("saving", "writing timeline").
  AtomicFile(std::string target, std::string what = "saving");
  // Without commit(): closes and removes the temporary file.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  // fsync, close, rename over the target, fsync the directory.
  void commit();

 private:
  std::string path_, target_, what_;
  int fd_ = -1;
  bool committed_ = false;
  size_t written_ = 0;
};

}  // namespace dtrain::runtime
