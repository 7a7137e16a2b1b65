// The attention family: FusedAttention (made by the fuse_attention pass), y = softmax(scale * Q·K
// + M) · V per batch index. The fused tactic keeps each batch's score matrix in a per-thread
// buffer while it is hot: our packed GEMM computes scale * Q·K + M straight into it (the mask is
// the GEMM epilogue's residual, read with broadcast strides), the softmax runs over its rows in
// place, and a second GEMM multiplies it by V. Batches (batch x heads) are spread over threads.
// Unfused, the same work writes and re-reads the scores three more times.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/attention/geometry.h"
#include "kernels/elementwise/common.h"
#include "kernels/gemm/gemm.h"

namespace tac::kernels {

namespace {

using attention::Geometry;

Result<Geometry> geometry(const StepDesc& s) {
  for (size_t i = 0; i < s.in_dtypes.size(); ++i)
    if (s.has_input(i) && s.in_dtypes[i] != DType::float32) return not_applicable("float32 only");
  TAC_ASSIGN_OR_RETURN(Geometry g, attention::geometry(s));
  if (g.cs(3) != 1) return not_applicable("the output's columns must be contiguous");
  return g;
}

gemm::Blocking blocking(ew::Isa isa) {
  return isa == ew::Isa::avx512 ? gemm::Blocking{gemm::Isa::avx512, 8, 32, 256, 128, 1024, false, true}
                                : gemm::Blocking{gemm::Isa::avx2, 6, 16, 256, 120, 1024, false, true};
}

constexpr size_t align64(size_t n) { return (n + 63) / 64 * 64; }

template <ew::Isa I>
Status fused_applies(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(ew::isa_applies(I));
  if (!gemm::blocking_supported(blocking(I))) return not_applicable("no such GEMM microkernel");
  return geometry(s).status();
}

template <ew::Isa I>
double fused_cost(const StepDesc& s) {
  auto g = geometry(s);
  if (!g) return 1e30;
  const double flops = 2.0 * static_cast<double>(g->batches * g->sq * g->sk) * static_cast<double>(g->d + g->dv);
  const double gflops = (I == ew::Isa::avx512 ? 180.0 : 90.0) * std::max(1, s.threads);
  return flops / gflops + 3.0 * static_cast<double>(g->batches * g->sq * g->sk) / std::max(1, s.threads);
}

template <ew::Isa I>
Result<std::unique_ptr<Kernel>> fused_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(Geometry g, geometry(s));
  const gemm::Blocking blk = blocking(I);
  const int threads = static_cast<int>(std::min<int64_t>(std::max(1, s.threads), g.batches));
  const size_t gemm_ws = std::max(gemm::sgemm_workspace_bytes(blk, g.sq, g.sk, g.d, false, 1),
                                  gemm::sgemm_workspace_bytes(blk, g.sq, g.dv, g.sk, false, 1));
  const size_t per_thread = align64(static_cast<size_t>(g.sq * g.sk) * sizeof(float)) + align64(gemm_ws);
  const ew::IsaKernels& ek = ew::isa_kernels(I);
  auto run = [g, blk, threads, per_thread, &ek](std::span<const TensorView> in, std::span<const TensorView> out,
                                                         void* ws) -> Status {
    const float* q = in[0].as<const float>();
    const float* k = in[1].as<const float>();
    const float* v = in[2].as<const float>();
    const float* mask = g.has_mask ? in[3].as<const float>() : nullptr;
    float* y = out[0].as<float>();
    const size_t nb = g.batch_dims.size();
    auto one = [&](int64_t b, std::byte* mine) {
      float* scores = reinterpret_cast<float*>(mine);
      void* gws = mine + align64(static_cast<size_t>(g.sq * g.sk) * sizeof(float));
      gemm::Epilogue ep;
      ep.alpha = g.scale;
      if (mask) {
        int64_t off = 0, rest = b;
        for (size_t i = nb; i-- > 0;) {
          off += (rest % g.batch_dims[i]) * g.mask_stride[i];
          rest /= g.batch_dims[i];
        }
        ep.res = mask + off;
        ep.res_rs = g.mask_stride[nb];
        ep.res_cs = g.mask_stride[nb + 1];
      }
      const float* qb = q + ir::batch_offset(g.op[0], b);
      const float* kb = k + ir::batch_offset(g.op[1], b);
      const float* vb = v + ir::batch_offset(g.op[2], b);
      gemm::sgemm(blk, g.sq, g.sk, g.d, {qb, g.rs(0), g.cs(0), false}, {kb, g.rs(1), g.cs(1), false}, scores, g.sk,
                  ep, 1, gws);
      ek.softmax_rows(scores, scores, g.sq, g.sk, false);
      gemm::sgemm(blk, g.sq, g.dv, g.sk, {scores, g.sk, 1, false}, {vb, g.rs(2), g.cs(2), false},
                  y + ir::batch_offset(g.op[3], b), g.rs(3), gemm::Epilogue{}, 1, gws);
    };
    std::byte* base = static_cast<std::byte*>(ws);
    if (threads <= 1) {
      for (int64_t b = 0; b < g.batches; ++b) one(b, base);
    } else {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t b = 0; b < g.batches; ++b) one(b, base + static_cast<size_t>(omp_get_thread_num()) * per_thread);
    }
    return Status::ok();
  };
  return ew::make_kernel(std::move(run), per_thread * static_cast<size_t>(threads));
}

const std::vector<Tactic>& table() {
  static const std::vector<Tactic> t = {
      {"fused_avx512", ir::OpKind::FusedAttention,
       "scores, softmax and the product with V per batch in a cache-resident buffer (our AVX-512 GEMM)",
       fused_applies<ew::Isa::avx512>, fused_cost<ew::Isa::avx512>, fused_prepare<ew::Isa::avx512>},
      {"fused_avx2", ir::OpKind::FusedAttention,
       "scores, softmax and the product with V per batch in a cache-resident buffer (our AVX2 GEMM)",
       fused_applies<ew::Isa::avx2>, fused_cost<ew::Isa::avx2>, fused_prepare<ew::Isa::avx2>},
  };
  return t;
}

}  // namespace

std::span<const Tactic> attention_tactics() { return table(); }

}  // namespace tac::kernels
