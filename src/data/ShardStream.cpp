#include "data/ShardStream.h"

#include <algorithm>
#include <numeric>

#include "data/ImageSample.h"

namespace dtrain::data {
namespace {

uint64_t epochSeed(uint64_t seed, int64_t epoch, uint64_t salt) {
  // As DistributedSampler: the multiplication keeps (seed, epoch) and (seed + 1, epoch - 1) apart.
  return seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(epoch + 1)) ^
         (0xD1B54A32D192ED03ULL * salt);
}

}  // namespace

std::vector<int64_t> streamShards(int64_t shardCount, const ShardStreamConfig& c, int64_t epoch,
                                  int thread) {
  std::vector<int64_t> order(static_cast<size_t>(shardCount));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (c.shuffle) {
    Rng rng(epochSeed(c.seed, epoch, 0));
    for (int64_t i = shardCount - 1; i > 0; --i)
      std::swap(order[i], order[rng.below(static_cast<uint64_t>(i + 1))]);
  }
  std::vector<int64_t> mine;
  int64_t nth = 0;  // among the rank's shards
  for (int64_t p = c.rank; p < shardCount; p += c.worldSize, ++nth)
    if (nth % c.threads == thread) mine.push_back(order[static_cast<size_t>(p)]);
  return mine;
}

ShardStream::ShardStream(std::shared_ptr<const ShardSet> set, ShardStreamConfig config,
                         int64_t epoch)
    : set_(std::move(set)),
      config_(config),
      rng_(epochSeed(config.seed, epoch, 1 + static_cast<uint64_t>(config.rank))) {
  DTRAIN_CHECK(config_.threads >= 1 && config_.worldSize >= 1 && config_.rank >= 0 &&
                   config_.rank < config_.worldSize,
               "shard stream: bad configuration");
  decoding_.options = set_->imageOptions();
  decoding_.options.resizedCrop = config_.resizedCrop;
  decoding_.options.flip = config_.flip;
  decoding_.seed = config_.seed;
  decoding_.epoch = epoch;
  const auto shards = static_cast<int64_t>(set_->files().size());
  for (int t = 0; t < config_.threads; ++t) sources_.push_back(std::make_unique<Source>());
  active_ = sources_.size();
  for (int t = 0; t < config_.threads; ++t)
    sources_[t]->thread = std::thread(&ShardStream::readShards, this, static_cast<size_t>(t),
                                      streamShards(shards, config_, epoch, t));
}

ShardStream::~ShardStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  space_.notify_all();
  for (auto& s : sources_)
    if (s->thread.joinable()) s->thread.join();
}

// Hands a chunk of samples over under one lock: a lock and a wake-up per sample cost the
// compute threads more than the samples' reading.
bool ShardStream::push(size_t source, std::vector<Sample>& chunk) {
  std::unique_lock<std::mutex> lock(mu_);
  Source& src = *sources_[source];
  space_.wait(lock, [&] {
    return stop_ || static_cast<int64_t>(src.queue.size()) < config_.queueSamples;
  });
  if (stop_) return false;
  for (Sample& s : chunk) src.queue.push_back(std::move(s));
  chunk.clear();
  if (consumerWaiting_) ready_.notify_all();
  return true;
}

void ShardStream::readShards(size_t source, std::vector<int64_t> shards) {
  const auto chunkSize = static_cast<size_t>(std::max<int64_t>(1, config_.queueSamples / 4));
  std::vector<Sample> chunk;
  try {
    for (int64_t index : shards) {
      const ShardFile& file = set_->files()[static_cast<size_t>(index)];
      auto samples = set_->open(static_cast<size_t>(index), decoding_, config_.keysOnly);
      for (;;) {
        Sample s;
        try {
          if (!samples->next(s)) break;
          if (config_.exclude && config_.exclude->count(s.key)) continue;
          s.shard = index;
          set_->check(s, file.images.empty() ? file.path : s.key);
        } catch (const UndecodableImage&) {
          if (!set_->skipBad()) throw;
          set_->countUndecodable();  // the scan read only its header
          continue;
        } catch (const BadData&) {
          if (!set_->skipBad()) throw;
          continue;  // counted by the scan
        }
        chunk.push_back(std::move(s));
        if (chunk.size() >= chunkSize && !push(source, chunk)) return;
      }
    }
    if (!chunk.empty() && !push(source, chunk)) return;
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    sources_[source]->error = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mu_);
  sources_[source]->done = true;
  ready_.notify_all();
}

bool ShardStream::take(Sample& out) {
  while (active_ > 0) {
    Source& src = *sources_[cursor_];
    if (src.drained) {
      cursor_ = (cursor_ + 1) % sources_.size();
      continue;
    }
    if (src.taken.empty()) {  // take the whole shared queue at once
      std::unique_lock<std::mutex> lock(mu_);
      if (src.queue.empty() && !src.done) {
        consumerWaiting_ = true;
        ready_.wait(lock, [&] { return !src.queue.empty() || src.done; });
        consumerWaiting_ = false;
      }
      src.taken.swap(src.queue);
      if (!src.taken.empty()) space_.notify_all();
      if (src.taken.empty() && src.error) std::rethrow_exception(src.error);
    }
    if (!src.taken.empty()) {
      out = std::move(src.taken.front());
      src.taken.pop_front();
      cursor_ = (cursor_ + 1) % sources_.size();
      return true;
    }
    src.drained = true;  // finished and empty: out of the rotation
    --active_;
    cursor_ = (cursor_ + 1) % sources_.size();
  }
  return false;
}

bool ShardStream::next(Sample& out) {
  if (config_.shuffleBuffer <= 1) return take(out);
  if (!bufferFilled_) {
    buffer_.reserve(static_cast<size_t>(config_.shuffleBuffer));
    for (Sample s; static_cast<int64_t>(buffer_.size()) < config_.shuffleBuffer && take(s);)
      buffer_.push_back(std::move(s));
    bufferFilled_ = true;
  }
  if (buffer_.empty()) return false;
  const auto j = static_cast<size_t>(rng_.below(buffer_.size()));
  out = std::move(buffer_[j]);
  Sample refill;
  if (take(refill)) {
    buffer_[j] = std::move(refill);
  } else {
    buffer_[j] = std::move(buffer_.back());
    buffer_.pop_back();
  }
  return true;
}

void ShardStream::skip(int64_t count) {
  Sample s;
  for (int64_t i = 0; i < count && next(s); ++i) {
  }
}

EpochTaken replayEpoch(std::shared_ptr<const ShardSet> set, const ShardStreamConfig& base,
                       int64_t epoch, const std::vector<StreamSegment>& segments) {
  EpochTaken taken{std::make_shared<std::unordered_set<std::string>>(),
                   std::vector<int64_t>(set->files().size(), 0)};
  for (const StreamSegment& seg : segments) {
    // The segment's streams excluded what the segments before it took, not its own.
    auto before = std::make_shared<const std::unordered_set<std::string>>(*taken.keys);
    for (int rank = 0; rank < seg.worldSize; ++rank) {
      ShardStreamConfig c = base;
      c.rank = rank;
      c.worldSize = seg.worldSize;
      c.threads = seg.threads;
      c.shuffleBuffer = seg.shuffleBuffer;
      c.exclude = before->empty() ? nullptr : before;
      c.keysOnly = true;
      ShardStream stream(set, c, epoch);
      Sample s;
      for (int64_t i = 0; i < seg.samplesPerRank && stream.next(s); ++i) {
        taken.keys->insert(s.key);
        ++taken.perShard[static_cast<size_t>(s.shard)];
      }
    }
  }
  return taken;
}

int64_t samplesLeft(const ShardSet& set, const ShardStreamConfig& config, int64_t epoch,
                    const EpochTaken& taken) {
  int64_t left = 0;
  const auto shards = static_cast<int64_t>(set.files().size());
  for (int t = 0; t < config.threads; ++t)
    for (int64_t index : streamShards(shards, config, epoch, t))
      left += set.files()[static_cast<size_t>(index)].samples - taken.perShard[static_cast<size_t>(index)];
  return left;
}

}  // namespace dtrain::data
