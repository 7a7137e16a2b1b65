// The accuracy gate: metrics, tolerance parsing, violation messages, JSON.
#include "tuner/accuracy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace tac::tuner {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor make(DType t, const std::vector<double>& values, Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  Result<Tensor> r = Tensor::create(t, shape);
  EXPECT_TRUE(r.is_ok());
  for (size_t i = 0; i < values.size(); ++i) r->set_f64(static_cast<int64_t>(i), values[i]);
  return *r;
}

Tensor make_i64(DType t, const std::vector<int64_t>& values) {
  Result<Tensor> r = Tensor::create(t, {static_cast<int64_t>(values.size())});
  EXPECT_TRUE(r.is_ok());
  for (size_t i = 0; i < values.size(); ++i) r->set_i64(static_cast<int64_t>(i), values[i]);
  return *r;
}

Metrics metrics(const Tensor& got, const Tensor& ref, double atol = 1e-4, double rtol = 1e-3) {
  Result<Metrics> m = compute_metrics(got, ref, atol, rtol);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? *m : Metrics{};
}

TEST(TunerAccuracyMetrics, HandComputedFloat32) {
  // diff = [0, 0, 0, 1]; sum|ref| = 10; ||ref||^2 = 30; ||got||^2 = 39; dot = 34.
  Tensor ref = make(DType::float32, {1, 2, 3, 4});
  Tensor got = make(DType::float32, {1, 2, 3, 5});
  Metrics m = metrics(got, ref, 0.5, 0);
  EXPECT_DOUBLE_EQ(m.linf, 1);
  EXPECT_DOUBLE_EQ(m.l1, 0.1);
  EXPECT_DOUBLE_EQ(m.l2, 1 / std::sqrt(30.0));
  EXPECT_DOUBLE_EQ(m.cos, 34 / std::sqrt(39.0 * 30.0));
  EXPECT_DOUBLE_EQ(m.l0, 0.25);
  EXPECT_TRUE(m.finite);
  // l0 uses atol + rtol * |ref|: the last element's bound is 0 + 0.25 * 4 = 1, and 1 is not > 1.
  EXPECT_DOUBLE_EQ(metrics(got, ref, 0, 0.25).l0, 0);
  EXPECT_DOUBLE_EQ(metrics(got, ref, 0, 0.2).l0, 0.25);
  EXPECT_DOUBLE_EQ(metrics(got, ref, 0.999, 0).l0, 0.25);
  EXPECT_DOUBLE_EQ(metrics(got, ref, 1.0, 0).l0, 0);
}

TEST(TunerAccuracyMetrics, MaxRelativeDiff) {
  // |diff| / |ref| = [0.5, 0, (skipped: ref 0), 0.25, (skipped: NaN)]
  Tensor ref = make(DType::float32, {2, -3, 0, -4, kNaN});
  Tensor got = make(DType::float32, {3, -3, 7, -5, 1});
  Result<double> r = max_relative_diff(got, ref);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_DOUBLE_EQ(*r, 0.5);
  EXPECT_DOUBLE_EQ(*max_relative_diff(ref, ref), 0);
  EXPECT_DOUBLE_EQ(*max_relative_diff(make_i64(DType::int64, {10, 4}), make_i64(DType::int64, {8, 4})), 0.25);
  Result<double> bad = max_relative_diff(make(DType::float32, {1, 2}), make(DType::float32, {1, 2, 3}));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("reference float[3]"), std::string::npos) << bad.status().message();
}

TEST(TunerAccuracyMetrics, CosineAndRelativeNorms) {
  Metrics m = metrics(make(DType::float64, {3, 4}), make(DType::float64, {4, 3}));
  EXPECT_DOUBLE_EQ(m.cos, 24.0 / 25.0);
  EXPECT_DOUBLE_EQ(m.l2, std::sqrt(2.0) / 5.0);
  EXPECT_DOUBLE_EQ(m.l1, 2.0 / 7.0);
  EXPECT_DOUBLE_EQ(m.l0, 1);

  Metrics neg = metrics(make(DType::float32, {1, -2, 3}), make(DType::float32, {-1, 2, -3}));
  EXPECT_DOUBLE_EQ(neg.cos, -1);
  EXPECT_DOUBLE_EQ(neg.l2, 2);
  EXPECT_DOUBLE_EQ(neg.linf, 6);
}

TEST(TunerAccuracyMetrics, IdenticalTensorsAreExact) {
  // Values whose sums are not exact in binary: cos must still be exactly 1.
  std::vector<double> v;
  for (int i = 0; i < 1000; ++i) v.push_back(std::sin(i * 0.37) * 1e3 + 0.1);
  for (DType t : {DType::float32, DType::float64, DType::float16, DType::bfloat16}) {
    Tensor ref = make(t, v, {10, 100});
    Metrics m = metrics(ref.clone(), ref);
    EXPECT_EQ(m.linf, 0) << dtype_name(t);
    EXPECT_EQ(m.l1, 0) << dtype_name(t);
    EXPECT_EQ(m.l2, 0) << dtype_name(t);
    EXPECT_EQ(m.cos, 1) << dtype_name(t);
    EXPECT_EQ(m.l0, 0) << dtype_name(t);
    EXPECT_TRUE(m.finite) << dtype_name(t);
  }
}

TEST(TunerAccuracyMetrics, ZeroTensors) {
  Tensor zeros = make(DType::float32, {0, 0, 0});
  Metrics both = metrics(zeros, zeros);
  EXPECT_EQ(both.l1, 0);
  EXPECT_EQ(both.l2, 0);
  EXPECT_EQ(both.cos, 1);
  // Reference all zeros, output not: the relative norms are infinite and nothing is in common.
  Metrics ref_zero = metrics(make(DType::float32, {0, 1, 0}), zeros);
  EXPECT_EQ(ref_zero.l1, kInf);
  EXPECT_EQ(ref_zero.l2, kInf);
  EXPECT_EQ(ref_zero.cos, 0);
  EXPECT_DOUBLE_EQ(ref_zero.linf, 1);
  EXPECT_TRUE(ref_zero.finite);
  // Output all zeros, reference not: relative error 1, cosine 0.
  Metrics got_zero = metrics(zeros, make(DType::float32, {0, 2, 0}));
  EXPECT_DOUBLE_EQ(got_zero.l2, 1);
  EXPECT_DOUBLE_EQ(got_zero.l1, 1);
  EXPECT_EQ(got_zero.cos, 0);
  // No elements at all.
  Metrics empty = metrics(make(DType::float32, {}, {0, 4}), make(DType::float32, {}, {0, 4}));
  EXPECT_EQ(empty.l0, 0);
  EXPECT_EQ(empty.cos, 1);
  EXPECT_TRUE(empty.finite);
}

TEST(TunerAccuracyMetrics, NaNMatchingNaNIsEqual) {
  Metrics m = metrics(make(DType::float32, {kNaN, 1, 2}), make(DType::float32, {kNaN, 1, 2}));
  EXPECT_TRUE(m.finite);
  EXPECT_EQ(m.linf, 0);
  EXPECT_EQ(m.l0, 0);
  EXPECT_EQ(m.cos, 1);
  EXPECT_EQ(m.l2, 0);
}

TEST(TunerAccuracyMetrics, NaNOrInfInOutputWhereReferenceIsFinite) {
  Tensor ref = make(DType::float32, {1, 2, 3, 4});
  for (double bad : {kNaN, kInf, -kInf}) {
    Metrics m = metrics(make(DType::float32, {1, bad, 3, 4}), ref);
    EXPECT_FALSE(m.finite) << bad;
    EXPECT_EQ(m.linf, kInf) << bad;
    EXPECT_DOUBLE_EQ(m.l0, 0.25) << bad;
    // The norms cover the comparable elements and stay numbers.
    EXPECT_FALSE(std::isnan(m.l2)) << bad;
    EXPECT_FALSE(std::isnan(m.cos)) << bad;
  }
}

TEST(TunerAccuracyMetrics, InfinitiesMustMatchExactly) {
  Metrics same = metrics(make(DType::float32, {kInf, -kInf, 1}), make(DType::float32, {kInf, -kInf, 1}));
  EXPECT_TRUE(same.finite);
  EXPECT_EQ(same.linf, 0);
  EXPECT_EQ(same.l0, 0);
  EXPECT_EQ(same.cos, 1);

  EXPECT_FALSE(metrics(make(DType::float32, {-kInf, 1}), make(DType::float32, {kInf, 1})).finite);
  EXPECT_FALSE(metrics(make(DType::float32, {3e38, 1}), make(DType::float32, {kInf, 1})).finite);
  EXPECT_FALSE(metrics(make(DType::float32, {kNaN, 1}), make(DType::float32, {kInf, 1})).finite);
  // A NaN in the reference is matched only by a NaN.
  Metrics nan_ref = metrics(make(DType::float32, {0, 1}), make(DType::float32, {kNaN, 1}));
  EXPECT_FALSE(nan_ref.finite);
  EXPECT_DOUBLE_EQ(nan_ref.l0, 0.5);
}

TEST(TunerAccuracyMetrics, IntegerOutputsAreComparedExactly) {
  Tensor ref = make_i64(DType::int64, {5, 8, -3});
  Tensor got = make_i64(DType::int64, {5, 7, -3});
  // A huge atol does not make unequal integers equal.
  Metrics m = metrics(got, ref, 100, 100);
  EXPECT_DOUBLE_EQ(m.l0, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.linf, 1);
  EXPECT_DOUBLE_EQ(m.l1, 1.0 / 16.0);
  EXPECT_DOUBLE_EQ(m.l2, 1.0 / std::sqrt(98.0));
  EXPECT_DOUBLE_EQ(m.cos, (25.0 + 56.0 + 9.0) / std::sqrt(83.0 * 98.0));
  EXPECT_TRUE(m.finite);

  Metrics same = metrics(ref.clone(), ref);
  EXPECT_EQ(same.l0, 0);
  EXPECT_EQ(same.cos, 1);

  // 2^53 + 1 and 2^53 are equal as doubles but not as int64.
  const int64_t big = int64_t{1} << 53;
  Metrics near = metrics(make_i64(DType::int64, {big + 1}), make_i64(DType::int64, {big}));
  EXPECT_EQ(near.l0, 1);
  EXPECT_EQ(near.linf, 1);

  // Extremes do not overflow.
  Metrics wide = metrics(make_i64(DType::int64, {std::numeric_limits<int64_t>::max()}),
                         make_i64(DType::int64, {std::numeric_limits<int64_t>::min()}));
  EXPECT_DOUBLE_EQ(wide.linf, 18446744073709551615.0);
  Tensor u_ref = make_i64(DType::uint64, {0});
  Tensor u_got = make_i64(DType::uint64, {0});
  u_got.data<uint64_t>()[0] = std::numeric_limits<uint64_t>::max();
  EXPECT_DOUBLE_EQ(metrics(u_got, u_ref).linf, 18446744073709551615.0);

  for (DType t : {DType::int8, DType::uint8, DType::int16, DType::uint16, DType::int32, DType::uint32}) {
    Metrics small = metrics(make_i64(t, {1, 2, 3, 4}), make_i64(t, {1, 2, 3, 5}), 10, 10);
    EXPECT_DOUBLE_EQ(small.l0, 0.25) << dtype_name(t);
    EXPECT_DOUBLE_EQ(small.linf, 1) << dtype_name(t);
  }
}

TEST(TunerAccuracyMetrics, BoolOutputs) {
  Metrics m = metrics(make_i64(DType::boolean, {1, 0, 1, 1}), make_i64(DType::boolean, {1, 1, 1, 1}));
  EXPECT_DOUBLE_EQ(m.l0, 0.25);
  EXPECT_DOUBLE_EQ(m.linf, 1);
  EXPECT_DOUBLE_EQ(m.l1, 0.25);
  EXPECT_TRUE(m.finite);
}

TEST(TunerAccuracyMetrics, MismatchNamesBothSides) {
  Result<Metrics> dtype = compute_metrics(make(DType::float32, {1, 2}), make_i64(DType::int64, {1, 2}), 0, 0);
  ASSERT_FALSE(dtype.is_ok());
  EXPECT_EQ(dtype.status().kind(), ErrorKind::invalid_argument);
  EXPECT_NE(dtype.status().message().find("float[2]"), std::string::npos) << dtype.status().message();
  EXPECT_NE(dtype.status().message().find("int64[2]"), std::string::npos) << dtype.status().message();
  EXPECT_NE(dtype.status().message().find("dtype differs"), std::string::npos) << dtype.status().message();

  Result<Metrics> shape = compute_metrics(make(DType::float32, {1, 2, 3, 4, 5, 6}, {2, 3}),
                                          make(DType::float32, {1, 2, 3, 4, 5, 6}, {3, 2}), 0, 0);
  ASSERT_FALSE(shape.is_ok());
  EXPECT_NE(shape.status().message().find("[2,3]"), std::string::npos) << shape.status().message();
  EXPECT_NE(shape.status().message().find("[3,2]"), std::string::npos) << shape.status().message();
  EXPECT_NE(shape.status().message().find("shape differs"), std::string::npos) << shape.status().message();

  Result<Metrics> both = compute_metrics(make(DType::float16, {1}), make(DType::float32, {1, 2}), 0, 0);
  ASSERT_FALSE(both.is_ok());
  EXPECT_NE(both.status().message().find("dtype and shape differ"), std::string::npos) << both.status().message();
}

TEST(TunerAccuracyTolerance, DefaultFp32) {
  Tolerance tol = Tolerance::default_fp32();
  ASSERT_EQ(tol.bounds.size(), 2u);
  EXPECT_EQ(tol.bounds[0].metric, "l2");
  EXPECT_FALSE(tol.bounds[0].at_least);
  EXPECT_EQ(tol.bounds[0].value, 1e-5);
  EXPECT_EQ(tol.bounds[1].metric, "cos");
  EXPECT_TRUE(tol.bounds[1].at_least);
  EXPECT_EQ(tol.bounds[1].value, 0.99999);
  EXPECT_EQ(tol.atol, 1e-4);
  EXPECT_EQ(tol.rtol, 1e-3);
  EXPECT_EQ(tol.to_string(), "l2<=1e-05,cos>=0.99999,atol=1e-04,rtol=0.001");
}

TEST(TunerAccuracyTolerance, ParseWithSpaces) {
  Result<Tolerance> tol = Tolerance::parse(" cos >= 0.9999 , linf<=1e-3,l0<=0.01,  atol = 1e-4,rtol=2e-3 ");
  ASSERT_TRUE(tol.is_ok()) << tol.status().to_string();
  ASSERT_EQ(tol->bounds.size(), 3u);
  EXPECT_EQ(tol->bounds[0].metric, "cos");
  EXPECT_TRUE(tol->bounds[0].at_least);
  EXPECT_EQ(tol->bounds[0].value, 0.9999);
  EXPECT_EQ(tol->bounds[1].metric, "linf");
  EXPECT_FALSE(tol->bounds[1].at_least);
  EXPECT_EQ(tol->bounds[1].value, 1e-3);
  EXPECT_EQ(tol->bounds[2].metric, "l0");
  EXPECT_EQ(tol->bounds[2].value, 0.01);
  EXPECT_EQ(tol->atol, 1e-4);
  EXPECT_EQ(tol->rtol, 2e-3);
}

TEST(TunerAccuracyTolerance, UnsetSettingsKeepTheirDefaults) {
  Result<Tolerance> tol = Tolerance::parse("l1<=0.5");
  ASSERT_TRUE(tol.is_ok()) << tol.status().to_string();
  EXPECT_EQ(tol->atol, 1e-4);
  EXPECT_EQ(tol->rtol, 1e-3);
  // Settings alone: no bounds, only the finiteness check remains.
  Result<Tolerance> settings = Tolerance::parse("atol=0,rtol=0");
  ASSERT_TRUE(settings.is_ok()) << settings.status().to_string();
  EXPECT_TRUE(settings->bounds.empty());
  EXPECT_EQ(settings->atol, 0);
}

void expect_round_trip(const Tolerance& tol) {
  const std::string text = tol.to_string();
  Result<Tolerance> back = Tolerance::parse(text);
  ASSERT_TRUE(back.is_ok()) << text << ": " << back.status().to_string();
  EXPECT_EQ(back->to_string(), text);
  ASSERT_EQ(back->bounds.size(), tol.bounds.size()) << text;
  for (size_t i = 0; i < tol.bounds.size(); ++i) {
    EXPECT_EQ(back->bounds[i].metric, tol.bounds[i].metric) << text;
    EXPECT_EQ(back->bounds[i].at_least, tol.bounds[i].at_least) << text;
    EXPECT_EQ(back->bounds[i].value, tol.bounds[i].value) << text;  // bit-exact
  }
  EXPECT_EQ(back->atol, tol.atol) << text;
  EXPECT_EQ(back->rtol, tol.rtol) << text;
}

TEST(TunerAccuracyTolerance, RoundTrips) {
  expect_round_trip(Tolerance::default_fp32());
  Tolerance all;
  all.bounds = {{"linf", false, 1.0 / 3.0}, {"l1", false, 0.1}, {"l2", false, 2.5e-7},
                {"cos", true, 0.999999999}, {"l0", false, 0}};
  all.atol = 0.1 + 0.2;  // not a short decimal
  all.rtol = 0;
  expect_round_trip(all);
  Tolerance none;
  expect_round_trip(none);
  Result<Tolerance> parsed = Tolerance::parse("cos>=0.9999,linf<=1e-3,l0<=0.01,atol=1e-4,rtol=1e-3");
  ASSERT_TRUE(parsed.is_ok());
  EXPECT_EQ(parsed->to_string(), "cos>=0.9999,linf<=0.001,l0<=0.01,atol=1e-04,rtol=0.001");
  expect_round_trip(*parsed);
}

// Every error names the offending term (or the whole text) and says what is allowed.
void expect_error(const std::string& text, const std::string& names, const std::string& says) {
  Result<Tolerance> r = Tolerance::parse(text);
  ASSERT_FALSE(r.is_ok()) << "'" << text << "' parsed";
  EXPECT_EQ(r.status().kind(), ErrorKind::invalid_argument) << text;
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find(names), std::string::npos) << text << " -> " << msg;
  EXPECT_NE(msg.find(says), std::string::npos) << text << " -> " << msg;
}

TEST(TunerAccuracyTolerance, ParseErrors) {
  expect_error("", "empty tolerance", "cos>=X");
  expect_error("   ", "empty tolerance", "linf<=X");
  expect_error("cos>=0.9,,l2<=1", "'cos>=0.9,,l2<=1'", "empty term");
  expect_error("cos>=0.9,", "'cos>=0.9,'", "empty term");
  expect_error("foo<=1", "'foo<=1'", "unknown name 'foo'; expected linf<=X, l1<=X, l2<=X, l0<=X, cos>=X, atol=X or rtol=X");
  expect_error("COS>=0.9", "'COS>=0.9'", "unknown name 'COS'");
  expect_error("linf", "'linf'", "no comparison; expected");
  expect_error("cos<=0.9", "'cos<=0.9'", "cos takes a lower bound only: write cos>=X");
  expect_error("linf>=1", "'linf>=1'", "linf takes an upper bound only: write linf<=X");
  expect_error("l0>=0.1", "'l0>=0.1'", "l0 takes an upper bound only: write l0<=X");
  expect_error("l2=1e-5", "'l2=1e-5'", "l2 is a bound: write l2<=X");
  expect_error("cos=0.9", "'cos=0.9'", "cos is a bound: write cos>=X");
  expect_error("atol<=1e-4", "'atol<=1e-4'", "atol is a setting: write atol=X");
  expect_error("rtol>=1e-4", "'rtol>=1e-4'", "rtol is a setting: write rtol=X");
  expect_error("cos>0.9", "'cos>0.9'", "comparison '>' is not allowed: use <= or >=");
  expect_error("l1<0.9", "'l1<0.9'", "comparison '<' is not allowed: use <= or >=");
  expect_error("linf<=abc", "'linf<=abc'", "'abc' is not a finite number");
  expect_error("linf<=", "'linf<='", "'' is not a finite number");
  expect_error("linf<=1e-3x", "'linf<=1e-3x'", "not a finite number");
  expect_error("linf<=nan", "'linf<=nan'", "not a finite number");
  expect_error("linf<=inf", "'linf<=inf'", "not a finite number");
  expect_error("linf<=-1", "'linf<=-1'", "linf bound must be >= 0");
  expect_error("l0<=1.5", "'l0<=1.5'", "must lie in [0, 1]");
  expect_error("cos>=1.5", "'cos>=1.5'", "must lie in [-1, 1]");
  expect_error("atol=-1e-4", "'atol=-1e-4'", "atol must be >= 0");
  expect_error("cos>=0.9,cos>=0.99", "'cos>=0.99'", "metric cos is bounded twice");
  expect_error("atol=1,l2<=1,atol=2", "'atol=2'", "atol is given twice");
  expect_error("rtol=1,rtol=2", "'rtol=2'", "rtol is given twice");
}

TEST(TunerAccuracyCheck, EmptyWhenEverythingHolds) {
  Metrics good;
  good.l2 = 1e-6;
  good.cos = 0.999999;
  EXPECT_EQ(check_tolerance(Tolerance::default_fp32(), {good, good}), "");
  EXPECT_EQ(check_tolerance(Tolerance::default_fp32(), {}), "");
  // Bounds include their value.
  Metrics edge;
  edge.l2 = 1e-5;
  edge.cos = 0.99999;
  EXPECT_EQ(check_tolerance(Tolerance::default_fp32(), {edge}), "");
}

TEST(TunerAccuracyCheck, FirstViolationOnOneLine) {
  Result<Tolerance> tol = Tolerance::parse("cos>=0.9999,linf<=1e-3,l0<=0.01,atol=1e-4,rtol=1e-3");
  ASSERT_TRUE(tol.is_ok());
  Metrics good;
  Metrics low_cos;
  low_cos.cos = 0.9991;
  low_cos.linf = 0.5;  // also violated, but cos comes first in the tolerance
  EXPECT_EQ(check_tolerance(*tol, {good, low_cos}), "output 1: cos 0.9991 < 0.9999");
  Metrics big_linf;
  big_linf.linf = 0.0031;
  EXPECT_EQ(check_tolerance(*tol, {big_linf, low_cos}), "output 0: linf 0.0031 > 0.001");
  Metrics l0;
  l0.l0 = 0.02;
  EXPECT_EQ(check_tolerance(*tol, {l0}),
            "output 0: l0 0.02 > 0.01 (elements outside atol 1e-04 + rtol 0.001 * |ref|)");
}

TEST(TunerAccuracyCheck, ValuesShowEnoughDigitsToDiffer) {
  Metrics m;
  m.cos = 0.99998999;
  m.l2 = 0;
  EXPECT_EQ(check_tolerance(Tolerance::default_fp32(), {m}), "output 0: cos 0.99998999 < 0.99999");
  Metrics l2;
  l2.l2 = 1.00001e-5;
  EXPECT_EQ(check_tolerance(Tolerance::default_fp32(), {l2}), "output 0: l2 1.00001e-05 > 1e-05");
}

TEST(TunerAccuracyCheck, NonFiniteNeverPasses) {
  Metrics bad;
  bad.finite = false;
  Tolerance no_bounds;
  EXPECT_EQ(check_tolerance(no_bounds, {Metrics{}, bad}),
            "output 1: NaN or Inf where the reference has a different value");
  // A NaN metric (e.g. overflowing norms) fails every bound on it.
  Metrics nan_cos;
  nan_cos.cos = kNaN;
  EXPECT_EQ(check_tolerance(Tolerance::default_fp32(), {nan_cos}), "output 0: cos nan < 0.99999");
  Metrics inf_l2;
  inf_l2.l2 = kInf;
  EXPECT_EQ(check_tolerance(Tolerance::default_fp32(), {inf_l2}), "output 0: l2 inf > 1e-05");
}

TEST(TunerAccuracyCheck, EndToEndFromTensors) {
  Tensor ref = make(DType::float32, {1, 2, 3, 4});
  Metrics close = metrics(make(DType::float32, {1, 2, 3, 4.00001f}), ref);
  EXPECT_EQ(check_tolerance(Tolerance::default_fp32(), {close}), "");
  Metrics far = metrics(make(DType::float32, {1, 2, 3, 4.01f}), ref);
  EXPECT_EQ(check_tolerance(Tolerance::default_fp32(), {far}).rfind("output 0: l2 0.0018", 0), 0u)
      << check_tolerance(Tolerance::default_fp32(), {far});
}

TEST(TunerAccuracyJson, Format) {
  Metrics a;
  a.linf = 0.5;
  a.l1 = 0.25;
  a.l2 = 1e-5;
  a.cos = 0.99999;
  a.l0 = 0.125;
  Metrics b;
  b.finite = false;
  b.linf = kInf;
  b.cos = kNaN;
  EXPECT_EQ(metrics_json({a, b}), R"([{"linf":0.5,"l1":0.25,"l2":1e-05,"cos":0.99999,"l0":0.125,"finite":true},)"
                                  R"({"linf":null,"l1":0.0,"l2":0.0,"cos":null,"l0":0.0,"finite":false}])");
  EXPECT_EQ(metrics_json({}), "[]");
}

TEST(TunerAccuracyJson, ParsesWhatItWrites) {
  Metrics a;
  a.linf = 1e-3;
  a.l1 = 2.5e-7;
  a.l2 = kInf;  // written as null
  a.cos = 0.999;
  a.l0 = 0.25;
  a.finite = false;
  Metrics b;
  auto back = parse_metrics_json(metrics_json({a, b}));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].linf, a.linf);
  EXPECT_EQ((*back)[0].l1, a.l1);
  EXPECT_TRUE(std::isnan((*back)[0].l2));
  EXPECT_EQ((*back)[0].cos, a.cos);
  EXPECT_EQ((*back)[0].l0, a.l0);
  EXPECT_FALSE((*back)[0].finite);
  EXPECT_TRUE((*back)[1].finite);
  EXPECT_TRUE(parse_metrics_json("").is_ok());
  EXPECT_TRUE(parse_metrics_json(" [ ] ").is_ok());
}

TEST(TunerAccuracyJson, RefusesAnythingElse) {
  auto why = [](const char* text) {
    auto r = parse_metrics_json(text);
    return r.is_ok() ? std::string("<accepted>") : r.status().message();
  };
  // Not JSON: the byte where nlohmann's parser stopped, and its reason.
  EXPECT_EQ(why(R"([{"l2": 1e999}])"), "metrics JSON at byte 12: number overflow parsing '1e999'");
  EXPECT_EQ(why(R"([{"l2": 1}] x)"),
            "metrics JSON at byte 12: syntax error while parsing value - invalid literal; last read: '1}] x'; expected end of "
            "input");
  EXPECT_EQ(why(R"([{"l2": 1},])"),
            "metrics JSON at byte 11: syntax error while parsing value - unexpected ']'; expected '[', '{', or a literal");
  EXPECT_EQ(why(R"([{"l2": 1.}])"),
            "metrics JSON at byte 10: syntax error while parsing value - invalid number; expected digit after '.'; last read: "
            "'1.}'");
  EXPECT_EQ(why("[{\"l2\": 1}"),
            "metrics JSON at byte 10: syntax error while parsing array - unexpected end of input; expected ']'");
  // JSON of another shape: the output at fault.
  EXPECT_EQ(why("{}"), "metrics JSON: expected a list of per-output metrics");
  EXPECT_EQ(why("[1]"), "metrics JSON, output 0: expected an object (one output's metrics)");
  EXPECT_EQ(why(R"([{"l2": "0.1"}])"), "metrics JSON, output 0: metric 'l2' is not a number");
  EXPECT_EQ(why(R"([{"l2": -1}])"), "metrics JSON, output 0: metric 'l2' is negative");
  EXPECT_EQ(why(R"([{"l2": 1}, {"l2": 1, "l2": 2}])"), "metrics JSON, output 1: metric 'l2' given twice");
  EXPECT_EQ(why(R"([{"finite": 1}])"), "metrics JSON, output 0: 'finite' must be true or false");
  EXPECT_EQ(why(R"([{"l2": 1}, {"note": 1}])"), "metrics JSON, output 1: unknown metric 'note' (linf, l1, l2, cos, l0, finite)");
  // A repeated key nested in a value is not a repeated metric (the value is refused for itself).
  EXPECT_EQ(why(R"([{"l2": {"a": 1, "a": 2}}])"), "metrics JSON, output 0: metric 'l2' is not a number");
  // Any JSON spelling of a name or number is the same name or number.
  auto escaped = parse_metrics_json(R"([{"l\u0032": 25E-2, "cos": -0.5}])");
  ASSERT_TRUE(escaped.is_ok()) << escaped.status().to_string();
  ASSERT_EQ(escaped->size(), 1u);
  EXPECT_EQ((*escaped)[0].l2, 0.25);
  EXPECT_EQ((*escaped)[0].cos, -0.5);
}

}  // namespace
}  // namespace tac::tuner
