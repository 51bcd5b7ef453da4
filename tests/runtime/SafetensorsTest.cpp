#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "runtime/Safetensors.h"
#include "runtime/TestUtil.h"

using namespace dtrain;
using namespace dtrain::runtime;
using dtrain::testing::readBytes;
using dtrain::testing::TempDir;
using dtrain::testing::writeBytes;

namespace {

Tensor i64(const std::vector<int64_t>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::I64);
  std::memcpy(t.rawData(), v.data(), v.size() * 8);
  return t;
}

Tensor u8(const std::vector<uint8_t>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::U8);
  std::memcpy(t.rawData(), v.data(), v.size());
  return t;
}

std::string bytesOf(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.rawData()), c.nbytes());
}

std::string le64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

// A file made of an 8-byte length, the given header text and data bytes.
std::string rawFile(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

std::string loadError(const std::string& path) {
  try {
    loadSafetensors(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Safetensors, ByteExactLayout) {
  TempDir dir;
  const std::string path = dir.file("small.safetensors");
  const Tensor w = Tensor::fromVector({1, 2, 3, 4}, {2, 2});
  const Tensor m = u8({9, 8, 7}, {3});
  const Tensor n = i64({-5}, {1});
  saveSafetensors(path, {{"w", w}, {"m", m}, {"n", n}}, {{"model", "tiny"}});

  // Tensors are laid out by decreasing element size (I64, F32, U8), each
  // naturally aligned; the header keeps that order, metadata first.
  const std::string header =
      R"({"__metadata__":{"model":"tiny"},)"
      R"("n":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
      R"("w":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]},)"
      R"("m":{"dtype":"U8","shape":[3],"data_offsets":[24,27]}})";
  std::string padded = header;
  padded.append((8 - header.size() % 8) % 8, ' ');
  ASSERT_EQ(padded.size() % 8, 0u);
  const std::string want = rawFile(padded, bytesOf(n) + bytesOf(w) + bytesOf(m));
  const std::string got = readBytes(path);
  EXPECT_EQ(got.size(), want.size());
  EXPECT_EQ(got.substr(8, padded.size()), padded);
  EXPECT_EQ(got, want);
  // The length prefix is little-endian and counts the padding.
  EXPECT_EQ(static_cast<unsigned char>(got[0]), padded.size());
  EXPECT_EQ(got.substr(1, 7), std::string(7, '\0'));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(Safetensors, EmptyFileHasAPaddedEmptyHeader) {
  TempDir dir;
  const std::string path = dir.file("empty.safetensors");
  saveSafetensors(path, {});
  EXPECT_EQ(readBytes(path), rawFile("{}      ", ""));
  auto f = loadSafetensors(path);
  EXPECT_TRUE(f.tensors.empty());
  EXPECT_TRUE(f.metadata.empty());
}

TEST(Safetensors, RoundTripsTensorsAndMetadata) {
  TempDir dir;
  const std::string path = dir.file("rt.safetensors");
  Tensor a = Tensor::fromVector({1.5f, -2.f, 3.25f, 0.f, 1e-30f, -7.f}, {2, 3});
  Tensor aT = a.transpose(0, 1);  // non-contiguous: written as its contiguous copy
  Tensor scalar = Tensor::full({}, 42.f);
  Tensor empty = Tensor::zeros({0, 3});
  Tensor ints = Tensor::fromInts({1, -2, 3}, {3});
  Tensor longs = i64({int64_t{1} << 40, -1}, {2});
  Tensor bytes = u8({0, 255}, {2, 1});
  std::map<std::string, std::string> meta{{"model", "mlp"}, {"quote", "a \"b\"\n\\ é"}, {"", ""}};
  std::vector<std::pair<std::string, Tensor>> in{{"0.weight", a},  {"aT", aT},     {"s", scalar},
                                                  {"empty", empty}, {"ints", ints}, {"longs", longs},
                                                  {"b", bytes}};
  saveSafetensors(path, in, meta);
  SafetensorsFile f = loadSafetensors(path);
  EXPECT_EQ(f.metadata, meta);
  ASSERT_EQ(f.tensors.size(), in.size());
  for (const auto& [name, t] : in) {
    const Tensor* got = f.find(name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_EQ(got->dtype(), t.dtype()) << name;
    EXPECT_EQ(got->shape(), t.shape()) << name;
    EXPECT_EQ(bytesOf(*got), bytesOf(t)) << name;
  }
  EXPECT_EQ(f.find("nope"), nullptr);
  // Returned in data order: I64 first, then 4-byte types in the given order, then U8.
  std::vector<std::string> order;
  for (const auto& [n, t] : f.tensors) order.push_back(n);
  EXPECT_EQ(order, (std::vector<std::string>{"longs", "0.weight", "aT", "s", "empty", "ints", "b"}));
}

TEST(Safetensors, ReadsFilesFromOtherWriters) {
  // Header keys in any order, no metadata, data order differing from key order.
  TempDir dir;
  const std::string path = dir.file("foreign.safetensors");
  const Tensor x = Tensor::fromVector({1, 2}, {2});
  const Tensor y = Tensor::fromVector({3}, {1});
  writeBytes(path, rawFile(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
                           R"("y":{"data_offsets":[0,4],"shape":[1],"dtype":"F32"}})",
                           bytesOf(y) + bytesOf(x)));
  auto f = loadSafetensors(path);
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].first, "y");
  EXPECT_EQ(f.find("x")->toVector(), (std::vector<float>{1, 2}));
  EXPECT_EQ(f.find("y")->toVector(), (std::vector<float>{3}));
}

TEST(Safetensors, CorruptFilesGiveErrorsNamingFileAndProblem) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  const std::string f8 = std::string(8, '\0');
  struct Case {
    const char* what;
    std::string bytes;
    const char* message;
  };
  const std::vector<Case> cases{
      {"shorter than the length prefix", "abc", "too short for a safetensors file (3 bytes"},
      {"header length beyond the file", le64(100) + "{}", "header length 100 goes beyond the file size (10 bytes)"},
      {"huge header length", le64(~uint64_t{0}) + "{}", "goes beyond the file size"},
      {"bad JSON", rawFile("{\"a\": [1,", ""), "bad JSON header"},
      {"header not an object", rawFile("[1, 2]", ""), "the JSON header is not an object"},
      {"entry not an object", rawFile(R"({"a": 3})", ""), "tensor 'a': header entry is not an object"},
      {"unknown dtype", rawFile(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", f8),
       "tensor 'a': unknown dtype 'F64'"},
      {"missing dtype", rawFile(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", f8),
       "tensor 'a': missing \"dtype\""},
      {"missing shape", rawFile(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", f8),
       "tensor 'a': missing \"shape\""},
      {"negative dimension", rawFile(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", f8),
       "not a non-negative integer"},
      {"bad offsets", rawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", f8),
       "\"data_offsets\" must be two non-negative integers"},
      {"offsets out of range", rawFile(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", f8),
       "tensor 'a': data_offsets [0, 16] out of range: the data section holds 8 bytes"},
      {"reversed offsets", rawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", f8),
       "end before they begin"},
      {"size not matching shape", rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", f8),
       "tensor 'a': data_offsets [0, 4] span 4 bytes but shape [2] of F32 needs 8"},
      {"size not matching dtype", rawFile(R"({"a":{"dtype":"I64","shape":[2],"data_offsets":[0,8]}})", f8),
       "shape [2] of I64 needs 16"},
      {"overlapping", rawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[2,10]}})", f8 + "xx"),
       "tensors 'a' [0, 4) and 'b' [2, 10) overlap"},
      {"metadata not strings", rawFile(R"({"__metadata__":{"step":3}})", ""),
       "metadata 'step' is not a string"},
      {"metadata not an object", rawFile(R"({"__metadata__":[]})", ""), "\"__metadata__\" is not an object"},
  };
  for (const Case& c : cases) {
    writeBytes(path, c.bytes);
    const std::string err = loadError(path);
    EXPECT_NE(err.find("file " + path + ": "), std::string::npos) << c.what << ": " << err;
    EXPECT_NE(err.find(c.message), std::string::npos) << c.what << ": " << err;
  }
  EXPECT_NE(loadError(dir.file("missing.safetensors")).find("cannot open"), std::string::npos);
  EXPECT_NE(loadError(dir.file("")).find("is a directory"), std::string::npos);
}

TEST(Safetensors, FailedSaveLeavesTheOldFileIntact) {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  saveSafetensors(path, {{"w", Tensor::fromVector({1, 2}, {2})}}, {{"v", "old"}});
  const std::string before = readBytes(path);

  // Invalid input: rejected before any file is created.
  const Tensor t = Tensor::fromVector({3}, {1});
  EXPECT_THROW(saveSafetensors(path, {{"w", t}, {"w", t}}), Error);
  EXPECT_THROW(saveSafetensors(path, {{"w", t}, {"u", Tensor()}}), Error);
  EXPECT_THROW(saveSafetensors(path, {{"__metadata__", t}}), Error);
  EXPECT_EQ(readBytes(path), before);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  // An I/O failure (the temporary file cannot be created) after validation.
  std::filesystem::create_directory(path + ".tmp");
  try {
    saveSafetensors(path, {{"w", t}}, {{"v", "new"}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("saving " + path + ": cannot create " + path + ".tmp"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(readBytes(path), before);
  EXPECT_EQ(loadSafetensors(path).metadata.at("v"), "old");
  std::filesystem::remove(path + ".tmp");

  // A successful save replaces the file whole and leaves no temporary behind.
  saveSafetensors(path, {{"w", t}}, {{"v", "new"}});
  EXPECT_EQ(loadSafetensors(path).metadata.at("v"), "new");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(Safetensors, SaveIntoAMissingDirectoryFails) {
  TempDir dir;
  const std::string path = dir.file("no/such/dir/x.safetensors");
  EXPECT_THROW(saveSafetensors(path, {}), Error);
  EXPECT_FALSE(std::filesystem::exists(path));
}
