#include "data/ShardReader.h"

#include <algorithm>
#include <map>
#include <utility>

#include "data/ImageSample.h"
#include "data/NpyFile.h"

namespace dtrain::data {
namespace {

constexpr int64_t kHeaderBytes = 4096;  // a .npy header is far shorter

struct Split {
  std::string key, extension;
};

// WebDataset's rule: the key is the path up to the first '.' of the base name.
Split splitName(const std::string& name) {
  const size_t slash = name.rfind('/');
  const size_t dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos) return {name, ""};
  std::string ext = name.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return {name.substr(0, dot), ext};
}

// What the reader decodes a member into; keyed by extension (a registry, not a chain of ifs).
struct Decoding {
  const std::string& file;
  std::string member;
  bool checkOnly;
  const ImageDecoding* images;
  Sample& out;
  bool haveX = false, haveLabel = false;
};
using MemberDecoder = void (*)(const ShardMember&, Decoding&);

void decodeNpy(const ShardMember& m, Decoding& d) {
  const std::string who = d.file + ": member " + d.member;
  NpyHeader h;
  try {
    h = parseNpyFeaturesHeader(m.bytes.data(), m.bytes.size(), m.size, who);
  } catch (const UsageError& e) {
    throw BadData(d.file, d.member, std::string(e.what()).substr(who.size() + 2));
  }
  d.out.shape = h.shape.empty() ? Shape{1} : Shape(h.shape.begin(), h.shape.end());
  d.haveX = true;
  if (d.checkOnly) return;
  d.out.x.resize(static_cast<size_t>(h.numel()));
  npyFeaturesToFloats(h, m.bytes.data(), d.out.x.data());
}

void decodeClass(const ShardMember& m, Decoding& d) {
  std::string text(m.bytes.begin(), m.bytes.end());
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw BadData(d.file, d.member, "the label '" + text.substr(0, 40) + "' is not a class index");
  if (v < 0 || v >= kMaxShardClasses)
    throw BadData(d.file, d.member,
                  detail::concat("the label ", v, " is ", v < 0 ? "negative" : "out of range",
                                 " (class labels are 0, 1, ... below ", kMaxShardClasses, ")"));
  d.out.label = static_cast<int32_t>(v);
  d.haveLabel = true;
}

void readPast(const ShardMember&, Decoding&) {}

void decodeImageMember(const ShardMember& m, Decoding& d) {
  DTRAIN_CHECK_USAGE(d.images, d.file, ": member ", d.member, ": an image, and images are not "
                     "read here");
  const bool whole = static_cast<int64_t>(m.bytes.size()) == m.size;
  decodeImageSample(m.bytes.data(), m.bytes.size(), whole, *d.images, d.checkOnly, d.file,
                    d.member, d.out);
  d.haveX = true;
}

const std::map<std::string, MemberDecoder>& decoders() {
  static const std::map<std::string, MemberDecoder> kDecoders{
      {"npy", decodeNpy},     {"cls", decodeClass},     {"txt", readPast},
      {"json", readPast},     {"jpg", decodeImageMember},   {"jpeg", decodeImageMember},
      {"png", decodeImageMember}};
  return kDecoders;
}

// A scan keeps labels and metadata whole, features (arrays, images) only as far as their header.
bool keepsAll(const std::string& extension) {
  auto it = decoders().find(extension);
  return it == decoders().end() || it->second == readPast || it->second == decodeClass;
}

}  // namespace

ShardReader::ShardReader(const std::string& path, bool headersOnly)
    : tar_(path), headersOnly_(headersOnly) {}

bool ShardReader::readMember() {
  TarEntry e;
  if (!tar_.next(e)) return false;
  Split s = splitName(e.name);
  pendingKey_ = std::move(s.key);
  pending_.extension = std::move(s.extension);
  pending_.size = e.size;
  // Labels and metadata are small; a feature member's header is all a scan needs.
  if (headersOnly_ && !keepsAll(pending_.extension))
    tar_.readPrefix(pending_.bytes, pending_.extension == "npy" ? kHeaderBytes : kImageHeaderBytes);
  else if (pending_.size > (int64_t{1} << 30))
    throw BadData(tar_.path(), e.name, detail::concat("a member of ", e.size, " bytes"));
  else
    tar_.readData(pending_.bytes);
  return true;
}

bool ShardReader::next(RawSample& sample) {
  if (brokenAfter_) {  // the archive broke after the sample returned last
    finished_ = true;
    std::rethrow_exception(std::exchange(brokenAfter_, nullptr));
  }
  if (finished_) return false;
  try {
    if (!havePending_ && !readMember()) {
      finished_ = true;
      return false;
    }
  } catch (...) {
    finished_ = true;
    throw;
  }
  sample.key = pendingKey_;
  sample.members.clear();
  try {
    do {
      sample.members.push_back(std::move(pending_));
      pending_ = {};
      havePending_ = readMember();
    } while (havePending_ && pendingKey_ == sample.key);
  } catch (...) {
    // Looking past this sample found the break: the sample is whole, the error is the
    // next call's.
    havePending_ = false;
    brokenAfter_ = std::current_exception();
  }
  if (!havePending_ && !brokenAfter_) finished_ = true;
  return true;
}

Sample ShardReader::decode(const RawSample& raw, bool checkOnly, const ImageDecoding* images) const {
  Sample s;
  s.key = tar_.path() + ":" + raw.key;
  Decoding d{tar_.path(), "", checkOnly, images, s};
  for (const ShardMember& m : raw.members) {
    d.member = raw.key + "." + m.extension;
    auto it = decoders().find(m.extension);
    if (it == decoders().end())
      throw BadData(tar_.path(), d.member,
                    "member type '." + m.extension +
                        "' is not one dtrain reads (.npy, .jpg or .png features, .cls labels, "
                        ".txt/.json metadata)");
    it->second(m, d);
  }
  if (!d.haveX || !d.haveLabel)
    throw BadData(tar_.path(), raw.key,
                  std::string("sample without ") + (d.haveX ? "a .cls label" : "a .npy array or an image"));
  return s;
}

}  // namespace dtrain::data
