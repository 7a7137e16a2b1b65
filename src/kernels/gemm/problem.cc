#include "kernels/gemm/problem.h"

#include <algorithm>

namespace tac::kernels::gemm {

namespace {

// For each index of `out` (row-major), the row-major index into `in`, which broadcasts to it
// (numpy rules, right-aligned; the caller has checked compatibility).
std::vector<int64_t> broadcast_index(const Shape& in, const Shape& out) {
  const int64_t n = shape_numel(out);
  std::vector<int64_t> idx(static_cast<size_t>(n), 0);
  const size_t r = out.size(), off = r - in.size();
  std::vector<int64_t> in_stride(r, 0);
  int64_t s = 1;
  for (size_t d = r; d-- > off;) {
    in_stride[d] = in[d - off] == 1 ? 0 : s;
    s *= in[d - off];
  }
  std::vector<int64_t> pos(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < r; ++d) o += pos[d] * in_stride[d];
    idx[static_cast<size_t>(i)] = o;
    for (size_t d = r; d-- > 0;) {
      if (++pos[d] < out[d]) break;
      pos[d] = 0;
    }
  }
  return idx;
}

bool broadcast_shape(const Shape& a, const Shape& b, Shape& out) {
  const size_t r = std::max(a.size(), b.size());
  out.assign(r, 1);
  for (size_t d = 0; d < r; ++d) {
    const int64_t x = d + a.size() >= r ? a[d + a.size() - r] : 1;
    const int64_t y = d + b.size() >= r ? b[d + b.size() - r] : 1;
    if (x != y && x != 1 && y != 1) return false;
    out[d] = x == 1 ? y : x;
  }
  return true;
}

// Residual of shape `rs` against the output [batch..., M, N]: per-batch offsets and the strides of
// its last two dims.
Status residual_layout(const Shape& rshape, const Shape& batch, int64_t M, int64_t N, Problem& p) {
  Shape r = rshape;
  const size_t out_rank = batch.size() + 2;
  if (r.size() > out_rank) return not_applicable("residual has a higher rank than the output");
  r.insert(r.begin(), out_rank - r.size(), 1);
  const int64_t rm = r[out_rank - 2], rn = r[out_rank - 1];
  if ((rm != 1 && rm != M) || (rn != 1 && rn != N)) return not_applicable("residual does not broadcast to the output");
  Shape rb(r.begin(), r.end() - 2);
  for (size_t d = 0; d < rb.size(); ++d)
    if (rb[d] != 1 && rb[d] != batch[d]) return not_applicable("residual does not broadcast to the output");
  p.res_rows = rm;
  p.res_cols = rn;
  p.res_rs = rm == 1 ? 0 : rn;
  p.res_cs = rn == 1 ? 0 : 1;
  p.r_off = broadcast_index(rb, batch);
  for (auto& o : p.r_off) o *= rm * rn;
  return Status::ok();
}

}  // namespace

Status analyze_problem(const StepDesc& s, Problem& p) {
  const ir::OpKind op = s.node->op;
  for (size_t i = 0; i < s.in_dtypes.size(); ++i)
    if (s.has_input(i) && s.in_dtypes[i] != DType::float32) return not_applicable("fp32 only");
  if (s.out_dtypes.size() != 1 || s.out_dtypes[0] != DType::float32) return not_applicable("fp32 only");
  if (!s.has_input(0) || !s.has_input(1)) return not_applicable("A and B are required");
  const Shape& sa = s.in_shapes[0];
  const Shape& sb = s.in_shapes[1];
  if (sa.size() < 2 || sb.size() < 2) return not_applicable("1-D operands (the reference covers them)");
  auto int_attr = [&](const char* k, int64_t d) {
    const ir::Attribute* a = s.node->attr(k);
    return a ? a->i : d;
  };
  auto float_attr = [&](const char* k, float d) {
    const ir::Attribute* a = s.node->attr(k);
    return a ? a->f : d;
  };
  Shape batch;
  bool trans_b = false;
  if (op == ir::OpKind::Gemm) {
    if (sa.size() != 2 || sb.size() != 2) return not_applicable("Gemm needs 2-D A and B");
    const bool ta = int_attr("transA", 0) != 0;
    trans_b = int_attr("transB", 0) != 0;
    p.M = ta ? sa[1] : sa[0];
    p.K = ta ? sa[0] : sa[1];
    p.a_rs = ta ? 1 : sa[1];
    p.a_cs = ta ? sa[1] : 1;
    p.alpha = float_attr("alpha", 1.0f);
    p.res_scale = float_attr("beta", 1.0f);
  } else if (op == ir::OpKind::MatMul || op == ir::OpKind::FusedMatMul) {
    trans_b = op == ir::OpKind::FusedMatMul && int_attr("transB", 0) != 0;
    if (trans_b && sb.size() != 2) return not_applicable("transB needs a 2-D B");
    p.M = sa[sa.size() - 2];
    p.K = sa.back();
    p.a_rs = p.K;
    p.a_cs = 1;
    if (!broadcast_shape(Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2), batch))
      return not_applicable("batch dims do not broadcast");
    if (op == ir::OpKind::FusedMatMul) {
      auto ep = ir::epilogue_of(*s.node);
      if (!ep) return ep.status();
      p.act = *ep;
    }
  } else {
    return not_applicable("not a GEMM op");
  }
  const int64_t kb = trans_b ? sb[sb.size() - 1] : sb[sb.size() - 2];
  p.N = trans_b ? sb[sb.size() - 2] : sb.back();
  if (kb != p.K) return not_applicable("inner dimensions do not match");
  p.b_rs = trans_b ? 1 : p.N;
  p.b_cs = trans_b ? p.K : 1;
  if (p.M <= 0 || p.N <= 0 || p.K <= 0) return not_applicable("empty dimension");
  Shape out = batch;
  out.push_back(p.M);
  out.push_back(p.N);
  if (!s.out_shapes.empty() && s.out_shapes[0] != out) return not_applicable("unexpected output shape");

  p.batches = shape_numel(batch);
  const Shape ba = sa.size() > 2 ? Shape(sa.begin(), sa.end() - 2) : Shape{};
  const Shape bb = sb.size() > 2 ? Shape(sb.begin(), sb.end() - 2) : Shape{};
  p.a_off = broadcast_index(ba, batch);
  for (auto& o : p.a_off) o *= p.M * p.K;
  p.b_index = broadcast_index(bb, batch);
  p.b_count = shape_numel(bb);
  p.b_off = p.b_index;
  for (auto& o : p.b_off) o *= p.K * p.N;
  p.b_const = s.constants.size() > 1 && s.constants[1] != nullptr;

  if (op == ir::OpKind::FusedMatMul && s.has_input(2)) {
    const Shape& bs = s.in_shapes[2];
    if (bs.size() != 1 || bs[0] != p.N) return not_applicable("bias must be 1-D of length N");
    p.bias_input = 2;
  }
  const int res = op == ir::OpKind::Gemm ? 2 : (op == ir::OpKind::FusedMatMul ? 3 : -1);
  if (res >= 0 && s.has_input(static_cast<size_t>(res))) {
    p.res_input = res;
    TAC_RETURN_IF_ERROR(residual_layout(s.in_shapes[static_cast<size_t>(res)], batch, p.M, p.N, p));
  } else {
    p.r_off.assign(static_cast<size_t>(p.batches), 0);
  }

  // Fold the batch into M when B is shared and A (and the residual) are laid out batch after
  // batch: one large GEMM instead of many small ones.
  if (p.batches > 1 && p.b_count == 1) {
    bool a_seq = true, r_ok = true;
    for (int64_t i = 0; i < p.batches; ++i) a_seq = a_seq && p.a_off[static_cast<size_t>(i)] == i * p.M * p.K;
    if (p.res_input >= 0) {
      bool r_seq = p.res_rows == p.M, r_zero = p.res_rows == 1;
      for (int64_t i = 0; i < p.batches; ++i) {
        r_seq = r_seq && p.r_off[static_cast<size_t>(i)] == i * p.M * p.res_cols;
        r_zero = r_zero && p.r_off[static_cast<size_t>(i)] == 0;
      }
      r_ok = r_seq || r_zero;
    }
    if (a_seq && r_ok) {
      p.M *= p.batches;
      if (p.res_input >= 0 && p.res_rows != 1) p.res_rows = p.M;
      p.batches = 1;
      p.a_off = {0};
      p.b_off = {0};
      p.b_index = {0};
      p.r_off = {0};
      p.folded = true;
    }
  }
  return Status::ok();
}

Status analyze_typed_problem(const StepDesc& s, Problem& p) {
  if (s.out_dtypes.empty()) return not_applicable("no output");
  const DType dt = s.out_dtypes[0];
  StepDesc f = s;
  for (size_t i = 0; i < f.in_dtypes.size(); ++i)
    if (f.has_input(i)) {
      if (f.in_dtypes[i] != dt && f.in_dtypes[i] != DType::float32) return not_applicable("inputs of the output's type");
      f.in_dtypes[i] = DType::float32;
    }
  f.out_dtypes[0] = DType::float32;
  TAC_RETURN_IF_ERROR(analyze_problem(f, p));
  for (size_t i = 0; i < s.in_dtypes.size(); ++i)
    if (s.has_input(i) && s.in_dtypes[i] != dt && static_cast<int>(i) != p.bias_input)
      return not_applicable("operands and residual of the output's type");
  return Status::ok();
}

}  // namespace tac::kernels::gemm
