#pragma once
// Sandblaster with parameter-server shards (--sandblaster-servers S): what the
// coordinator, the shards and the workers say to each other.
//
// Ranks: 0 the coordinator, 1..S the shards, S+1..S+W the workers. Shard i
// holds a contiguous slice of the flat parameter vector (the model's
// parameters in order) and the same slice of the L-BFGS history, of the step's
// gradient, of the direction and of each evaluation's unit gradients. The
// coordinator sends commands (op + up to three scalars) and gets scalars back
// (partial dot products, maxima, sums), which it adds in shard order: no
// vector passes through it while training (only at setup, and when the
// trainer evaluates or checkpoints, where it gathers the parameters).
// Workers pull the parameters of an evaluation from every shard and push
// their unit's gradient slices to every shard; the coordinator hears only the
// unit's loss.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <utility>

#include "core/Error.h"

namespace dtrain::parallel::sandblaster::shard {

// Tags (user channel), apart from the unsharded protocol's 811-816.
constexpr int kCommandTag = 821, kReplyTag = 822, kVectorTag = 823;      // coordinator <-> shard
constexpr int kPullTag = 824, kParamsSliceTag = 825;                     // worker <-> shard
constexpr int kGradHeadTag = 826, kGradSliceTag = 827;                   // worker -> shard

// The coordinator's commands; each is answered by one Reply.
enum class Op : int64_t {
  kInit,        // a = history pairs that follow, b = history capacity; then the
                // parameter slice and the pairs' s and y slices (kVectorTag)
  kPairDots,    // a = k: partial y_k.s_k and y_k.y_k (after a resume)
  kEvalBegin,   // a = evaluation, b = units, c = samples: expect its unit gradients
  kEvalEnd,     // a = evaluation: answer once every unit is in, summed in unit order
  kStepBegin,   // g = the evaluation's gradient, x0 = x: partial max|g| and sum|g|
  kBackInit,    // q = -g: partial s_{m-1}.q (m pairs)
  kBack,        // a = k, b = al_k: q -= al_k y_k; partial s_{k-1}.q
  kScale,       // a = hDiag: q *= hDiag; partial y_0.q
  kForward,     // a = k, b = al_k - be_k: q += (al_k - be_k) s_k; partial y_{k+1}.q
  kFinishDir,   // d = q (as floats): partial g.d and max|d|
  kSteepest,    // d = -g, the history cleared: partial g.g and max|d|
  kSetX,        // a = t: x = x0 + t d
  kPair,        // a = t: s = t d, y = g_eval - g kept aside: partial y.s and y.y
  kKeepPair,    // the pair kept aside joins the history (the oldest leaves when full)
  kClear,       // the history is dropped
  kGatherX,     // the parameter slice follows the reply (kVectorTag)
  kGatherHistory,  // every pair's s slice, then its y slice, follow the reply
  kDone,        // the run is over
};

struct Command {
  double op = 0, a = 0, b = 0, c = 0;
};
// Up to two partial scalars (their meaning is the command's); `pairs` is the
// shard's history length, so the coordinator can check that shards agree.
struct Reply {
  double v0 = 0, v1 = 0, pairs = 0;
};

// Bounds on the numbers a message carries (they come from a peer and become
// counts, indices and sizes): far above any run, small enough that what they
// size fits in memory. Doubles hold every whole number up to 2^53 exactly.
inline constexpr int64_t kMaxCount = int64_t{1} << 53;    // evaluations, history pairs and capacity
inline constexpr int64_t kMaxUnits = int64_t{1} << 20;    // work units of one evaluation
inline constexpr int64_t kMaxSamples = int64_t{1} << 36;  // samples of one evaluation (x units: no overflow)

// A whole number a peer sent as a double (commands and gradient heads carry
// doubles), checked before it becomes an index or a count: a NaN, a fraction
// or a value outside [lo, hi] is one line naming it (a cast would be undefined
// behaviour). tests/fuzz/targets/FuzzSandblaster.cpp feeds such messages.
inline int64_t wholeNumber(double v, int64_t lo, int64_t hi, std::string_view what) {
  if (!(std::isfinite(v) && v == std::floor(v) && v >= static_cast<double>(lo) &&
        v <= static_cast<double>(hi)))
    throw ::dtrain::Error(::dtrain::detail::concat("sandblaster: malformed message: ", what, " is ", v,
                                                   ", not a whole number in [", lo, ", ", hi, "]"));
  return static_cast<int64_t>(v);
}

// A command's operation.
inline Op opOf(const Command& c) {
  return static_cast<Op>(wholeNumber(c.op, 0, static_cast<int64_t>(Op::kDone), "the command's op"));
}

// A shard's history length from its reply, as the coordinator reads it.
inline int64_t replyPairs(const Reply& r, int shard) {
  return wholeNumber(r.pairs, 0, kMaxCount, ::dtrain::detail::concat("shard ", shard, "'s history length"));
}

// What a worker sends a shard ahead of its unit's gradient slice: the
// evaluation and unit as doubles; evaluation -1 says goodbye.
struct GradHead {
  int64_t evaluation = 0, unit = 0;
  bool goodbye() const { return evaluation < 0; }
};
inline GradHead decodeGradHead(const double head[2]) {
  GradHead h;
  h.evaluation = wholeNumber(head[0], -1, kMaxCount, "a gradient head's evaluation");
  if (!h.goodbye()) h.unit = wholeNumber(head[1], 0, kMaxUnits - 1, "a gradient head's unit");
  return h;
}

// Shard i's slice of n parameters among s shards: [lo, hi).
inline std::pair<int64_t, int64_t> sliceOf(int64_t n, int shards, int i) {
  return {n * i / shards, n * (i + 1) / shards};
}

}  // namespace dtrain::parallel::sandblaster::shard
