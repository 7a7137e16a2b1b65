// "gather_channels": a Gather of channels (axis 1 of a 4-D activation, constant indices) on nhwc
// activations: each pixel's output channels are its input channels picked by the indices. The
// channel shuffles of ShuffleNet become such Gathers (builder/passes/channel_gather.cc), so a
// channels-last region no longer ends before each shuffle. CPU; any 2- or 4-byte element (a copy).
#include <cstring>

#include "kernels/elementwise/common.h"
#include "kernels/layout/raw_buffer.h"

namespace tac::kernels {

namespace {

Status gather_applies(const StepDesc& s) {
  if (s.node->op != ir::OpKind::Gather || s.in_shapes.size() != 2) return not_applicable("Gather of two inputs");
  if (s.in_layout(0) != ir::Layout::nhwc || s.out_layout(0) != ir::Layout::nhwc)
    return not_applicable("x and y in nhwc (nchw steps have the plain Gather tactics)");
  if (ew::attr_i(s, "axis", 0) != 1) return not_applicable("along the channels (axis 1) only");
  const Shape& x = s.in_shapes[0];
  if (x.size() != 4 || s.out_dtypes.empty() || s.out_dtypes[0] != s.in_dtypes[0]) return not_applicable("4-D x");
  const size_t e = dtype_size(s.in_dtypes[0]);
  if (e != 2 && e != 4) return not_applicable("2- or 4-byte elements");
  const Tensor* idx = s.constants.size() > 1 ? s.constants[1] : nullptr;
  if (!idx || idx->rank() != 1 || (idx->dtype() != DType::int64 && idx->dtype() != DType::int32))
    return not_applicable("constant 1-D indices");
  for (int64_t i = 0; i < idx->numel(); ++i)
    if (idx->get_i64(i) < -x[1] || idx->get_i64(i) >= x[1]) return not_applicable("an index out of range");
  return Status::ok();
}

double gather_cost(const StepDesc& s) {
  const double n = static_cast<double>(shape_numel(s.out_shapes[0]));
  return ew::stream_cost_ns(2 * n * static_cast<double>(dtype_size(s.out_dtypes[0])), n * 0.1, s.threads,
                            static_cast<int64_t>(n));
}

template <class T>
void gather_rows(const T* x, T* y, const int32_t* idx, int64_t rows, int64_t C, int64_t K, int threads) {
  ew::parallel_for(rows, K, threads, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* xr = x + r * C;
      T* yr = y + r * K;
      for (int64_t k = 0; k < K; ++k) yr[k] = xr[idx[k]];
    }
  });
}

Result<std::unique_ptr<Kernel>> gather_prepare(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(gather_applies(s));
  const Shape& x = s.in_shapes[0];
  const int64_t C = x[1], rows = x[0] * x[2] * x[3];
  const Tensor& t = *s.constants[1];
  std::vector<int32_t> idx(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t c = t.get_i64(i);
    idx[static_cast<size_t>(i)] = static_cast<int32_t>(c < 0 ? c + C : c);
  }
  const int64_t K = t.numel();
  const bool wide = dtype_size(s.in_dtypes[0]) == 4;
  const int threads = s.threads;
  return ew::make_kernel([=](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
    if (wide) gather_rows(in[0].as<uint32_t>(), out[0].as<uint32_t>(), idx.data(), rows, C, K, threads);
    else gather_rows(in[0].as<uint16_t>(), out[0].as<uint16_t>(), idx.data(), rows, C, K, threads);
    return Status::ok();
  });
}

}  // namespace

void add_gather_channels_tactics(std::vector<Tactic>& t) {
  t.push_back(Tactic{"gather_channels", ir::OpKind::Gather,
                     "nhwc Gather of channels (axis 1, constant indices): each pixel's channels picked by the indices",
                     gather_applies, gather_cost, gather_prepare, Backend::cpu, /*layouts=*/true});
}

}  // namespace tac::kernels
