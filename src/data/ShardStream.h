#pragma once
// One rank's samples of one epoch of a ShardSet, streamed:
//
//   order       the epoch's shard order: a permutation of the S shards seeded by (seed,
//               epoch) (file order without shuffle), the same on every rank;
//   rank r      reads the shards at positions r, r + W, r + 2W, ... of the order, so the W
//               ranks together read every shard once, each sample once;
//   thread t    of the rank's T loader threads reads every T-th of the rank's shards,
//               front to back, into a bounded queue of its own;
//   merge       the consumer takes one sample from each thread's queue in turn (round
//               robin), so the order does not depend on which thread runs first;
//   shuffle     a buffer of N samples (--shuffle-buffer): each sample taken is a random one
//               of the buffer (an Rng seeded by (seed, epoch, rank)), replaced by the next.
//
// So a rank's sample sequence is a pure function of (shard set, seed, epoch, rank, world
// size, T, N): resuming mid-epoch at the same world size skips the samples already seen.
// Memory is the shuffle buffer plus T queues (each up to about twice its size: what the
// consumer took and what the thread refilled), whatever the size of the data.
//
// A bad sample (data/ShardReader.h) is rethrown by the next() that would have returned it,
// or skipped when the set was scanned with skipBad (the scan counted it).
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "core/Rng.h"
#include "data/ShardSet.h"

namespace dtrain::data {

struct ShardStreamConfig {
  int rank = 0;
  int worldSize = 1;
  int threads = 1;             // loader threads (T)
  int64_t shuffleBuffer = 0;   // N; 0 or 1: no buffer
  int64_t queueSamples = 64;   // each thread's queue
  uint64_t seed = 0;
  bool shuffle = true;         // shard order and buffer
  // Training augmentation of image samples at decoding (ImageOptions::resizedCrop, flip);
  // the rest of the image transform is the set's.
  bool resizedCrop = false, flip = false;
  // Samples (by key) read past: those an interrupted epoch already gave out (a resume at
  // another world size, runtime/ShardTask.cpp). Null: none.
  std::shared_ptr<const std::unordered_set<std::string>> exclude;
  // Keys, labels and shards only, nothing decoded (replaying an epoch's order).
  bool keysOnly = false;
};

// The shard indices loader thread `thread` of `config.rank` reads in `epoch`, in order.
std::vector<int64_t> streamShards(int64_t shardCount, const ShardStreamConfig& config,
                                  int64_t epoch, int thread);

// Resuming an epoch at another world size: the epoch so far as segments, each a run of
// `worldSize` ranks (with its loader threads and shuffle buffer) whose every rank took
// `samplesPerRank` samples, the keys taken in the segments before it excluded.
struct StreamSegment {
  int worldSize = 1;
  int threads = 1;
  int64_t shuffleBuffer = 0;
  int64_t samplesPerRank = 0;
};

struct EpochTaken {
  std::shared_ptr<std::unordered_set<std::string>> keys;  // every sample taken
  std::vector<int64_t> perShard;                          // how many of each shard's
};

// Replays the segments' streams (keys only, nothing decoded). `base` gives the seed and
// shuffle; its rank, world size, threads and buffer are the segments'.
EpochTaken replayEpoch(std::shared_ptr<const ShardSet> set, const ShardStreamConfig& base,
                       int64_t epoch, const std::vector<StreamSegment>& segments);

// The samples rank `config.rank` can still be given in `epoch` when `taken` are excluded.
int64_t samplesLeft(const ShardSet& set, const ShardStreamConfig& config, int64_t epoch,
                    const EpochTaken& taken);

class ShardStream {
 public:
  ShardStream(std::shared_ptr<const ShardSet> set, ShardStreamConfig config, int64_t epoch);
  ~ShardStream();
  ShardStream(const ShardStream&) = delete;
  ShardStream& operator=(const ShardStream&) = delete;

  // The next sample, or false when the rank's shards are exhausted.
  bool next(Sample& out);
  // Skips `count` samples (resume mid-epoch).
  void skip(int64_t count);

 private:
  struct Source {
    std::deque<Sample> queue;  // shared with the thread (under mu_)
    std::deque<Sample> taken;  // moved out of queue by the consumer (consumer only)
    bool done = false;     // the thread finished (its queue may still hold samples)
    bool drained = false;  // done and empty (consumer only)
    std::exception_ptr error;
    std::thread thread;
  };
  void readShards(size_t source, std::vector<int64_t> shards);
  bool push(size_t source, std::vector<Sample>& chunk);
  bool take(Sample& out);

  std::shared_ptr<const ShardSet> set_;
  ShardStreamConfig config_;
  ImageDecoding decoding_;
  Rng rng_;
  std::vector<Sample> buffer_;
  bool bufferFilled_ = false;

  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::vector<std::unique_ptr<Source>> sources_;
  size_t cursor_ = 0;   // the source next() takes from (round robin)
  size_t active_ = 0;   // sources not yet drained
  bool consumerWaiting_ = false;
  bool stop_ = false;
};

}  // namespace dtrain::data
