// Checkpoints and output files on a disk that is full, fills during the write or
// is read-only (issue 32): one line naming the path and the OS error, exit 1, the
// previous checkpoint whole and no temporary file left (runtime/AtomicFile.h).
// Real small tmpfs mounts (root; skipped where mounting is not permitted) and
// the DTRAIN_TEST_WRITE_LIMIT seam (a write that fails after N bytes).
#include <filesystem>

#include "cli/CliRunner.h"
#include "core/Error.h"
#include "parallel/ParallelTestUtil.h"
#include "runtime/Safetensors.h"

namespace dtrain::test {
namespace {
namespace fs = std::filesystem;

// A tmpfs of `size` (mount's syntax: 64k, 5m) at a fresh directory; unmounted
// and removed when it goes.
class SmallDisk {
 public:
  explicit SmallDisk(const std::string& size) : dir_(tempDir()) {
    mounted_ = std::system(("mount -t tmpfs -o size=" + size + " tmpfs " + dir_ + " 2>/dev/null").c_str()) == 0;
  }
  ~SmallDisk() {
    if (mounted_) std::system(("umount " + dir_).c_str());
    fs::remove_all(dir_);
  }
  bool mounted() const { return mounted_; }
  bool makeReadOnly() { return std::system(("mount -o remount,ro " + dir_ + " 2>/dev/null").c_str()) == 0; }
  const std::string& dir() const { return dir_; }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::string dir_;
  bool mounted_ = false;
};

#define DTRAIN_NEED_MOUNT(disk) \
  if (!(disk).mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root)"

Tensor filled(int64_t n, float v) {
  Tensor t = Tensor::empty({n}, DType::F32);
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = v + static_cast<float>(i);
  return t;
}

std::string thrown(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DiskFull, SavingOverACheckpointLeavesTheOldOneWhole) {
  SmallDisk disk("64k");
  DTRAIN_NEED_MOUNT(disk);
  const std::string path = disk.dir() + "/a.safetensors";
  runtime::saveSafetensors(path, {{"w", filled(1000, 1)}});
  const std::string before = slurp(path);
  const std::string err = thrown([&] { runtime::saveSafetensors(path, {{"w", filled(64000, 2)}}); });
  EXPECT_EQ(err, "saving " + path + ": write to " + path + ".tmp failed (No space left on device)");
  EXPECT_EQ(slurp(path), before);
  EXPECT_EQ(disk.files(), std::vector<std::string>{"a.safetensors"});  // no .tmp left
  EXPECT_EQ(runtime::loadSafetensors(path).tensors.at(0).second.numel(), 1000);
}

TEST(DiskFull, AReadOnlyDirectoryIsOneLine) {
  SmallDisk disk("64k");
  DTRAIN_NEED_MOUNT(disk);
  const std::string path = disk.dir() + "/a.safetensors";
  runtime::saveSafetensors(path, {{"w", filled(100, 1)}});
  const std::string before = slurp(path);
  ASSERT_TRUE(disk.makeReadOnly());
  const std::string err = thrown([&] { runtime::saveSafetensors(path, {{"w", filled(100, 2)}}); });
  EXPECT_EQ(err, "saving " + path + ": cannot create " + path + ".tmp (Read-only file system)");
  EXPECT_EQ(slurp(path), before);
}

const std::string kDiskRun = std::string(DTRAIN_BIN) +
    " train --model mlp --dataset synthetic --synthetic-size 512 --epochs 1000 --lr 0.05 --seed 5 "
    "--progress off --batch-size 16 ";

// Two mlp checkpoints (2.2 MB each) fit in 5 MB, the third fills the disk while
// it is written: exit 1, one line; the two before stay whole and a run resumes.
TEST(DiskFull, PeriodicCheckpointsOnADiskThatFills) {
  SmallDisk disk("5m");
  DTRAIN_NEED_MOUNT(disk);
  const std::string ckpt = disk.dir();
  auto r = runShell(kDiskRun + "--workers 2 --max-steps 10 --checkpoint-every 2 --keep-checkpoints 5 "
                    "--checkpoint-dir " + ckpt);
  const std::string six = ckpt + "/step-000000006.safetensors";
  EXPECT_EQ(r.code, 1) << r.err;
  // The info lines of the two checkpoints written, then the error's one line.
  EXPECT_NE(r.err.find("checkpoint " + ckpt + "/step-000000004.safetensors\ndtrain: error: saving " + six +
                       ": write to " + six + ".tmp failed (No space left on device)\n"),
            std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 3) << r.err;
  EXPECT_EQ(disk.files(), (std::vector<std::string>{"latest.safetensors", "step-000000002.safetensors",
                                                    "step-000000004.safetensors"}));
  fs::remove(ckpt + "/step-000000002.safetensors");  // room for the resumed run's last step
  auto resumed = runShell(kDiskRun + "--max-steps 5 --resume auto --checkpoint-dir " + ckpt);
  EXPECT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("step-000000004.safetensors at step 4"), std::string::npos) << resumed.err;
}

// A disk that fills during --save (the seam: writes fail after 1000 bytes): the
// old file at that path stays, nothing new is left beside it.
TEST(DiskFull, SaveFailingHalfwayKeepsThePreviousFile) {
  const std::string dir = tempDir(), path = dir + "/s.safetensors";
  ASSERT_EQ(runShell(kDiskRun + "--max-steps 2 --save " + path).code, 0);
  const std::string before = slurp(path);
  auto r = runShell("DTRAIN_TEST_WRITE_LIMIT=1000 " + kDiskRun + "--max-steps 3 --save " + path);
  expectError(r, 1, "saving " + path + ": write to " + path + ".tmp failed (No space left on device)");
  EXPECT_EQ(slurp(path), before);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  fs::remove_all(dir);
}

TEST(DiskFull, MetricsAndTimelineOnAFullDiskAreOneLine) {
  SmallDisk disk("64k");
  DTRAIN_NEED_MOUNT(disk);
  const std::string metrics = disk.dir() + "/m.jsonl";
  auto m = runShell(kDiskRun + "--max-steps 2000 --log-every 1 --metrics " + metrics);
  expectError(m, 1, "dtrain: error: writing metrics file " + metrics + " failed: No space left on device");
  fs::remove(metrics);
  const std::string timeline = disk.dir() + "/t.json";
  auto t = runShell(kDiskRun + "--workers 2 --max-steps 400 --timeline " + timeline);
  expectError(t, 1, "dtrain: error: writing timeline " + timeline + ": write to " + timeline +
                        ".tmp failed (No space left on device)");
  EXPECT_EQ(disk.files(), std::vector<std::string>{});
}

}  // namespace
}  // namespace dtrain::test
