// oneDNN's convolutions (OnednnConv.h) in fp32 and bf16, and the per-layer
// choice between them and dtrain's kernels (ConvDispatch.h), against a
// double-precision reference on awkward shapes: batch 1 and 7, 1/3/7/16+
// channels, odd and non-square sizes, stride 1 and 2, padding 0 and 1.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/Error.h"
#include "core/ThreadPool.h"
#include "tensor/KernelTestUtil.h"
#include "tensor/cpu/Bf16.h"
#include "tensor/cpu/Blas.h"
#include "tensor/cpu/ConvDispatch.h"
#include "tensor/cpu/Onednn.h"
#include "tensor/cpu/OnednnConv.h"

using namespace dtrain;
using namespace dtrain::kernels;
using dtrain::testutil::describe;
using dtrain::testutil::randomVector;

namespace {

const ConvShape kShapes[] = {
    {1, 1, 9, 9, 3, 3, 3, 1, 1, 0, 0},     // one image, one channel
    {7, 3, 13, 13, 7, 3, 3, 2, 2, 1, 1},   // stride 2, padding 1
    {7, 7, 9, 13, 16, 5, 5, 1, 1, 1, 1},   // non-square, a full block of outputs
    {1, 7, 13, 9, 1, 3, 3, 2, 2, 0, 0},    // one output channel
    {7, 3, 9, 11, 17, 3, 5, 2, 1, 1, 0},   // rectangular kernel, mixed stride/padding
    {2, 3, 10, 10, 5, 3, 3, 2, 2, 0, 0},   // last input row never read (stride 2)
    {3, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2},   // lenet conv1
    {3, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0},  // lenet conv2
    {3, 16, 8, 8, 16, 3, 3, 1, 1, 1, 1},   // resnet: 3x3 of a stage
    {3, 32, 14, 14, 64, 3, 3, 2, 2, 1, 1}, // resnet: a stage's first 3x3, stride 2
    {5, 64, 7, 7, 64, 3, 3, 1, 1, 1, 1},   // resnet: layer3's 3x3
    {3, 16, 8, 8, 32, 1, 1, 2, 2, 0, 0},   // resnet: projection shortcut
};

// Values and scales (sums of |terms|, so cancellation does not shrink the
// tolerance) of y (bias included), gx, gw and gbias, in double.
struct Ref {
  std::vector<double> y, ys, gx, gxs, gw, gws, gb, gbs;
};

Ref reference(const ConvShape& s, const std::vector<float>& x, const std::vector<float>& w,
              const std::vector<float>& b, const std::vector<float>& gy) {
  const int64_t OH = s.outH(), OW = s.outW(), P = OH * OW;
  Ref r{std::vector<double>(gy.size()), std::vector<double>(gy.size()),
        std::vector<double>(x.size()),  std::vector<double>(x.size()),
        std::vector<double>(w.size()),  std::vector<double>(w.size()),
        std::vector<double>(s.Cout),    std::vector<double>(s.Cout)};
  for (int64_t i = 0; i < int64_t(gy.size()); ++i) {
    const int64_t co = (i / P) % s.Cout;
    r.y[i] = b[co], r.ys[i] = std::abs(b[co]);
    r.gb[co] += gy[i], r.gbs[co] += std::abs(gy[i]);
  }
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t co = 0; co < s.Cout; ++co)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow)
          for (int64_t ci = 0; ci < s.Cin; ++ci)
            for (int64_t kh = 0; kh < s.KH; ++kh)
              for (int64_t kw = 0; kw < s.KW; ++kw) {
                const int64_t ih = oh * s.strideH - s.padH + kh, iw = ow * s.strideW - s.padW + kw;
                if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
                const int64_t yi = ((n * s.Cout + co) * OH + oh) * OW + ow;
                const int64_t xi = ((n * s.Cin + ci) * s.H + ih) * s.W + iw;
                const int64_t wi = ((co * s.Cin + ci) * s.KH + kh) * s.KW + kw;
                const double xw = double(x[xi]) * w[wi], gw = double(gy[yi]) * w[wi],
                             gx = double(gy[yi]) * x[xi];
                r.y[yi] += xw, r.ys[yi] += std::abs(xw);
                r.gx[xi] += gw, r.gxs[xi] += std::abs(gw);
                r.gw[wi] += gx, r.gws[wi] += std::abs(gx);
              }
  return r;
}

// Every element within tol of the reference, relative to its scale.
void expectNear(const std::vector<float>& got, const std::vector<double>& ref,
                const std::vector<double>& scale, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::abs(got[i] - ref[i]), tol * (scale[i] + 1e-6))
        << what << " at " << i << ": got " << got[i] << ", expected " << ref[i];
}

std::vector<float> rounded(const std::vector<float>& v) {
  std::vector<BFloat16> h(v.size());
  std::vector<float> out(v.size());
  toBf16(v.data(), h.data(), int64_t(v.size()));
  fromBf16(h.data(), out.data(), int64_t(v.size()));
  return out;
}

std::vector<BFloat16> bf16(const std::vector<float>& v) {
  std::vector<BFloat16> h(v.size());
  toBf16(v.data(), h.data(), int64_t(v.size()));
  return h;
}

struct Data {
  std::vector<float> x, w, b, gy;
};

Data randomData(const ConvShape& s, uint32_t seed) {
  return {randomVector(s.N * s.Cin * s.H * s.W, seed),
          randomVector(s.Cout * s.Cin * s.KH * s.KW, seed + 1), randomVector(s.Cout, seed + 2),
          randomVector(s.N * s.Cout * s.outH() * s.outW(), seed + 3)};
}

// Runs every oneDNN pass (with and without bias) on fp32 or bf16 operands and
// checks it against the reference of the operands as multiplied (rounded to
// bf16 for bf16: fp32 accumulation keeps that within 1e-4) and, for bf16,
// against the unrounded fp32 reference at bf16's resolution.
void checkOnednn(const ConvShape& s, bool useBf16) {
  const Data d = randomData(s, 11);
  const std::string what = describe(s) + (useBf16 ? " bf16" : " fp32");
  const Data r = useBf16 ? Data{rounded(d.x), rounded(d.w), d.b, rounded(d.gy)} : d;
  const Ref exact = reference(s, r.x, r.w, r.b, r.gy), full = reference(s, d.x, d.w, d.b, d.gy);
  const auto xh = bf16(d.x), wh = bf16(d.w), gyh = bf16(d.gy);
  const void* x = useBf16 ? static_cast<const void*>(xh.data()) : d.x.data();
  const void* w = useBf16 ? static_cast<const void*>(wh.data()) : d.w.data();
  const void* gy = useBf16 ? static_cast<const void*>(gyh.data()) : d.gy.data();
  const float nan = std::numeric_limits<float>::quiet_NaN();  // outputs are overwritten
  std::vector<float> y(d.gy.size(), nan), gx(d.x.size(), nan), gw(d.w.size(), nan), gb(s.Cout, nan);

  onednn::convForward(s, useBf16, x, w, d.b.data(), y.data());
  expectNear(y, exact.y, exact.ys, 1e-4, "y " + what);
  if (useBf16) expectNear(y, full.y, full.ys, 1e-2, "y vs fp32 " + what);
  onednn::convForward(s, useBf16, x, w, nullptr, y.data());
  std::vector<double> yNoBias = exact.y;
  for (size_t i = 0; i < y.size(); ++i) yNoBias[i] -= d.b[(i / (s.outH() * s.outW())) % s.Cout];
  expectNear(y, yNoBias, exact.ys, 1e-4, "y without bias " + what);

  onednn::convBackwardData(s, useBf16, gy, w, gx.data());
  expectNear(gx, exact.gx, exact.gxs, 1e-4, "gx " + what);
  if (useBf16) expectNear(gx, full.gx, full.gxs, 1e-2, "gx vs fp32 " + what);

  onednn::convBackwardWeights(s, useBf16, x, gy, gw.data(), gb.data());
  expectNear(gw, exact.gw, exact.gws, 1e-4, "gw " + what);
  expectNear(gb, exact.gb, exact.gbs, 1e-4, "gbias " + what);
  if (useBf16) {
    expectNear(gw, full.gw, full.gws, 1e-2, "gw vs fp32 " + what);
    expectNear(gb, full.gb, full.gbs, 1e-2, "gbias vs fp32 " + what);
  }
  std::vector<float> gw2(d.w.size(), nan);
  onednn::convBackwardWeights(s, useBf16, x, gy, gw2.data(), nullptr);
  expectNear(gw2, exact.gw, exact.gws, 1e-4, "gw without bias " + what);
}

}  // namespace

TEST(OnednnConv, Fp32MatchesReference) {
  for (const ConvShape& s : kShapes) checkOnednn(s, false);
}

TEST(OnednnConv, Bf16MatchesReference) {
  if (!onednnConvBf16()) GTEST_SKIP() << "no oneDNN bf16 kernels on this CPU";
  for (const ConvShape& s : kShapes) checkOnednn(s, true);
}

TEST(OnednnConv, MultiThreadedMatchesReference) {
  setNumThreads(2);
  setBlasThreads(2);
  checkOnednn({7, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0}, false);
  if (onednnConvBf16()) checkOnednn({7, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0}, true);
  setNumThreads(1);
  setBlasThreads(1);
}

TEST(OnednnConv, OnePrimitivePerShapePassAndBias) {
  const ConvShape s{2, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1};
  const Data d = randomData(s, 3);
  std::vector<float> y(d.gy.size()), gx(d.x.size()), gw(d.w.size()), gb(s.Cout);
  const size_t before = onednn::cachedConvPrimitives();
  for (int i = 0; i < 2; ++i)
    onednn::convForward(s, false, d.x.data(), d.w.data(), d.b.data(), y.data());
  EXPECT_EQ(onednn::cachedConvPrimitives(), before + 1);
  onednn::convForward(s, false, d.x.data(), d.w.data(), nullptr, y.data());
  onednn::convBackwardData(s, false, d.gy.data(), d.w.data(), gx.data());
  onednn::convBackwardWeights(s, false, d.x.data(), d.gy.data(), gw.data(), gb.data());
  EXPECT_EQ(onednn::cachedConvPrimitives(), before + 4);
}

TEST(OnednnConv, ClearErrorOnEmptyShape) {
  const ConvShape s{0, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1};
  float dummy = 0;
  try {
    onednn::convForward(s, false, &dummy, &dummy, nullptr, &dummy);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("N0 Cin3 7x7 Cout4"), std::string::npos) << e.what();
  }
}

// The dispatcher, on whichever implementation the table picks per pass
// (lenet conv2 runs on oneDNN with AVX-512, conv1 and small layers on dtrain's
// kernels): fp32 within 1e-4, bf16 at bf16's resolution of the fp32 reference
// and within 1e-4 of the reference of the rounded operands.
TEST(ConvDispatch, MatchesReferenceInBothPrecisions) {
  for (const ConvShape& s : kShapes) {
    const Data d = randomData(s, 21);
    const std::string what = describe(s);
    const Ref full = reference(s, d.x, d.w, d.b, d.gy);
    const Ref exact = reference(s, rounded(d.x), rounded(d.w), d.b, rounded(d.gy));
    std::vector<float> y(d.gy.size()), gx(d.x.size()), gw(d.w.size()), gb(s.Cout);
    convolve(s, d.x.data(), d.w.data(), d.b.data(), y.data());
    expectNear(y, full.y, full.ys, 1e-4, "y fp32 " + what);
    convolveBackward(s, d.x.data(), d.w.data(), d.gy.data(), gx.data(), gw.data(), gb.data());
    expectNear(gx, full.gx, full.gxs, 1e-4, "gx fp32 " + what);
    expectNear(gw, full.gw, full.gws, 1e-4, "gw fp32 " + what);
    expectNear(gb, full.gb, full.gbs, 1e-4, "gbias fp32 " + what);

    const auto xh = bf16(d.x), wh = bf16(d.w), gyh = bf16(d.gy);
    convolve(s, xh.data(), wh.data(), d.b.data(), y.data());
    expectNear(y, exact.y, exact.ys, 1e-4, "y bf16 " + what);
    expectNear(y, full.y, full.ys, 1e-2, "y bf16 vs fp32 " + what);
    // One output at a time too: each pass is chosen on its own.
    std::vector<float> gx2(d.x.size()), gw2(d.w.size());
    convolveBackward(s, xh.data(), wh.data(), gyh.data(), gx.data(), gw.data(), gb.data());
    convolveBackward(s, xh.data(), wh.data(), gyh.data(), gx2.data(), nullptr, nullptr);
    convolveBackward(s, xh.data(), wh.data(), gyh.data(), nullptr, gw2.data(), nullptr);
    for (const auto* g : {&gx, &gx2}) expectNear(*g, exact.gx, exact.gxs, 1e-4, "gx bf16 " + what);
    for (const auto* g : {&gw, &gw2}) expectNear(*g, exact.gw, exact.gws, 1e-4, "gw bf16 " + what);
    expectNear(gb, exact.gb, exact.gbs, 1e-4, "gbias bf16 " + what);
    expectNear(gx, full.gx, full.gxs, 1e-2, "gx bf16 vs fp32 " + what);
    expectNear(gw, full.gw, full.gws, 1e-2, "gw bf16 vs fp32 " + what);
  }
}

TEST(ConvDispatch, LenetConv2OnOnednnConv1OnDtrain) {
  if (!onednn::hasAvx512() || !onednnConvBf16()) GTEST_SKIP() << "the table is for AVX-512";
  const ConvShape conv1{64, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2}, conv2{64, 6, 14, 14, 16, 5, 5};
  for (ConvPass p : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardWeights}) {
    EXPECT_EQ(convImplFor(conv1, p, false), ConvImpl::Dtrain);
    EXPECT_EQ(convImplFor(conv1, p, true), ConvImpl::Dtrain);
    EXPECT_EQ(convImplFor(conv2, p, true), ConvImpl::OneDnn);
    EXPECT_EQ(convImplFor(conv2, p, false),
              p == ConvPass::Forward ? ConvImpl::OneDnn : ConvImpl::Dtrain);
  }
  EXPECT_EQ(convImplFor({0, 6, 14, 14, 16, 5, 5}, ConvPass::Forward, true), ConvImpl::Dtrain);
}

TEST(ConvDispatch, ResNetWideLayersOnOnednnShortcutsOnDtrain) {
  if (!onednn::hasAvx512() || !onednnConvBf16()) GTEST_SKIP() << "the table is for AVX-512";
  const ConvShape wide{128, 16, 28, 28, 16, 3, 3, 1, 1, 1, 1},
      shortcut{128, 16, 28, 28, 32, 1, 1, 2, 2, 0, 0};
  for (ConvPass p : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardWeights}) {
    EXPECT_EQ(convImplFor(wide, p, false), ConvImpl::OneDnn);
    EXPECT_EQ(convImplFor(shortcut, p, false), ConvImpl::Dtrain);
  }
}

// Packed bf16 operands (x and gy rounded and reordered in one pass) give what
// the plain bf16 path gives from bf16 copies, bit for bit: the same roundings
// fed to the same primitives. resnet's layers (16+ channels in: no padded
// blocks) pack; so may layers whose x oneDNN reads plain (few channels in).
TEST(ConvDispatch, PackedBf16EqualsPlainBf16) {
  if (!onednn::hasAvx512() || !onednnConvBf16()) GTEST_SKIP() << "no oneDNN bf16 kernels";
  int packedWide = 0;
  for (const ConvShape& s : kShapes) {
    const ConvPacking packing = convPacking(s);
    const bool wide = s.Cin >= 16 && s.Cout >= 16;
    if (!packing.packed()) {
      EXPECT_FALSE(wide) << describe(s);
      continue;
    }
    packedWide += wide;
    const std::string what = describe(s);
    const Data d = randomData(s, 31);
    const auto xh = bf16(d.x), wh = bf16(d.w), gyh = bf16(d.gy);
    std::vector<float> y(d.gy.size()), gx(d.x.size()), gw(d.w.size()), gb(s.Cout);
    convolve(s, xh.data(), wh.data(), d.b.data(), y.data());
    convolveBackward(s, xh.data(), wh.data(), gyh.data(), gx.data(), gw.data(), gb.data());

    EXPECT_EQ(packing.x, s.N * s.Cin * s.H * s.W) << what;
    std::vector<BFloat16> xp(packing.x), gyp(packing.gy);
    packConvInput(s, d.x.data(), xp.data());
    packConvOutputGrad(s, d.gy.data(), gyp.data());
    std::vector<float> py(y.size()), pgx(gx.size()), pgw(gw.size()), pgb(gb.size()),
        pgw2(gw.size()), pgb2(gb.size());
    convolvePacked(s, xp.data(), wh.data(), d.b.data(), py.data());
    convolveBackwardPacked(s, xp.data(), wh.data(), gyp.data(), pgx.data(), pgw.data(), pgb.data());
    // Each output alone too, and the bias gradient of a frozen weight.
    std::vector<float> pgx2(gx.size());
    convolveBackwardPacked(s, xp.data(), wh.data(), gyp.data(), pgx2.data(), nullptr, nullptr);
    convolveBackwardPacked(s, xp.data(), wh.data(), gyp.data(), nullptr, pgw2.data(), nullptr);
    convolveBackwardPacked(s, xp.data(), wh.data(), gyp.data(), nullptr, nullptr, pgb2.data());
    EXPECT_EQ(py, y) << "y " << what;
    EXPECT_EQ(pgx, gx) << "gx " << what;
    EXPECT_EQ(pgx2, gx) << "gx alone " << what;
    EXPECT_EQ(pgw, gw) << "gw " << what;
    EXPECT_EQ(pgw2, gw) << "gw alone " << what;
    EXPECT_EQ(pgb, gb) << "gbias " << what;
    EXPECT_EQ(pgb2, gb) << "gbias alone " << what;
  }
  EXPECT_EQ(packedWide, 4);  // resnet's 3x3 layers and its shortcut
}
