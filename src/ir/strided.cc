#include "ir/strided.h"

#include <string>

namespace tac::ir {

StridedView contiguous_view(const std::vector<int64_t>& shape) {
  StridedView v;
  v.shape = shape;
  v.strides.assign(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) v.strides[i - 1] = v.strides[i] * shape[i];
  return v;
}

int64_t view_extent(const StridedView& v) {
  int64_t e = v.offset;
  for (size_t i = 0; i < v.shape.size(); ++i)
    if (v.shape[i] > 0) e += (v.shape[i] - 1) * v.strides[i];
  return e;
}

int64_t batch_offset(const StridedView& v, int64_t b) {
  int64_t off = v.offset;
  for (size_t i = v.shape.size() - 2; i-- > 0;) {
    off += (b % v.shape[i]) * v.strides[i];
    b /= v.shape[i];
  }
  return off;
}

Result<std::optional<AttentionViews>> attention_views(const Node& n) {
  const Attribute *dims = n.attr(kAttnDims), *strides = n.attr(kAttnStrides), *offsets = n.attr(kAttnOffsets),
                  *out = n.attr(kAttnOutShape);
  if (!dims && !strides && !offsets && !out) return std::optional<AttentionViews>{};
  auto bad = [&](const std::string& why) { return invalid_model(n.label() + ": operand views: " + why); };
  if (!dims || !strides || !offsets || !out) return bad("needs all of dims, strides, offsets and out_shape");
  if (dims->ints.size() < 4) return bad("dims needs [batch dims..., sq, d, sk, dv]");
  const size_t r = dims->ints.size() - 2;  // logical rank of each operand
  if (strides->ints.size() != 4 * r) return bad("strides needs 4 x " + std::to_string(r) + " values");
  if (offsets->ints.size() != 4) return bad("offsets needs 4 values");
  AttentionViews v;
  v.batch_dims.assign(dims->ints.begin(), dims->ints.begin() + static_cast<std::ptrdiff_t>(r - 2));
  v.sq = dims->ints[r - 2], v.d = dims->ints[r - 1], v.sk = dims->ints[r], v.dv = dims->ints[r + 1];
  const int64_t mats[4][2] = {{v.sq, v.d}, {v.d, v.sk}, {v.sk, v.dv}, {v.sq, v.dv}};
  for (size_t o = 0; o < 4; ++o) {
    StridedView& sv = v.op[o];
    sv.shape = v.batch_dims;
    sv.shape.push_back(mats[o][0]);
    sv.shape.push_back(mats[o][1]);
    sv.strides.assign(strides->ints.begin() + static_cast<std::ptrdiff_t>(o * r),
                      strides->ints.begin() + static_cast<std::ptrdiff_t>((o + 1) * r));
    sv.offset = offsets->ints[o];
    for (size_t i = 0; i < r; ++i)
      if (sv.shape[i] < 0 || sv.strides[i] < 0) return bad("negative dims or strides");
    if (sv.offset < 0) return bad("negative offset");
  }
  v.out_shape = out->ints;
  return std::optional<AttentionViews>{std::move(v)};
}

void set_attention_views(Node& n, const AttentionViews& v) {
  auto ints = [&](const char* key, std::vector<int64_t> x) {
    Attribute a;
    a.type = Attribute::Type::ints;
    a.ints = std::move(x);
    n.attrs[key] = std::move(a);
  };
  std::vector<int64_t> dims = v.batch_dims, strides, offsets;
  for (int64_t x : {v.sq, v.d, v.sk, v.dv}) dims.push_back(x);
  for (const StridedView& s : v.op) {
    strides.insert(strides.end(), s.strides.begin(), s.strides.end());
    offsets.push_back(s.offset);
  }
  ints(kAttnDims, std::move(dims));
  ints(kAttnStrides, std::move(strides));
  ints(kAttnOffsets, std::move(offsets));
  ints(kAttnOutShape, v.out_shape);
}

}  // namespace tac::ir
