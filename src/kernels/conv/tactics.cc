// Tactic table of the conv family (see src/kernels/tactic.h). Conv and FusedConv share every
// implementation (a plain Conv is a FusedConv with an empty epilogue), so each row appears twice.
#include <iterator>
#include <vector>

#include "kernels/conv/conv_common.h"

namespace tac::kernels {

namespace {

using namespace conv;

// Rank by the formula (name##_cost) times the fitted factors of src/kernels/cost_table.inc.
// `over`: the FusedConv row writes its output over that input (Tactic::over_input; 3 = the
// residual) where the builder lets it, -1 none.
#define TAC_CONV_ROWS_X(name, help, layouts, over)                                                              \
  Tactic{#name, ir::OpKind::Conv, help, name##_applies, name##_cost, name##_prepare, Backend::cpu, layouts},   \
      Tactic {                                                                                                   \
    #name, ir::OpKind::FusedConv, help, name##_applies, name##_cost, name##_prepare, Backend::cpu, layouts,     \
        false, false, false, over                                                                                \
  }
#define TAC_CONV_ROWS(name, help) TAC_CONV_ROWS_X(name, help, false, -1)

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
    TAC_CONV_ROWS_X(onednn, "oneDNN convolution, formats chosen by oneDNN (blocked), reorders from/to NCHW inside; in "
                            "nhwc / blocked layouts (layout.*) reads and writes them directly", true, 3),
    TAC_CONV_ROWS(onednn_nchw, "oneDNN convolution forced to plain nchw/oihw formats (no reorders)"),
    TAC_CONV_ROWS_X(onednn_winograd, "oneDNN Winograd convolution (F(2x2,3x3) or F(4x4,3x3), AVX-512, 3x3 stride 1): "
                                     "fewer multiplies, more rounding; reorders from/to the step's layout inside", true, 3),
};
#undef TAC_CONV_ROWS
#undef TAC_CONV_ROWS_X

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
