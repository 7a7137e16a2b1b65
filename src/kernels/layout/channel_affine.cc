// "channel_affine": inference BatchNormalization on nhwc or channel-blocked activations, as
// y = x * s[c] + t[c] with s, t folded (in double) from the constant parameters at prepare. The
// plain tactics read nchw only, so before this a BatchNormalization between layout regions
// (DenseNet's BN -> ReLU -> Conv after each Concat) cost a Reformat on each side. Blocked padding
// channels get s = t = 0: the padding stays zero. CPU, float32.

#include "kernels/elementwise/common.h"
#include "kernels/layout/raw_buffer.h"

namespace tac::kernels {

namespace {

using ir::Layout;

Status affine_applies(const StepDesc& s) {
  if (s.node->op != ir::OpKind::BatchNormalization) return not_applicable("BatchNormalization only");
  const Layout l = s.out_layout(0);
  if (l == Layout::nchw) return not_applicable("for nhwc and blocked layouts (nchw steps have their own tactics)");
  if (s.in_layout(0) != l) return not_applicable("x in the output's layout");
  if (s.in_dtypes.size() < 5 || s.out_dtypes.empty() || s.out_dtypes[0] != DType::float32 || s.in_dtypes[0] != DType::float32)
    return not_applicable("float32 x and 4 parameters");
  for (size_t k = 1; k < s.out_dtypes.size(); ++k)
    if (s.out_dtypes[k] != DType::undefined) return not_applicable("inference outputs only (no running statistics)");
  if (ew::attr_i(s, "training_mode", 0) != 0 || s.node->opset < 7) return not_applicable("inference mode, opset 7 or later");
  const Shape& x = s.in_shapes[0];
  if (x.size() != 4 || s.out_shapes[0] != x) return not_applicable("4-D x");
  for (size_t i = 1; i < 5; ++i)
    if (!s.has_input(i) || !s.constants[i] || s.in_dtypes[i] != DType::float32 || s.constants[i]->numel() != x[1])
      return not_applicable("constant per-channel float32 parameters");
  return Status::ok();
}

double affine_cost(const StepDesc& s) {
  const double n = static_cast<double>(ir::physical_numel(s.out_shapes[0], s.out_layout(0)));
  return ew::stream_cost_ns(8 * n, n * 0.06, s.threads, static_cast<int64_t>(n));
}

Result<std::unique_ptr<Kernel>> affine_prepare(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(affine_applies(s));
  const Shape& x = s.in_shapes[0];
  const Layout l = s.out_layout(0);
  const int64_t N = x[0], C = x[1], HW = x[2] * x[3];
  const int64_t B = ir::is_blocked(l) ? ir::layout_block(l) : C, Cb = (C + B - 1) / B;
  // s, t per (padded) channel; a row is one pixel's C channels (nhwc) or one block of B (blocked).
  std::vector<float> st(static_cast<size_t>(2 * Cb * B), 0.0f);
  ew::bn_fold(*s.constants[1], *s.constants[2], *s.constants[3], *s.constants[4], ew::attr_f(s, "epsilon", 1e-5f), st.data(),
              st.data() + Cb * B);
  const int64_t rows = ir::is_blocked(l) ? N * Cb * HW : N * HW;
  const int threads = s.threads;
  return ew::make_kernel([=](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
    const float* xp = in[0].as<float>();
    float* yp = out[0].as<float>();
    const float *sp = st.data(), *tp = st.data() + Cb * B;
    ew::parallel_for(rows, B, threads, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t off = B == C ? 0 : (r / HW) % Cb * B;  // the row's channel block
        const float *xr = xp + r * B, *sr = sp + off, *tr = tp + off;
        float* yr = yp + r * B;
        for (int64_t c = 0; c < B; ++c) yr[c] = xr[c] * sr[c] + tr[c];
      }
    });
    return Status::ok();
  });
}

}  // namespace

void add_channel_affine_tactics(std::vector<Tactic>& t) {
  t.push_back(Tactic{"channel_affine", ir::OpKind::BatchNormalization,
                     "nhwc / blocked inference BatchNormalization: x * s[c] + t[c], folded from constant parameters",
                     affine_applies, affine_cost, affine_prepare, Backend::cpu, /*layouts=*/true});
}

}  // namespace tac::kernels
