#include <gtest/gtest.h>

#include "core/Memory.h"
#include "tensor/Tensor.h"

using namespace dtrain;

TEST(Tensor, ShapeStridesAndAccounting) {
  auto before = memory::stats().currentBytes;
  {
    Tensor t = Tensor::zeros({2, 3, 4});
    EXPECT_EQ(t.numel(), 24);
    EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
    EXPECT_EQ(t.dtype(), DType::F32);
    EXPECT_TRUE(t.device() == Device::cpu());
    EXPECT_TRUE(t.isContiguous());
    EXPECT_EQ(memory::stats().currentBytes, before + 96);
  }
  EXPECT_EQ(memory::stats().currentBytes, before);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::fromVector({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor r = t.reshape({3, 2});
  EXPECT_EQ(r.storage(), t.storage());
  Tensor tr = t.transpose(0, 1);
  EXPECT_EQ(tr.storage(), t.storage());
  EXPECT_FALSE(tr.isContiguous());
  EXPECT_EQ(tr.at({2, 1}), 5.f);
  EXPECT_EQ(tr.at({1, 0}), 1.f);
  Tensor s = t.slice(1, 1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_EQ(s.at({1, 0}), 4.f);
  EXPECT_EQ(t.select(0, 1).toVector(), (std::vector<float>{3, 4, 5}));
  r.data<float>()[0] = 9;
  EXPECT_EQ(t.at({0, 0}), 9.f);
}

TEST(Tensor, ContiguousCopiesTransposed) {
  Tensor t = Tensor::fromVector({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor c = t.transpose(0, 1).contiguous();
  EXPECT_TRUE(c.isContiguous());
  EXPECT_NE(c.storage(), t.storage());
  EXPECT_EQ(c.toVector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(t.transpose(0, 1).reshape({6}).toVector(), c.toVector());
}

TEST(Tensor, ReshapeInfersAndValidates) {
  Tensor t = Tensor::zeros({4, 6});
  EXPECT_EQ(t.reshape({-1, 3}).shape(), (Shape{8, 3}));
  EXPECT_EQ(t.flatten(0).shape(), (Shape{24}));
  EXPECT_THROW(t.reshape({5, -1}), Error);
  EXPECT_THROW(t.reshape({-1, -1}), Error);
  EXPECT_THROW(t.slice(0, 2, 5), Error);
  EXPECT_THROW(t.data<int32_t>(), Error);
}
