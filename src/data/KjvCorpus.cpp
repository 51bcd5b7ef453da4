#include "data/KjvCorpus.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/Error.h"
#include "core/Log.h"
#include "data/Md5.h"

extern char** environ;

namespace dtrain::data {
namespace {

namespace fs = std::filesystem;

// The exact arguments of the peer's `bible -l80 "Gen1:1-Rev22:21"` (no shell involved).
constexpr const char* kKjvArgs[] = {"-l80", "Gen1:1-Rev22:21"};

std::string command(const std::string& program) {
  return program + " " + kKjvArgs[0] + " \"" + kKjvArgs[1] + "\"";
}

bool nonEmpty(const char* s) { return s != nullptr && *s != '\0'; }

// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Runs `program` with the kjv arguments and returns its standard output. It runs in the
// cache directory: `bible` looks for its data in ./ before /usr/lib, and a stray
// bible.data in the caller's directory must not change the corpus.
std::vector<uint8_t> runBible(const std::string& program, const std::string& dir) {
  int fds[2];
  DTRAIN_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "kjv corpus: pipe failed (", std::strerror(errno),
               ")");
  Fd readEnd{fds[0]}, writeEnd{fds[1]};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, writeEnd.fd, 1);
  posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());
  std::vector<std::string> args = {program, kKjvArgs[0], kKjvArgs[1]};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  DTRAIN_CHECK_USAGE(rc != ENOENT, "the default text corpus kjv needs the `", program,
                     "` program of Debian's bible-kjv package, which is not installed: "
                     "apt-get install bible-kjv (scripts/setup.sh does), or train on a file "
                     "with --text-file PATH");
  DTRAIN_CHECK(rc == 0, "kjv corpus: cannot run `", command(program), "` (", std::strerror(rc),
               ")");
  log::info("kjv corpus: generating it with `", command(program), "` (once; then cached in ", dir,
            ")");
  ::close(writeEnd.fd);  // so that read() sees EOF when the child exits
  writeEnd.fd = -1;

  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(kKjvBytes));
  uint8_t chunk[1 << 16];
  int readErrno = 0;
  for (;;) {
    const ssize_t got = ::read(readEnd.fd, chunk, sizeof(chunk));
    if (got > 0) {
      out.insert(out.end(), chunk, chunk + got);
    } else if (got == 0) {
      break;
    } else if (errno != EINTR) {
      readErrno = errno;
      break;
    }
  }
  readEnd = {};  // closes: a child still writing gets SIGPIPE instead of blocking
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  DTRAIN_CHECK(readErrno == 0, "kjv corpus: reading the output of `", command(program),
               "` failed (", std::strerror(readErrno), ")");
  DTRAIN_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "kjv corpus: `", command(program),
               "` failed (",
               WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                 : "killed by signal " + std::to_string(WTERMSIG(status)),
               ")");
  return out;
}

// Writes `bytes` to `path` through a temporary file in the same directory and a rename,
// so no reader ever sees a partial corpus.
void writeAtomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
  const auto fail = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    std::error_code ec;
    fs::remove(tmp, ec);
    throw Error(detail::concat("kjv corpus: cannot ", what, " ", tmp, " (", reason,
                               "); set DTRAIN_CACHE_DIR to a writable directory"));
  };
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) fail("create");
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() &&
                       std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  if (std::fclose(f) != 0 || !written) fail("write");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("rename into place");
}

// The cached corpus when it is there and intact, else nullptr.
std::shared_ptr<const TextCorpus> cached(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) ||
      fs::file_size(path, ec) != static_cast<uintmax_t>(kKjvBytes))
    return nullptr;
  auto corpus = TextCorpus::fromFile(path);
  if (md5Hex(corpus->bytes()) == kKjvMd5) return corpus;
  log::warn("kjv corpus: cached ", path, " has the wrong md5; regenerating it");
  return nullptr;
}

std::shared_ptr<const TextCorpus> ensureKjv(const KjvOptions& options) {
  const std::string dir = options.cacheDir.empty() ? defaultCacheDir() : options.cacheDir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  DTRAIN_CHECK(!ec && fs::is_directory(dir), "kjv corpus: cannot create the cache directory ", dir,
               " (", ec ? ec.message() : "not a directory",
               "); set DTRAIN_CACHE_DIR to a writable directory");
  const std::string path = (fs::path(dir) / kKjvFileName).string();
  if (auto corpus = cached(path)) return corpus;

  std::vector<uint8_t> bytes = runBible(options.program, dir);
  const std::string md5 = md5Hex(bytes);
  DTRAIN_CHECK(static_cast<int64_t>(bytes.size()) == kKjvBytes && md5 == kKjvMd5, "kjv corpus: `",
               command(options.program), "` produced ", bytes.size(), " bytes with md5 ", md5,
               ", expected ", kKjvBytes, " bytes with md5 ", kKjvMd5,
               " (another bible-kjv version?); train on a file with --text-file PATH instead");
  writeAtomically(path, bytes);
  return std::make_shared<const TextCorpus>(std::move(bytes), path);
}

}  // namespace

std::string cacheDirFrom(const char* dtrainCacheDir, const char* xdgCacheHome, const char* home) {
  if (nonEmpty(dtrainCacheDir)) return dtrainCacheDir;
  if (nonEmpty(xdgCacheHome) && xdgCacheHome[0] == '/')
    return (fs::path(xdgCacheHome) / "dtrain").string();
  DTRAIN_CHECK_USAGE(nonEmpty(home),
                     "no cache directory for dtrain: set DTRAIN_CACHE_DIR (or XDG_CACHE_HOME or "
                     "HOME)");
  return (fs::path(home) / ".cache" / "dtrain").string();
}

std::string defaultCacheDir() {
  return cacheDirFrom(std::getenv("DTRAIN_CACHE_DIR"), std::getenv("XDG_CACHE_HOME"),
                      std::getenv("HOME"));
}

std::string materializeKjv(const KjvOptions& options) { return ensureKjv(options)->name(); }

std::shared_ptr<const TextCorpus> loadKjv(const KjvOptions& options) { return ensureKjv(options); }

std::shared_ptr<const TextCorpus> loadTextCorpus(const std::string& textFile,
                                                 const KjvOptions& kjv) {
  return textFile.empty() ? loadKjv(kjv) : TextCorpus::fromFile(textFile);
}

}  // namespace dtrain::data
