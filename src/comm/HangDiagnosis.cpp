#include "comm/HangDiagnosis.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "core/Error.h"

namespace dtrain::comm {

using dtrain::detail::concat;

namespace {

bool pointToPoint(FlightKind k) { return k >= FlightKind::Send; }

std::string seconds(float s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(s));
  return buf;
}

std::string ranksWord(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rankRanges(ranks);
}

std::string waitWord(const std::vector<int>& ranks) { return ranks.size() == 1 ? " waits" : " wait"; }

// The call's identity across ranks (each rank numbers a communicator's calls alike).
using CallKey = std::tuple<uint32_t, uint64_t, int>;
CallKey keyOf(const FlightCall& c) { return {c.commId, c.seq, static_cast<int>(c.kind)}; }

// What a rank that is not in the hung call last did. A silent one (mpi: no
// heartbeat for longer than --comm-timeout) is described as of its last beat.
std::string lastActivity(const FlightState& s) {
  const std::string prefix =
      s.silent ? concat("no heartbeat for ", seconds(s.silentS), " s: stopped, dead or cut off; at its last one ")
               : std::string();
  if (s.hasOpen)
    return prefix + concat(s.silent ? "it waited in " : "waits in ", describeCall(s.oldestOpen), " since ",
                           seconds(s.oldestOpen.ageS), " s");
  // A call issued in the phase it is in says more than the phase; one issued
  // before (an async allreduce of backward ending in the next phase) less.
  if (s.hasLatest && s.latest.postedAgeS < s.phaseAgeS)
    return prefix + concat(s.silent ? "it had ended " : "last: ", describeCall(s.latest), ", ",
                           s.silent ? "" : "ended ", seconds(s.latest.ageS), " s ago");
  std::string what = s.step >= 0 ? concat(s.phase, " of step ", s.step) : std::string(s.phase);
  return prefix + concat(s.silent ? "it was in " : "last: ", what, s.silent ? ", since " : ", ",
                         seconds(s.phaseAgeS), " s ago");
}

std::string whoIs(const FlightState& s) {
  return s.host[0] ? concat("rank ", s.rank, " (host ", s.host, ")") : concat("rank ", s.rank);
}

}  // namespace

std::string rankRanges(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += (s.empty() ? "" : ", ") + std::to_string(ranks[i]);
    if (j > i) s += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

std::string describeCall(const FlightCall& c) {
  std::string s = pointToPoint(c.kind)
                      ? concat(flightKindName(c.kind), c.kind == FlightKind::Send || c.kind == FlightKind::Isend ? " to" : " from",
                               " rank ", c.peer, " (tag ", c.seq, ")")
                      : concat(flightKindName(c.kind), " #", c.seq);
  if (c.step >= 0) s += concat(" of step ", c.step);
  if (c.commId != 1) s += concat(" on a group of ", c.commSize, " ranks");
  return s;
}

std::string diagnoseHang(const std::vector<FlightState>& ranks) {
  // The call the most ranks wait in (the lowest call number on a tie: the oldest).
  std::map<CallKey, std::vector<int>> waiting;
  for (const FlightState& s : ranks)
    if (s.known && s.hasOpen) waiting[keyOf(s.oldestOpen)].push_back(s.rank);
  if (waiting.empty()) return {};
  auto hung = std::max_element(waiting.begin(), waiting.end(), [](const auto& a, const auto& b) {
    return a.second.size() < b.second.size();  // first maximum: the smallest key
  });
  const FlightCall* call = nullptr;
  for (const FlightState& s : ranks)
    if (s.known && s.hasOpen && keyOf(s.oldestOpen) == hung->first) call = &s.oldestOpen;
  const auto [commId, seq, kind] = hung->first;
  std::vector<std::string> culprits, others;
  std::vector<int> unknown;
  for (const FlightState& s : ranks) {
    if (!s.known) {
      // Every rank is a member of the world; of a sub-communicator, unknown.
      if (commId != 1) unknown.push_back(static_cast<int>(&s - ranks.data()));
      else
        culprits.push_back(concat("rank ", &s - ranks.data(), " never entered ", describeCall(*call), " (",
                                  s.silent ? concat("no heartbeat for ", seconds(s.silentS),
                                                    " s: stopped, dead or cut off; ")
                                           : std::string(),
                                  "none of its calls is known)"));
      continue;
    }
    if (!s.member(commId) || (s.hasOpen && keyOf(s.oldestOpen) == hung->first)) continue;
    const bool entered = s.enteredCall(commId, seq);
    if (entered) {
      others.push_back(concat("rank ", s.rank, " is past it (", lastActivity(s), ")"));
      continue;
    }
    culprits.push_back(concat(whoIs(s), " never entered ", describeCall(*call), " (", lastActivity(s), ")"));
  }
  std::string out;
  for (size_t i = 0; i < culprits.size(); ++i) out += (i ? "; " : "") + culprits[i];
  if (culprits.empty() && call->kind != FlightKind::Split && pointToPoint(call->kind))
    out = concat(ranksWord(hung->second), waitWord(hung->second), " in ", describeCall(*call), "; rank ", call->peer,
                 " never matched it");
  else if (culprits.empty())
    out = concat("every rank known entered ", describeCall(*call), "; ", ranksWord(hung->second),
                 waitWord(hung->second), " in it");
  else
    out += concat("; ", ranksWord(hung->second), waitWord(hung->second), " in it");
  if (!unknown.empty()) others.push_back(concat(ranksWord(unknown), ": nothing heard (no heartbeat carried its calls)"));
  for (size_t i = 0; i < others.size(); ++i) out += (i ? "; " : "\n  also: ") + others[i];
  return out;
}

}  // namespace dtrain::comm
