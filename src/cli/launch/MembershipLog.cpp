#include "cli/launch/MembershipLog.h"

#include <cmath>

#include "core/Error.h"
#include "core/Timer.h"

namespace dtrain::cli::launch {

MembershipLog::MembershipLog(const std::filesystem::path& dir) {
  out_.open(dir / "launch.jsonl", std::ios::app);
  DTRAIN_CHECK_USAGE(out_.good(), "launch: cannot write ", (dir / "launch.jsonl").string());
}

void MembershipLog::record(nlohmann::json record) {
  record["time"] = epochSeconds();
  out_ << record.dump() << std::endl;
}

void MembershipLog::progressed(int64_t step, int64_t resumeStep) {
  if (!failedAt_ || step <= resumeStep) return;
  tally_.secondsToRecover += std::chrono::duration<double>(std::chrono::steady_clock::now() - *failedAt_).count();
  failedAt_.reset();
}

nlohmann::json MembershipLog::finalResult(const std::string& resultLine) const {
  nlohmann::json out = nlohmann::json::parse(resultLine, nullptr, false);
  if (out.is_discarded()) out = nlohmann::json::object();
  out["restarts"] = tally_.restarts;
  out["hosts_lost"] = tally_.hostsLost;
  out["steps_redone"] = tally_.stepsRedone;
  out["hosts_rejoined"] = tally_.hostsRejoined;
  out["seconds_to_recover"] = std::round(tally_.secondsToRecover * 1000.0) / 1000.0;
  return out;
}

}  // namespace dtrain::cli::launch
