// Row-wise ops over the last axis (Softmax, LogSoftmax, LayerNormalization, ReduceSum /
// ReduceMean over trailing axes) and inference BatchNormalization as a per-channel scale-shift,
// float32. Rows per op: "avx512" and "avx2". Rows are split over threads; each row is computed by
// one thread, so results do not depend on the thread count.
#include <cmath>

#include "kernels/elementwise/common.h"

namespace tac::kernels::ew {
namespace {

using ir::OpKind;

int64_t norm_axis(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

// Rows of `d` contiguous elements: [outer, d] where d = prod(shape[k:]).
void rows_of(const Shape& s, int64_t k, int64_t& rows, int64_t& d) {
  rows = 1;
  d = 1;
  for (size_t i = 0; i < s.size(); ++i) (static_cast<int64_t>(i) < k ? rows : d) *= s[i];
}

// ReduceSum / ReduceMean: the first reduced axis when the reduced set is a non-empty run of
// trailing axes, else -1.
int64_t reduce_first_axis(const StepDesc& s, std::string* why) {
  const size_t rank = s.in_shapes[0].size();
  const int since = s.node->op == OpKind::ReduceSum ? 13 : 18;
  std::vector<int64_t> axes;
  if (s.node->opset < since) {
    axes = attr_ints(s, "axes", {});
  } else if (s.has_input(1)) {
    if (!s.constants[1] || s.in_dtypes[1] != DType::int64) {
      *why = "axes must be a constant int64 input";
      return -1;
    }
    const int64_t* p = s.constants[1]->data<int64_t>();
    axes.assign(p, p + s.constants[1]->numel());
  }
  if (axes.empty()) {
    if (s.node->opset >= since && attr_i(s, "noop_with_empty_axes", 0) != 0) {
      *why = "noop_with_empty_axes";
      return -1;
    }
    return 0;
  }
  std::vector<bool> red(rank, false);
  for (int64_t a : axes) {
    const int64_t na = norm_axis(a, rank);
    if (na < 0 || na >= static_cast<int64_t>(rank)) {
      *why = "axis out of range";
      return -1;
    }
    red[static_cast<size_t>(na)] = true;
  }
  int64_t k = static_cast<int64_t>(rank);
  while (k > 0 && red[static_cast<size_t>(k - 1)]) --k;
  for (int64_t i = 0; i < k; ++i)
    if (red[static_cast<size_t>(i)]) {
      *why = "only trailing axes are reduced by this tactic";
      return -1;
    }
  return k;
}

Status norm_check(const StepDesc& s) {
  const OpKind op = s.node->op;
  if (s.in_shapes.empty() || s.in_dtypes[0] != DType::float32) return not_applicable("float32 only");
  if (Status st = all_f32(s, {0}); !st) return st;
  if (!only_first_output(s)) return not_applicable("optional statistics outputs are not produced");
  const size_t rank = s.in_shapes[0].size();
  switch (op) {
    case OpKind::Softmax:
    case OpKind::LogSoftmax: {
      if (rank < 1) return not_applicable("rank 0");
      // Before opset 13 the input is coerced to 2-D at `axis`: that is the last-axis softmax
      // exactly when axis is the last axis.
      const int64_t ax = norm_axis(attr_i(s, "axis", s.node->opset >= 13 ? -1 : 1), rank);
      if (ax != static_cast<int64_t>(rank) - 1) return not_applicable("softmax over the last axis only");
      return Status::ok();
    }
    case OpKind::LayerNormalization: {
      if (rank < 1) return not_applicable("rank 0");
      const int64_t ax = norm_axis(attr_i(s, "axis", -1), rank);
      if (ax < 0 || ax >= static_cast<int64_t>(rank)) return not_applicable("axis out of range");
      if (attr_i(s, "stash_type", 1) != 1) return not_applicable("stash_type float only");
      int64_t rows, d;
      rows_of(s.in_shapes[0], ax, rows, d);
      for (size_t i = 1; i <= 2; ++i)
        if (s.has_input(i) && (s.in_dtypes[i] != DType::float32 || shape_numel(s.in_shapes[i]) != d))
          return not_applicable("scale and bias must cover the normalised dims exactly");
      if (!s.has_input(1)) return not_applicable("scale is required");
      return Status::ok();
    }
    case OpKind::ReduceSum:
    case OpKind::ReduceMean: {
      std::string why;
      if (reduce_first_axis(s, &why) < 0) return not_applicable(why);
      if (shape_numel(s.in_shapes[0]) == 0) return not_applicable("empty input");
      return Status::ok();
    }
    case OpKind::BatchNormalization: {
      if (rank < 2) return not_applicable("rank below 2");
      if (attr_i(s, "training_mode", 0) != 0) return not_applicable("training mode");
      if (s.node->opset < 7) return not_applicable("opset below 7");
      if (s.in_dtypes.size() < 5) return not_applicable("needs 5 inputs");
      for (size_t i = 1; i < 5; ++i)
        if (s.in_dtypes[i] != DType::float32 || shape_numel(s.in_shapes[i]) != s.in_shapes[0][1])
          return not_applicable("per-channel float32 parameters only");
      return Status::ok();
    }
    default: return not_applicable("not a row op");
  }
}

template <Isa I>
Status norm_applies(const StepDesc& s) {
  if (Status st = isa_applies(I); !st) return st;
  return norm_check(s);
}

double op_weight(OpKind op) {
  switch (op) {
    case OpKind::Softmax:
    case OpKind::LogSoftmax: return 9;
    case OpKind::LayerNormalization: return 4;
    default: return 1;
  }
}

template <Isa I>
double norm_cost(const StepDesc& s) {
  const double n = static_cast<double>(shape_numel(s.in_shapes[0]));
  const double w = op_weight(s.node->op);
  return stream_cost_ns(8 * n, n * w * 0.06 * isa_factor(I), s.threads, static_cast<int64_t>(n * w));
}

template <Isa I>
Result<std::unique_ptr<Kernel>> norm_prepare(const StepDesc& s) {
  const IsaKernels& k = isa_kernels(I);
  const int threads = s.threads;
  const OpKind op = s.node->op;
  const Shape shape = s.in_shapes[0];
  const size_t rank = shape.size();
  int64_t rows = 1, d = 1;
  const int64_t w = static_cast<int64_t>(op_weight(op));
  switch (op) {
    case OpKind::Softmax:
    case OpKind::LogSoftmax: {
      rows_of(shape, static_cast<int64_t>(rank) - 1, rows, d);
      const bool log = op == OpKind::LogSoftmax;
      return make_kernel([=, &k](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
        const float* x = in[0].as<float>();
        float* y = out[0].as<float>();
        parallel_for(rows, d * w, threads, [&](int64_t b, int64_t e) { k.softmax_rows(x + b * d, y + b * d, e - b, d, log); });
        return Status::ok();
      });
    }
    case OpKind::LayerNormalization: {
      rows_of(shape, norm_axis(attr_i(s, "axis", -1), rank), rows, d);
      const float eps = attr_f(s, "epsilon", 1e-5f);
      const bool has_bias = s.has_input(2);
      return make_kernel([=, &k](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
        const float* x = in[0].as<float>();
        const float* sc = in[1].as<float>();
        const float* bi = has_bias ? in[2].as<float>() : nullptr;
        float* y = out[0].as<float>();
        parallel_for(rows, d * w, threads, [&](int64_t b, int64_t e) { k.layernorm_rows(x + b * d, sc, bi, y + b * d, e - b, d, eps); });
        return Status::ok();
      });
    }
    case OpKind::ReduceSum:
    case OpKind::ReduceMean: {
      std::string why;
      rows_of(shape, reduce_first_axis(s, &why), rows, d);
      const float mul = op == OpKind::ReduceMean ? static_cast<float>(1.0 / static_cast<double>(d)) : 1.0f;
      return make_kernel([=, &k](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
        const float* x = in[0].as<float>();
        float* y = out[0].as<float>();
        parallel_for(rows, d, threads, [&](int64_t b, int64_t e) { k.reduce_rows(x + b * d, y + b, e - b, d, mul, false); });
        return Status::ok();
      });
    }
    default: {  // BatchNormalization
      const int64_t C = shape[1];
      rows_of(shape, 2, rows, d);  // rows = N*C planes of d
      const float eps = attr_f(s, "epsilon", 1e-5f);
      // Constant parameters are folded once here; otherwise per run into the workspace. s[c]
      // then t[c] (bn_fold).
      std::vector<float> folded;
      if (s.constants.size() >= 5 && s.constants[1] && s.constants[2] && s.constants[3] && s.constants[4]) {
        folded.resize(static_cast<size_t>(2 * C));
        bn_fold(*s.constants[1], *s.constants[2], *s.constants[3], *s.constants[4], eps, folded.data(), folded.data() + C);
      }
      const size_t ws = folded.empty() ? static_cast<size_t>(2 * C) * sizeof(float) : 0;
      return make_kernel([=, &k](std::span<const TensorView> in, std::span<const TensorView> out, void* wsp) -> Status {
        const float* st = folded.data();
        if (folded.empty()) {
          float* f = static_cast<float*>(wsp);
          auto param = [&](size_t i) { return Tensor::wrap(in[i].data, in[i].dtype, in[i].shape); };
          bn_fold(param(1), param(2), param(3), param(4), eps, f, f + C);
          st = f;
        }
        const float* x = in[0].as<float>();
        float* y = out[0].as<float>();
        parallel_for(rows, d, threads, [&](int64_t b, int64_t e) {
          for (int64_t p = b; p < e; ++p) {
            const int64_t c = p % C;
            k.scale_shift(x + p * d, y + p * d, d, st[c], st[C + c]);
          }
        });
        return Status::ok();
      }, ws);
    }
  }
}

}  // namespace

std::vector<Tactic> norm_tactics() {
  std::vector<Tactic> t;
  for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax, OpKind::LayerNormalization, OpKind::ReduceSum, OpKind::ReduceMean,
                    OpKind::BatchNormalization}) {
    t.push_back(Tactic{"avx512", op, "AVX-512 row kernel over the trailing axes (per-channel for BatchNormalization)",
                       norm_applies<Isa::avx512>, norm_cost<Isa::avx512>, norm_prepare<Isa::avx512>});
    t.push_back(Tactic{"avx2", op, "AVX2 row kernel over the trailing axes (per-channel for BatchNormalization)",
                       norm_applies<Isa::avx2>, norm_cost<Isa::avx2>, norm_prepare<Isa::avx2>});
  }
  return t;
}

}  // namespace tac::kernels::ew
