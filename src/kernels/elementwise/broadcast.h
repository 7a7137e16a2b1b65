// Numpy broadcasting reduced to runs: the output is walked as `outer` runs of `inner` contiguous
// elements, and in each run every input is either contiguous (stride 1) or one repeated value
// (stride 0). Size-1 output dims are dropped and adjacent dims that every input walks alike are
// merged, so the common cases (same shape, scalar, row bias [D] over [..., D], channel bias
// [C,1,1] over NCHW) become one long run, a per-run scalar, or a per-run vector.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/elementwise/common.h"

namespace tac::kernels::ew {

struct BroadcastPlan {
  std::vector<int64_t> dims;                  // merged output dims; dims.back() is the run
  std::vector<std::vector<int64_t>> strides;  // per input, per merged dim (elements)
  int64_t inner = 1, outer = 1;
  std::vector<int> inner_stride;              // per input: 0 or 1

  BroadcastPlan(const Shape& out, const std::vector<Shape>& ins) {
    const size_t r = out.size(), k = ins.size();
    std::vector<std::vector<int64_t>> st(k, std::vector<int64_t>(r, 0));
    for (size_t j = 0; j < k; ++j) {
      const Shape& s = ins[j];
      int64_t acc = 1;
      for (size_t d = r; d-- > 0;) {
        const size_t off = r - s.size();
        const int64_t dim = d >= off ? s[d - off] : 1;
        st[j][d] = dim == 1 ? 0 : acc;
        acc *= dim;
      }
    }
    strides.assign(k, {});
    for (size_t d = 0; d < r; ++d) {
      if (out[d] == 1) continue;
      bool merge = !dims.empty();
      for (size_t j = 0; j < k && merge; ++j) merge = strides[j].back() == st[j][d] * out[d];
      if (merge) {
        dims.back() *= out[d];
        for (size_t j = 0; j < k; ++j) strides[j].back() = st[j][d];
      } else {
        dims.push_back(out[d]);
        for (size_t j = 0; j < k; ++j) strides[j].push_back(st[j][d]);
      }
    }
    if (dims.empty()) {
      dims.push_back(1);
      for (auto& s : strides) s.push_back(0);
    }
    inner = dims.back();
    outer = 1;
    for (size_t d = 0; d + 1 < dims.size(); ++d) outer *= dims[d];
    for (auto& s : strides) inner_stride.push_back(s.back() != 0 ? 1 : 0);
  }

  // Calls f(offsets, out_offset, n) for every run piece; pieces are split over threads: whole
  // runs when there are several, else chunks of the single run.
  template <class F>
  void run(int threads, int64_t work_per_elem, F f) const {
    const size_t k = strides.size();
    if (outer == 1) {
      parallel_for(inner, work_per_elem, threads, [&](int64_t b, int64_t e) {
        int64_t off[4] = {0, 0, 0, 0};
        for (size_t j = 0; j < k; ++j) off[j] = b * inner_stride[j];
        f(off, b, e - b);
      }, 64);
      return;
    }
    parallel_for(outer, work_per_elem * inner, threads, [&](int64_t b, int64_t e) {
      const size_t m = dims.size() - 1;
      int64_t idx[16] = {};
      int64_t off[4] = {0, 0, 0, 0};
      int64_t rem = b;
      for (size_t d = m; d-- > 0;) {
        idx[d] = rem % dims[d];
        rem /= dims[d];
        for (size_t j = 0; j < k; ++j) off[j] += idx[d] * strides[j][d];
      }
      for (int64_t o = b; o < e; ++o) {
        f(off, o * inner, inner);
        for (size_t d = m; d-- > 0;) {  // odometer step
          for (size_t j = 0; j < k; ++j) off[j] += strides[j][d];
          if (++idx[d] < dims[d]) break;
          for (size_t j = 0; j < k; ++j) off[j] -= strides[j][d] * dims[d];
          idx[d] = 0;
        }
      }
    });
  }
};

}  // namespace tac::kernels::ew
