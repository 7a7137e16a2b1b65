// The CPU Resize / Upsample tactics (kernels/resize/cpu_resize.cc) against the reference kernel
// (check_tactic), at 1 and 3 threads, on random data: every mode, coordinate transformation,
// nearest_mode, scales above and below 1 on odd sizes, sizes with keep_aspect_ratio_policy, axes,
// tf_crop_and_resize's extrapolation, antialias, exclude_outside, the legacy forms (Resize-10,
// Upsample-7 and -9), N-D and non-adjacent resized axes, and the ONNX backend suite's own cases.
//
// Bound: exact. "copy" only moves elements; "separable" does the reference's float64 arithmetic
// term by term in its order, so every element must equal the reference's (NaN where it is NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "io/onnx_import.h"
#include "io/test_case.h"
#include "kernels/tactic_check.h"
#include "node_test_util.h"

namespace tac::kernels {
namespace {

using test::int64s;
using test::floats;

// Runs `name` at 1 and 3 threads; it must apply (or, with applies=false, must not) and match.
// (`either`: it may or may not apply; where it does, it matches.)
void expect_exact(const char* name, const ir::Node& n, const std::vector<Tensor>& in, const std::vector<bool>& cmask,
                  bool applies, const std::string& what, bool either = false) {
  const Tactic* t = find_tactic(n.op, name);
  ASSERT_NE(t, nullptr) << n.op_type << " " << name;
  for (int threads : {1, 3}) {
    TacticCheck r = check_tactic(*t, n, in, cmask, threads);
    if (!r.status && r.status.kind() == ErrorKind::not_applicable) {
      EXPECT_TRUE(!applies || either) << what << " " << name << ": " << r.status.to_string();
      return;
    }
    ASSERT_TRUE(r.status.is_ok()) << what << " " << name << ": " << r.status.to_string();
    EXPECT_TRUE(applies || either) << what << " " << name << " applied";
    ASSERT_EQ(r.outputs.size(), r.expected.size());
    for (size_t k = 0; k < r.outputs.size(); ++k) {
      ASSERT_EQ(r.outputs[k].shape(), r.expected[k].shape()) << what;
      int bad = 0;
      for (int64_t i = 0; i < r.expected[k].numel() && bad < 5; ++i) {
        const double want = r.expected[k].get_f64(i), got = r.outputs[k].get_f64(i);
        if (std::isnan(want) ? std::isnan(got) : got == want) continue;
        ++bad;
        ADD_FAILURE() << what << " " << name << " threads=" << threads << " out[" << i << "]: got " << got << " want " << want;
      }
    }
  }
}


struct Case {
  std::string what;
  ir::Node node;
  std::vector<Tensor> in;
  std::vector<bool> cmask;
};

// Resize-11+ with (x, roi, scales) or (x, roi, scales, sizes), scales or sizes as constants.
Case with_scales(const std::string& what, int opset, Tensor x, const std::vector<double>& sc) {
  return {what + " scales", make_node("Resize", 3, 1, opset), {std::move(x), Tensor(), floats(sc)}, {false, true, true}};
}
Case with_sizes(const std::string& what, int opset, Tensor x, const std::vector<int64_t>& sz) {
  return {what + " sizes", make_node("Resize", 4, 1, opset), {std::move(x), Tensor(), Tensor(), int64s(sz)},
          {false, true, true, true}};
}
void set_mode(Case& c, const std::string& mode, const std::string& coord, const std::string& nm = "") {
  set_attr(c.node, "mode", mode);
  set_attr(c.node, "coordinate_transformation_mode", coord);
  if (!nm.empty()) set_attr(c.node, "nearest_mode", nm);
  c.what += " " + mode + " " + coord + " " + nm;
}

// Both tactics: "separable" applies to float32 / float64, "copy" where every output element is
// one input element (`gather`; kMaybe: linear or cubic, which may land on input points only).
enum Gather { kNo, kYes, kMaybe };
void expect_both(const Case& c, Gather gather) {
  const bool fp = c.in[0].dtype() == DType::float32 || c.in[0].dtype() == DType::float64;
  expect_exact("separable", c.node, c.in, c.cmask, fp, c.what);
  expect_exact("copy", c.node, c.in, c.cmask, gather != kNo, c.what, gather == kMaybe);
}

const std::vector<std::string> kCoords = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                                          "align_corners", "asymmetric", "tf_half_pixel_for_nn"};

TEST(ResizeTactics, NearestEveryCoordAndRounding) {
  uint64_t seed = 1;
  const std::vector<std::vector<double>> scales = {{1, 1, 2.3, 0.6}, {1, 1, 2, 2}, {1, 1, 0.5, 3}, {1, 1, 1.7, 1}};
  for (const std::string& coord : kCoords)
    for (const char* nm : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      for (const auto& sc : scales) {
        Case c = with_scales("x[2,3,7,9]", 19, random_tensor(DType::float32, {2, 3, 7, 9}, ++seed), sc);
        set_mode(c, "nearest", coord, nm);
        expect_both(c, kYes);
      }
      Case z = with_sizes("x[2,3,7,9]", 19, random_tensor(DType::float32, {2, 3, 7, 9}, ++seed), {2, 3, 4, 20});
      set_mode(z, "nearest", coord, nm);
      expect_both(z, kYes);
    }
}

TEST(ResizeTactics, LinearAndCubicEveryCoord) {
  uint64_t seed = 100;
  const std::vector<std::vector<double>> scales = {{1, 1, 2.3, 0.6}, {1, 1, 2, 2}, {1, 1, 0.5, 0.5}, {1, 1, 3, 1.7}, {1, 1, 1, 0.4}};
  for (const char* mode : {"linear", "cubic"})
    for (const std::string& coord : kCoords) {
      for (const auto& sc : scales) {
        Case c = with_scales("x[2,3,7,9]", 13, random_tensor(DType::float32, {2, 3, 7, 9}, ++seed), sc);
        set_mode(c, mode, coord);
        expect_both(c, kMaybe);
      }
      Case z = with_sizes("x[2,3,7,9]", 13, random_tensor(DType::float32, {2, 3, 7, 9}, ++seed), {2, 3, 4, 20});
      set_mode(z, mode, coord);
      expect_both(z, kMaybe);
      Case one = with_sizes("x[1,2,5,6] to one", 13, random_tensor(DType::float32, {1, 2, 5, 6}, ++seed), {1, 2, 1, 1});
      set_mode(one, mode, coord);
      expect_both(one, kMaybe);
    }
}

TEST(ResizeTactics, CropAndResizeExtrapolates) {
  uint64_t seed = 200;
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    Case c{std::string("tf_crop_and_resize ") + mode, make_node("Resize", 4, 1, 13),
           {random_tensor(DType::float32, {2, 3, 7, 9}, ++seed), floats({0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3}), Tensor(),
            int64s({2, 3, 11, 6})},
           {false, true, true, true}};
    set_attr(c.node, "mode", std::string(mode));
    set_attr(c.node, "coordinate_transformation_mode", std::string("tf_crop_and_resize"));
    set_attr(c.node, "extrapolation_value", 0.5f);
    expect_both(c, std::string(mode) == "nearest" ? kYes : kMaybe);
    // axes (opset 18): roi of the resized axes only, in the order of `axes`.
    Case a{std::string("tf_crop_and_resize axes ") + mode, make_node("Resize", 4, 1, 18),
           {random_tensor(DType::float32, {2, 3, 7, 9}, ++seed), floats({0.1, -0.3, 1.2, 0.8}), Tensor(), int64s({10, 5})},
           {false, true, true, true}};
    set_attr(a.node, "mode", std::string(mode));
    set_attr(a.node, "coordinate_transformation_mode", std::string("tf_crop_and_resize"));
    set_attr(a.node, "axes", std::vector<int64_t>{3, 2});
    expect_both(a, std::string(mode) == "nearest" ? kYes : kMaybe);
  }
}

TEST(ResizeTactics, CubicOptionsAndAntialias) {
  uint64_t seed = 300;
  for (double a : {-0.5, -0.75})
    for (int64_t excl : {0, 1}) {
      Case c = with_scales("cubic a=" + std::to_string(a) + " exclude_outside=" + std::to_string(excl), 13,
                           random_tensor(DType::float32, {2, 3, 7, 9}, ++seed), {1, 1, 1.6, 0.7});
      set_attr(c.node, "mode", std::string("cubic"));
      set_attr(c.node, "exclude_outside", excl);
      set_attr(c.node, "cubic_coeff_a", static_cast<float>(a));
      expect_both(c, kNo);
    }
  for (const char* mode : {"linear", "cubic"})
    for (const auto& sc : std::vector<std::vector<double>>{{1, 1, 0.3, 0.45}, {1, 1, 0.6, 1.5}, {1, 1, 2, 2}}) {
      Case c = with_scales(std::string("antialias ") + mode, 18, random_tensor(DType::float32, {1, 2, 31, 29}, ++seed), sc);
      set_attr(c.node, "mode", std::string(mode));
      set_attr(c.node, "antialias", int64_t{1});
      expect_both(c, kNo);
    }
}

TEST(ResizeTactics, AxesAndAspectRatioPolicy) {
  uint64_t seed = 400;
  for (const char* mode : {"nearest", "linear"})
    for (const char* policy : {"stretch", "not_larger", "not_smaller"})
      for (const auto& sz : std::vector<std::vector<int64_t>>{{13, 5}, {3, 20}}) {
        Case c = with_sizes(std::string("axes {-1,2} policy ") + policy, 18, random_tensor(DType::float32, {2, 3, 7, 9}, ++seed), sz);
        set_attr(c.node, "mode", std::string(mode));
        set_attr(c.node, "axes", std::vector<int64_t>{-1, 2});
        set_attr(c.node, "keep_aspect_ratio_policy", std::string(policy));
        expect_both(c, std::string(mode) == "nearest" ? kYes : kMaybe);
      }
}

// Resized axes that are not the last two: the batch / channel axes, every axis, a 5-D volume,
// one axis with an identity axis between two resized ones, an empty output.
TEST(ResizeTactics, NdAndInnerAxes) {
  uint64_t seed = 500;
  struct G {
    Shape x;
    std::vector<double> sc;
  };
  for (const G& g : std::vector<G>{{{2, 5, 6, 7}, {1, 2, 1, 1}},       // channels only: blocks of 42
                                   {{2, 5, 6, 7}, {1, 1.6, 1, 0.7}},   // channels and width
                                   {{3, 5, 6, 7}, {0.7, 1, 1.5, 1}},   // batch and height
                                   {{2, 3, 4, 5}, {1.5, 0.7, 2, 1.3}}, // every axis
                                   {{1, 2, 5, 6, 7}, {1, 1, 1.5, 2, 0.5}},
                                   {{11}, {2.6}},
                                   {{4, 9}, {1, 1}}})                  // nothing resized
    for (const char* mode : {"nearest", "linear", "cubic"}) {
      Case c = with_scales("x" + shape_to_string(g.x), 13, random_tensor(DType::float32, g.x, ++seed), g.sc);
      set_mode(c, mode, "half_pixel");
      const bool gather = std::string(mode) == "nearest" || g.sc == std::vector<double>{1, 1};
      expect_both(c, gather ? kYes : kMaybe);
    }
  Case e = with_sizes("empty output", 13, random_tensor(DType::float32, {2, 3, 4, 5}, ++seed), {2, 3, 0, 7});
  set_mode(e, "linear", "half_pixel");
  expect_both(e, kNo);
}

// Integer nearest upsampling (the replication path of "copy"): each element size, factors 2 and
// 3, odd widths; large enough for three threads; as PyTorch exports nn.Upsample.
TEST(ResizeTactics, IntegerUpsamplingEveryElementSize) {
  uint64_t seed = 600;
  for (DType dt : {DType::float32, DType::float16, DType::bfloat16, DType::uint8, DType::int32, DType::float64})
    for (const Shape& x : std::vector<Shape>{{1, 3, 5, 7}, {2, 16, 33, 41}, {1, 8, 20, 20}})
      for (double f : {2.0, 3.0}) {
        Case c = with_scales("upsample x" + std::to_string(f) + " " + dtype_name(dt) + shape_to_string(x), 17,
                             random_tensor(dt, x, ++seed), {1, 1, f, f});
        set_mode(c, "nearest", "asymmetric", "floor");
        expect_both(c, kYes);
      }
  // int64 / bool: neither (the reference's float64 round trip; bool is not a Resize type).
  Case i = with_scales("int64", 17, random_tensor(DType::int64, {1, 2, 3, 4}, ++seed), {1, 1, 2, 2});
  set_mode(i, "nearest", "asymmetric", "floor");
  expect_both(i, kNo);
}

TEST(ResizeTactics, LargeBilinearThreadsAndFloat64) {
  uint64_t seed = 700;
  for (DType dt : {DType::float32, DType::float64})
    for (const char* coord : {"half_pixel", "align_corners", "asymmetric"}) {
      Case c = with_scales("bilinear " + dtype_name(dt), 13, random_tensor(dt, {2, 16, 33, 40}, ++seed), {1, 1, 2, 2});
      set_mode(c, "linear", coord);
      expect_both(c, kNo);
      Case d = with_scales("bilinear down " + dtype_name(dt), 13, random_tensor(dt, {2, 16, 65, 80}, ++seed), {1, 1, 0.5, 0.37});
      set_mode(d, "linear", coord);
      expect_both(d, kNo);
    }
  // NHWC-like: the resized axes are 1 and 2, channels last (blocks of 24 elements).
  Case n = with_scales("bilinear nhwc", 13, random_tensor(DType::float32, {2, 31, 37, 24}, ++seed), {1, 1.5, 2, 1});
  set_mode(n, "linear", "half_pixel");
  expect_both(n, kNo);
}

// Infinities and NaN: weights of 0 are skipped as the reference skips them, so no 0 * inf.
TEST(ResizeTactics, SpecialValues) {
  Tensor x = random_tensor(DType::float32, {1, 2, 6, 7}, 800);
  const double inf = std::numeric_limits<double>::infinity();
  x.set_f64(3, inf), x.set_f64(10, -inf), x.set_f64(20, std::nan("")), x.set_f64(50, inf), x.set_f64(51, -0.0);
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (const char* coord : {"half_pixel", "align_corners", "asymmetric"}) {
      Case c = with_scales("special", 13, x, {1, 1, 2, 1.5});
      set_mode(c, mode, coord);
      expect_both(c, std::string(mode) == "nearest" ? kYes : kNo);
    }
}

// Resize-10 (scales input), Upsample-9 (scales input) and Upsample-7 (scales attribute).
TEST(ResizeTactics, LegacyForms) {
  uint64_t seed = 900;
  for (const char* mode : {"nearest", "linear"})
    for (const auto& sc : std::vector<std::vector<double>>{{1, 1, 2, 1.5}, {1, 1, 0.6, 3}, {1, 2, 2, 2}}) {
      for (const char* op : {"Resize", "Upsample"}) {
        Case c{std::string(op) + " legacy " + mode, make_node(op, 2, 1, std::string(op) == "Resize" ? 10 : 9),
               {random_tensor(DType::float32, {2, 3, 7, 9}, ++seed), floats(sc)}, {false, true}};
        set_attr(c.node, "mode", std::string(mode));
        expect_both(c, std::string(mode) == "nearest" ? kYes : kNo);
      }
      Case u{std::string("Upsample-7 ") + mode, make_node("Upsample", 1, 1, 7), {random_tensor(DType::float32, {2, 3, 7, 9}, ++seed)},
             {false}};
      set_attr(u.node, "mode", std::string(mode));
      ir::Attribute a;
      a.type = ir::Attribute::Type::floats;
      for (double v : sc) a.floats.push_back(static_cast<float>(v));
      u.node.attrs["scales"] = a;
      expect_both(u, std::string(mode) == "nearest" ? kYes : kNo);
    }
}

// scales / sizes computed at run time: neither tactic applies (the reference takes the step).
TEST(ResizeTactics, RunTimeScalesAreNotApplicable) {
  Case c = with_scales("run-time scales", 13, random_tensor(DType::float32, {1, 2, 4, 4}, 1000), {1, 1, 2, 2});
  c.cmask = {false, false, false};
  set_mode(c, "nearest", "asymmetric", "floor");
  expect_exact("copy", c.node, c.in, c.cmask, false, c.what);
  expect_exact("separable", c.node, c.in, c.cmask, false, c.what);
}

// Where both apply, the default ranking prefers the gather.
TEST(ResizeTactics, CopyRanksFirstForNearest) {
  ir::Node n = make_node("Resize", 3, 1, 17);
  set_attr(n, "mode", std::string("nearest"));
  set_attr(n, "coordinate_transformation_mode", std::string("asymmetric"));
  set_attr(n, "nearest_mode", std::string("floor"));
  Tensor sc = floats({1, 1, 2, 2});
  StepDesc s;
  s.node = &n;
  s.in_dtypes = {DType::float32, DType::undefined, DType::float32};
  s.in_shapes = {{1, 256, 20, 20}, {}, {4}};
  s.constants = {nullptr, nullptr, &sc};
  s.out_dtypes = {DType::float32};
  s.out_shapes = {{1, 256, 40, 40}};
  std::vector<const Tactic*> ts = tactics_for(ir::OpKind::Resize);
  ASSERT_GE(ts.size(), 3u);
  double copy = 0, sep = 0, ref = 0;
  for (const Tactic* t : ts) {
    ASSERT_TRUE(t->applies(s).is_ok()) << t->name;
    const std::string name = t->name;
    (name == "copy" ? copy : name == "separable" ? sep : ref) = t->cost(s);
  }
  EXPECT_LT(copy, sep);
  EXPECT_LT(sep, ref);
}

// The ONNX backend suite's Resize / Upsample node tests, every input but the data as a constant:
// each tactic that applies matches the reference exactly, and the reference the stored outputs.
TEST(ResizeTactics, OnnxNodeTests) {
  // The suite's default place (TAC_ONNX_BACKEND_DIR in CMakeLists.txt): ../shared beside the source tree.
  const std::filesystem::path root = test::onnx_node_suite();
  if (!std::filesystem::exists(root)) GTEST_SKIP() << "no ONNX backend suite at " << root;
  int tested = 0, separable = 0, copy = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("test_resize_", 0) != 0 && name.rfind("test_upsample", 0) != 0) continue;
    auto model = io::load_model((entry.path() / "model.onnx").string());
    ASSERT_TRUE(model.is_ok()) << name << ": " << model.status().to_string();
    const ir::Graph& g = model->graph;
    if (g.nodes.size() != 1) continue;
    const ir::Node& n = g.nodes[0];
    auto data = io::load_test_data(*model, entry.path().string());
    ASSERT_TRUE(data.is_ok() && !data->empty()) << name;
    for (const io::TestDataSet& ds : *data) {
      std::vector<Tensor> in;
      std::vector<bool> cmask;
      test::single_node_inputs(g, n, ds, in, cmask);
      ++tested;
      for (const char* tn : {"separable", "copy"}) {
        TacticCheck r = check_tactic(*find_tactic(n.op, tn), n, in, cmask, 1);
        if (!r.status && r.status.kind() == ErrorKind::not_applicable) {
          EXPECT_NE(std::string(tn), "separable") << name << ": " << r.status.to_string();
          continue;
        }
        ASSERT_TRUE(r.status.is_ok()) << name << " " << tn << ": " << r.status.to_string();
        (std::string(tn) == "copy" ? copy : separable) += 1;
        ASSERT_EQ(r.outputs[0].shape(), r.expected[0].shape()) << name;
        for (int64_t i = 0; i < r.expected[0].numel(); ++i)
          ASSERT_EQ(r.outputs[0].get_f64(i), r.expected[0].get_f64(i)) << name << " " << tn << " [" << i << "]";
        const Tensor& want = ds.outputs[0].tensor;
        ASSERT_EQ(want.shape(), r.outputs[0].shape()) << name;
        for (int64_t i = 0; i < want.numel(); ++i)
          EXPECT_NEAR(r.outputs[0].get_f64(i), want.get_f64(i), 1e-7 + 1e-3 * std::fabs(want.get_f64(i))) << name << " [" << i << "]";
      }
    }
  }
  EXPECT_GE(tested, 40);
  EXPECT_EQ(separable, tested);
  EXPECT_GE(copy, 15);
}

}  // namespace
}  // namespace tac::kernels
