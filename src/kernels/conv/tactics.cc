// Tactic table of the conv family (see src/kernels/tactic.h). Conv and FusedConv share every
// implementation (a plain Conv is a FusedConv with an empty epilogue), so each row appears twice.
#include <cmath>
#include <cstring>
#include <iterator>
#include <vector>

#include "kernels/conv/conv_common.h"

namespace tac::kernels {

namespace {

using namespace conv;

// Calibration of the per-tactic cost formulas against isolated whole-layer timings (the
// `builder.selection=isolated` numbers of `tactician build --verbose`), 1 thread, on the conv
// layers of resnet18, mobilenet_v2, squeezenet1.1 and super-resolution (102 layers, AVX-512
// Zen-class core). Each factor is the median of measured / formula over the layers of one shape
// regime, so that the formulas of different tactics are on one scale and the default ranking
// follows the measured one. Regimes are read from the geometry only:
//   dw   depthwise (G == C == M);  1x1  1x1 pad 0;  w3x3  3x3 stride 1 dilation 1 group 1;
//   kxk  everything else (strided / first-layer / grouped kernels).
double calibration(const char* t, const ConvGeom& g) {
  auto is = [&](const char* n) { return std::strcmp(t, n) == 0; };
  const bool dw = g.G > 1 && g.G == g.C && g.G == g.M;
  const bool one = g.KH == 1 && g.KW == 1 && g.PT == 0 && g.PL == 0 && g.PB == 0 && g.PR == 0;
  const bool w3 = !dw && g.G == 1 && g.KH == 3 && g.KW == 3 && g.SH == 1 && g.SW == 1 && g.DH == 1 && g.DW == 1;
  const double ow = static_cast<double>(g.OW);
  // oneDNN forced to nchw is fast with no activation post-op and 4-10x slower with one (relu or
  // clip): resnet18 downsample 81-96 us vs 3x3+relu 2-4x onednn; squeezenet fire squeeze 1x1+relu
  // 68-288 us vs ours 31-78; mobilenet_v2 1x1+clip expansions 4670 us vs ours 454.
  const bool nchw_act = g.ep.act != ir::Epilogue::Act::none;
  // Direct along rows: timed in the same runs as the other tactics of the layer (isolated, 1
  // thread, 2026-12-02, loaded machine, so as ratios to the oneDNN / GEMM tactics' calibrated
  // estimates): 0.29-0.39 of its formula for short reductions (K <= 27: squeezenet conv1 and its
  // 16-channel fire 1x1s, mobilenet_v2 features.0 and features.2-7 expansions), 0.8-0.85 for
  // 3x3 on 16-32 channels (K = 144, 288: squeezenet expand3x3, where oneDNN is ~1.3x faster).
  if (is("direct_rows_avx512")) return g.Cg() * g.KH * g.KW <= 32 ? 0.36 : 0.85;
  if (is("onednn_nchw") && nchw_act) return dw ? 2.0 : one ? 2.0 : 1.6;
  if (dw) {
    // oneDNN's depthwise (blocked nChw16c, reorders included): 0.21-0.32 of the formula at
    // stride 1 (mobilenet_v2 features.1-17), ~1.4x that at stride 2 (single dw+clip layers,
    // 2026-12-02: 112->56 96ch 662 us, 56->28 144ch 320 us against 524 / 196 estimated at 0.27).
    if (is("onednn")) return g.SW > 1 ? 0.38 : 0.27;
    // Ours over the flattened phase planes (the formula counts its Wq/OW wasted lanes): per-plane
    // overhead grows as planes shrink, and stride 2 is no longer dearer than stride 1 (phases
    // built with a de-interleaving permute). Measured / formula, single dw+clip layers, 1 thread,
    // 2026-12-02 (`tactician build L.onnx --verbose --route builder.selection=isolated`):
    // 0.31 (112x112 s1, 32ch), 0.30 (112->56 s2, 96ch), 0.41 (56->28 s2), 0.37 (14x14, 384ch),
    // 0.60 (7x7, 960ch): 0.28 + 2.2/OW. depthwise_avx2 on the same AVX-512 core: 1.3-1.9x slower
    // (1.45x median); on an AVX2-only core it is the native kernel and the formula's halved peak
    // covers it.
    if (is("depthwise_avx512") || is("depthwise_avx2")) {
      const double f = 0.28 + 2.2 / ow;
      return f * (is("depthwise_avx2") && cpu_features().avx512 ? 1.45 : 1.0);
    }
    if (is("onednn_nchw")) return g.ep.act == ir::Epilogue::Act::none ? 0.52 : 2.0;
    if (is("im2col_gemm_inb") || is("im2col_openblas")) return 0.68;
    return 0.5;
  }
  if (one) {
    // oneDNN plain nchw 1x1: fast for projections (many input, few output channels: 0.16-0.4 of
    // the formula, mobilenet_v2 conv.2 / squeezenet squeeze layers with C >= 128), very slow for
    // expansions and short reductions (1.3-4x: mobilenet_v2 conv.0, squeezenet expand1x1).
    if (is("onednn_nchw")) return 0.25;  // no activation: 0.16-0.4 of the formula
    if (is("onednn")) return 0.40;
    if (is("conv1x1_gemm_inb")) return 0.60;
    if (is("im2col_gemm_inb")) return 0.55;
    if (is("conv1x1_openblas")) return 0.53;
    return 0.49;  // conv1x1_gemm, im2col_gemm, im2col_openblas, direct (0.47-0.50)
  }
  if (w3) {
    // Winograd: the formula is ~2x high on large planes (0.46-0.53 of it on resnet18 layer1 56x56
    // and super-resolution 224x224) and far too high on small ones, where the transforms are
    // cheap next to the formula's per-tile term: F(4x4) 0.21 at 28x28, 0.10 at 14x14, 0.085 at
    // 7x7; F(2x2) 0.5 at 28x28, 0.17 at 14x14, 0.11 at 7x7.
    const double ohw = static_cast<double>(g.ohw());
    if (is("winograd_f4x3")) return 0.5 * std::pow(std::min(1.0, ohw / 3000.0), 0.6);
    if (is("winograd_f2x3")) return 0.45 * std::pow(std::min(1.0, ohw / 1000.0), 0.6);
    if (is("onednn")) return 0.53;
    // oneDNN's Winograd measures 0.22-0.3 of the formula (1.7-2.4x faster than onednn's direct on
    // 64-256 channels), but rounds more: ranked just after onednn on purpose (see onednn_conv.cc).
    if (is("onednn_winograd")) return 0.56;
    if (is("onednn_nchw")) return 0.78;
    if (is("im2col_gemm_inb")) return 0.70;
    if (is("im2col_gemm") || is("im2col_openblas")) return 0.60;
    if (is("direct_avx2")) return 0.42;
    if (is("direct_avx512")) return 0.45;
    return 0.5;
  }
  if (is("onednn")) return 0.38;
  if (is("onednn_nchw")) return 0.69;
  if (is("im2col_gemm_inb")) return 0.74;
  if (is("im2col_gemm") || is("im2col_openblas")) return 0.60;
  if (is("direct_avx2")) return 0.42;
  if (is("direct_avx512")) return 0.465;
  return 0.5;
}

template <const char* const* Name, double (*Cost)(const StepDesc&)>
double calibrated_cost(const StepDesc& s) {
  const double c = Cost(s);
  auto g = conv_geom(s);
  return g ? c * calibration(*Name, *g) : c;
}

#define TAC_CONV_NAME(name) constexpr const char* name##_name = #name;
TAC_CONV_NAME(im2col_gemm)
TAC_CONV_NAME(conv1x1_gemm)
TAC_CONV_NAME(im2col_gemm_inb)
TAC_CONV_NAME(conv1x1_gemm_inb)
TAC_CONV_NAME(im2col_openblas)
TAC_CONV_NAME(conv1x1_openblas)
TAC_CONV_NAME(direct_avx512)
TAC_CONV_NAME(direct_avx2)
TAC_CONV_NAME(winograd_f2x3)
TAC_CONV_NAME(winograd_f4x3)
TAC_CONV_NAME(depthwise_avx512)
TAC_CONV_NAME(depthwise_avx2)
TAC_CONV_NAME(direct_rows_avx512)
TAC_CONV_NAME(onednn)
TAC_CONV_NAME(onednn_nchw)
TAC_CONV_NAME(onednn_winograd)
#undef TAC_CONV_NAME

#define TAC_CONV_ROWS_L(name, help, layouts)                                                                          \
  Tactic{#name, ir::OpKind::Conv, help, name##_applies, calibrated_cost<&name##_name, name##_cost>, name##_prepare,     \
         Backend::cpu, layouts},                                                                                       \
      Tactic {                                                                                                         \
    #name, ir::OpKind::FusedConv, help, name##_applies, calibrated_cost<&name##_name, name##_cost>, name##_prepare,    \
        Backend::cpu, layouts                                                                                          \
  }
#define TAC_CONV_ROWS(name, help) TAC_CONV_ROWS_L(name, help, false)

const Tactic kConvTactics[] = {
    TAC_CONV_ROWS(im2col_gemm, "im2col into the workspace + our packed sgemm (weights prepacked, fused epilogue); any 2-D conv"),
    TAC_CONV_ROWS(conv1x1_gemm, "1x1 pad-0 conv as our packed sgemm on the NCHW planes (strided: subsample first)"),
    TAC_CONV_ROWS(im2col_gemm_inb, "im2col_gemm with the column buffer read in place by the microkernel (no B packing copy)"),
    TAC_CONV_ROWS(conv1x1_gemm_inb, "conv1x1_gemm with the input planes read in place by the microkernel (no B packing copy)"),
    TAC_CONV_ROWS(im2col_openblas, "im2col into the workspace + OpenBLAS sgemm per image and group; any 2-D conv"),
    TAC_CONV_ROWS(conv1x1_openblas, "1x1 pad-0 conv as OpenBLAS sgemm on the NCHW planes (strided: subsample first)"),
    TAC_CONV_ROWS(direct_avx512, "direct conv on a padded input, 32 out-channels x 12 pixels AVX-512 tile; const weights"),
    TAC_CONV_ROWS(direct_avx2, "direct conv on a padded input, 16 out-channels x 6 pixels AVX2 tile; const weights"),
    TAC_CONV_ROWS(winograd_f2x3, "Winograd F(2x2,3x3): 3x3 stride 1 dilation 1 group 1, 16 sgemms; const weights"),
    TAC_CONV_ROWS(winograd_f4x3, "Winograd F(4x4,3x3): 3x3 stride 1 dilation 1 group 1, 36 sgemms; const weights"),
    TAC_CONV_ROWS(depthwise_avx512, "depthwise (group == C == M) conv, 16 output pixels per AVX-512 vector"),
    TAC_CONV_ROWS(depthwise_avx2, "depthwise (group == C == M) conv, 8 output pixels per AVX2 vector"),
    TAC_CONV_ROWS(direct_rows_avx512, "direct conv along output rows (phase planes for strides), 12 out-channels x 32 columns AVX-512 tile; few input channels (C <= 32, OW >= 16)"),
    TAC_CONV_ROWS_L(onednn, "oneDNN convolution, formats chosen by oneDNN (blocked), reorders from/to NCHW inside; in "
                            "nhwc / blocked layouts (layout.*) reads and writes them directly", true),
    TAC_CONV_ROWS(onednn_nchw, "oneDNN convolution forced to plain nchw/oihw formats (no reorders)"),
    TAC_CONV_ROWS_L(onednn_winograd, "oneDNN Winograd convolution (F(2x2,3x3) or F(4x4,3x3), AVX-512, 3x3 stride 1): "
                                     "fewer multiplies, more rounding; reorders from/to the step's layout inside", true),
};
#undef TAC_CONV_ROWS
#undef TAC_CONV_ROWS_L

}  // namespace

namespace conv {
std::span<const Tactic> lowp_conv_tactics();  // bf16 / int8 rows (onednn_lowp.cc)
}  // namespace conv

std::span<const Tactic> conv_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t(std::begin(kConvTactics), std::end(kConvTactics));
    for (const Tactic& lowp : conv::lowp_conv_tactics()) t.push_back(lowp);
    return t;
  }();
  return table;
}

}  // namespace tac::kernels
