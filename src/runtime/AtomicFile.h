#pragma once
// A file written whole or not at all: the bytes go to `target` + ".tmp", are
// fsynced, and the file is renamed over `target` (then the directory fsynced).
// Any failure (a full disk, a read-only directory, a crash) leaves `target` as it
// was (the previous checkpoint whole) and no temporary file behind; the error is
// one dtrain::Error line naming `what` `target`, the step that failed and the OS
// error ("saving ckpt/step-9.safetensors: write to ...tmp failed (No space left
// on device)"). Checkpoints (Safetensors) and timelines use it.
// A target that exists and is not a regular file (/dev/null, /dev/stdout, a
// FIFO) is written in place: renaming over it would replace the device with a
// file (as root, even /dev/null).
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
  bool inPlace_ = false;  // the target is a device or a pipe: no temporary file
  int fd_ = -1;
  bool committed_ = false;
  size_t written_ = 0;
};

}  // namespace dtrain::runtime
