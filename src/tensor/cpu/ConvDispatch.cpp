#include "tensor/cpu/ConvDispatch.h"

#include <type_traits>

#include "core/Scratch.h"
#include "tensor/cpu/Bf16.h"
#include "tensor/cpu/Blocked.h"
#include "tensor/cpu/Onednn.h"
#include "tensor/cpu/OnednnConv.h"

namespace dtrain::kernels {
namespace {

// fp32 operands as they are; bf16 ones widened into this thread's scratch
// buffer `slot` (one per operand, so several can be live at once).
const float* widened(const float* p, int64_t, int) { return p; }
const float* widened(const BFloat16* p, int64_t n, int slot) {
  thread_local ScratchBuffer<float> buffers[3];
  float* out = buffers[slot].grow(n);
  fromBf16(p, out, n);
  return out;
}

// Where dtrain's kernels run a pass of a layer whose activations are
// channel-blocked: plain copies in this thread's scratch `slot`, and blocked
// results reordered back (the model's edges: the stem reads a plain image).
const float* plainCopy(const float* p, bool blocked, int64_t N, int64_t C, int64_t S, int slot) {
  if (!blocked) return p;
  thread_local ScratchBuffer<float> buffers[3];
  float* out = buffers[slot].grow(N * C * S);
  fromChannelBlocked(p, out, N, C, S);
  return out;
}
float* plainOutput(float* p, bool blocked, int64_t n) {
  if (!blocked) return p;
  thread_local ScratchBuffer<float> buffer;
  return buffer.grow(n);
}
void blockOutput(const float* plain, float* out, bool blocked, int64_t N, int64_t C, int64_t S) {
  if (blocked) toChannelBlocked(plain, out, N, C, S);
}

template <typename T>
void forward(const ConvShape& s, const T* x, const T* w, const float* bias, float* y,
             ConvLayout l = {}) {
  constexpr bool bf16 = std::is_same_v<T, BFloat16>;
  if (convImplFor(s, ConvPass::Forward, bf16, l.x || l.y) == ConvImpl::OneDnn) {
    onednn::convForward(s, bf16, x, w, bias, y, l);
    return;
  }
  const int64_t S = s.H * s.W, oS = s.outH() * s.outW();
  const float* xp = plainCopy(widened(x, s.N * s.Cin * S, 0), l.x, s.N, s.Cin, S, 0);
  float* yp = plainOutput(y, l.y, s.N * s.Cout * oS);
  conv2dForward(s, xp, widened(w, s.Cout * s.Cin * s.KH * s.KW, 1), bias, yp);
  blockOutput(yp, y, l.y, s.N, s.Cout, oS);
}

template <typename T>
void backward(const ConvShape& s, const T* x, const T* w, const T* gy, float* gx, float* gw,
              float* gbias, ConvLayout l = {}) {
  constexpr bool bf16 = std::is_same_v<T, BFloat16>;
  const bool blocked = l.x || l.y;
  const bool dataOnednn =
      gx && convImplFor(s, ConvPass::BackwardData, bf16, blocked) == ConvImpl::OneDnn;
  const bool weightsOnednn =
      gw && convImplFor(s, ConvPass::BackwardWeights, bf16, blocked) == ConvImpl::OneDnn;
  if (dataOnednn) onednn::convBackwardData(s, bf16, gy, w, gx, l);
  if (weightsOnednn) onednn::convBackwardWeights(s, bf16, x, gy, gw, gbias, l);
  // What is left runs on dtrain's kernels, which read w only for gx and x only for gw.
  gx = dataOnednn ? nullptr : gx;
  gw = weightsOnednn ? nullptr : gw;
  gbias = weightsOnednn ? nullptr : gbias;
  if (!gx && !gw && !gbias) return;
  const int64_t S = s.H * s.W, oS = s.outH() * s.outW();
  const int64_t nx = s.N * s.Cin * S, ny = s.N * s.Cout * oS;
  float* gxp = gx ? plainOutput(gx, l.x, nx) : nullptr;
  conv2dBackward(s, gw ? plainCopy(widened(x, nx, 0), l.x, s.N, s.Cin, S, 0) : nullptr,
                 gx ? widened(w, s.Cout * s.Cin * s.KH * s.KW, 1) : nullptr,
                 plainCopy(widened(gy, ny, 2), l.y, s.N, s.Cout, oS, 2), gxp, gw, gbias);
  if (gx) blockOutput(gxp, gx, l.x, s.N, s.Cin, S);
}

}  // namespace

ConvImpl convImplFor(const ConvShape& s, ConvPass pass, bool bf16, bool blocked) {
  // oneDNN's kernels were measured on AVX-512 only; empty shapes stay with
  // dtrain's kernels, which handle them.
  if (!onednn::hasAvx512() || (bf16 && !onednnConvBf16())) return ConvImpl::Dtrain;
  if (s.N == 0 || s.Cin == 0 || s.Cout == 0) return ConvImpl::Dtrain;
  // Blocked activations in and out: oneDNN reads and writes them in place,
  // where dtrain's kernels would reorder both (the 1x1 shortcuts included).
  const auto full = [](int64_t c) { return c % kChannelBlock == 0; };
  if (!bf16 && blocked && full(s.Cin) && full(s.Cout)) return ConvImpl::OneDnn;
  // Chosen per layer and pass with bench/ConvBench.cpp (lenet's layers, batch
  // 64 and 10 alike). oneDNN's direct kernels work on blocks of 16 output
  // channels (and, in bf16, pairs of input channels) in blocked layouts that
  // dtrain's tensors are reordered to and from. A layer with few output
  // channels (lenet's conv1, 1 -> 6) fills few of the 16 lanes and reorders a
  // padded output, so dtrain's kernels win every pass there. With a full block
  // (conv2, 6 -> 16) oneDNN wins the fp32 forward and, with its bf16 dot
  // products, every bf16 pass; its fp32 backward kernels are slower than
  // dtrain's where the input channels are few.
  const bool blocks = s.Cout >= 16 && s.Cin >= 2;
  // resnet-20 (conv_bench --model resnet-20): on 3x3 layers with at least 16
  // channels in and out oneDNN's blocked kernels win the backward passes too;
  // on the 1x1 projection shortcuts dtrain's kernels (one GEMM, no reorders)
  // win every pass.
  const bool pointwise = s.KH == 1 && s.KW == 1;
  if (!bf16 && pointwise) return ConvImpl::Dtrain;
  const bool wide = s.Cin >= 16 && s.Cout >= 16;
  return blocks && (bf16 || pass == ConvPass::Forward || wide) ? ConvImpl::OneDnn
                                                               : ConvImpl::Dtrain;
}

bool onednnConvBf16() { return onednn::supportsBf16(); }

bool convBlockable(const ConvShape& s) {
  return onednn::hasAvx512() && s.Cout > 0 && s.Cout % kChannelBlock == 0;
}

void convolve(const ConvShape& s, const float* x, const float* w, const float* bias, float* y,
              ConvLayout layout) {
  forward(s, x, w, bias, y, layout);
}
void convolve(const ConvShape& s, const BFloat16* x, const BFloat16* w, const float* bias,
              float* y) {
  forward(s, x, w, bias, y);
}
void convolveBackward(const ConvShape& s, const float* x, const float* w, const float* gy,
                      float* gx, float* gw, float* gbias, ConvLayout layout) {
  backward(s, x, w, gy, gx, gw, gbias, layout);
}
void convolveBackward(const ConvShape& s, const BFloat16* x, const BFloat16* w, const BFloat16* gy,
                      float* gx, float* gw, float* gbias) {
  backward(s, x, w, gy, gx, gw, gbias);
}

ConvPacking convPacking(const ConvShape& s) {
  for (ConvPass p : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardWeights})
    if (convImplFor(s, p, true) != ConvImpl::OneDnn) return {};
  const auto elements = [&](onednn::Packed which) {
    return static_cast<int64_t>(onednn::packedBytes(s, which) / sizeof(BFloat16));
  };
  const int64_t x = elements(onednn::Packed::Src);
  if (x != s.N * s.Cin * s.H * s.W) return {};  // padded channels: more memory kept
  return {x, elements(onednn::Packed::DiffDst)};
}

void packConvInput(const ConvShape& s, const float* x, BFloat16* out) {
  onednn::pack(s, onednn::Packed::Src, x, out);
}
void packConvOutputGrad(const ConvShape& s, const float* gy, BFloat16* out) {
  onednn::pack(s, onednn::Packed::DiffDst, gy, out);
}
void convolvePacked(const ConvShape& s, const BFloat16* x, const BFloat16* w, const float* bias,
                    float* y) {
  onednn::convForwardPacked(s, x, w, bias, y);
}
void convolveBackwardPacked(const ConvShape& s, const BFloat16* x, const BFloat16* w,
                            const BFloat16* gy, float* gx, float* gw, float* gbias) {
  if (gx) onednn::convBackwardDataPacked(s, gy, w, gx);
  if (gw) {
    onednn::convBackwardWeightsPacked(s, x, gy, gw, gbias);
  } else if (gbias) {
    // The bias gradient alone (a frozen weight): sum gy over batch and pixels.
    thread_local ScratchBuffer<float> weights;
    onednn::convBackwardWeightsPacked(s, x, gy, weights.grow(s.Cout * s.Cin * s.KH * s.KW), gbias);
  }
}

}  // namespace dtrain::kernels
