# Sourced by the install tests (tests/install/*.sh).

# run_as_ordinary_user WORK COMMAND...: COMMAND as the unprivileged user
# dtrainuser (created once, owner of WORK) when this is root, else as this user;
# either way with a clean environment that keeps only what a build may be given
# (compiler launchers, ccache, parallelism), as a user's login would.
run_as_ordinary_user() {
  local work=$1; shift
  local keep=(PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 TMPDIR="$work/tmp") v
  for v in CMAKE_CXX_COMPILER_LAUNCHER CMAKE_C_COMPILER_LAUNCHER CMAKE_BUILD_PARALLEL_LEVEL CCACHE_DIR \
           CCACHE_BASEDIR CCACHE_MAXSIZE OMP_NUM_THREADS DTRAIN_CMAKE_ARGS; do
    if [ -n "${!v:-}" ]; then keep+=("$v=${!v}"); fi
  done
  mkdir -p "$work/tmp"
  if [ "$(id -u)" -ne 0 ]; then
    env -i HOME="$HOME" "${keep[@]}" "$@"
    return
  fi
  local user=dtrainuser
  id -u "$user" >/dev/null 2>&1 || useradd -m "$user"
  chown -R "$user:" "$work"
  runuser -u "$user" -- env -i HOME="$(getent passwd "$user" | cut -d: -f6)" "${keep[@]}" "$@"
}

# fresh_copy SRC DEST: the working tree as a fresh clone has it (tracked files and
# untracked ones that git does not ignore: no build trees).
fresh_copy() {
  mkdir -p "$2"
  if git -C "$1" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$1" ls-files -z --cached --others --exclude-standard |
      (cd "$1" && tar --null -T - -cf -) | tar -xf - -C "$2"
  else
    tar -C "$1" --exclude='./build*' -cf - . | tar -xf - -C "$2"
  fi
}

# A ccache this user may read but not write (root's, when run_as_ordinary_user
# switched users): its hits, without new entries.
use_ccache_read_only() {
  if [ -n "${CCACHE_DIR:-}" ] && [ ! -w "$CCACHE_DIR" ]; then
    export CCACHE_READONLY=1 CCACHE_TEMPDIR="$TMPDIR/ccache"
    mkdir -p "$CCACHE_TEMPDIR"
  fi
}
