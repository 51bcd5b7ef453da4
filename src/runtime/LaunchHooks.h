#pragma once
// What `dtrain launch` (cli/LaunchCommand) needs from the ranks it starts:
//  - DTRAIN_LAUNCH_PROGRESS=FILE: the reporting rank writes the global step it
//    finished into FILE after every step (one short overwrite), so the launcher
//    knows how far a failed attempt got (steps redone) and when a restarted one
//    trains again (seconds to recover) without parsing logs.
//  - DTRAIN_LAUNCH_STOP=FILE: once FILE exists the reporting rank asks for a
//    stop as SIGTERM would (every rank stops after the same step and writes a
//    checkpoint): the launcher stops a job this way to take a host back.
//  - Test hook DTRAIN_TEST_DIE_AT_STEP=k with DTRAIN_TEST_DIE_RANK=r: rank r
//    _exit(9)s after step k, as a host whose processes were killed.
//  - Test hook DTRAIN_TEST_STOP_AT_STEP=r:k: rank r's process stops itself
//    (SIGSTOP) after step k, as a host that froze (a hang's diagnosis names it).
#include <cstdint>

namespace dtrain::runtime {

// After each finished step; cheap (nothing) when neither variable is set.
void afterStepForLaunch(int64_t step, int rank, bool reporter);

}  // namespace dtrain::runtime
