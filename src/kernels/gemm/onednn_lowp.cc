// Lower-precision GEMM tactics (the builder's precision rewrite makes these steps, see
// src/builder/precision.h): oneDNN matmul with
//   onednn_bf16: bf16 A and B, bf16 C, fp32 bias, bf16 residual (binary add post-op), AVX512-BF16;
//   onednn_int8: u8 or s8 A, s8 constant B, fp32 C with per-column output scales
//                x_scale * w_scales[n] (node attributes), fp32 bias and residual, AVX512-VNNI.
// The problem geometry is the fp32 one (problem.cc) read from the same step with its dtypes
// set aside; every fp32 tactic rejects these steps (analyze_problem accepts fp32 only).
#include <omp.h>

#include <algorithm>
#include <dnnl.hpp>
#include <memory>
#include <unordered_map>

#include "kernels/gemm/problem.h"
#include "kernels/onednn_common.h"
#include "kernels/tactic.h"

namespace tac::kernels::gemm {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

enum class Lowp { bf16, int8 };

int batch_kind(const std::vector<int64_t>& off, int64_t step) {
  bool seq = true, zero = true;
  for (size_t i = 0; i < off.size(); ++i) {
    seq = seq && off[i] == static_cast<int64_t>(i) * step;
    zero = zero && off[i] == 0;
  }
  return zero ? 0 : (seq ? 1 : -1);
}

// The step's dtypes for `kind`, then its fp32 geometry (analyze_problem on a copy whose dtypes
// read fp32).
Status analyze_lowp(const StepDesc& s, Lowp kind, Problem& p) {
  const ir::OpKind op = s.node->op;
  if (op != ir::OpKind::MatMul && op != ir::OpKind::FusedMatMul && op != ir::OpKind::Gemm)
    return not_applicable("not a GEMM op");
  if (!s.has_input(0) || !s.has_input(1) || s.out_dtypes.size() != 1) return not_applicable("A and B are required");
  const int res = op == ir::OpKind::Gemm ? 2 : (op == ir::OpKind::FusedMatMul ? 3 : -1);
  if (kind == Lowp::bf16) {
    if (!cpu_features().avx512_bf16) return not_applicable("needs AVX512-BF16");
    if (s.in_dtypes[0] != DType::bfloat16 || s.in_dtypes[1] != DType::bfloat16 || s.out_dtypes[0] != DType::bfloat16)
      return not_applicable("bf16 only (A, B and the output)");
    if (res >= 0 && s.has_input(static_cast<size_t>(res)) && s.in_dtypes[static_cast<size_t>(res)] != DType::bfloat16)
      return not_applicable("the residual must be bf16");
    if (s.node->attr("x_scale")) return not_applicable("an int8 step");
  } else {
    if (!cpu_features().avx512_vnni) return not_applicable("needs AVX512-VNNI");
    if (op != ir::OpKind::FusedMatMul || !s.node->attr("x_scale") || !s.node->attr("w_scales"))
      return not_applicable("not an int8 step (FusedMatMul with x_scale / w_scales)");
    // With y_scale the output is quantized (u8 / s8 for the next int8 node), else fp32.
    const bool y_q = s.node->attr("y_scale") != nullptr;
    const DType y = s.out_dtypes[0];
    if ((s.in_dtypes[0] != DType::uint8 && s.in_dtypes[0] != DType::int8) || s.in_dtypes[1] != DType::int8 ||
        (y_q ? y != DType::uint8 && y != DType::int8 : y != DType::float32))
      return not_applicable("int8 needs u8/s8 A, s8 B, fp32 output (u8/s8 with y_scale)");
    if (!s.constants[1]) return not_applicable("int8 needs constant B");
    if (res >= 0 && s.has_input(static_cast<size_t>(res)) && (y_q || s.in_dtypes[static_cast<size_t>(res)] != DType::float32))
      return not_applicable("the residual must be fp32, without y_scale");
    if (y_q && !(s.node->attr("y_scale")->f > 0)) return not_applicable("y_scale must be positive");
  }
  if (s.has_input(2) && op != ir::OpKind::Gemm && s.in_dtypes[2] != DType::float32) return not_applicable("bias must be fp32");
  StepDesc f = s;
  for (DType& d : f.in_dtypes)
    if (d != DType::undefined) d = DType::float32;
  f.out_dtypes[0] = DType::float32;
  f.constants[1] = nullptr;  // prepack decisions below do not read it as fp32
  TAC_RETURN_IF_ERROR(analyze_problem(f, p));
  p.b_const = s.constants[1] != nullptr;
  if (p.batches > 1) {
    if (batch_kind(p.a_off, p.M * p.K) < 0 || batch_kind(p.b_off, p.K * p.N) < 0)
      return not_applicable("oneDNN: batch broadcast other than all-or-nothing");
    if (p.res_input >= 0 && batch_kind(p.r_off, p.res_rows * p.res_cols) < 0)
      return not_applicable("oneDNN: residual batch broadcast other than all-or-nothing");
    if (p.b_count > 1 && p.b_const && p.batches != p.b_count) return not_applicable("oneDNN: broadcast constant B batch");
  }
  if (p.res_input >= 0 && p.res_scale != 1.0f) return not_applicable("oneDNN: Gemm beta != 1 with C");
  if (kind == Lowp::int8) {
    if (s.in_shapes[1].size() != 2) return not_applicable("int8 needs a 2-D B (per-column scales)");
    if (static_cast<int64_t>(s.node->attr("w_scales")->floats.size()) != p.N)
      return not_applicable("w_scales must have N entries");
  }
  return Status::ok();
}

class LowpMatmulKernel final : public Kernel {
 public:
  LowpMatmulKernel(const Problem& p, Lowp kind, int threads)
      : p_(p), kind_(kind), threads_(std::max(threads, 1)), strm_(cpu_engine()) {}

  void init(const StepDesc& s) {
    const bool batched = p_.batches > 1;
    const memory::dim nb = p_.batches, M = p_.M, N = p_.N, K = p_.K;
    auto dims = [&](memory::dim b, memory::dim r, memory::dim c) {
      return batched ? memory::dims{b, r, c} : memory::dims{r, c};
    };
    auto strides = [&](memory::dim bs, memory::dim rs, memory::dim cs) {
      return batched ? memory::dims{bs, rs, cs} : memory::dims{rs, cs};
    };
    const dt a_t = dnnl_type(s.in_dtypes[0]), b_t = dnnl_type(s.in_dtypes[1]), c_t = dnnl_type(s.out_dtypes[0]);
    const memory::dim ab = batched && batch_kind(p_.a_off, M * K) == 1 ? nb : 1;
    const memory::dim bb = batched && batch_kind(p_.b_off, K * N) == 1 ? nb : 1;
    src_md_ = memory::desc(dims(ab, M, K), a_t, strides(M * K, p_.a_rs, p_.a_cs));
    user_wei_md_ = memory::desc(dims(bb, K, N), b_t, strides(K * N, p_.b_rs, p_.b_cs));
    dst_md_ = memory::desc(dims(nb, M, N), c_t, strides(M * N, N, 1));
    const memory::desc wei_any = p_.b_const ? memory::desc(dims(bb, K, N), b_t, tag::any) : user_wei_md_;
    if (p_.bias_input >= 0) bias_md_ = memory::desc(dims(1, 1, N), dt::f32, strides(N, N, 1));

    dnnl::primitive_attr attr;
    dnnl::post_ops po;
    if (p_.alpha != 1.0f) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, p_.alpha, 0.0f);
    if (kind_ == Lowp::int8) {
      // oneDNN 2.x applies the bias before the output scales: pre-divide it (see run()).
      const float xs = s.node->attr("x_scale")->f;
      const auto& ws = s.node->attr("w_scales")->floats;
      scales_.resize(ws.size());
      for (size_t i = 0; i < ws.size(); ++i) scales_[i] = xs * ws[i];
      attr.set_output_scales(1 << (batched ? 2 : 1), scales_);
    }
    if (p_.res_input >= 0) {
      const memory::dim rb = batched && batch_kind(p_.r_off, p_.res_rows * p_.res_cols) == 1 ? nb : 1;
      res_md_ = memory::desc(dims(rb, p_.res_rows, p_.res_cols), dnnl_type(s.in_dtypes[static_cast<size_t>(p_.res_input)]),
                             strides(p_.res_rows * p_.res_cols, p_.res_cols, 1));
      po.append_binary(dnnl::algorithm::binary_add, res_md_);
    }
    using A = ir::Epilogue::Act;
    switch (p_.act.act) {
      case A::none: break;
      case A::relu: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f); break;
      case A::leaky_relu: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, p_.act.alpha, 0.0f); break;
      case A::clip: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, p_.act.alpha, p_.act.beta); break;
      case A::sigmoid: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f); break;
      case A::tanh: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_tanh, 0.0f, 0.0f); break;
      case A::gelu: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f); break;
      case A::silu: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f); break;
      case A::hard_swish: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_hardswish, 1.0f / 6.0f, 0.5f); break;
      case A::hard_sigmoid:
        po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, p_.act.alpha, p_.act.beta);
        po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, 0.0f, 1.0f);
        break;
    }
    // y_scale: y / y_scale as the last post-op; the f32 -> s8/u8 store rounds to nearest even
    // and saturates.
    if (const ir::Attribute* ys = s.node->attr("y_scale"); ys && kind_ == Lowp::int8)
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, 1.0f / ys->f, 0.0f);
    attr.set_post_ops(po);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto d = p_.bias_input >= 0 ? dnnl::matmul::desc(src_md_, wei_any, bias_md_, dst_md_)
                                : dnnl::matmul::desc(src_md_, wei_any, dst_md_);
    pd_ = dnnl::matmul::primitive_desc(d, attr, cpu_engine());
    prim_ = dnnl::matmul(pd_);
    if (p_.b_const) {
      weights_ = memory(pd_.weights_desc(), cpu_engine());
      memory user(user_wei_md_, cpu_engine(), const_cast<void*>(s.constants[1]->raw()));
      dnnl::reorder(user, weights_).execute(strm_, user, weights_);
      strm_.wait();
    }
    if (kind_ == Lowp::int8 && p_.bias_input >= 0) {
      bias_scaled_.resize(static_cast<size_t>(N));
      bias_const_ = s.constants[static_cast<size_t>(p_.bias_input)];
      if (bias_const_)
        for (int64_t i = 0; i < N; ++i)
          bias_scaled_[static_cast<size_t>(i)] = bias_const_->data<float>()[i] / scales_[static_cast<size_t>(i)];
    }
  }

  size_t workspace_bytes() const override { return pd_.scratchpad_desc().get_size(); }

  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* workspace) override {
    try {
      const int saved = omp_get_max_threads();
      omp_set_num_threads(threads_);
      std::unordered_map<int, memory> args;
      args.emplace(DNNL_ARG_SRC, memory(src_md_, cpu_engine(), in[0].data));
      args.emplace(DNNL_ARG_WEIGHTS, weights_ ? weights_ : memory(user_wei_md_, cpu_engine(), in[1].data));
      args.emplace(DNNL_ARG_DST, memory(dst_md_, cpu_engine(), out[0].data));
      if (p_.bias_input >= 0) {
        void* b = in[static_cast<size_t>(p_.bias_input)].data;
        if (kind_ == Lowp::int8) {
          if (!bias_const_) {  // a computed bias: scale it here
            const float* bf = static_cast<const float*>(b);
            for (size_t i = 0; i < bias_scaled_.size(); ++i) bias_scaled_[i] = bf[i] / scales_[i];
          }
          b = bias_scaled_.data();
        }
        args.emplace(DNNL_ARG_BIAS, memory(bias_md_, cpu_engine(), b));
      }
      if (p_.res_input >= 0) {
        const int index = p_.alpha != 1.0f ? 1 : 0;
        args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1,
                     memory(res_md_, cpu_engine(), in[static_cast<size_t>(p_.res_input)].data));
      }
      if (pd_.scratchpad_desc().get_size() > 0)
        args.emplace(DNNL_ARG_SCRATCHPAD, memory(pd_.scratchpad_desc(), cpu_engine(), workspace));
      prim_.execute(strm_, args);
      strm_.wait();
      omp_set_num_threads(saved);
    } catch (const dnnl::error& e) {
      return internal_error(std::string("oneDNN low-precision matmul: ") + e.what());
    }
    return Status::ok();
  }

 private:
  Problem p_;
  Lowp kind_;
  int threads_;
  dnnl::stream strm_;
  memory::desc src_md_, user_wei_md_, dst_md_, bias_md_, res_md_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul prim_;
  memory weights_;
  std::vector<float> scales_, bias_scaled_;
  const Tensor* bias_const_ = nullptr;
};

template <Lowp K>
Status lowp_applies(const StepDesc& s) {
  Problem p;
  return analyze_lowp(s, K, p);
}

// oneDNN bf16 matmul (AVX512-BF16 vdpbf16ps: twice the fp32 FMA rate) and int8 (VNNI vpdpbusd:
// four times); the fp32 rate is ~242 GFLOP/s single-thread here (gemm_libs.cc).
template <Lowp K>
double lowp_cost(const StepDesc& s) {
  Problem p;
  if (!analyze_lowp(s, K, p)) return 1e30;
  const double Kd = static_cast<double>(p.K), N = static_cast<double>(p.N), batches = static_cast<double>(p.batches);
  const double kc = std::min(Kd, 256.0);
  const double rate = K == Lowp::bf16 ? 420.0 : 700.0, bytes = K == Lowp::bf16 ? 2.0 : 1.0;
  double work = std::max(p.flops() / (rate * kc / (kc + 16.0)), bytes * Kd * N * batches / 100.0);
  if (!p.b_const) work += 0.3 * Kd * N * batches;
  return 3000.0 + work / std::max(1, s.threads);
}

template <Lowp K>
Result<std::unique_ptr<Kernel>> lowp_prepare(const StepDesc& s) {
  Problem p;
  TAC_RETURN_IF_ERROR(analyze_lowp(s, K, p));
  try {
    auto k = std::make_unique<LowpMatmulKernel>(p, K, s.threads);
    k->init(s);
    return std::unique_ptr<Kernel>(std::move(k));
  } catch (const dnnl::error& e) {
    return not_applicable(std::string("oneDNN low-precision matmul: ") + e.what());
  }
}

}  // namespace

std::span<const Tactic> lowp_gemm_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t;
    for (ir::OpKind op : {ir::OpKind::MatMul, ir::OpKind::FusedMatMul, ir::OpKind::Gemm}) {
      t.push_back(Tactic{"onednn_bf16", op,
                         "oneDNN matmul in bf16 (AVX512-BF16): bf16 A/B/C, fp32 bias, bias/residual/activation post-ops",
                         lowp_applies<Lowp::bf16>, lowp_cost<Lowp::bf16>, lowp_prepare<Lowp::bf16>});
      if (op == ir::OpKind::FusedMatMul)
        t.push_back(Tactic{"onednn_int8", op,
                           "oneDNN matmul in int8 (VNNI): u8/s8 A, s8 B, fp32 C with per-column scales, fp32 post-ops",
                           lowp_applies<Lowp::int8>, lowp_cost<Lowp::int8>, lowp_prepare<Lowp::int8>});
    }
    return t;
  }();
  return table;
}

}  // namespace tac::kernels::gemm
