// The compressors' message decoders (--compress on parameter-server pushes: a
// server decodes what a worker sent): every codec, any bucket size, any bytes.
// Byte 0 picks the codec, bytes 1-2 the bucket's size; the rest is the message
// (zero-padded to the codec's message size).
#include <cstring>
#include <vector>

#include "fuzz/FuzzInput.h"
#include "parallel/compress/Compressor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtrain::parallel::compress;
  static const std::vector<std::string> codecs = [] {
    std::vector<std::string> out;
    for (const std::string& name : compressorNames()) {
      try {
        requireMessageCodec(name);
        out.push_back(name);
      } catch (const std::exception&) {
      }
    }
    return out;
  }();
  if (size < 3 || codecs.empty()) return 0;
  CompressOptions o;
  o.name = codecs[data[0] % codecs.size()];
  o.ratio = 0.25;
  BucketLayout layout;
  layout.shapes = {{1 + ((data[1] << 8 | data[2]) % 1024)}};
  std::unique_ptr<MessageCodec> codec = makeMessageCodec(o, layout);
  std::vector<uint8_t> msg(codec->messageBytes(), 0);
  std::memcpy(msg.data(), data + 3, std::min(msg.size(), size - 3));
  std::vector<float> out(static_cast<size_t>(layout.numel()), 0.f);
  dtrain::fuzz::expectErrorsOnly([&] { codec->decodeAdd(msg.data(), out.data()); });
  return 0;
}
