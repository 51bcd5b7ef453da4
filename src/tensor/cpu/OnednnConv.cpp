#include "tensor/cpu/OnednnConv.h"

#include <cstring>
#include <initializer_list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/Error.h"
#include "core/Scratch.h"
#include "tensor/cpu/OnednnContext.h"

// Primitives are created with format_tag::any. On dtrain's plain layouts
// (nchw, oihw) oneDNN 2.6 runs im2col + GEMM ("gemm:jit"), which on lenet's
// layers runs several times slower than its direct jit kernels on the blocked layouts
// they choose (nChw16c, blocked weights); so each operand whose chosen layout
// is not dtrain's is reordered into (inputs) or out of (outputs) a scratch
// buffer per call, and the reorders are part of what bench/ConvBench.cpp times.
namespace dtrain::kernels::onednn {
namespace {

using dnnl::memory;
using Dt = memory::data_type;
using Tag = memory::format_tag;

enum class Pass : int64_t { Forward, BackwardData, BackwardWeights };
const char* const kPassNames[] = {"forward", "backward-data", "backward-weights"};

// All int64_t: no padding bytes, so memcmp equality and hashing are safe.
struct Key {
  ConvShape s;
  Pass pass;
  int64_t bf16, bias, threads;  // threads: a primitive may fix its blocking for its team
  int64_t blockedX, blockedY;   // ConvLayout: the user's activations in nChw16c
  bool operator==(const Key& o) const { return std::memcmp(this, &o, sizeof(Key)) == 0; }
};
static_assert(sizeof(Key) == sizeof(ConvShape) + 6 * sizeof(int64_t), "Key has padding");

// One argument of a primitive: `user` is dtrain's tensor (plain layout, data
// handle set per call); where the primitive chose another layout, `own` is
// the primitive's copy in a scratch buffer and `reorder` converts between them.
struct Operand {
  int arg;
  bool output;
  memory user, own;
  dnnl::reorder reorder;
  size_t ownBytes = 0;  // 0: no reorder, own is user
  // bf16 src / diff_dst given packed (packedLayouts()): `packed` wraps the
  // caller's data; where this primitive chose the packed layout it is read in
  // place (fromPackedBytes 0), else converted by `fromPacked` into scratch.
  memory packed;
  dnnl::reorder fromPacked;
  size_t fromPackedBytes = 0;
};

struct Entry {
  dnnl::primitive prim;
  std::vector<Operand> operands;  // in the order run() gets their pointers
  std::unordered_map<int, memory> args;
};

using Cache = std::unordered_map<Key, Entry, detail::BytewiseHash>;
Cache& cache() {
  thread_local Cache c;  // per thread, as the context: no lock
  return c;
}

Operand operand(const detail::Context& c, int arg, bool output, const memory::desc& plain,
                const memory::desc& chosen) {
  Operand o{arg, output, memory(plain, c.engine, DNNL_MEMORY_NONE), {}, {}, 0, {}, {}, 0};
  if (chosen == plain) {
    o.own = o.user;
    return o;
  }
  o.own = memory(chosen, c.engine, DNNL_MEMORY_NONE);
  o.reorder = output ? dnnl::reorder(o.own, o.user) : dnnl::reorder(o.user, o.own);
  o.ownBytes = chosen.get_size();
  return o;
}

// The descriptors of a convolution's primitives (dims and data types; `any`
// lets oneDNN choose the layouts).
struct Descs {
  memory::dims xd, wd, yd, strides, pad;
  Dt in;
  Descs(const ConvShape& s, bool bf16)
      : xd{s.N, s.Cin, s.H, s.W},
        wd{s.Cout, s.Cin, s.KH, s.KW},
        yd{s.N, s.Cout, s.outH(), s.outW()},
        strides{s.strideH, s.strideW},
        pad{s.padH, s.padW},
        in(bf16 ? Dt::bf16 : Dt::f32) {}
  static memory::desc any(const memory::dims& d, Dt t) { return memory::desc(d, t, Tag::any); }
  static memory::desc plain(const memory::dims& d, Dt t) {
    return memory::desc(d, t, d.size() == 4 ? Tag::abcd : Tag::a);
  }
  // An activation as the caller holds it: plain, or channel-blocked.
  static memory::desc user(const memory::dims& d, Dt t, bool blocked) {
    return blocked ? memory::desc(d, t, Tag::nChw16c) : plain(d, t);
  }
};

const auto kAlg = dnnl::algorithm::convolution_direct;

// Passing the left padding as the right one too is safe: dtrain's outH()
// rounds down as oneDNN's shape check does, and padding past the last window
// is never read. The forward descriptor is also the backward primitives' hint.
dnnl::convolution_forward::primitive_desc forwardPd(const detail::Context& c, const Descs& d,
                                                    bool bias) {
  using namespace dnnl;
  const memory::desc b = Descs::plain({d.wd[0]}, Dt::f32);
  const auto fd = bias ? convolution_forward::desc(prop_kind::forward_training, kAlg,
                                                   Descs::any(d.xd, d.in), Descs::any(d.wd, d.in),
                                                   b, Descs::any(d.yd, Dt::f32), d.strides, d.pad,
                                                   d.pad)
                       : convolution_forward::desc(prop_kind::forward_training, kAlg,
                                                   Descs::any(d.xd, d.in), Descs::any(d.wd, d.in),
                                                   Descs::any(d.yd, Dt::f32), d.strides, d.pad,
                                                   d.pad);
  return convolution_forward::primitive_desc(fd, c.engine);
}

dnnl::convolution_backward_data::primitive_desc backwardDataPd(
    const detail::Context& c, const Descs& d, const dnnl::convolution_forward::primitive_desc& hint) {
  using namespace dnnl;
  return convolution_backward_data::primitive_desc(
      convolution_backward_data::desc(kAlg, Descs::any(d.xd, Dt::f32), Descs::any(d.wd, d.in),
                                      Descs::any(d.yd, d.in), d.strides, d.pad, d.pad),
      c.engine, hint);
}

// The packed layouts of a shape: where the bf16 forward keeps x and the bf16
// backward-data reads gy. One per shape for the whole process, never
// recomputed (a tensor packed on one thread may be read on another, whose
// primitives could have chosen otherwise: they then reorder from these), so
// the map only grows: by two descriptors per convolution shape ever seen.
struct PackedLayouts {
  memory::desc src, diffDst;
};
struct ShapeKey {
  ConvShape s;
  bool operator==(const ShapeKey& o) const { return std::memcmp(this, &o, sizeof(*this)) == 0; }
};

const PackedLayouts& packedLayouts(const detail::Context& c, const ConvShape& s) {
  static std::mutex mutex;
  static std::unordered_map<ShapeKey, PackedLayouts, detail::BytewiseHash> layouts;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = layouts.find(ShapeKey{s});
  if (it != layouts.end()) return it->second;
  const Descs d(s, true);
  const auto fpd = forwardPd(c, d, false);
  const auto bpd = backwardDataPd(c, d, fpd);
  return layouts.emplace(ShapeKey{s}, PackedLayouts{fpd.src_desc(), bpd.diff_dst_desc()})
      .first->second;  // references into an unordered_map stay valid as it grows
}

// An input operand that may also be given packed (bf16 src or diff_dst).
Operand packable(const detail::Context& c, Operand o, const memory::desc& packedDesc) {
  o.packed = memory(packedDesc, c.engine, DNNL_MEMORY_NONE);
  if (packedDesc != o.own.get_desc()) {
    o.fromPacked = dnnl::reorder(o.packed, memory(o.own.get_desc(), c.engine, DNNL_MEMORY_NONE));
    o.fromPackedBytes = o.own.get_desc().get_size();
  }
  return o;
}

Entry makeEntry(const detail::Context& c, const Key& k) {
  using namespace dnnl;
  const ConvShape& s = k.s;
  const Descs d(s, k.bf16);
  const Dt in = d.in;
  const memory::dims &xd = d.xd, &wd = d.wd, &yd = d.yd, &strides = d.strides, &pad = d.pad;
  const auto any = Descs::any;
  const auto plain = Descs::plain;
  const memory::desc bias = plain({s.Cout}, Dt::f32);
  const auto alg = kAlg;
  const convolution_forward::primitive_desc fpd = forwardPd(c, d, k.bias);
  const PackedLayouts* packedAs = k.bf16 ? &packedLayouts(c, s) : nullptr;
  auto input = [&](int arg, const memory::desc& plainDesc, const memory::desc& chosen,
                   const memory::desc* packedDesc) {
    Operand o = operand(c, arg, false, plainDesc, chosen);
    return packedDesc ? packable(c, std::move(o), *packedDesc) : o;
  };
  Entry e;
  std::vector<Operand>& ops = e.operands;
  const memory::desc xUser = Descs::user(xd, in, k.blockedX),
                     yUser = Descs::user(yd, in, k.blockedY),
                     gxUser = Descs::user(xd, Dt::f32, k.blockedX),
                     yOut = Descs::user(yd, Dt::f32, k.blockedY);
  if (k.pass == Pass::Forward) {
    e.prim = convolution_forward(fpd);
    ops.push_back(input(DNNL_ARG_SRC, xUser, fpd.src_desc(), packedAs ? &packedAs->src : nullptr));
    ops.push_back(operand(c, DNNL_ARG_WEIGHTS, false, plain(wd, in), fpd.weights_desc()));
    if (k.bias) ops.push_back(operand(c, DNNL_ARG_BIAS, false, bias, fpd.bias_desc()));
    ops.push_back(operand(c, DNNL_ARG_DST, true, yOut, fpd.dst_desc()));
  } else if (k.pass == Pass::BackwardData) {
    const auto pd = backwardDataPd(c, d, fpd);
    e.prim = convolution_backward_data(pd);
    ops.push_back(input(DNNL_ARG_DIFF_DST, yUser, pd.diff_dst_desc(),
                        packedAs ? &packedAs->diffDst : nullptr));
    ops.push_back(operand(c, DNNL_ARG_WEIGHTS, false, plain(wd, in), pd.weights_desc()));
    ops.push_back(operand(c, DNNL_ARG_DIFF_SRC, true, gxUser, pd.diff_src_desc()));
  } else {
    const auto d = k.bias ? convolution_backward_weights::desc(alg, any(xd, in), any(wd, Dt::f32),
                                                               bias, any(yd, in), strides, pad, pad)
                          : convolution_backward_weights::desc(alg, any(xd, in), any(wd, Dt::f32),
                                                               any(yd, in), strides, pad, pad);
    const convolution_backward_weights::primitive_desc pd(d, c.engine, fpd);
    e.prim = convolution_backward_weights(pd);
    ops.push_back(input(DNNL_ARG_SRC, xUser, pd.src_desc(), packedAs ? &packedAs->src : nullptr));
    ops.push_back(input(DNNL_ARG_DIFF_DST, yUser, pd.diff_dst_desc(),
                        packedAs ? &packedAs->diffDst : nullptr));
    ops.push_back(
        operand(c, DNNL_ARG_DIFF_WEIGHTS, true, plain(wd, Dt::f32), pd.diff_weights_desc()));
    if (k.bias) ops.push_back(operand(c, DNNL_ARG_DIFF_BIAS, true, bias, pd.diff_bias_desc()));
  }
  for (const Operand& o : ops) e.args.emplace(o.arg, o.own);
  return e;
}

std::string describe(const ConvShape& s) {
  return dtrain::detail::concat("N", s.N, " Cin", s.Cin, " ", s.H, "x", s.W, " Cout", s.Cout,
                                " kernel ", s.KH, "x", s.KW, " stride ", s.strideH, "x", s.strideW,
                                " padding ", s.padH, "x", s.padW);
}

// Runs the cached primitive of (s, pass, bf16, bias); ptrs are its operands'
// data in Entry::operands' order, those whose bit is set in `packedMask`
// (bf16 src and diff_dst only) in their packed layouts.
void run(const ConvShape& s, Pass pass, bool bf16, bool bias,
         std::initializer_list<const void*> ptrs, unsigned packedMask = 0, ConvLayout layout = {}) {
  DTRAIN_CHECK(
      s.N > 0 && s.Cin > 0 && s.Cout > 0 && s.KH > 0 && s.KW > 0 && s.outH() > 0 && s.outW() > 0,
      "oneDNN convolution: empty or invalid shape ", describe(s));
  detail::Context& c = detail::context();
  Cache& cached = cache();
  DTRAIN_CHECK(!bf16 || (!layout.x && !layout.y),
               "oneDNN convolution: bf16 operands are never channel-blocked");
  const Key k{s, pass, bf16, bias, c.threads, layout.x, layout.y};
  auto it = cached.find(k);
  if (it == cached.end()) {
    if (cached.size() >= 256) cached.clear();  // training sees a few shapes; bound odd uses
    try {
      it = cached.emplace(k, makeEntry(c, k)).first;
    } catch (const dnnl::error& e) {
      throw Error(dtrain::detail::concat("oneDNN ", bf16 ? "bf16" : "fp32", " convolution ",
                                         kPassNames[static_cast<int>(pass)], " for ", describe(s),
                                         ": ", e.what()));
    }
  }
  // Scratch for the operands' own layouts, one buffer per operand position,
  // shared by all shapes (they only grow), counted in the memory statistics.
  thread_local ScratchBuffer<char> scratch[4];
  Entry& e = it->second;
  const void* const* p = ptrs.begin();
  for (size_t i = 0; i < e.operands.size(); ++i) {
    Operand& o = e.operands[i];
    void* data = const_cast<void*>(p[i]);
    if (packedMask & (1u << i)) {
      DTRAIN_CHECK(o.packed, "oneDNN convolution: operand ", i, " cannot be packed");
      o.packed.set_data_handle(data);
      if (o.fromPackedBytes == 0) {
        o.own.set_data_handle(data);  // the layout this primitive reads
      } else {
        o.own.set_data_handle(scratch[i].grow(static_cast<int64_t>(o.fromPackedBytes)));
        o.fromPacked.execute(c.stream, o.packed, o.own);
      }
      continue;
    }
    o.user.set_data_handle(data);  // own too where it is user (one handle): after a packed call
    if (o.ownBytes == 0) continue;
    o.own.set_data_handle(scratch[i].grow(static_cast<int64_t>(o.ownBytes)));
    if (!o.output) o.reorder.execute(c.stream, o.user, o.own);
  }
  e.prim.execute(c.stream, e.args);
  for (Operand& o : e.operands)
    if (o.output && o.ownBytes != 0) o.reorder.execute(c.stream, o.own, o.user);
}

}  // namespace

void convForward(const ConvShape& s, bool bf16, const void* x, const void* w, const float* bias,
                 float* y, ConvLayout layout) {
  if (bias)
    run(s, Pass::Forward, bf16, true, {x, w, bias, y}, 0, layout);
  else
    run(s, Pass::Forward, bf16, false, {x, w, y}, 0, layout);
}

void convBackwardData(const ConvShape& s, bool bf16, const void* gy, const void* w, float* gx,
                      ConvLayout layout) {
  run(s, Pass::BackwardData, bf16, false, {gy, w, gx}, 0, layout);
}

void convBackwardWeights(const ConvShape& s, bool bf16, const void* x, const void* gy, float* gw,
                         float* gbias, ConvLayout layout) {
  if (gbias)
    run(s, Pass::BackwardWeights, bf16, true, {x, gy, gw, gbias}, 0, layout);
  else
    run(s, Pass::BackwardWeights, bf16, false, {x, gy, gw}, 0, layout);
}

namespace {
const memory::desc& packedDesc(const detail::Context& c, const ConvShape& s, Packed which) {
  const PackedLayouts& l = packedLayouts(c, s);
  return which == Packed::Src ? l.src : l.diffDst;
}
}  // namespace

size_t packedBytes(const ConvShape& s, Packed which) {
  return packedDesc(detail::context(), s, which).get_size();
}

void pack(const ConvShape& s, Packed which, const float* plain, void* packed) {
  detail::Context& c = detail::context();
  const memory::desc& to = packedDesc(c, s, which);
  const memory::dims dims = which == Packed::Src ? memory::dims{s.N, s.Cin, s.H, s.W}
                                                 : memory::dims{s.N, s.Cout, s.outH(), s.outW()};
  // One reorder per shape and direction, per thread (primitives belong to an engine).
  struct Reorder {
    memory from, to;
    dnnl::reorder prim;
  };
  struct PackKey {
    ConvShape s;
    int64_t which;
    bool operator==(const PackKey& o) const { return std::memcmp(this, &o, sizeof(*this)) == 0; }
  };
  thread_local std::unordered_map<PackKey, Reorder, detail::BytewiseHash> reorders;
  const PackKey key{s, static_cast<int64_t>(which)};
  auto it = reorders.find(key);
  if (it == reorders.end()) {
    if (reorders.size() >= 256) reorders.clear();
    Reorder r{memory(Descs::plain(dims, Dt::f32), c.engine, DNNL_MEMORY_NONE),
              memory(to, c.engine, DNNL_MEMORY_NONE), {}};
    r.prim = dnnl::reorder(r.from, r.to);
    it = reorders.emplace(key, std::move(r)).first;
  }
  Reorder& r = it->second;
  r.from.set_data_handle(const_cast<float*>(plain));
  r.to.set_data_handle(packed);
  r.prim.execute(c.stream, r.from, r.to);
}

void convForwardPacked(const ConvShape& s, const void* x, const void* w, const float* bias,
                       float* y) {
  if (bias)
    run(s, Pass::Forward, true, true, {x, w, bias, y}, 1u);
  else
    run(s, Pass::Forward, true, false, {x, w, y}, 1u);
}

void convBackwardDataPacked(const ConvShape& s, const void* gy, const void* w, float* gx) {
  run(s, Pass::BackwardData, true, false, {gy, w, gx}, 1u);
}

void convBackwardWeightsPacked(const ConvShape& s, const void* x, const void* gy, float* gw,
                               float* gbias) {
  if (gbias)
    run(s, Pass::BackwardWeights, true, true, {x, gy, gw, gbias}, 3u);
  else
    run(s, Pass::BackwardWeights, true, false, {x, gy, gw}, 3u);
}

size_t cachedConvPrimitives() { return cache().size(); }

}  // namespace dtrain::kernels::onednn
