// NumPy/PyTorch broadcasting: a tensor repeated along its size-1 (or missing
// leading) axes, whose gradient sums over them.
#include "autograd/Ops.h"
#include "autograd/ops/OpUtil.h"

namespace dtrain::autograd {
namespace {

// For each axis of `out`, the stride of `in` along it: 0 where `in` is broadcast.
std::vector<int64_t> broadcastStrides(const Shape& in, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    const size_t inAxis = in.size() - 1 - k, outAxis = out.size() - 1 - k;
    if (in[inAxis] != 1) strides[outAxis] = stride;
    stride *= in[inAxis];
  }
  return strides;
}

// Calls visit(outIndex, inOffset) for every element of `out` in order.
template <typename Visit>
void forEachBroadcast(const Shape& in, const Shape& out, Visit&& visit) {
  const std::vector<int64_t> strides = broadcastStrides(in, out);
  std::vector<int64_t> index(out.size(), 0);
  const int64_t n = shapeNumel(out);
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    visit(i, offset);
    for (size_t axis = out.size(); axis-- > 0;) {  // odometer over the output's axes
      offset += strides[axis];
      if (++index[axis] < out[axis]) break;
      offset -= strides[axis] * out[axis];
      index[axis] = 0;
    }
  }
}

class BroadcastNode final : public Node {
 public:
  BroadcastNode(Shape in, Shape out) : in_(std::move(in)), out_(std::move(out)) {}
  const char* name() const override { return "broadcast"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const float* g = gy.data<float>();
    detail::writeGrad(sink, 0, shapeNumel(in_), [&](float* o) {
      std::fill(o, o + shapeNumel(in_), 0.f);
      forEachBroadcast(in_, out_, [&](int64_t i, int64_t at) { o[at] += g[i]; });
    });
  }

 private:
  Shape in_, out_;
};

std::string shapeTuple(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += std::to_string(s[i]) + (s.size() == 1 || i + 1 < s.size() ? "," : "");
  return out + ")";
}

}  // namespace

Shape broadcastShape(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    const int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    DTRAIN_CHECK_USAGE(da == db || da == 1 || db == 1, "operands could not be broadcast together "
                       "with shapes ", shapeTuple(a), " ", shapeTuple(b));
    out[out.size() - 1 - k] = da == 1 ? db : da;
  }
  return out;
}

Variable broadcastTo(const Variable& x, const Shape& shape) {
  Tensor xd = detail::contig(x, "broadcast", "input");
  DTRAIN_CHECK_USAGE(broadcastShape(xd.shape(), shape) == shape, "cannot broadcast shape ",
                     shapeTuple(xd.shape()), " to ", shapeTuple(shape));
  if (xd.shape() == shape) return x;
  Tensor y = Tensor::empty(shape);
  const float* in = xd.data<float>();
  float* out = y.data<float>();
  forEachBroadcast(xd.shape(), shape, [&](int64_t i, int64_t at) { out[i] = in[at]; });
  if (!needsGraph({&x})) return Variable(std::move(y));
  return record(std::move(y), std::make_shared<BroadcastNode>(xd.shape(), shape), {&x});
}

}  // namespace dtrain::autograd
