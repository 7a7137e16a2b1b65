#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include <cmath>

#include "tactician/tensor.h"

namespace tac {
namespace {

TEST(Float16, RoundTripsExactValues) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f})
    EXPECT_EQ(static_cast<float>(Float16(f)), f) << f;
}

TEST(Float16, RoundsToNearestEvenAndOverflowsToInf) {
  // One half-precision ulp at 1.0 is 2^-10.
  EXPECT_EQ(static_cast<float>(Float16(1.0f + 1.0f / 2048)), 1.0f);               // 0.5 ulp: to even (down)
  EXPECT_EQ(static_cast<float>(Float16(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);  // 1.5 ulp: to even (up)
  EXPECT_EQ(static_cast<float>(Float16(1.0f + 3.0f / 4096)), 1.0f + 1.0f / 1024);  // 0.75 ulp: nearest
  EXPECT_TRUE(std::isinf(static_cast<float>(Float16(70000.0f))));
  EXPECT_TRUE(std::isnan(static_cast<float>(Float16(NAN))));
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(1.00390625f)), 1.0f);  // halfway between 1 and 1+2^-7
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(NAN))));
}

TEST(Tensor, CreateRejectsAbsurdShapes) {
  EXPECT_FALSE(Tensor::create(DType::float32, {int64_t{1} << 40, int64_t{1} << 40}).is_ok());
  EXPECT_FALSE(Tensor::create(DType::float32, {-1}).is_ok());
  EXPECT_FALSE(Tensor::create(DType::string, {2}).is_ok());
  auto t = Tensor::create(DType::int64, {2, 3});
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->numel(), 6);
  EXPECT_EQ(t->bytes(), 48u);
}

// adopt() takes a string's bytes as storage without a copy (long strings), copies short ones
// (their bytes live inside the string object), and refuses a size that does not match.
TEST(Tensor, AdoptOwnsTheBytesOrSaysWhyNot) {
  for (int64_t n : {64, 3}) {
    auto bytes = std::make_unique<std::string>(static_cast<size_t>(n) * 4, '\0');
    for (int64_t i = 0; i < n; ++i) {
      const float f = 0.5f * static_cast<float>(i) - 7.0f;
      std::memcpy(bytes->data() + i * 4, &f, 4);
    }
    const char* storage = bytes->data();
    auto t = Tensor::adopt(std::move(bytes), DType::float32, {n});
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    EXPECT_EQ(t->numel(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(t->data<float>()[i], 0.5f * static_cast<float>(i) - 7.0f) << i;
    if (n == 64) {
      EXPECT_EQ(static_cast<const void*>(t->raw()), static_cast<const void*>(storage)) << "not adopted";
    }
    Tensor copy = *t;  // shares the storage, which outlives the original
    t = Result<Tensor>(Tensor());
    EXPECT_EQ(copy.data<float>()[n - 1], 0.5f * static_cast<float>(n - 1) - 7.0f);
  }
  EXPECT_FALSE(Tensor::adopt(std::make_unique<std::string>(100, 'x'), DType::float32, {64}).is_ok());
  EXPECT_FALSE(Tensor::adopt(nullptr, DType::float32, {1}).is_ok());
}

TEST(Tensor, SetGetConvertsAndSaturates) {
  auto t = Tensor::create(DType::int8, {3});
  ASSERT_TRUE(t.is_ok());
  t->set_f64(0, 300.0);
  t->set_f64(1, -7.9);
  t->set_f64(2, NAN);
  EXPECT_EQ(t->get_i64(0), 127);
  EXPECT_EQ(t->get_i64(1), -7);
  EXPECT_EQ(t->get_i64(2), 0);
}

}  // namespace
}  // namespace tac
