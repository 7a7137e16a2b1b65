// Data movement, any fixed-size dtype: Transpose ("blocked": contiguous-run copy or batched 2-D
// tiles; "generic": strided gather for any perm), Concat, Split, Gather (axis 0), Slice (steps 1)
// as run copies ("copy"), and Reshape / Flatten / Squeeze / Unsqueeze / Identity as one memcpy
// ("copy"; the builder may alias them instead).
#include <cstring>

#include "kernels/elementwise/common.h"

namespace tac::kernels::ew {
namespace {

using ir::OpKind;

constexpr size_t kMaxRank = 16;

size_t esize_of(const StepDesc& s) { return s.in_dtypes.empty() ? 0 : dtype_size(s.in_dtypes[0]); }

Status same_dtype_fixed(const StepDesc& s) {
  if (s.in_dtypes.empty() || s.out_dtypes.empty()) return not_applicable("no inputs or outputs");
  if (esize_of(s) == 0) return not_applicable("unsupported dtype");
  for (DType d : s.out_dtypes)
    if (d != s.in_dtypes[0]) return not_applicable("output dtype differs from input");
  for (const Shape& sh : s.out_shapes)
    if (sh.size() > kMaxRank) return not_applicable("rank above 16");
  if (s.in_shapes[0].size() > kMaxRank) return not_applicable("rank above 16");
  return Status::ok();
}

double copy_cost(const StepDesc& s) {
  double bytes = 0;
  for (const Shape& sh : s.out_shapes) bytes += static_cast<double>(shape_numel(sh));
  bytes *= 2.0 * static_cast<double>(std::max<size_t>(1, esize_of(s)));
  return stream_cost_ns(bytes, 0, s.threads, static_cast<int64_t>(bytes / 8));
}

// Parallel memcpy of large blocks.
void copy_bytes(void* dst, const void* src, int64_t n, int threads) {
  parallel_for(n, 1, n >= (int64_t{1} << 20) ? threads : 1, [&](int64_t b, int64_t e) {
    std::memcpy(static_cast<char*>(dst) + b, static_cast<const char*>(src) + b, static_cast<size_t>(e - b));
  }, 64);
}

// ---------------------------------------------------------------- Reshape & co.

Status reshape_applies(const StepDesc& s) {
  if (Status st = same_dtype_fixed(s); !st) return st;
  if (shape_numel(s.in_shapes[0]) != shape_numel(s.out_shapes[0])) return not_applicable("element count differs");
  return Status::ok();
}
Result<std::unique_ptr<Kernel>> reshape_prepare(const StepDesc& s) {
  const int64_t bytes = shape_numel(s.out_shapes[0]) * static_cast<int64_t>(esize_of(s));
  const int threads = s.threads;
  return make_kernel([=](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
    if (out[0].data != in[0].data) copy_bytes(out[0].data, in[0].data, bytes, threads);
    return Status::ok();
  });
}

// ---------------------------------------------------------------- Transpose

// The perm after dropping size-1 dims and merging input dims that stay adjacent.
struct TransposePlan {
  std::vector<int64_t> in_dims;  // reduced input dims
  std::vector<int> perm;         // output dim j reads input dim perm[j]
  TransposePlan(const Shape& in, std::vector<int64_t> p) {
    const size_t r = in.size();
    if (p.empty())
      for (size_t i = 0; i < r; ++i) p.push_back(static_cast<int64_t>(r - 1 - i));
    std::vector<int> keep(r, -1);
    std::vector<int64_t> dims;
    for (size_t i = 0; i < r; ++i)
      if (in[i] != 1) {
        keep[i] = static_cast<int>(dims.size());
        dims.push_back(in[i]);
      }
    std::vector<int> q;
    for (int64_t a : p)
      if (keep[static_cast<size_t>(a)] >= 0) q.push_back(keep[static_cast<size_t>(a)]);
    // merge output-adjacent dims that are input-adjacent: groups of consecutive input dims
    std::vector<std::vector<int>> groups;
    for (int a : q) {
      if (!groups.empty() && groups.back().back() + 1 == a) groups.back().push_back(a);
      else groups.push_back({a});
    }
    // new input order: groups sorted by their first input dim
    std::vector<int> order(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) order[g] = static_cast<int>(g);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return groups[a][0] < groups[b][0]; });
    std::vector<int> rank_of(groups.size());
    for (size_t i = 0; i < order.size(); ++i) rank_of[order[i]] = static_cast<int>(i);
    for (int g : order) {
      int64_t d = 1;
      for (int a : groups[g]) d *= dims[a];
      in_dims.push_back(d);
    }
    for (size_t g = 0; g < groups.size(); ++g) perm.push_back(rank_of[g]);
  }
  size_t rank() const { return perm.size(); }
  bool inner_kept() const { return rank() <= 1 || perm.back() == static_cast<int>(rank()) - 1; }
  bool batched_2d() const {
    const size_t r = rank();
    if (r < 2 || perm[r - 1] != static_cast<int>(r) - 2 || perm[r - 2] != static_cast<int>(r) - 1) return false;
    for (size_t i = 0; i + 2 < r; ++i)
      if (perm[i] != static_cast<int>(i)) return false;
    return true;
  }
};

template <class T>
void transpose_2d_tiles(const T* x, T* y, int64_t rows, int64_t cols) {  // y[c][r] = x[r][c]
  constexpr int64_t B = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += B)
    for (int64_t c0 = 0; c0 < cols; c0 += B) {
      const int64_t r1 = std::min(rows, r0 + B), c1 = std::min(cols, c0 + B);
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t r = r0; r < r1; ++r) y[c * rows + r] = x[r * cols + c];
    }
}

template <class T>
void transpose_gather(const T* x, T* y, const TransposePlan& p, const int64_t* out_dims, const int64_t* in_stride, int threads) {
  const size_t r = p.rank();
  const int64_t inner = out_dims[r - 1], sin = in_stride[r - 1];
  int64_t outer = 1;
  for (size_t j = 0; j + 1 < r; ++j) outer *= out_dims[j];
  parallel_for(outer, inner, threads, [&](int64_t b, int64_t e) {
    int64_t idx[kMaxRank] = {}, off = 0, rem = b;
    for (size_t j = r - 1; j-- > 0;) {
      idx[j] = rem % out_dims[j];
      rem /= out_dims[j];
      off += idx[j] * in_stride[j];
    }
    for (int64_t o = b; o < e; ++o) {
      T* yo = y + o * inner;
      const T* xo = x + off;
      for (int64_t i = 0; i < inner; ++i) yo[i] = xo[i * sin];
      for (size_t j = r - 1; j-- > 0;) {
        off += in_stride[j];
        if (++idx[j] < out_dims[j]) break;
        off -= in_stride[j] * out_dims[j];
        idx[j] = 0;
      }
    }
  });
}

Status transpose_generic_applies(const StepDesc& s) {
  if (Status st = same_dtype_fixed(s); !st) return st;
  const size_t e = esize_of(s);
  if (e != 1 && e != 2 && e != 4 && e != 8) return not_applicable("element size");
  return Status::ok();
}
Status transpose_blocked_applies(const StepDesc& s) {
  if (Status st = transpose_generic_applies(s); !st) return st;
  TransposePlan p(s.in_shapes[0], attr_ints(s, "perm", {}));
  if (!p.inner_kept() && !p.batched_2d())
    return not_applicable("perm neither keeps the last dim nor swaps the last two after merging");
  return Status::ok();
}
double transpose_generic_cost(const StepDesc& s) { return copy_cost(s) * 3; }
// Measured (1 thread, [1,12,128,64] fp32): the run copy is ~3x faster than the gather, but the
// scalar 16x16 tiles are ~1.2x slower than the gather on a last-two swap, so they rank behind it.
double transpose_blocked_cost(const StepDesc& s) {
  TransposePlan p(s.in_shapes[0], attr_ints(s, "perm", {}));
  return copy_cost(s) * (p.inner_kept() ? 1.0 : 3.6);
}

template <bool Blocked>
Result<std::unique_ptr<Kernel>> transpose_prepare(const StepDesc& s) {
  TransposePlan p(s.in_shapes[0], attr_ints(s, "perm", {}));
  const size_t es = esize_of(s);
  const int threads = s.threads;
  const int64_t total = shape_numel(s.out_shapes[0]);
  const size_t r = p.rank();
  std::vector<int64_t> out_dims(std::max<size_t>(r, 1), 1), in_stride(std::max<size_t>(r, 1), 0);
  {
    std::vector<int64_t> st(r, 1);
    for (size_t i = r; i-- > 1;) st[i - 1] = st[i] * p.in_dims[i];
    for (size_t j = 0; j < r; ++j) {
      out_dims[j] = p.in_dims[static_cast<size_t>(p.perm[j])];
      in_stride[j] = st[static_cast<size_t>(p.perm[j])];
    }
  }
  return make_kernel([=](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
    const char* x = static_cast<const char*>(in[0].data);
    char* y = static_cast<char*>(out[0].data);
    if (r <= 1) {
      copy_bytes(y, x, total * static_cast<int64_t>(es), threads);
      return Status::ok();
    }
    if (Blocked && p.inner_kept()) {  // copy runs of the (merged) last dim
      const int64_t run = out_dims[r - 1] * static_cast<int64_t>(es);
      int64_t outer = 1;
      for (size_t j = 0; j + 1 < r; ++j) outer *= out_dims[j];
      parallel_for(outer, run / 4, threads, [&](int64_t b, int64_t e) {
        int64_t idx[kMaxRank] = {}, off = 0, rem = b;
        for (size_t j = r - 1; j-- > 0;) {
          idx[j] = rem % out_dims[j];
          rem /= out_dims[j];
          off += idx[j] * in_stride[j];
        }
        for (int64_t o = b; o < e; ++o) {
          std::memcpy(y + o * run, x + off * static_cast<int64_t>(es), static_cast<size_t>(run));
          for (size_t j = r - 1; j-- > 0;) {
            off += in_stride[j];
            if (++idx[j] < out_dims[j]) break;
            off -= in_stride[j] * out_dims[j];
            idx[j] = 0;
          }
        }
      });
      return Status::ok();
    }
    if (Blocked) {  // batched 2-D: [B, R, C] -> [B, C, R]
      const int64_t R = p.in_dims[r - 2], C = p.in_dims[r - 1], batch = total / (R * C);
      auto run2d = [&](auto tag) {
        using T = decltype(tag);
        const T* xt = reinterpret_cast<const T*>(x);
        T* yt = reinterpret_cast<T*>(y);
        if (batch > 1) {
          parallel_for(batch, R * C, threads, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) transpose_2d_tiles(xt + i * R * C, yt + i * R * C, R, C);
          });
        } else {  // split the output rows (input columns) in tile multiples
          parallel_for(C, R, threads, [&](int64_t b, int64_t e) {
            for (int64_t c0 = b; c0 < e; c0 += 16) {
              const int64_t c1 = std::min(e, c0 + 16);
              for (int64_t r0 = 0; r0 < R; r0 += 16) {
                const int64_t r1 = std::min(R, r0 + 16);
                for (int64_t c = c0; c < c1; ++c)
                  for (int64_t rr = r0; rr < r1; ++rr) yt[c * R + rr] = xt[rr * C + c];
              }
            }
          }, 16);
        }
      };
      switch (es) {
        case 1: run2d(uint8_t{}); break;
        case 2: run2d(uint16_t{}); break;
        case 4: run2d(uint32_t{}); break;
        default: run2d(uint64_t{}); break;
      }
      return Status::ok();
    }
    switch (es) {
      case 1: transpose_gather(reinterpret_cast<const uint8_t*>(x), reinterpret_cast<uint8_t*>(y), p, out_dims.data(), in_stride.data(), threads); break;
      case 2: transpose_gather(reinterpret_cast<const uint16_t*>(x), reinterpret_cast<uint16_t*>(y), p, out_dims.data(), in_stride.data(), threads); break;
      case 4: transpose_gather(reinterpret_cast<const uint32_t*>(x), reinterpret_cast<uint32_t*>(y), p, out_dims.data(), in_stride.data(), threads); break;
      default: transpose_gather(reinterpret_cast<const uint64_t*>(x), reinterpret_cast<uint64_t*>(y), p, out_dims.data(), in_stride.data(), threads); break;
    }
    return Status::ok();
  });
}

// ---------------------------------------------------------------- Concat / Split

int64_t axis_attr(const StepDesc& s, int64_t def, size_t rank) {
  int64_t a = attr_i(s, "axis", def);
  return a < 0 ? a + static_cast<int64_t>(rank) : a;
}
int64_t prod(const Shape& s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e; ++i) p *= s[i];
  return p;
}

Status concat_applies(const StepDesc& s) {
  if (Status st = same_dtype_fixed(s); !st) return st;
  for (DType d : s.in_dtypes)
    if (d != s.in_dtypes[0]) return not_applicable("mixed dtypes");
  const int64_t a = axis_attr(s, 0, s.out_shapes[0].size());
  if (a < 0 || a >= static_cast<int64_t>(s.out_shapes[0].size())) return not_applicable("axis out of range");
  return Status::ok();
}
Result<std::unique_ptr<Kernel>> concat_prepare(const StepDesc& s) {
  const size_t a = static_cast<size_t>(axis_attr(s, 0, s.out_shapes[0].size()));
  const Shape& o = s.out_shapes[0];
  const int64_t es = static_cast<int64_t>(esize_of(s));
  const int64_t outer = prod(o, 0, a), out_row = prod(o, a, o.size()) * es;
  std::vector<int64_t> rows;  // bytes per outer index of each input
  for (const Shape& sh : s.in_shapes) rows.push_back(prod(sh, a, sh.size()) * es);
  const int threads = s.threads;
  return make_kernel([=](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
    char* y = static_cast<char*>(out[0].data);
    parallel_for(outer, out_row / 4, threads, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        char* yo = y + i * out_row;
        for (size_t k = 0; k < rows.size(); ++k) {
          const char* src = static_cast<const char*>(in[k].data) + i * rows[k];
          // An input the memory plan placed in its slice already (memory.concat_alias) is not copied.
          if (rows[k] && src != yo) std::memcpy(yo, src, static_cast<size_t>(rows[k]));
          yo += rows[k];
        }
      }
    });
    return Status::ok();
  });
}

Status split_applies(const StepDesc& s) {
  if (Status st = same_dtype_fixed(s); !st) return st;
  for (int v : s.node->outputs)
    if (v == ir::kNoValue) return not_applicable("omitted outputs");
  const int64_t a = axis_attr(s, 0, s.in_shapes[0].size());
  if (a < 0 || a >= static_cast<int64_t>(s.in_shapes[0].size())) return not_applicable("axis out of range");
  return Status::ok();
}
Result<std::unique_ptr<Kernel>> split_prepare(const StepDesc& s) {
  const Shape& x = s.in_shapes[0];
  const size_t a = static_cast<size_t>(axis_attr(s, 0, x.size()));
  const int64_t es = static_cast<int64_t>(esize_of(s));
  const int64_t outer = prod(x, 0, a), in_row = prod(x, a, x.size()) * es;
  std::vector<int64_t> rows;
  for (const Shape& sh : s.out_shapes) rows.push_back(prod(sh, a, sh.size()) * es);
  const int threads = s.threads;
  return make_kernel([=](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
    const char* x0 = static_cast<const char*>(in[0].data);
    parallel_for(outer, in_row / 4, threads, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const char* xi = x0 + i * in_row;
        for (size_t k = 0; k < rows.size(); ++k) {
          if (rows[k]) std::memcpy(static_cast<char*>(out[k].data) + i * rows[k], xi, static_cast<size_t>(rows[k]));
          xi += rows[k];
        }
      }
    });
    return Status::ok();
  });
}

// ---------------------------------------------------------------- Gather (axis 0)

Status gather_applies(const StepDesc& s) {
  if (Status st = same_dtype_fixed(s); !st) return st;
  if (s.in_dtypes.size() < 2 || (s.in_dtypes[1] != DType::int64 && s.in_dtypes[1] != DType::int32))
    return not_applicable("int64 or int32 indices");
  if (s.in_shapes[0].empty() || axis_attr(s, 0, s.in_shapes[0].size()) != 0) return not_applicable("axis 0 only");
  return Status::ok();
}
Result<std::unique_ptr<Kernel>> gather_prepare(const StepDesc& s) {
  const Shape& x = s.in_shapes[0];
  const int64_t dim = x[0], row = prod(x, 1, x.size()) * static_cast<int64_t>(esize_of(s));
  const int64_t n = shape_numel(s.in_shapes[1]);
  const bool i64 = s.in_dtypes[1] == DType::int64;
  const int threads = s.threads;
  const std::string label = s.node->label();
  return make_kernel([=](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
    const char* xp = static_cast<const char*>(in[0].data);
    char* y = static_cast<char*>(out[0].data);
    auto index = [&](int64_t i) { return i64 ? in[1].as<int64_t>()[i] : static_cast<int64_t>(in[1].as<int32_t>()[i]); };
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = index(i);
      if (v < -dim || v >= dim)
        return invalid_argument(label + ": index " + std::to_string(v) + " is out of range for dim " + std::to_string(dim));
    }
    parallel_for(n, row / 4, threads, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        int64_t v = index(i);
        if (v < 0) v += dim;
        std::memcpy(y + i * row, xp + v * row, static_cast<size_t>(row));
      }
    });
    return Status::ok();
  });
}

// ---------------------------------------------------------------- Slice (steps 1)

Status slice_applies(const StepDesc& s) {
  if (Status st = same_dtype_fixed(s); !st) return st;
  if (s.out_shapes[0].size() != s.in_shapes[0].size()) return not_applicable("rank changes");
  if (s.node->opset >= 10) {
    for (size_t i = 1; i < 4; ++i)
      if (s.has_input(i) && s.in_dtypes[i] != DType::int64 && s.in_dtypes[i] != DType::int32)
        return not_applicable("int32 / int64 starts, ends, axes");
    if (s.has_input(4)) {
      if (!s.constants[4]) return not_applicable("steps must be constant");
      for (int64_t i = 0; i < s.constants[4]->numel(); ++i)
        if (s.constants[4]->get_i64(i) != 1) return not_applicable("steps other than 1");
    }
    if (!s.has_input(3)) {
      // starts cover the leading axes
    } else if (!s.constants[3]) {
      return not_applicable("axes must be constant");
    }
  }
  return Status::ok();
}
Result<std::unique_ptr<Kernel>> slice_prepare(const StepDesc& s) {
  const Shape x = s.in_shapes[0], o = s.out_shapes[0];
  const size_t r = x.size();
  const int64_t es = static_cast<int64_t>(esize_of(s));
  const bool inputs = s.node->opset >= 10;
  std::vector<int64_t> axes, attr_starts;
  if (inputs) {
    if (s.has_input(3))
      for (int64_t i = 0; i < s.constants[3]->numel(); ++i) axes.push_back(s.constants[3]->get_i64(i));
  } else {
    axes = attr_ints(s, "axes", {});
    attr_starts = attr_ints(s, "starts", {});
  }
  for (int64_t& a : axes)
    if (a < 0) a += static_cast<int64_t>(r);
  // innermost axis that is cut; everything after it is copied as one run
  size_t q = 0;
  for (size_t d = 0; d < r; ++d)
    if (o[d] != x[d]) q = d;
  const int64_t run = prod(o, q, r) * es;
  std::vector<int64_t> in_stride(r, 1);
  for (size_t d = r; d-- > 1;) in_stride[d - 1] = in_stride[d] * x[d];
  const int threads = s.threads;
  return make_kernel([=](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
    int64_t start[kMaxRank] = {};
    const int64_t n_starts = inputs ? in[1].numel() : static_cast<int64_t>(attr_starts.size());
    for (int64_t i = 0; i < n_starts; ++i) {
      int64_t v = inputs ? (in[1].dtype == DType::int64 ? in[1].as<int64_t>()[i] : in[1].as<int32_t>()[i]) : attr_starts[static_cast<size_t>(i)];
      const int64_t a = axes.empty() ? i : axes[static_cast<size_t>(i)];
      const int64_t dim = x[static_cast<size_t>(a)];
      if (v < 0) v += dim;
      start[a] = std::clamp<int64_t>(v, 0, dim);
      if (start[a] + o[static_cast<size_t>(a)] > dim) start[a] = dim - o[static_cast<size_t>(a)];
    }
    const char* xp = static_cast<const char*>(in[0].data);
    char* y = static_cast<char*>(out[0].data);
    int64_t base = 0;
    for (size_t d = 0; d < r; ++d) base += start[d] * in_stride[d];
    int64_t outer = prod(o, 0, q);
    parallel_for(outer, run / 4, threads, [&](int64_t b, int64_t e) {
      int64_t idx[kMaxRank] = {}, off = base, rem = b;
      for (size_t d = q; d-- > 0;) {
        idx[d] = rem % o[d];
        rem /= o[d];
        off += idx[d] * in_stride[d];
      }
      for (int64_t i = b; i < e; ++i) {
        std::memcpy(y + i * run, xp + off * es, static_cast<size_t>(run));
        for (size_t d = q; d-- > 0;) {
          off += in_stride[d];
          if (++idx[d] < o[d]) break;
          off -= in_stride[d] * o[d];
          idx[d] = 0;
        }
      }
    });
    return Status::ok();
  });
}

}  // namespace

std::vector<Tactic> movement_tactics() {
  std::vector<Tactic> t;
  for (OpKind op : {OpKind::Reshape, OpKind::Flatten, OpKind::Squeeze, OpKind::Unsqueeze, OpKind::Identity})
    t.push_back(Tactic{"copy", op, "memcpy of the input (the fallback when the builder cannot alias)", reshape_applies, copy_cost,
                       reshape_prepare});
  t.push_back(Tactic{"blocked", OpKind::Transpose, "contiguous-run copy, or 16x16 tiles for a swap of the last two dims",
                     transpose_blocked_applies, transpose_blocked_cost, transpose_prepare<true>});
  t.push_back(Tactic{"generic", OpKind::Transpose, "strided gather along the last output dim, any perm",
                     transpose_generic_applies, transpose_generic_cost, transpose_prepare<false>});
  t.push_back(Tactic{"copy", OpKind::Concat, "one memcpy per input per outer index", concat_applies, copy_cost, concat_prepare});
  t.push_back(Tactic{"copy", OpKind::Split, "one memcpy per output per outer index", split_applies, copy_cost, split_prepare});
  t.push_back(Tactic{"copy", OpKind::Gather, "axis-0 row lookup (embedding), int64 / int32 indices", gather_applies, copy_cost,
                     gather_prepare});
  t.push_back(Tactic{"copy", OpKind::Slice, "steps-1 slice as contiguous run copies", slice_applies, copy_cost, slice_prepare});
  return t;
}

}  // namespace tac::kernels::ew
