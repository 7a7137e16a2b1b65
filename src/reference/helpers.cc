#include "reference/helpers.h"

#include <algorithm>

namespace tac::ref {

Shape broadcast_shapes(const KernelContext& ctx, const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1) out[i] = da;
    else if (da == 1) out[i] = db;
    else ctx.fail_invalid("shapes " + shape_to_string(a) + " and " + shape_to_string(b) + " do not broadcast");
  }
  return out;
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

std::vector<int64_t> broadcast_index(const Shape& in, const Shape& out) {
  const size_t r = out.size();
  const int64_t n = shape_numel(out);
  std::vector<int64_t> idx(static_cast<size_t>(std::max<int64_t>(n, 0)));
  if (n <= 0) return idx;
  // Stride of each output dim in the input (0 where the input is broadcast).
  std::vector<int64_t> in_st(r, 0);
  std::vector<int64_t> ist = strides_of(in);
  for (size_t i = 0; i < in.size(); ++i) {
    size_t o = r - in.size() + i;
    in_st[o] = in[i] == 1 ? 0 : ist[i];
  }
  std::vector<int64_t> pos(r, 0);
  int64_t off = 0;
  for (int64_t k = 0; k < n; ++k) {
    idx[static_cast<size_t>(k)] = off;
    for (size_t d = r; d-- > 0;) {  // odometer increment
      ++pos[d];
      off += in_st[d];
      if (pos[d] < out[d]) break;
      off -= in_st[d] * pos[d];
      pos[d] = 0;
    }
  }
  return idx;
}

int64_t normalize_axis(const KernelContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    ctx.fail_invalid("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> to_int_vector(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_i64(i);
  return v;
}

std::vector<double> to_double_vector(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_f64(i);
  return v;
}

double scalar_f64(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.numel() != 1) ctx.fail_invalid(std::string(what) + " must hold exactly one value");
  return t.get_f64(0);
}

int64_t scalar_i64(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.numel() != 1) ctx.fail_invalid(std::string(what) + " must hold exactly one value");
  return t.get_i64(0);
}

Tensor new_tensor(const KernelContext& ctx, DType dtype, Shape shape) {
  auto t = Tensor::create(dtype, std::move(shape));
  if (!t) throw KernelError{t.status().with_context(ctx.node.label() + ": ")};
  return std::move(t).value();
}

}  // namespace tac::ref
