#!/usr/bin/env bash
# slow.sh SCRIPT ARGS...: SCRIPT when DTRAIN_SLOW_TESTS=1, else "skipped" (77 for
# CTest): the tests that take minutes stay out of the default run.
if [ "${DTRAIN_SLOW_TESTS:-0}" != 1 ]; then
  echo "skipped: takes minutes; run with DTRAIN_SLOW_TESTS=1" >&2
  exit 77
fi
exec bash "$@"
