// Images: JPEG and PNG decoded as written, broken ones refused with the library's reason,
// the transform's crop, resize, flip and normalisation, image folders listed as torchvision
// lists them, and a folder streamed so that every image is read once per epoch.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "DataTestUtil.h"
#include "data/ImageFolder.h"
#include "data/ImageSample.h"
#include "data/ImageTransform.h"
#include "data/ImageTestData.h"
#include "data/ShardStream.h"

using namespace dtrain;
using namespace dtrain::data;

namespace {

Image gradient(int64_t h, int64_t w) {
  Image img{h, w, std::vector<uint8_t>(static_cast<size_t>(h * w * 3))};
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) img.rgb[static_cast<size_t>((y * w + x) * 3 + c)] = static_cast<uint8_t>(x * 7 + y * 3 + c * 50);
  return img;
}

TEST(ImageCodec, PngIsLosslessAndJpegClose) {
  const Image img = gradient(13, 17);
  const auto png = encodePng(img);
  EXPECT_EQ(sniffImage(png.data(), png.size()), ImageFormat::Png);
  const Image back = decodeImage(png.data(), png.size());
  EXPECT_EQ(back.height, 13);
  EXPECT_EQ(back.width, 17);
  EXPECT_EQ(back.rgb, img.rgb);
  const auto jpg = encodeJpeg(img, 95);
  EXPECT_EQ(readImageSize(jpg.data(), jpg.size()).width, 17);
  const Image j = decodeImage(jpg.data(), jpg.size());
  double err = 0;
  for (size_t i = 0; i < img.rgb.size(); ++i) err += std::abs(int(j.rgb[i]) - int(img.rgb[i]));
  EXPECT_LT(err / static_cast<double>(img.rgb.size()), 8.0);
}

TEST(ImageCodec, TruncatedOrForeignBytesAreRefused) {
  const Image img = gradient(32, 32);
  for (auto bytes : {encodePng(img), encodeJpeg(img)}) {
    bytes.resize(bytes.size() * 2 / 3);
    EXPECT_THROW(decodeImage(bytes.data(), bytes.size()), ImageError);
  }
  const std::string gif = "GIF89a.......";
  EXPECT_THROW(decodeImage(reinterpret_cast<const uint8_t*>(gif.data()), gif.size()), ImageError);
}

TEST(ImageTransform, CentreCropOfASquareImageIsTheImage) {
  const Image img = gradient(8, 8);
  ImageOptions o;
  o.size = 8;
  Rng rng(0);
  std::vector<float> out(3 * 8 * 8);
  transformImage(img, o, rng, out.data());
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 8; ++x)
        EXPECT_NEAR(out[c * 64 + y * 8 + x], img.rgb[(y * 8 + x) * 3 + c] / 255.0f, 1e-5);
  // A wide image: its centred square; normalised per channel.
  const Image wide = gradient(8, 20);
  parseNormalize("0.1,0.2,0.3,0.5,0.5,0.25", o);
  transformImage(wide, o, rng, out.data());
  const float expect = (wide.rgb[(2 * 20 + 6 + 3) * 3 + 2] / 255.0f - 0.3f) / 0.25f;
  EXPECT_NEAR(out[2 * 64 + 2 * 8 + 3], expect, 1e-4);
  EXPECT_THROW(parseNormalize("0.5", o), UsageError);
  EXPECT_THROW(parseNormalize("0.5,0", o), UsageError);
}

TEST(ImageTransform, DownscalingAveragesAndFlipMirrors) {
  Image stripes{16, 16, std::vector<uint8_t>(16 * 16 * 3)};
  for (size_t p = 0; p < stripes.rgb.size(); ++p) stripes.rgb[p] = (p / 3) % 2 ? 255 : 0;
  ImageOptions o;
  o.size = 4;
  Rng rng(0);
  std::vector<float> out(3 * 16);
  transformImage(stripes, o, rng, out.data());
  for (float v : out) EXPECT_NEAR(v, 0.5f, 0.05f);  // antialiased: no stripes left
  const Image img = gradient(6, 6);
  o.size = 6;
  o.flip = true;
  std::vector<float> plain(3 * 36), flipped(3 * 36);
  ImageOptions noFlip = o;
  noFlip.flip = false;
  int mirrored = 0;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    Rng a(seed), b(seed);
    transformImage(img, noFlip, a, plain.data());
    transformImage(img, o, b, flipped.data());
    if (flipped[5] == plain[0] && flipped[0] == plain[5]) ++mirrored;
    else EXPECT_EQ(flipped, plain);
  }
  EXPECT_GT(mirrored, 2);
  EXPECT_LT(mirrored, 14);
}

TEST(ImageFolder, ClassesSortedByNameAndOtherFilesLeftOut) {
  test::TempDir tmp;
  const std::string dir = tmp.str();
  test::writeImageFolder(dir, 2, {"zebra", "ant", "moth"});
  std::ofstream(dir + "/ant/README.txt") << "notes";
  const ImageFolderListing l = listImageFolder(dir);
  EXPECT_EQ(l.classes, (std::vector<std::string>{"ant", "moth", "zebra"}));
  ASSERT_EQ(l.images.size(), 6u);
  EXPECT_EQ(l.images[0].path, dir + "/ant/0.jpg");
  EXPECT_EQ(l.images[5].label, 2);
  const std::vector<std::string> two{"ant", "moth"};
  EXPECT_THROW(listImageFolder(dir, &two), UsageError);
  EXPECT_THROW(listImageFolder(dir + "/none"), UsageError);
}

TEST(ImageFolder, EveryImageOncePerEpochAcrossRanksAndThreads) {
  test::TempDir tmp;
  const std::string dir = tmp.str();
  const auto paths = test::writeImageFolder(dir, 10, {"a", "b", "c"});
  ImageOptions o;
  o.size = 12;
  auto set = ShardSet::scanFolder(dir, false, o, 7);
  EXPECT_EQ(set->samples(), 30);
  EXPECT_EQ(set->spec().sampleShape, (Shape{3, 12, 12}));
  EXPECT_EQ(set->spec().numClasses, 3);
  for (int world : {1, 2, 3}) {
    std::multiset<std::string> seen;
    for (int rank = 0; rank < world; ++rank) {
      ShardStreamConfig c;
      c.rank = rank;
      c.worldSize = world;
      c.threads = 2;
      c.shuffleBuffer = 5;
      c.resizedCrop = c.flip = true;
      ShardStream stream(set, c, 1);
      for (Sample s; stream.next(s);) {
        EXPECT_EQ(s.x.size(), 3u * 12 * 12);
        EXPECT_EQ(s.label, std::string("abc").find(s.key[dir.size() + 1])) << s.key;
        seen.insert(s.key);
      }
    }
    EXPECT_EQ(seen, std::multiset<std::string>(paths.begin(), paths.end())) << world;
  }
}

TEST(ImageFolder, BadImagesNameTheFileOrAreCounted) {
  test::TempDir tmp;
  const std::string dir = tmp.str();
  test::writeImageFolder(dir, 3, {"a", "b"});
  std::ofstream(dir + "/a/junk.jpg") << "not an image";
  ImageOptions o;
  o.size = 8;
  try {
    ShardSet::scanFolder(dir, false, o, 0);
    ADD_FAILURE() << "no error";
  } catch (const BadData& e) {
    EXPECT_EQ(std::string(e.what()), dir + "/a/junk.jpg: not a JPEG or PNG image (its first bytes are neither's)");
  }
  EXPECT_EQ(ShardSet::scanFolder(dir, true, o, 0)->badSamples(), 1);
  // A body that breaks past the header: found when decoded, counted then.
  std::filesystem::remove(dir + "/a/junk.jpg");
  const auto good = encodeJpeg(gradient(40, 40));
  test::writeFileBytes(dir + "/b/cut.jpg", std::vector<uint8_t>(good.begin(), good.begin() + good.size() / 2));
  auto set = ShardSet::scanFolder(dir, true, o, 0);
  EXPECT_EQ(set->samples(), 7);
  ShardStream stream(set, ShardStreamConfig{}, 0);
  int n = 0;
  for (Sample s; stream.next(s);) ++n;
  EXPECT_EQ(n, 6);
  EXPECT_EQ(set->badSamples(), 1);
  auto strict = ShardSet::scanFolder(dir, false, o, 0);
  ShardStream failing(strict, ShardStreamConfig{}, 0);
  try {
    for (Sample s; failing.next(s);) {
    }
    ADD_FAILURE() << "no error";
  } catch (const BadData& e) {
    EXPECT_EQ(std::string(e.what()).rfind(dir + "/b/cut.jpg: JPEG data: ", 0), 0u) << e.what();
  }
}

TEST(ImageShards, JpegAndPngMembersDecodeLikeFolderFiles) {
  test::TempDir tmp;
  const std::string dir = tmp.str();
  Rng rng(3);
  const Image red = test::colourImage(0, rng, 30, 20), blue = test::colourImage(2, rng, 24, 24);
  {
    TarWriter tar(dir + "/s-0.tar");
    const auto a = encodeJpeg(red), b = encodePng(blue);
    tar.add("x1.jpg", a.data(), a.size());
    tar.add("x1.cls", "0", 1);
    tar.add("x2.png", b.data(), b.size());
    tar.add("x2.cls", "2", 1);
    tar.close();
  }
  ImageOptions o;
  o.size = 10;
  auto set = ShardSet::scan({dir + "/s-0.tar"}, false, {}, o);
  EXPECT_TRUE(set->holdsImages());
  EXPECT_EQ(set->spec().sampleShape, (Shape{3, 10, 10}));
  ShardStreamConfig c;
  c.shuffle = false;
  ShardStream stream(set, c, 0);
  Sample s;
  ASSERT_TRUE(stream.next(s));
  EXPECT_EQ(s.label, 0);
  EXPECT_GT(s.x[0], s.x[200]);  // red over blue
  ASSERT_TRUE(stream.next(s));
  EXPECT_EQ(s.label, 2);
  EXPECT_LT(s.x[0], s.x[200]);
  EXPECT_THROW(ShardSet::scan({dir + "/s-0.tar"}, false), UsageError);  // no --image-size
}

}  // namespace
