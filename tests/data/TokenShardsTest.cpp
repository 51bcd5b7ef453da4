// nanoGPT-format token shards: packed from bytes, windows read back across files, and bad
// files named.
#include <gtest/gtest.h>

#include <fstream>

#include "data/TarFile.h"
#include "data/TokenShards.h"
#include "DataTestUtil.h"

namespace dtrain::data {
namespace {

using test::errorOf;
using test::TempDir;

TEST(TokenShards, PackedBytesReadBackAsWindowsThatStayInOneFile) {
  TempDir dir;
  std::vector<uint8_t> text(250);
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<uint8_t>(i);
  const auto files = packTextTokens(text, dir.file("tok/train"), 100);
  ASSERT_EQ(files.size(), 3u);  // 100 + 100 + 50 tokens
  TokenShards t(files, "--train-data");
  EXPECT_EQ(t.tokens(), 250);
  EXPECT_EQ(t.vocabSize(), 256);  // from the meta.json pack wrote
  EXPECT_EQ(t.windowStarts(10), 90 + 90 + 40);
  Batch b;
  t.fill({0, 89, 90, 219}, 10, 256, b);  // last start of file 0, first of file 1, last of file 2
  const int32_t* x = b.x.data<int32_t>();
  const int32_t* y = b.y.data<int32_t>();
  EXPECT_EQ(x[0 * 10], 0);
  EXPECT_EQ(y[1 * 10 + 9], 99);  // window 89..99 ends at file 0's last token
  EXPECT_EQ(x[2 * 10], 100);
  EXPECT_EQ(x[3 * 10], 239);
  EXPECT_EQ(y[3 * 10 + 9], 249);
  EXPECT_CONTAINS(errorOf<BadData>([&] { t.fill({5}, 10, 12, b); }),
                  "token 12 at token offset 12 is not below the model's vocabulary of 12");
}

TEST(TokenShards, BadFilesAreNamed) {
  TempDir dir;
  std::ofstream(dir.file("odd.bin")) << "abc";
  EXPECT_CONTAINS(errorOf<BadData>([&] { TokenShards({dir.file("odd.bin")}, "--train-data"); }),
                  "odd.bin: an odd size (3 bytes): not uint16 tokens");
  std::ofstream(dir.file("meta.json")) << "{\"vocab\": 3}";
  std::ofstream(dir.file("ok.bin")) << "abcd";
  EXPECT_CONTAINS(errorOf<BadData>([&] { TokenShards({dir.file("ok.bin")}, "--train-data"); }),
                  "meta.json: no \"vocab_size\" between 1 and 65536");
}

}  // namespace
}  // namespace dtrain::data
