// Tactic table of the gemm family (see src/kernels/tactic.h): MatMul, FusedMatMul and Gemm in
// fp32 through our packed GEMM (one row per microkernel and blocking), OpenBLAS and oneDNN.
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <utility>

#include "kernels/gemm/gemm.h"
#include "kernels/gemm/problem.h"
#include "kernels/tactic.h"

namespace tac::kernels {

// Library tactics (gemm_libs.cc).
namespace gemm {
Status openblas_applies(const StepDesc& s);
double openblas_cost(const StepDesc& s);
Result<std::unique_ptr<Kernel>> openblas_prepare(const StepDesc& s);
Status onednn_applies(const StepDesc& s);
double onednn_cost(const StepDesc& s);
Result<std::unique_ptr<Kernel>> onednn_prepare(const StepDesc& s);
std::span<const Tactic> lowp_gemm_tactics();  // bf16 / int8 rows (onednn_lowp.cc)
}  // namespace gemm

namespace {

using gemm::Blocking;
using gemm::Isa;
using gemm::Problem;

// One row per microkernel + blocking: {isa, mr, nr, kc, mc, nc, pack_a}. `gflops` is the row's
// measured single-thread rate on 512^3 (AMD Zen-class core with AVX-512, peak ~250 GFLOP/s); the
// cost model derates it for small shapes. "_ina" rows read A in place (no A copy).
struct PackedRow {
  const char* name;
  const char* help;
  Blocking blk;
  double gflops;
};

constexpr PackedRow kRows[] = {
    {"gemm_avx512_14x32_ina", "packed GEMM, AVX-512 14x32, A read in place, kc=256 mc=112 nc=1024", {Isa::avx512, 14, 32, 256, 112, 1024, false}, 246},
    {"gemm_avx512_8x32_ina", "packed GEMM, AVX-512 8x32, A read in place, kc=256 mc=128 nc=1024", {Isa::avx512, 8, 32, 256, 128, 1024, false}, 246},
    {"gemm_avx512_8x32_ina_kc512", "packed GEMM, AVX-512 8x32, A read in place, kc=512 mc=128 nc=1024",
     {Isa::avx512, 8, 32, 512, 128, 1024, false}, 243},
    {"gemm_avx512_6x64_ina", "packed GEMM, AVX-512 6x64, A read in place, kc=256 mc=120 nc=1024", {Isa::avx512, 6, 64, 256, 120, 1024, false}, 242},
    {"gemm_avx512_14x32", "packed GEMM, AVX-512 14x32, A packed, kc=256 mc=112 nc=1024", {Isa::avx512, 14, 32, 256, 112, 1024, true}, 228},
    {"gemm_avx512_12x32", "packed GEMM, AVX-512 12x32, A packed, kc=256 mc=120 nc=1024", {Isa::avx512, 12, 32, 256, 120, 1024, true}, 230},
    {"gemm_avx512_8x32", "packed GEMM, AVX-512 8x32, A packed, kc=256 mc=128 nc=1024", {Isa::avx512, 8, 32, 256, 128, 1024, true}, 226},
    {"gemm_avx512_6x32", "packed GEMM, AVX-512 6x32, A packed, kc=256 mc=120 nc=1024", {Isa::avx512, 6, 32, 256, 120, 1024, true}, 227},
    {"gemm_avx512_8x48", "packed GEMM, AVX-512 8x48, A packed, kc=256 mc=128 nc=960", {Isa::avx512, 8, 48, 256, 128, 960, true}, 220},
    {"gemm_avx512_4x48", "packed GEMM, AVX-512 4x48, A packed, kc=256 mc=128 nc=960", {Isa::avx512, 4, 48, 256, 128, 960, true}, 202},
    {"gemm_avx512_6x64", "packed GEMM, AVX-512 6x64, A packed, kc=256 mc=120 nc=1024", {Isa::avx512, 6, 64, 256, 120, 1024, true}, 219},
    {"gemm_avx512_14x16", "packed GEMM, AVX-512 14x16 (narrow N), A packed, kc=256 mc=112 nc=1024", {Isa::avx512, 14, 16, 256, 112, 1024, true}, 201},
    {"gemm_avx2_6x16_ina", "packed GEMM, AVX2+FMA 6x16, A read in place, kc=256 mc=120 nc=1024", {Isa::avx2, 6, 16, 256, 120, 1024, false}, 122},
    {"gemm_avx2_6x16", "packed GEMM, AVX2+FMA 6x16, A packed, kc=256 mc=120 nc=1024", {Isa::avx2, 6, 16, 256, 120, 1024, true}, 119},
    {"gemm_avx2_4x24", "packed GEMM, AVX2+FMA 4x24, A packed, kc=256 mc=128 nc=960", {Isa::avx2, 4, 24, 256, 128, 960, true}, 117},
};
constexpr int kNumRows = static_cast<int>(sizeof(kRows) / sizeof(kRows[0]));

struct AlignedFree {
  void operator()(float* p) const { std::free(p); }
};
using AlignedFloats = std::unique_ptr<float[], AlignedFree>;
AlignedFloats aligned_floats(size_t n) {
  const size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
  return AlignedFloats(static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64))));
}

class PackedGemmKernel final : public Kernel {
 public:
  PackedGemmKernel(Problem p, Blocking blk, int threads) : p_(std::move(p)), blk_(blk), threads_(std::max(threads, 1)) {}

  void prepack_b(const float* b) {
    const size_t one = gemm::packed_b_floats(blk_, p_.K, p_.N);
    packed_b_ = aligned_floats(one * static_cast<size_t>(p_.b_count));
    for (int64_t i = 0; i < p_.b_count; ++i)
      gemm::pack_b(blk_, p_.K, p_.N, b + i * p_.K * p_.N, p_.b_rs, p_.b_cs, packed_b_.get() + i * one);
  }

  // Batches run in parallel (one thread each) when there are enough of them.
  bool batch_parallel() const { return threads_ > 1 && p_.batches >= threads_; }
  size_t one_thread_bytes() const {
    return (gemm::sgemm_workspace_bytes(blk_, p_.M, p_.N, p_.K, packed_b_ != nullptr, 1) + 63) / 64 * 64;
  }
  size_t workspace_bytes() const override {
    if (batch_parallel()) return one_thread_bytes() * static_cast<size_t>(threads_);
    return gemm::sgemm_workspace_bytes(blk_, p_.M, p_.N, p_.K, packed_b_ != nullptr, threads_);
  }

  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* workspace) override {
    const float* a = in[0].as<const float>();
    const float* b = in[1].as<const float>();
    float* c = out[0].as<float>();
    gemm::Epilogue ep;
    ep.alpha = p_.alpha;
    ep.act = p_.act;
    ep.res_scale = p_.res_scale;
    ep.res_rs = p_.res_rs;
    ep.res_cs = p_.res_cs;
    if (p_.bias_input >= 0) ep.bias = in[static_cast<size_t>(p_.bias_input)].as<const float>();
    const float* res = p_.res_input >= 0 ? in[static_cast<size_t>(p_.res_input)].as<const float>() : nullptr;
    const size_t one = gemm::packed_b_floats(blk_, p_.K, p_.N);
    auto one_batch = [&](int64_t i, int threads, void* ws) {
      const size_t bi = static_cast<size_t>(i);
      gemm::Operand oa{a + p_.a_off[bi], p_.a_rs, p_.a_cs, false};
      gemm::Operand ob = packed_b_ ? gemm::Operand{packed_b_.get() + static_cast<size_t>(p_.b_index[bi]) * one, 0, 0, true}
                                   : gemm::Operand{b + p_.b_off[bi], p_.b_rs, p_.b_cs, false};
      gemm::Epilogue e = ep;
      if (res) e.res = res + p_.r_off[bi];
      gemm::sgemm(blk_, p_.M, p_.N, p_.K, oa, ob, c + i * p_.M * p_.N, p_.N, e, threads, ws);
    };
    if (batch_parallel()) {
      const size_t stride = one_thread_bytes();
#pragma omp parallel for num_threads(threads_) schedule(static)
      for (int64_t i = 0; i < p_.batches; ++i)
        one_batch(i, 1, static_cast<char*>(workspace) + static_cast<size_t>(omp_get_thread_num()) * stride);
    } else {
      for (int64_t i = 0; i < p_.batches; ++i) one_batch(i, threads_, workspace);
    }
    return Status::ok();
  }

 private:
  Problem p_;
  Blocking blk_;
  int threads_;
  AlignedFloats packed_b_;
};

template <int R>
Status packed_applies(const StepDesc& s) {
  const Blocking& blk = kRows[R].blk;
  if (!gemm::isa_available(blk.isa))
    return not_applicable(blk.isa == Isa::avx512 ? "needs AVX-512 (F/BW/VL/DQ)" : "needs AVX2 and FMA");
  Problem p;
  return gemm::analyze_problem(s, p);
}

// Estimated time: padded flops at the row's rate, derated for small M (partial row tiles run
// narrower kernels) and short K, or streaming the packed B when that takes longer (small M); plus
// copying A (packed rows) and B (when not a constant), all spread over the usable threads.
template <int R>
double packed_cost(const StepDesc& s) {
  Problem p;
  if (!gemm::analyze_problem(s, p)) return 1e30;
  const Blocking& blk = kRows[R].blk;
  const double batches = static_cast<double>(p.batches), K = static_cast<double>(p.K);
  const double n_pad = static_cast<double>((p.N + blk.nr - 1) / blk.nr * blk.nr);
  const double m_tiles = static_cast<double>((p.M + blk.mr - 1) / blk.mr);
  const double m_eff = static_cast<double>(p.M) / (m_tiles * blk.mr);  // row-tile occupancy
  const double kc = std::min<double>(K, blk.kc);
  const double rate = kRows[R].gflops * (kc / (kc + 4.0)) * (0.35 + 0.65 * m_eff);  // flop per ns
  const double flops = 2.0 * static_cast<double>(p.M) * n_pad * K * batches;
  const double b_stream_ns = 4.0 * K * n_pad * batches / 100.0;  // ~100 bytes/ns from L2/L3
  // Small M: a tile of r = min(M, mr) rows keeps only r * nr / lanes independent FMA chains, and
  // with fewer than 8 (2 FMA units x 4 cycles latency) the microkernel is latency-bound at
  // 2 * lanes * chains / 4 flops per cycle (~3.9 GHz). Calibrated on mobilenet_v2's / resnet18's
  // classifiers (M=1): nr=16 rows 82-107 us, AVX2 6x16 85-92 us, nr>=32 AVX-512 rows 54-58 us
  // (then B streaming bound) for K=1280 N=1000.
  const double lanes = blk.isa == Isa::avx512 ? 16.0 : 8.0;
  const double chains = std::min<double>(static_cast<double>(std::min<int64_t>(p.M, blk.mr)) * blk.nr / lanes, 8.0);
  const double latency_rate = 2.0 * lanes * chains / 4.0 * 3.9;  // flop per ns
  double copy_ns = 0;
  if (blk.pack_a) copy_ns += 0.3 * static_cast<double>(p.M) * K * static_cast<double>((p.N + blk.nc - 1) / blk.nc) * batches;
  if (!p.b_const) copy_ns += 0.3 * K * n_pad * batches;
  const double tiles = m_tiles * (n_pad / blk.nr) * batches;
  const double threads = std::max(1.0, std::min<double>(s.threads, tiles));
  return 300.0 + (std::max({flops / rate, flops / latency_rate, b_stream_ns}) + copy_ns) / threads;
}

template <int R>
Result<std::unique_ptr<Kernel>> packed_prepare(const StepDesc& s) {
  Problem p;
  TAC_RETURN_IF_ERROR(gemm::analyze_problem(s, p));
  const Blocking& blk = kRows[R].blk;
  if (!gemm::blocking_supported(blk)) return internal_error(std::string(kRows[R].name) + ": no such microkernel");
  const bool b_const = p.b_const;
  auto k = std::make_unique<PackedGemmKernel>(std::move(p), blk, s.threads);
  if (b_const) k->prepack_b(s.constants[1]->data<float>());
  return std::unique_ptr<Kernel>(std::move(k));
}

template <int... Rs>
void add_packed_rows(std::vector<Tactic>& t, ir::OpKind op, std::integer_sequence<int, Rs...>) {
  (t.push_back(Tactic{kRows[Rs].name, op, kRows[Rs].help, packed_applies<Rs>, packed_cost<Rs>, packed_prepare<Rs>}), ...);
}

}  // namespace

std::span<const Tactic> gemm_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t;
    for (ir::OpKind op : {ir::OpKind::MatMul, ir::OpKind::FusedMatMul, ir::OpKind::Gemm}) {
      add_packed_rows(t, op, std::make_integer_sequence<int, kNumRows>{});
      t.push_back(Tactic{"openblas", op, "OpenBLAS cblas_sgemm (OpenMP build) per batch, then a vectorised epilogue pass",
                         gemm::openblas_applies, gemm::openblas_cost, gemm::openblas_prepare});
      t.push_back(Tactic{"onednn", op,
                         "oneDNN matmul primitive, weights reordered once, bias / residual / activation as post-ops",
                         gemm::onednn_applies, gemm::onednn_cost, gemm::onednn_prepare});
    }
    for (const Tactic& lowp : gemm::lowp_gemm_tactics()) t.push_back(lowp);
    return t;
  }();
  return table;
}

}  // namespace tac::kernels
