// Tactics of the layout rewrite (src/builder/layout.cc): Reformat, and the ops that stay in an
// nhwc or channel-blocked region (ir/layout.h) besides convolutions (onednn in conv/):
//   Reformat           "onednn_reorder" (oneDNN reorder), "loops" (plain loops: the baseline)
//   MaxPool, AveragePool, GlobalAveragePool
//                      "onednn_pool" (oneDNN pooling on the buffer's format)
//   elementwise ops, Concat (axis 1)
//                      "raw_buffer" (raw_buffer.h, shared with the CUDA backend)
#include <dnnl.hpp>

#include <cmath>
#include <cstring>

#include "kernels/conv/conv_common.h"
#include "kernels/layout/raw_buffer.h"
#include "kernels/onednn_common.h"
#include "kernels/tactic.h"

namespace tac::kernels {

namespace {

using ir::Layout;
using ir::OpKind;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

dnnl::memory::desc dnnl_md(const Shape& s, DType t, Layout l) {
  return dnnl::memory::desc(dnnl::memory::dims(s.begin(), s.end()), dnnl_type(t), dnnl_tag(l));
}
double buffer_bytes(const Shape& s, DType t, Layout l) {
  return static_cast<double>(dtype_size(t)) * static_cast<double>(ir::physical_numel(s, l));
}

// One 4-D output and 4-D activations, all float32 or all bfloat16 (the precision rewrite's).
Status rank4_float(const StepDesc& s) {
  if (s.out_dtypes.size() != 1 || (s.out_dtypes[0] != DType::float32 && s.out_dtypes[0] != DType::bfloat16) ||
      s.out_shapes[0].size() != 4)
    return not_applicable("one 4-D float32 or bfloat16 output only");
  for (size_t i = 0; i < s.in_dtypes.size(); ++i)
    if (s.has_input(i) && !s.constants[i] && (s.in_dtypes[i] != s.out_dtypes[0] || s.in_shapes[i].size() != 4))
      return not_applicable("4-D activations of the output's type only");
  return Status::ok();
}

// Runs oneDNN primitives at the step's thread count and turns oneDNN errors into Status.
template <class F> Status run_dnnl(int threads, const char* what, F&& f) {
  conv::ScopedOmpThreads scope(threads);
  try {
    f();
  } catch (const dnnl::error& e) {
    return internal_error(std::string(what) + ": " + e.what());
  }
  return Status::ok();
}

// ---------------------------------------------------------------- Reformat

Status reformat_applies(const StepDesc& s) {
  if (Status st = rank4_float(s); !st) return st;
  if (s.in_shapes[0] != s.out_shapes[0]) return not_applicable("Reformat keeps the shape");
  return Status::ok();
}

// A reorder of fewer elements runs on one thread: on shufflenet_v2's 44 Reformats (at most 75k
// elements) two threads took 2.4x one thread's time (thread wake-ups outweigh the copy).
constexpr int64_t kReorderMinParallel = int64_t{1} << 18;

class ReorderKernel final : public Kernel {
 public:
  ReorderKernel(const StepDesc& s)
      : threads_(shape_numel(s.in_shapes[0]) < kReorderMinParallel ? 1 : s.threads), stream_(cpu_engine()) {
    conv::ScopedOmpThreads scope(threads_);
    src_ = dnnl::memory(dnnl_md(s.in_shapes[0], s.in_dtypes[0], s.in_layout(0)), cpu_engine(), nullptr);
    dst_ = dnnl::memory(dnnl_md(s.out_shapes[0], s.out_dtypes[0], s.out_layout(0)), cpu_engine(), nullptr);
    reorder_ = dnnl::reorder(src_, dst_);
  }
  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void*) override {
    return run_dnnl(threads_, "oneDNN reorder", [&] {
      src_.set_data_handle(in[0].data);
      dst_.set_data_handle(out[0].data);
      reorder_.execute(stream_, src_, dst_);
      stream_.wait();
    });
  }

 private:
  int threads_;
  dnnl::stream stream_;
  dnnl::memory src_, dst_;
  dnnl::reorder reorder_;
};

double reorder_cost(const StepDesc& s) {
  return (buffer_bytes(s.in_shapes[0], s.in_dtypes[0], s.in_layout(0)) +
          buffer_bytes(s.out_shapes[0], s.out_dtypes[0], s.out_layout(0))) /
         (conv::kBytesPerNsPerThread * std::max(1, s.threads));
}
Result<std::unique_ptr<Kernel>> reorder_prepare(const StepDesc& s) {
  try {
    return std::unique_ptr<Kernel>(new ReorderKernel(s));
  } catch (const dnnl::error& e) {
    return not_applicable(std::string("oneDNN has no reorder for this step: ") + e.what());
  }
}

class LoopsKernel final : public Kernel {
 public:
  explicit LoopsKernel(const StepDesc& s)
      : shape_(s.in_shapes[0]), from_(s.in_layout(0)), to_(s.out_layout(0)), e_(dtype_size(s.in_dtypes[0])) {}
  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void*) override {
    const Shape& sh = shape_;
    const auto* x = static_cast<const std::byte*>(in[0].data);
    auto* y = static_cast<std::byte*>(out[0].data);
    if (ir::is_blocked(to_)) std::memset(y, 0, e_ * static_cast<size_t>(ir::physical_numel(sh, to_)));
    for (int64_t n = 0; n < sh[0]; ++n)
      for (int64_t c = 0; c < sh[1]; ++c)
        for (int64_t h = 0; h < sh[2]; ++h)
          for (int64_t w = 0; w < sh[3]; ++w)
            std::memcpy(y + e_ * static_cast<size_t>(ir::layout_offset(sh, to_, n, c, h, w)),
                        x + e_ * static_cast<size_t>(ir::layout_offset(sh, from_, n, c, h, w)), e_);
    return Status::ok();
  }

 private:
  Shape shape_;
  Layout from_, to_;
  size_t e_;
};
double loops_cost(const StepDesc& s) { return 4 * reorder_cost(s) * std::max(1, s.threads); }
Result<std::unique_ptr<Kernel>> loops_prepare(const StepDesc& s) { return std::unique_ptr<Kernel>(new LoopsKernel(s)); }

// ---------------------------------------------------------------- pooling

struct PoolGeom {
  dnnl::algorithm alg;
  dnnl::memory::dims kernel, strides, dil, pl, pr;
};

// The oneDNN pooling that computes `s`'s node, or not_applicable naming why not.
Result<PoolGeom> pool_geom(const StepDesc& s) {
  if (Status st = rank4_float(s); !st) return st;
  const ir::Node& n = *s.node;
  if (n.outputs.size() > 1 && n.outputs[1] != ir::kNoValue) return not_applicable("MaxPool's Indices output");
  const Shape& x = s.in_shapes[0];
  const Shape& y = s.out_shapes[0];
  auto ints = [&](const char* key, int64_t def) {
    const ir::Attribute* a = n.attr(key);
    std::vector<int64_t> v = a && a->type == ir::Attribute::Type::ints ? a->ints : std::vector<int64_t>{};
    if (v.empty()) v.assign(2, def);
    return v;
  };
  auto int_attr = [&](const char* key, int64_t def) {
    const ir::Attribute* a = n.attr(key);
    return a && a->type == ir::Attribute::Type::i ? a->i : def;
  };
  PoolGeom g;
  std::vector<int64_t> k, st{1, 1}, d{1, 1}, pads{0, 0, 0, 0};
  bool include_pad = false;
  if (n.op == OpKind::GlobalAveragePool) {
    k = {x[2], x[3]};
    g.alg = dnnl::algorithm::pooling_avg_exclude_padding;
  } else {
    k = ints("kernel_shape", 0);
    st = ints("strides", 1);
    d = ints("dilations", 1);
    pads = ints("pads", 0);
    if (k.size() != 2 || st.size() != 2 || d.size() != 2 || (pads.size() != 4 && pads.size() != 2))
      return not_applicable("2-D pooling only");
    if (pads.size() == 2) pads = {0, 0, 0, 0};
    include_pad = n.op == OpKind::AveragePool && int_attr("count_include_pad", 0) != 0;
    g.alg = n.op == OpKind::MaxPool ? dnnl::algorithm::pooling_max
            : include_pad           ? dnnl::algorithm::pooling_avg_include_padding
                                    : dnnl::algorithm::pooling_avg_exclude_padding;
    if (n.op == OpKind::AveragePool && (d[0] != 1 || d[1] != 1)) return not_applicable("dilated AveragePool");
  }
  const ir::Attribute* ap = n.attr("auto_pad");
  const std::string auto_pad = ap && ap->type == ir::Attribute::Type::s ? ap->s : "NOTSET";
  for (size_t i = 0; i < 2; ++i) {
    const int64_t span = (k[i] - 1) * d[i] + 1;
    const int64_t total = std::max<int64_t>(0, (y[2 + i] - 1) * st[i] + span - x[2 + i]);
    int64_t lo = pads[i];
    if (auto_pad == "SAME_UPPER") lo = total / 2;
    else if (auto_pad == "SAME_LOWER") lo = total - total / 2;
    else if (auto_pad == "VALID") lo = 0;
    // The right pad that makes oneDNN's floor((x + pl + pr - span) / s) + 1 equal the output:
    // the smallest such pad that is >= 0. Past the explicit pads (ceil_mode) it is padding that
    // the average must not count, so count_include_pad then needs it to be exactly the pad.
    // Every pad in [need, need + stride - 1] gives the same windows; the explicit one if it is
    // among them (an averaged window then counts the pads ONNX counts), else the smallest >= 0.
    const int64_t need = (y[2 + i] - 1) * st[i] + span - x[2 + i] - lo;
    const int64_t explicit_hi = auto_pad == "NOTSET" ? pads[i + 2] : need;
    int64_t hi = explicit_hi >= need && explicit_hi <= need + st[i] - 1 ? explicit_hi : std::max<int64_t>(need, 0);
    if (hi > need + st[i] - 1) return not_applicable("pooling window geometry oneDNN cannot express");
    if (include_pad && hi != explicit_hi) return not_applicable("count_include_pad with ceil_mode padding");
    g.kernel.push_back(k[i]);
    g.strides.push_back(st[i]);
    g.dil.push_back(d[i] - 1);
    g.pl.push_back(lo);
    g.pr.push_back(hi);
  }
  return g;
}

Status pool_applies(const StepDesc& s) {
  auto g = pool_geom(s);
  if (!g) return g.status();
  if (s.in_layout(0) != s.out_layout(0)) return not_applicable("input and output in one layout");
  if (s.out_layout(0) == Layout::nchw) return not_applicable("for nhwc and blocked layouts (nchw pooling has its own tactics)");
  return Status::ok();
}

class PoolKernel final : public Kernel {
 public:
  PoolKernel(const StepDesc& s, const PoolGeom& g) : threads_(s.threads), stream_(cpu_engine()) {
    conv::ScopedOmpThreads scope(threads_);
    const auto src_md = dnnl_md(s.in_shapes[0], s.in_dtypes[0], s.in_layout(0)),
               dst_md = dnnl_md(s.out_shapes[0], s.out_dtypes[0], s.out_layout(0));
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, g.alg, src_md, dst_md, g.strides, g.kernel,
                                     g.dil, g.pl, g.pr);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    pd_ = dnnl::pooling_v2_forward::primitive_desc(d, attr, cpu_engine());
    pool_ = dnnl::pooling_v2_forward(pd_);
    src_ = dnnl::memory(src_md, cpu_engine(), nullptr);
    dst_ = dnnl::memory(dst_md, cpu_engine(), nullptr);
    scratch_ = dnnl::memory(pd_.scratchpad_desc(), cpu_engine(), nullptr);
  }
  size_t workspace_bytes() const override { return pd_.scratchpad_desc().get_size(); }
  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* ws) override {
    return run_dnnl(threads_, "oneDNN pooling", [&] {
      src_.set_data_handle(in[0].data);
      dst_.set_data_handle(out[0].data);
      scratch_.set_data_handle(ws);
      pool_.execute(stream_, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}, {DNNL_ARG_SCRATCHPAD, scratch_}});
      stream_.wait();
    });
  }

 private:
  int threads_;
  dnnl::stream stream_;
  dnnl::pooling_v2_forward::primitive_desc pd_;
  dnnl::pooling_v2_forward pool_;
  dnnl::memory src_, dst_, scratch_;
};

double pool_cost(const StepDesc& s) {
  return (buffer_bytes(s.in_shapes[0], s.in_dtypes[0], s.in_layout(0)) +
          buffer_bytes(s.out_shapes[0], s.out_dtypes[0], s.out_layout(0))) /
         (conv::kBytesPerNsPerThread * std::max(1, s.threads));
}
Result<std::unique_ptr<Kernel>> pool_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(PoolGeom g, pool_geom(s));
  try {
    return std::unique_ptr<Kernel>(new PoolKernel(s, g));
  } catch (const dnnl::error& e) {
    return not_applicable(std::string("oneDNN has no pooling for this step: ") + e.what());
  }
}

}  // namespace

std::span<const Tactic> layout_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t;
    auto add = [&](const char* name, OpKind op, const char* help, auto applies, auto cost, auto prepare) {
      t.push_back(Tactic{name, op, help, applies, cost, prepare, Backend::cpu, /*layouts=*/true});
    };
    add("onednn_reorder", OpKind::Reformat, "oneDNN reorder between nchw, nhwc and nChw16c/nChw8c, fp32 or bf16", reformat_applies,
        reorder_cost, reorder_prepare);
    add("loops", OpKind::Reformat, "plain loops over every element (the baseline the others are tested against)",
        reformat_applies, loops_cost, loops_prepare);
    for (OpKind op : {OpKind::MaxPool, OpKind::AveragePool, OpKind::GlobalAveragePool})
      add("onednn_pool", op, "oneDNN pooling on the activation's own layout (nhwc, blocked), fp32 or bf16", pool_applies,
          pool_cost, pool_prepare);
    add_raw_buffer_tactics(t, Backend::cpu);
    add_channel_affine_tactics(t);
    add_gather_channels_tactics(t);
    return t;
  }();
  return table;
}

}  // namespace tac::kernels
