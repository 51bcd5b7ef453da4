#pragma once
// From the options a user gave to the configuration a run executes: the
// model's defaults for what was not given, the strategy its options imply, the
// workers of a mesh; then every given option the run would not use is refused
// (one line naming it and where it was given), and the values are validated.
#include <string>
#include <utility>
#include <vector>

#include "api/Option.h"
#include "api/Schema.h"

namespace dtrain::api {

// workersKnown false: under mpi before MPI is up (the rank validates again).
void prepare(RunConfig& rc, const Sources& src, bool workersKnown);

// "" when the option means something in this prepared configuration (its
// strategy reads it, and its own condition holds), else why not.
std::string unusedBecause(const Option& o, const RunConfig& rc);

// The options a prepared configuration uses and that have a value, with it,
// in schema order (group by group): what --print-config, the result line's
// fields and its "config" show.
std::vector<std::pair<const Option*, Value>> usedValues(const RunConfig& rc);

}  // namespace dtrain::api
