// CUDA tactics of the attention family, both our own kernels (cuda_attention.cu) for a
// FusedAttention step (the fuse_attention pass, operand views from pass.attention_views):
// "cuda_flash_w2/w4/w4s2/w8s2" (tensor cores, fp16/bf16: mma.sync with the scores in registers
// and an online softmax; head sizes up to 128; blocks of 2, 4 or 8 warps, the w*s2 ones with two
// warps per 16 query rows that split the keys) and "cuda_fused" (CUDA cores,
// fp32, fp16 or bf16, any head size whose K and V fit in shared memory: BERT-base needs 32 KB per
// head in fp16). Q, K, V, the mask
// and y are of one type, as the CUDA precision rewrite leaves them (FusedAttention follows its
// neighbours into fp16/bf16, builder/precision.cc).
#include "kernels/attention/geometry.h"
#include "kernels/cuda_util.h"
#include "kernels/elementwise/cuda_kernels.h"

namespace tac::kernels {

namespace {

using cuda::kern::AttentionDesc;
using cuda::kern::Elem;

constexpr int64_t kMaxSmem = 200 * 1024;  // of the H100/H200's 227 KB per block

struct Fused {
  AttentionDesc d;
  Elem t = Elem::f32;
  bool mask = false;
};

Result<Fused> fused_desc(const StepDesc& s) {
  if (s.out_dtypes.size() != 1) return not_applicable("one output");
  const DType dt = s.out_dtypes[0];
  Fused f;
  if (dt == DType::float16) f.t = Elem::f16;
  else if (dt == DType::bfloat16) f.t = Elem::bf16;
  else if (dt != DType::float32) return not_applicable("fp32, fp16 or bf16 only");
  for (size_t i = 0; i < s.in_dtypes.size(); ++i)
    if (s.has_input(i) && s.in_dtypes[i] != dt) return not_applicable("Q, K, V and the mask of the output's type");
  TAC_ASSIGN_OR_RETURN(attention::Geometry g, attention::geometry(s));
  if (g.batch_dims.size() > static_cast<size_t>(cuda::kern::kMaxDims)) return not_applicable("too many batch dims");
  AttentionDesc& d = f.d;
  d.batches = g.batches, d.sq = g.sq, d.d = g.d, d.sk = g.sk, d.dv = g.dv, d.scale = g.scale;
  d.nb = static_cast<int>(g.batch_dims.size());
  f.mask = g.has_mask;
  for (int i = 0; i < d.nb; ++i) {
    d.batch_dims[i] = g.batch_dims[static_cast<size_t>(i)];
    d.mask_bs[i] = g.has_mask ? g.mask_stride[static_cast<size_t>(i)] : 0;
  }
  for (size_t o = 0; o < 4; ++o) {
    d.off[o] = g.op[o].offset;
    d.rs[o] = g.rs(o);
    d.cs[o] = g.cs(o);
    for (int i = 0; i < d.nb; ++i) d.bs[o][i] = g.op[o].strides[static_cast<size_t>(i)];
  }
  if (g.has_mask) {
    d.mask_rs = g.mask_stride[static_cast<size_t>(d.nb)];
    d.mask_cs = g.mask_stride[static_cast<size_t>(d.nb) + 1];
  }
  if (d.batches > (int64_t{1} << 31) - 1) return not_applicable("too many batches for one grid");
  if (cuda::kern::attention_smem_bytes(f.t, d) > kMaxSmem)
    return not_applicable("K and V of one batch need more than 200 KB of shared memory");
  return f;
}

Status fused_applies(const StepDesc& s) { return fused_desc(s).status(); }

// The cost model of both kernels (ns): K and V read once per block of `rows` query rows, and the
// two products at `flops_per_ns`.
double attention_cost(const Fused& f, int64_t rows, double flops_per_ns) {
  const AttentionDesc& d = f.d;
  const double flops = 2.0 * static_cast<double>(d.batches * d.sq * d.sk) * static_cast<double>(d.d + d.dv);
  const double e = f.t == Elem::f32 ? 4 : 2;
  const double blocks = static_cast<double>(d.batches) * static_cast<double>((d.sq + rows - 1) / rows);
  return cuda::memory_bound_ns(e * blocks * static_cast<double>(d.d * d.sk + d.sk * d.dv)) + flops / flops_per_ns;
}

double fused_cost(const StepDesc& s) {
  auto f = fused_desc(s);
  // CUDA cores: ~30 TFLOP/s reached by a shared-memory-bound loop.
  return f ? attention_cost(*f, 16, 3e4) : 1e30;
}

Result<std::unique_ptr<Kernel>> fused_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(Fused f, fused_desc(s));
  TAC_ASSIGN_OR_RETURN(cuda::Context * c, cuda::context());
  TAC_RETURN_IF_ERROR(cuda::launch_status(cuda::kern::attention_init(f.t, f.d), "attention kernel (shared memory limit)"));
  cudaStream_t st = c->stream;
  return cuda::make_kernel([f, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::attention(f.t, in[0].data, in[1].data, in[2].data, f.mask ? in[3].data : nullptr,
                                                     out[0].data, f.d, st),
                               "attention kernel");
  });
}

// ---- cuda_flash_w2/w4/w4s2/w8s2: scores in registers (mma.sync, online softmax) ----

// The block shape the cost model prefers: 4 warps of 16 query rows each while that gives about
// two blocks per SM of an H200; with fewer blocks (BERT at batch 1: 12 heads x 2), 8 warps that
// split the keys in two (the same blocks, twice the warps, each with half the chain).
bool preferred(const AttentionDesc& d, int w, int ks) {
  const bool many = d.batches * ((d.sq + 63) / 64) >= 264;
  return many ? (w == 4 && ks == 1) : (w == 8 && ks == 2);
}

// One tactic per block shape: W warps, KS of them per 16 query rows (each with 1/KS of the keys).
// Fewer, larger blocks share each staged K and V among more rows; more, smaller ones keep more
// SMs busy; split keys put more warps in flight. Which wins depends on the batch and the engine
// around it, so each is a tactic the tuner can time.
template <int W, int KS>
Result<Fused> flash_desc(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(Fused f, fused_desc(s));
  if (f.t == Elem::f32) return not_applicable("fp16 or bf16 only (tensor cores)");
  const AttentionDesc& d = f.d;
  if (d.d % 16 || d.dv % 16 || d.sk % 16) return not_applicable("head sizes and key count must be multiples of 16");
  if (d.d > 128 || d.dv > 128) return not_applicable("head sizes above 128");
  if (cuda::kern::attention_flash_smem_bytes(d, W, KS) > kMaxSmem)
    return not_applicable("K, V and the block's Q rows need more than 200 KB of shared memory");
  return f;
}

template <int W, int KS>
Status flash_applies(const StepDesc& s) {
  return flash_desc<W, KS>(s).status();
}

template <int W, int KS>
double flash_cost(const StepDesc& s) {
  auto f = flash_desc<W, KS>(s);
  if (!f) return 1e30;
  // Tensor cores with the scores in registers: ~400 TFLOP/s at these sizes; the other block
  // shapes rank just behind the preferred one.
  return attention_cost(*f, 16 * (W / KS), 4e5) * (preferred(f->d, W, KS) ? 1.0 : 1.1);
}

template <int W, int KS>
Result<std::unique_ptr<Kernel>> flash_prepare(const StepDesc& s) {
  auto fd = flash_desc<W, KS>(s);
  TAC_RETURN_IF_ERROR(fd.status());
  const Fused f = *fd;
  TAC_ASSIGN_OR_RETURN(cuda::Context * c, cuda::context());
  TAC_RETURN_IF_ERROR(cuda::launch_status(cuda::kern::attention_flash_init(f.t, f.d, W, KS),
                                          "flash attention kernel (shared memory limit)"));
  cudaStream_t st = c->stream;
  return cuda::make_kernel([f, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::attention_flash(f.t, in[0].data, in[1].data, in[2].data,
                                                           f.mask ? in[3].data : nullptr, out[0].data, f.d, W, KS, st),
                               "flash attention kernel");
  });
}

template <int W, int KS>
Tactic flash_tactic(const char* name) {
  static const std::string help =
      "own CUDA kernel on tensor cores (mma.sync, fp16/bf16, fp32 sums): the scores stay in registers, online softmax "
      "over chunks of 64 keys; blocks of " + std::to_string(W) + " warps, " +
      (KS == 1 ? std::string("one per 16 query rows") : std::to_string(KS) + " per 16 query rows, each with 1/" +
                                                             std::to_string(KS) + " of the keys");
  return {name, ir::OpKind::FusedAttention, help.c_str(), flash_applies<W, KS>, flash_cost<W, KS>,
          flash_prepare<W, KS>, Backend::cuda};
}

}  // namespace

std::span<const Tactic> cuda_attention_tactics() {
  static const std::vector<Tactic> table = {
      {"cuda_fused", ir::OpKind::FusedAttention,
       "own CUDA kernel: scores, softmax and the product with V in one launch (K and V in shared memory, fp32 sums)",
       fused_applies, fused_cost, fused_prepare, Backend::cuda},
      flash_tactic<2, 1>("cuda_flash_w2"),
      flash_tactic<4, 1>("cuda_flash_w4"),
      flash_tactic<4, 2>("cuda_flash_w4s2"),
      flash_tactic<8, 2>("cuda_flash_w8s2"),
  };
  return table;
}

}  // namespace tac::kernels
