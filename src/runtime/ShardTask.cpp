// --dataset shards: classification on WebDataset-style tar shards streamed by each rank
// (data/ShardStream.h): the rank's shards of the epoch through loader threads and a shuffle
// buffer, assembled into batches here; the test shards streamed once per evaluation.
// --dataset imagefolder: the same over an image folder's files (data/ImageFolder.h).
//
// An epoch is as many steps as the rank given the fewest samples can fill
// (ShardSet::minSamplesPerRank), so every rank runs the same steps; the samples past them
// are dropped that epoch, as the sampler drops n mod G. Unlike the sampler, the global
// batch of a step depends on the world size (each rank reads its own shards).
#include <filesystem>
#include <limits>
#include <optional>

#include "autograd/Ops.h"
#include "core/Error.h"
#include "data/Augment.h"
#include "data/ShardList.h"
#include "data/ShardStream.h"
#include "runtime/StreamingData.h"
#include "runtime/Trainer.h"

namespace dtrain::runtime {
namespace {

data::ImageOptions imageOptions(const TrainConfig& c) {
  data::ImageOptions o;
  o.size = c.imageSize;
  if (!c.normalize.empty()) data::parseNormalize(c.normalize, o);
  return o;
}

// --image-size and --normalize say how images become samples: refused for data without any.
void checkImageFlags(const TrainConfig& c, const data::ShardSet& set) {
  if (set.holdsImages()) return;
  DTRAIN_CHECK_USAGE(c.imageSize == 0 && c.normalize.empty(), c.imageSize ? "--image-size" : "--normalize",
                     " applies to images (.jpg/.png); these shards hold .npy arrays");
}

// Where a streamed classification set's samples come from: shard files or an image folder.
struct SampleFiles {
  std::shared_ptr<const data::ShardSet> (*scanTrain)(const TrainConfig&);
  std::shared_ptr<const data::ShardSet> (*scanTest)(const TrainConfig&, const data::ShardSet&);
  bool (*hasTest)(const TrainConfig&);
  const char* missingTest;  // why there is no test evaluation
};

std::shared_ptr<const data::ShardSet> scanTrainShards(const TrainConfig& c) {
  auto set = data::ShardSet::scan(data::expandShardPattern(c.trainData, "--train-data"),
                                  c.skipBadSamples, {}, imageOptions(c));
  checkImageFlags(c, *set);
  return set;
}

bool hasTestShards(const TrainConfig& c) { return !c.testData.empty(); }

std::shared_ptr<const data::ShardSet> scanTestShards(const TrainConfig& c, const data::ShardSet& train) {
  if (!hasTestShards(c)) return nullptr;
  return data::ShardSet::scan(data::expandShardPattern(c.testData, "--test-data"),
                              c.skipBadSamples, train.spec(), imageOptions(c));
}

std::string folderPart(const TrainConfig& c, const char* part) {
  return (std::filesystem::path(c.dataDir) / part).string();
}

std::shared_ptr<const data::ShardSet> scanTrainFolder(const TrainConfig& c) {
  return data::ShardSet::scanFolder(folderPart(c, "train"), c.skipBadSamples, imageOptions(c), c.seed);
}

// ImageNet's layout: the evaluation images in DIR/val.
bool hasValFolder(const TrainConfig& c) { return std::filesystem::is_directory(folderPart(c, "val")); }

std::shared_ptr<const data::ShardSet> scanValFolder(const TrainConfig& c, const data::ShardSet& train) {
  if (!hasValFolder(c)) return nullptr;
  return data::ShardSet::scanFolder(folderPart(c, "val"), c.skipBadSamples, imageOptions(c),
                                    c.seed, &train);
}

// The checkpoint metadata key of dataPosition().
constexpr const char* kPositionKey = "data_position";

const SampleFiles kShardFiles{scanTrainShards, scanTestShards, hasTestShards,
                              "no test set (--test-data not given)"};
const SampleFiles kImageFolder{scanTrainFolder, scanValFolder, hasValFolder,
                               "no test set (no val folder beside train in --data-dir)"};

// Samples into a batch [count, ...shape] (fewer when the stream ends first).
bool fillBatch(data::ShardStream& stream, const data::DatasetSpec& spec, int64_t count,
               data::Batch& b) {
  const int64_t numel = shapeNumel(spec.sampleShape);
  Shape shape{count};
  shape.insert(shape.end(), spec.sampleShape.begin(), spec.sampleShape.end());
  Tensor x = Tensor::empty(shape, DType::F32);
  std::vector<int32_t> labels;
  data::Sample s;
  for (int64_t i = 0; i < count && stream.next(s); ++i) {
    std::copy(s.x.begin(), s.x.end(), x.data<float>() + i * numel);
    labels.push_back(s.label);
  }
  const auto n = static_cast<int64_t>(labels.size());
  if (n == 0) return false;
  Tensor y = Tensor::empty({n}, DType::I32);
  std::copy(labels.begin(), labels.end(), y.data<int32_t>());
  b.x = n == count ? x : x.slice(0, 0, n).contiguous();
  b.y = y;
  return true;
}

class ShardTask final : public Task {
 public:
  ShardTask(const TaskContext& ctx, const TaskData& data, const SampleFiles& files)
      : config_(ctx.config),
        files_(files),
        rank_(ctx.rank),
        world_(ctx.worldSize),
        localBatch_(config_.batchSize * config_.accumulate),
        train_(data.trainShards ? data.trainShards : files.scanTrain(config_)),
        test_(data.testShards ? data.testShards
                              : (ctx.reporter ? files.scanTest(config_, *train_) : nullptr)) {
    steps_ = train_->minSamplesPerRank(world_) / localBatch_;
    DTRAIN_CHECK_USAGE(steps_ >= 1, "--train-data: ", train_->samples(), " samples in ",
                       train_->files().size(), " shards give some of the ", world_,
                       " ranks fewer than one local batch of ", localBatch_,
                       " (the rank with the fewest gets ", train_->minSamplesPerRank(world_), ")");
    augment_ = data::parseAugment(config_.augment);
    augment_.seed = config_.seed;
    if (train_->holdsImages()) {  // resized-crop and flip happen at decoding
      decodeAugment_ = augment_;
      augment_.resizedCrop = augment_.flip = false;
    }
    data::checkAugmentable(augment_, train_->spec().sampleShape);
  }

  std::string describeData() const override {
    return detail::concat(config_.dataset, " (", train_->samples(), " samples of ",
                          shapeStr(train_->spec().sampleShape), ", ", train_->spec().numClasses,
                          " classes, in ", train_->files().size(),
                          train_->files().front().images.empty() ? " shards; " : " groups of files; ",
                          config_.loaderThreads, " loader thread(s) and a shuffle buffer of ",
                          config_.shuffleBuffer, " per rank",
                          train_->badSamples() ? detail::concat("; ", train_->badSamples(),
                                                                " bad samples skipped")
                                               : std::string(),
                          ")");
  }
  int64_t stepsPerEpoch() const override { return steps_; }
  int64_t globalBatch() const override { return localBatch_ * world_; }
  void beginEpoch(int64_t epoch, int64_t step) override {
    stream_.reset();
    epoch_ = epoch;
    // Only the first epoch of a run may begin mid-way (a resume).
    next_ = firstEpoch_ ? step - epoch * steps_ : 0;
    firstEpoch_ = false;
    data::ShardStreamConfig sc = streamConfig(rank_, world_, config_.shuffle);
    if (epoch != resumedEpoch_) {
      segmentStart_ = 0;
      before_.clear();
      stream_.emplace(train_, sc, epoch);
      // Resume mid-epoch at the same world size: the stream is a pure function of its
      // configuration, so skipping what the finished steps took gives exactly the rest.
      stream_->skip(next_ * localBatch_);
      return;
    }
    // At another world size: this size's stream with every sample the interrupted segments
    // gave out excluded (resumeStep replayed them), for the steps left in the epoch.
    segmentStart_ = next_;
    sc.exclude = resumedTaken_;
    stream_.emplace(train_, sc, epoch);
  }
  bool nextBatch(data::Batch& b) override {
    if (next_ >= steps_) return false;
    DTRAIN_CHECK(fillBatch(*stream_, train_->spec(), localBatch_, b) && b.size() == localBatch_,
                 "shards: rank ", rank_, " ran out of samples at step ", next_, " of ", steps_);
    if (augment_.any())
      data::augmentSamples(augment_, train_->spec().sampleShape, b.x.data<float>(), localBatch_,
                           epoch_, next_, rank_ * localBatch_);
    ++next_;
    return true;
  }
  // The epoch, the step in it, and the segments of the epoch so far (resumeStep reads it).
  std::map<std::string, std::string> dataPosition() const override {
    nlohmann::json segments = nlohmann::json::array();
    for (const data::StreamSegment& g : before_)
      segments.push_back({g.worldSize, g.threads, g.shuffleBuffer, g.samplesPerRank});
    segments.push_back({world_, config_.loaderThreads, shuffleBufferUsed(),
                        (next_ - segmentStart_) * localBatch_});
    return {{kPositionKey,
             nlohmann::json{{"epoch", epoch_}, {"step", next_}, {"segments", segments}}.dump()}};
  }
  ResumePoint resumeStep(const TrainState& state) override {
    std::vector<data::StreamSegment> segments;
    int64_t epoch = 0;
    if (auto it = state.metadata.find(kPositionKey); it != state.metadata.end()) {
      const auto j = nlohmann::json::parse(it->second);
      epoch = j.at("epoch").get<int64_t>();
      for (const auto& g : j.at("segments"))
        segments.push_back({g[0].get<int>(), g[1].get<int>(), g[2].get<int64_t>(), g[3].get<int64_t>()});
    } else {  // a checkpoint without it: one segment, when its world size and batch are known
      const int64_t w = state.worldSize;
      if (w <= 0 || w == world_ || state.globalBatch != w * localBatch_) return {state.step, false};
      const int64_t perEpoch = train_->minSamplesPerRank(static_cast<int>(w)) / localBatch_;
      epoch = state.step / perEpoch;
      segments.push_back({static_cast<int>(w), config_.loaderThreads, shuffleBufferUsed(),
                          (state.step % perEpoch) * localBatch_});
    }
    int64_t taken = 0;  // samples over all ranks
    for (const data::StreamSegment& g : segments) taken += g.samplesPerRank * g.worldSize;
    const data::StreamSegment& last = segments.back();
    const bool sameStream = segments.size() == 1 && last.worldSize == world_ &&
                            last.threads == config_.loaderThreads &&
                            last.shuffleBuffer == shuffleBufferUsed();
    if (sameStream) return {epoch * steps_ + std::min(steps_, taken / (localBatch_ * world_)), true};
    resumedEpoch_ = epoch;
    before_ = segments;
    return {epoch * steps_ + steps_ - stepsLeftAfter(segments, epoch), true};
  }
  void endEpoch() override { stream_.reset(); }
  autograd::Variable lossFromOutput(const autograd::Variable& output, const Tensor& y) override {
    return autograd::crossEntropy(output, y);
  }
  nlohmann::json evaluate(nn::Module& model) override {
    if (!files_.hasTest(config_)) return nlohmann::json::object();
    DTRAIN_CHECK(test_, "shards: this rank has no test set to evaluate on");
    data::ShardStream stream(test_, streamConfig(0, 1, false), 0);
    auto [acc, loss] = evaluateBatches(model, [&](data::Batch& b) {
      return fillBatch(stream, test_->spec(), config_.evalBatch, b);
    });
    return {{"test_accuracy", acc}, {"test_loss", loss}};
  }
  std::string describeEvaluation(const nlohmann::json& f) const override {
    if (!f.contains("test_accuracy")) return files_.missingTest;
    return detail::concat("test accuracy ", f.at("test_accuracy").get<double>(), ", test loss ",
                          f.at("test_loss").get<double>());
  }
  nlohmann::json finalFields(double) const override {
    return {{"bad_samples", train_->badSamples() + (test_ ? test_->badSamples() : 0)},
            {"shards", train_->files().size()}};
  }

 private:
  // Replays the epoch's interrupted segments (keeping what they gave out for beginEpoch) and
  // returns the steps every rank of this world size can still fill in it. The step counter
  // resumes that many steps before the epoch's end, so epochs stay steps_ long.
  int64_t stepsLeftAfter(const std::vector<data::StreamSegment>& segments, int64_t epoch) {
    const data::ShardStreamConfig sc = streamConfig(rank_, world_, config_.shuffle);
    const data::EpochTaken taken = data::replayEpoch(train_, sc, epoch, segments);
    resumedTaken_ = taken.keys;
    int64_t fewest = std::numeric_limits<int64_t>::max();
    for (int r = 0; r < world_; ++r)
      fewest = std::min(fewest, data::samplesLeft(*train_, streamConfig(r, world_, config_.shuffle),
                                                  epoch, taken));
    return std::min(steps_, fewest / localBatch_);
  }

  int64_t shuffleBufferUsed() const { return config_.shuffle ? config_.shuffleBuffer : 0; }

  data::ShardStreamConfig streamConfig(int rank, int world, bool shuffle) const {
    data::ShardStreamConfig s;
    s.rank = rank;
    s.worldSize = world;
    s.threads = config_.loaderThreads;
    s.shuffleBuffer = shuffle ? config_.shuffleBuffer : 0;
    // The prefetch queue: --prefetch batches ahead, shared by the loader threads.
    s.queueSamples = std::max<int64_t>(1, config_.prefetch * localBatch_ / config_.loaderThreads);
    s.seed = config_.seed;
    s.shuffle = shuffle;
    s.resizedCrop = shuffle && decodeAugment_.resizedCrop;  // training only
    s.flip = shuffle && decodeAugment_.flip;
    return s;
  }

  const TrainConfig& config_;
  const SampleFiles& files_;
  int rank_, world_;
  int64_t localBatch_;
  std::shared_ptr<const data::ShardSet> train_, test_;
  int64_t steps_ = 0, next_ = 0, epoch_ = 0;
  // Resume at another world size: the epoch it happened in, the segments before this run's
  // and what they gave out, and the step this run's segment began at.
  int64_t resumedEpoch_ = -1, segmentStart_ = 0;
  std::vector<data::StreamSegment> before_;
  std::shared_ptr<const std::unordered_set<std::string>> resumedTaken_;
  bool firstEpoch_ = true;
  data::AugmentOptions augment_, decodeAugment_;
  std::optional<data::ShardStream> stream_;
};

template <const SampleFiles& files>
void loadSets(const TrainConfig& c, bool withTest, TaskData& d) {
  d.trainShards = files.scanTrain(c);
  if (withTest) d.testShards = files.scanTest(c, *d.trainShards);
}

template <const SampleFiles& files>
nn::DataShape setShape(const TrainConfig& c, const TaskData& d) {
  const data::DatasetSpec s = d.trainShards ? d.trainShards->spec() : files.scanTrain(c)->spec();
  return {s.sampleShape, s.numClasses};
}

template <const SampleFiles& files>
std::unique_ptr<Task> makeSetTask(const TaskContext& ctx, const TaskData& d) {
  return std::make_unique<ShardTask>(ctx, d, files);
}

void checkShardFlags(const TrainConfig& c) {
  DTRAIN_CHECK_USAGE(!c.trainData.empty(),
                     "--dataset shards needs --train-data 'DIR/train-{0000..0127}.tar' (brace "
                     "ranges and globs; dtrain data pack writes shards)");
  DTRAIN_CHECK_USAGE(c.trainLabels.empty() && c.testLabels.empty(),
                     "--dataset shards: the labels are in the shards (.cls members); "
                     "--train-labels and --test-labels apply to --dataset npy");
}

void checkFolderFlags(const TrainConfig& c) {
  DTRAIN_CHECK_USAGE(c.imageSize > 0, "--dataset imagefolder needs --image-size S (the images "
                     "are resized and cropped to S x S: 224 for ImageNet's models, 32 for CIFAR's)");
}

}  // namespace

StreamingDataset shardsDataset() {
  return {nn::kClassificationTask, loadSets<kShardFiles>, setShape<kShardFiles>,
          makeSetTask<kShardFiles>, checkShardFlags, true};
}

StreamingDataset imageFolderDataset() {
  return {nn::kClassificationTask, loadSets<kImageFolder>, setShape<kImageFolder>,
          makeSetTask<kImageFolder>, checkFolderFlags, true};
}

}  // namespace dtrain::runtime
