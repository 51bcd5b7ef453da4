#include "tensor/Tensor.h"

#include <cstring>
#include <numeric>
#include <sstream>

#include "tensor/cpu/Blocked.h"

namespace dtrain {

int64_t shapeNumel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shapeStr(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

Shape contiguousStrides(const Shape& shape) {
  Shape st(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    acc *= shape[i];
  }
  return st;
}

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset,
               DType dtype)
    : storage_(std::move(storage)),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset),
      numel_(shapeNumel(shape_)),
      dtype_(dtype) {}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) DTRAIN_CHECK(d >= 0, "Tensor::empty: negative dimension in shape ", shapeStr(shape));
  auto storage = std::make_shared<Storage>(shapeNumel(shape) * dtypeSize(dtype), device);
  return Tensor(std::move(storage), shape, contiguousStrides(shape), 0, dtype);
}

bool Tensor::blockable(const Shape& shape) {
  return shape.size() == 4 && shape[1] > 0 && shape[1] % kernels::kChannelBlock == 0;
}

Tensor Tensor::emptyBlocked(const Shape& shape) {
  DTRAIN_CHECK(blockable(shape), "Tensor::emptyBlocked: ", shapeStr(shape),
               " is not [N, C, H, W] with C a multiple of ", kernels::kChannelBlock);
  Tensor t = empty(shape);
  t.format_ = MemoryFormat::ChannelBlocked;
  return t;
}

Tensor Tensor::emptyIn(const Shape& shape, MemoryFormat format) {
  return format == MemoryFormat::ChannelBlocked ? emptyBlocked(shape) : empty(shape);
}

Tensor Tensor::toFormat(MemoryFormat format) const {
  if (format == format_) return *this;
  Tensor t = emptyIn(shape_, format);
  t.copyFrom(*this);
  return t;
}

Tensor Tensor::fromStorage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype) {
  DTRAIN_CHECK(storage && storage->bytes() >= shapeNumel(shape) * dtypeSize(dtype),
               "Tensor::fromStorage: ", shapeStr(shape), " does not fit the storage");
  return Tensor(std::move(storage), shape, contiguousStrides(shape), 0, dtype);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  std::memset(t.rawData(), 0, t.nbytes());
  return t;
}

Tensor Tensor::full(const Shape& shape, float value) {
  Tensor t = empty(shape);
  t.fill(value);
  return t;
}

Tensor Tensor::fromVector(const std::vector<float>& values, const Shape& shape) {
  DTRAIN_CHECK(static_cast<int64_t>(values.size()) == shapeNumel(shape), "Tensor::fromVector: ",
               values.size(), " values for shape ", shapeStr(shape));
  Tensor t = empty(shape);
  std::memcpy(t.rawData(), values.data(), t.nbytes());
  return t;
}

Tensor Tensor::fromInts(const std::vector<int32_t>& values, const Shape& shape) {
  DTRAIN_CHECK(static_cast<int64_t>(values.size()) == shapeNumel(shape), "Tensor::fromVector: ",
               values.size(), " values for shape ", shapeStr(shape));
  Tensor t = empty(shape, DType::I32);
  std::memcpy(t.rawData(), values.data(), t.nbytes());
  return t;
}

void Tensor::checkType(DType t) const {
  DTRAIN_CHECK(storage_, "access to an undefined tensor");
  DTRAIN_CHECK(t == dtype_, "tensor has dtype ", dtypeName(dtype_), ", accessed as ", dtypeName(t));
}

int64_t Tensor::normDim(int64_t d) const {
  int64_t n = dim();
  DTRAIN_CHECK(d >= -n && d < n, "dimension ", d, " out of range for a ", n, "-d tensor");
  return d < 0 ? d + n : d;
}

int64_t Tensor::size(int64_t d) const { return shape_[normDim(d)]; }

bool Tensor::isContiguous() const {
  if (blocked()) return false;
  int64_t acc = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] != 1 && strides_[i] != acc) return false;
    acc *= shape_[i];
  }
  return true;
}

static Shape inferShape(const Shape& shape, int64_t numel) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      DTRAIN_CHECK(infer < 0, "reshape: more than one -1 in ", shapeStr(shape));
      infer = static_cast<int64_t>(i);
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0) {
    DTRAIN_CHECK(known > 0 && numel % known == 0, "reshape: cannot infer ", shapeStr(shape),
                 " for ", numel, " elements");
    out[infer] = numel / known;
  }
  DTRAIN_CHECK(shapeNumel(out) == numel, "reshape: shape ", shapeStr(shape), " does not hold ",
               numel, " elements");
  return out;
}

Tensor Tensor::view(const Shape& shape) const {
  DTRAIN_CHECK(isContiguous(), "view: tensor of shape ", shapeStr(shape_), " is not contiguous");
  Shape s = inferShape(shape, numel_);
  return Tensor(storage_, s, contiguousStrides(s), offset_, dtype_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  return isContiguous() ? view(shape) : contiguous().view(shape);
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  a = normDim(a);
  b = normDim(b);
  Tensor t = plainView();
  std::swap(t.shape_[a], t.shape_[b]);
  std::swap(t.strides_[a], t.strides_[b]);
  return t;
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end) const {
  d = normDim(d);
  DTRAIN_CHECK(0 <= start && start <= end && end <= shape_[d], "slice [", start, ", ", end,
               ") out of range for dimension ", d, " of size ", shape_[d]);
  Tensor t = plainView();
  t.offset_ += start * strides_[d];
  t.shape_[d] = end - start;
  t.numel_ = shapeNumel(t.shape_);
  return t;
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = normDim(d);
  DTRAIN_CHECK(0 <= index && index < shape_[d], "select: index ", index,
               " out of range for dimension ", d, " of size ", shape_[d]);
  Tensor t = plainView();
  t.offset_ += index * strides_[d];
  t.shape_.erase(t.shape_.begin() + d);
  t.strides_.erase(t.strides_.begin() + d);
  t.numel_ = shapeNumel(t.shape_);
  return t;
}

Tensor Tensor::flatten(int64_t startDim) const {
  startDim = normDim(startDim);
  Shape s(shape_.begin(), shape_.begin() + startDim);
  s.push_back(-1);
  if (numel_ == 0) s.back() = 0;
  return reshape(s);
}

// Copies any-strided src into contiguous-or-strided dst, element by element for
// the general case and with memcpy on contiguous runs.
static void stridedCopy(char* dst, const Shape& dstStrides, const char* src,
                        const Shape& srcStrides, const Shape& shape, size_t elem) {
  const size_t nd = shape.size();
  if (nd == 0) {
    std::memcpy(dst, src, elem);
    return;
  }
  std::vector<int64_t> idx(nd, 0);
  const int64_t inner = shape[nd - 1];
  const bool innerContig = dstStrides[nd - 1] == 1 && srcStrides[nd - 1] == 1;
  const int64_t outer = inner ? shapeNumel(shape) / inner : 0;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t d = 0, s = 0;
    for (size_t k = 0; k + 1 < nd; ++k) {
      d += idx[k] * dstStrides[k];
      s += idx[k] * srcStrides[k];
    }
    if (innerContig) {
      std::memcpy(dst + d * elem, src + s * elem, inner * elem);
    } else {
      for (int64_t i = 0; i < inner; ++i)
        std::memcpy(dst + (d + i * dstStrides[nd - 1]) * elem,
                    src + (s + i * srcStrides[nd - 1]) * elem, elem);
    }
    for (size_t k = nd - 1; k-- > 0;) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
}

void Tensor::copyFrom(const Tensor& src) {
  DTRAIN_CHECK(defined() && src.defined(), "copyFrom: undefined tensor");
  DTRAIN_CHECK(shape_ == src.shape_, "copyFrom: shape ", shapeStr(src.shape_), " into ",
               shapeStr(shape_));
  DTRAIN_CHECK(dtype_ == src.dtype_, "copyFrom: dtype ", dtypeName(src.dtype_), " into ",
               dtypeName(dtype_));
  if (blocked() || src.blocked()) {
    copyAcrossFormats(src);
    return;
  }
  if (isContiguous() && src.isContiguous()) {
    std::memmove(rawData(), src.rawData(), nbytes());
    return;
  }
  stridedCopy(static_cast<char*>(rawData()), strides_, static_cast<const char*>(src.rawData()),
              src.strides_, shape_, dtypeSize(dtype_));
}

// The copy across formats: both sides dense (a strided plain side is made
// contiguous first), one reorder.
void Tensor::copyAcrossFormats(const Tensor& src) {
  if (format_ == src.format_) {
    std::memmove(rawData(), src.rawData(), nbytes());
    return;
  }
  const int64_t N = shape_[0], C = shape_[1], S = shape_[2] * shape_[3];
  if (blocked()) {
    const Tensor plain = src.contiguous();
    kernels::toChannelBlocked(plain.data<float>(), data<float>(), N, C, S);
  } else if (isContiguous()) {
    kernels::fromChannelBlocked(src.data<float>(), data<float>(), N, C, S);
  } else {
    copyFrom(src.contiguous());
  }
}

Tensor Tensor::plainView() const { return blocked() ? contiguous() : *this; }

Tensor Tensor::contiguous() const {
  if (isContiguous()) return *this;
  if (blocked()) return toFormat(MemoryFormat::Plain);
  return clone();
}

Tensor Tensor::clone() const {
  Tensor t = blocked() ? emptyBlocked(shape_) : empty(shape_, dtype_, device());
  t.copyFrom(*this);
  return t;
}

void Tensor::fill(float value) {
  DTRAIN_CHECK(isContiguous() || blocked(), "fill: tensor is not contiguous");
  float* p = data<float>();
  for (int64_t i = 0; i < numel_; ++i) p[i] = value;
}

void Tensor::zero() {
  DTRAIN_CHECK(isContiguous() || blocked(), "zero: tensor is not contiguous");
  std::memset(rawData(), 0, nbytes());
}

float Tensor::item() const {
  DTRAIN_CHECK(numel_ == 1, "item: tensor of shape ", shapeStr(shape_), " has ", numel_,
               " elements");
  return *data<float>();
}

float Tensor::at(std::initializer_list<int64_t> index) const {
  if (blocked()) return contiguous().at(index);
  DTRAIN_CHECK(static_cast<int64_t>(index.size()) == dim(), "at: ", index.size(),
               " indices for a ", dim(), "-d tensor");
  int64_t off = 0, k = 0;
  for (int64_t i : index) {
    DTRAIN_CHECK(i >= 0 && i < shape_[k], "at: index ", i, " out of range in dimension ", k);
    off += i * strides_[k++];
  }
  return data<float>()[off];
}

std::vector<float> Tensor::toVector() const {
  Tensor c = contiguous();
  const float* p = c.data<float>();
  return std::vector<float>(p, p + numel_);
}

}  // namespace dtrain
