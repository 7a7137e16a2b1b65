// Library GEMM tactics: OpenBLAS (cblas_sgemm + our epilogue pass) and oneDNN (matmul primitive
// with post-ops; the kernel of onednn_matmul.h, shared with the bf16 and int8 tactics). Both run from the same Problem as our
// packed GEMM (problem.h).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <dnnl.hpp>
#include <memory>
#include <unordered_map>

#include "kernels/gemm/gemm.h"
#include "kernels/gemm/onednn_matmul.h"
#include "kernels/gemm/problem.h"
#include "kernels/onednn_common.h"
#include "kernels/tactic.h"

namespace tac::kernels::gemm {

namespace {

gemm::Epilogue epilogue_for(const Problem& p, std::span<const TensorView> in) {
  gemm::Epilogue ep;
  ep.alpha = 1.0f;  // the library applies alpha
  ep.act = p.act;
  ep.res_scale = p.res_scale;
  ep.res_rs = p.res_rs;
  ep.res_cs = p.res_cs;
  if (p.bias_input >= 0) ep.bias = in[static_cast<size_t>(p.bias_input)].as<const float>();
  if (p.res_input >= 0) ep.res = in[static_cast<size_t>(p.res_input)].as<const float>();
  return ep;
}

// ---------------------------------------------------------------------------------------------
// OpenBLAS

class OpenBlasKernel final : public Kernel {
 public:
  OpenBlasKernel(Problem p, int threads) : p_(std::move(p)), threads_(std::max(threads, 1)) {}
  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void*) override {
    openblas_set_num_threads(threads_);  // process-wide in OpenBLAS: set before every call
    const float* a = in[0].as<const float>();
    const float* b = in[1].as<const float>();
    float* c = out[0].as<float>();
    const bool ta = p_.a_rs == 1 && p_.K > 1, tb = p_.b_rs == 1 && p_.N > 1;
    const int64_t lda = ta ? p_.a_cs : p_.a_rs, ldb = tb ? p_.b_cs : p_.b_rs;
    gemm::Epilogue ep = epilogue_for(p_, in);
    for (int64_t i = 0; i < p_.batches; ++i) {
      const size_t bi = static_cast<size_t>(i);
      float* ci = c + i * p_.M * p_.N;
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                  static_cast<blasint>(p_.M), static_cast<blasint>(p_.N), static_cast<blasint>(p_.K), p_.alpha,
                  a + p_.a_off[bi], static_cast<blasint>(std::max<int64_t>(lda, 1)), b + p_.b_off[bi],
                  static_cast<blasint>(std::max<int64_t>(ldb, 1)), 0.0f, ci, static_cast<blasint>(p_.N));
      gemm::Epilogue e = ep;
      if (e.res) e.res += p_.r_off[bi];
      gemm::apply_epilogue(p_.M, p_.N, ci, p_.N, 0, e, threads_);
    }
    return Status::ok();
  }

 private:
  Problem p_;
  int threads_;
};

// ---------------------------------------------------------------------------------------------
// oneDNN

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

Status onednn_shape_ok(const Problem& p) {
  if (p.batches > 1) {
    if (batch_kind(p.a_off, p.M * p.K) < 0 || batch_kind(p.b_off, p.K * p.N) < 0)
      return not_applicable("oneDNN: batch broadcast other than all-or-nothing");
    if (p.res_input >= 0 && batch_kind(p.r_off, p.res_rows * p.res_cols) < 0)
      return not_applicable("oneDNN: residual batch broadcast other than all-or-nothing");
  }
  if (p.res_input >= 0 && p.res_scale != 1.0f) return not_applicable("oneDNN: Gemm beta != 1 with C");
  return Status::ok();
}

class OneDnnKernel final : public Kernel {
 public:
  explicit OneDnnKernel(const OnednnMatmul& m) : p_(m.p), threads_(std::max(m.threads, 1)), strm_(cpu_engine()) {
    const bool batched = p_.batches > 1;
    const memory::dim nb = p_.batches, M = p_.M, N = p_.N, K = p_.K;
    auto dims = [&](memory::dim b, memory::dim r, memory::dim c) {
      return batched ? memory::dims{b, r, c} : memory::dims{r, c};
    };
    auto strides = [&](memory::dim bs, memory::dim rs, memory::dim cs) {
      return batched ? memory::dims{bs, rs, cs} : memory::dims{rs, cs};
    };
    const memory::dim ab = batched && batch_kind(p_.a_off, M * K) == 1 ? nb : 1;
    const memory::dim bb = batched && batch_kind(p_.b_off, K * N) == 1 ? nb : 1;
    src_md_ = memory::desc(dims(ab, M, K), m.a, strides(M * K, p_.a_rs, p_.a_cs));
    user_wei_md_ = memory::desc(dims(bb, K, N), m.b, strides(K * N, p_.b_rs, p_.b_cs));
    dst_md_ = memory::desc(dims(nb, M, N), m.c, strides(M * N, N, 1));
    const memory::desc wei_any = m.b_const ? memory::desc(dims(bb, K, N), m.b, tag::any) : user_wei_md_;
    if (p_.bias_input >= 0) bias_md_ = memory::desc(dims(1, 1, N), dt::f32, strides(N, N, 1));

    dnnl::primitive_attr attr;
    if (!m.scales.empty()) attr.set_output_scales(1 << (batched ? 2 : 1), m.scales);
    dnnl::post_ops po;
    if (p_.alpha != 1.0f) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, p_.alpha, 0.0f);
    if (p_.res_input >= 0) {
      const memory::dim rb = batched && batch_kind(p_.r_off, p_.res_rows * p_.res_cols) == 1 ? nb : 1;
      res_md_ = memory::desc(dims(rb, p_.res_rows, p_.res_cols), m.res, strides(p_.res_rows * p_.res_cols, p_.res_cols, 1));
      po.append_binary(dnnl::algorithm::binary_add, res_md_);
    }
    append_activation(po, p_.act);
    // y_scale: y / y_scale last; the f32 -> s8/u8 store rounds to nearest even and saturates.
    if (m.y_scale > 0) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, 1.0f / m.y_scale, 0.0f);
    attr.set_post_ops(po);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // scratch comes from the engine's workspace
    auto d = p_.bias_input >= 0 ? dnnl::matmul::desc(src_md_, wei_any, bias_md_, dst_md_)
                                : dnnl::matmul::desc(src_md_, wei_any, dst_md_);
    pd_ = dnnl::matmul::primitive_desc(d, attr, cpu_engine());
    prim_ = dnnl::matmul(pd_);
    if (m.b_const) weights_ = reordered_weights(*m.b_const, user_wei_md_, pd_.weights_desc(), strm_);
    if (!m.scales.empty() && p_.bias_input >= 0) {  // the bias divided by the output scales (see OnednnMatmul)
      scales_ = m.scales;
      bias_scaled_.resize(static_cast<size_t>(N));
      bias_const_ = m.bias;
      if (bias_const_)
        for (size_t i = 0; i < bias_scaled_.size(); ++i) bias_scaled_[i] = bias_const_->data<float>()[i] / scales_[i];
    }
  }

  size_t workspace_bytes() const override { return pd_.scratchpad_desc().get_size(); }

  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* workspace) override {
    try {
      const int saved = omp_get_max_threads();
      omp_set_num_threads(threads_);  // oneDNN's OpenMP runtime uses the caller's thread count
      std::unordered_map<int, memory> args;
      args.emplace(DNNL_ARG_SRC, memory(src_md_, cpu_engine(), in[0].data));
      args.emplace(DNNL_ARG_WEIGHTS, weights_ ? weights_ : memory(user_wei_md_, cpu_engine(), in[1].data));
      args.emplace(DNNL_ARG_DST, memory(dst_md_, cpu_engine(), out[0].data));
      if (p_.bias_input >= 0) {
        void* b = in[static_cast<size_t>(p_.bias_input)].data;
        if (!scales_.empty()) {
          if (!bias_const_) {  // a computed bias: scaled here
            const float* bf = static_cast<const float*>(b);
            for (size_t i = 0; i < bias_scaled_.size(); ++i) bias_scaled_[i] = bf[i] / scales_[i];
          }
          b = bias_scaled_.data();
        }
        args.emplace(DNNL_ARG_BIAS, memory(bias_md_, cpu_engine(), b));
      }
      if (p_.res_input >= 0) {
        const int index = p_.alpha != 1.0f ? 1 : 0;  // position of the binary post-op
        args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1,
                     memory(res_md_, cpu_engine(), in[static_cast<size_t>(p_.res_input)].data));
      }
      if (pd_.scratchpad_desc().get_size() > 0)
        args.emplace(DNNL_ARG_SCRATCHPAD, memory(pd_.scratchpad_desc(), cpu_engine(), workspace));
      prim_.execute(strm_, args);
      strm_.wait();
      omp_set_num_threads(saved);
    } catch (const dnnl::error& e) {
      return internal_error(std::string("oneDNN matmul: ") + e.what());
    }
    return Status::ok();
  }

 private:
  Problem p_;
  int threads_;
  dnnl::stream strm_;
  memory::desc src_md_, user_wei_md_, dst_md_, bias_md_, res_md_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul prim_;
  memory weights_;
  std::vector<float> scales_, bias_scaled_;  // int8 (OnednnMatmul::scales)
  const Tensor* bias_const_ = nullptr;
};

}  // namespace

Status openblas_applies(const StepDesc& s) {
  Problem p;
  return analyze_problem(s, p);
}

// OpenBLAS (measured ~117 GFLOP/s single-thread on 512^3 here: its kernels for this CPU are
// AVX2-class), a couple of microseconds per call, B packed at every call, and our epilogue pass.
double openblas_cost(const StepDesc& s) {
  Problem p;
  if (!analyze_problem(s, p)) return 1e30;
  const double K = static_cast<double>(p.K), N = static_cast<double>(p.N), batches = static_cast<double>(p.batches);
  const double kc = std::min(K, 256.0);
  const double work = std::max(p.flops() / (117.0 * kc / (kc + 16.0)), 4.0 * K * N * batches / 100.0) +
                      0.3 * K * N * batches +                                   // packing B
                      (p.act.act == ir::Epilogue::Act::none && p.bias_input < 0 && p.res_input < 0
                           ? 0.0
                           : 0.5 * static_cast<double>(p.M) * N * batches);  // epilogue pass
  return 2000.0 * batches + work / std::max(1, s.threads);
}

Result<std::unique_ptr<Kernel>> openblas_prepare(const StepDesc& s) {
  Problem p;
  TAC_RETURN_IF_ERROR(analyze_problem(s, p));
  return std::unique_ptr<Kernel>(new OpenBlasKernel(std::move(p), s.threads));
}

Status onednn_applies(const StepDesc& s) {
  Problem p;
  TAC_RETURN_IF_ERROR(analyze_problem(s, p));
  if (p.b_count > 1 && p.b_const && p.batches != p.b_count) return not_applicable("oneDNN: broadcast constant B batch");
  return onednn_shape_ok(p);
}

// oneDNN (measured ~242 GFLOP/s single-thread on 512^3 here): weights reordered once, post-ops
// fused, a few microseconds of primitive overhead per call.
double onednn_cost(const StepDesc& s) {
  Problem p;
  if (!analyze_problem(s, p)) return 1e30;
  const double K = static_cast<double>(p.K), N = static_cast<double>(p.N), batches = static_cast<double>(p.batches);
  const double kc = std::min(K, 256.0);
  double work = std::max(p.flops() / (242.0 * kc / (kc + 8.0)), 4.0 * K * N * batches / 100.0);
  if (!p.b_const) work += 0.3 * K * N * batches;
  return 3000.0 + work / std::max(1, s.threads);
}

Result<std::unique_ptr<Kernel>> onednn_prepare(const StepDesc& s) {
  Problem p;
  TAC_RETURN_IF_ERROR(analyze_problem(s, p));
  TAC_RETURN_IF_ERROR(onednn_shape_ok(p));
  OnednnMatmul m;
  m.p = p;
  m.threads = s.threads;
  m.b_const = p.b_const ? s.constants[1] : nullptr;
  return make_onednn_matmul(m);
}

int batch_kind(const std::vector<int64_t>& off, int64_t step) {
  bool seq = true, zero = true;
  for (size_t i = 0; i < off.size(); ++i) {
    seq = seq && off[i] == static_cast<int64_t>(i) * step;
    zero = zero && off[i] == 0;
  }
  return zero ? 0 : (seq ? 1 : -1);
}

Result<std::unique_ptr<Kernel>> make_onednn_matmul(const OnednnMatmul& m) {
  try {
    return std::unique_ptr<Kernel>(new OneDnnKernel(m));
  } catch (const dnnl::error& e) {
    return not_applicable(std::string("oneDNN has no matmul for this step: ") + e.what());
  }
}

}  // namespace tac::kernels::gemm
