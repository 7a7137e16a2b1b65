#include "ir/shape_inference.h"

#include <climits>
#include <cmath>

#include <algorithm>
#include <functional>

#include "ir/strided.h"

namespace tac::ir {

namespace {

Dim known(int64_t v) {
  Dim d;
  d.value = v;
  return d;
}

bool fully_known(const ValueType& t) {
  if (!t.has_shape) return false;
  for (const Dim& d : t.dims)
    if (!d.known()) return false;
  return true;
}

// Thrown inside this file only, to keep the per-op rules short; caught in infer_shapes().
struct ShapeError {
  Status status;
};

class Rules {
 public:
  Rules(Graph& g, const Node& n) : g_(g), n_(n) {}

  const ValueType* in(size_t i) const {
    if (i >= n_.inputs.size() || n_.inputs[i] == kNoValue) return nullptr;
    return &g_.values[static_cast<size_t>(n_.inputs[i])].type;
  }
  const Tensor* constant(size_t i) const {
    if (i >= n_.inputs.size() || n_.inputs[i] == kNoValue) return nullptr;
    const Value& v = g_.values[static_cast<size_t>(n_.inputs[i])];
    if (v.initializer) return &*v.initializer;
    if (v.producer >= 0 && static_cast<size_t>(v.producer) < g_.nodes.size()) {  // a Constant node
      const Node& p = g_.nodes[static_cast<size_t>(v.producer)];
      const Attribute* a = p.op == OpKind::Constant ? p.attr("value") : nullptr;
      if (a && a->type == Attribute::Type::t) return &a->t;
    }
    return nullptr;
  }
  void set(size_t i, ValueType t) {
    if (i >= n_.outputs.size() || n_.outputs[i] == kNoValue) return;
    ValueType& dst = g_.values[static_cast<size_t>(n_.outputs[i])].type;
    // An int8 FusedConv / FusedMatMul (the builder's precision rewrite) dequantizes: fp32 out.
    // With y_scale it also quantizes its output to y_dtype.
    if ((n_.op == OpKind::FusedConv || n_.op == OpKind::FusedMatMul) && n_.attr("x_scale"))
      t.dtype = n_.attr("y_dtype") ? static_cast<DType>(n_.attr("y_dtype")->i) : DType::float32;
    if (t.dtype == DType::undefined) t.dtype = dst.dtype;
    if (!t.has_shape && dst.has_shape) {  // keep the declared shape when we know nothing better
      t.has_shape = true;
      t.dims = dst.dims;
    }
    dst = std::move(t);
  }
  [[noreturn]] void fail(const std::string& why) const { throw ShapeError{invalid_model(n_.label() + ": " + why)}; }
  // a * b for sizes read from the model: an overflow is the model's error, never wrapped silently.
  int64_t mul(int64_t a, int64_t b) const {
    int64_t out;
    if (__builtin_mul_overflow(a, b, &out))
      fail("sizes " + std::to_string(a) + " * " + std::to_string(b) + " overflow 64 bits");
    return out;
  }

  int64_t attr_i(const char* k, int64_t def) const {
    const Attribute* a = n_.attr(k);
    return a && a->type == Attribute::Type::i ? a->i : def;
  }
  std::vector<int64_t> attr_ints(const char* k) const {
    const Attribute* a = n_.attr(k);
    return a && a->type == Attribute::Type::ints ? a->ints : std::vector<int64_t>{};
  }
  std::string attr_s(const char* k) const {
    const Attribute* a = n_.attr(k);
    return a && a->type == Attribute::Type::s ? a->s : std::string();
  }
  // Axis normalised to [0, rank), failing when out of range.
  int64_t axis(int64_t a, size_t rank) const {
    int64_t r = static_cast<int64_t>(rank);
    if (a < -r || a >= r) fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
    return a < 0 ? a + r : a;
  }

  ValueType broadcast(const std::vector<const ValueType*>& ins) const {
    ValueType out;
    out.dtype = ins.empty() || !ins[0] ? DType::undefined : ins[0]->dtype;
    size_t rank = 0;
    for (const ValueType* t : ins) {
      if (!t || !t->has_shape) return out;  // shape unknown
      rank = std::max(rank, t->dims.size());
    }
    out.has_shape = true;
    out.dims.assign(rank, known(1));
    for (const ValueType* t : ins) {
      size_t off = rank - t->dims.size();
      for (size_t i = 0; i < t->dims.size(); ++i) {
        Dim& o = out.dims[off + i];
        const Dim& d = t->dims[i];
        if (d.known() && d.value == 1) continue;
        if (o.known() && o.value == 1) o = d;
        else if (o.known() && d.known() && o.value != d.value)
          fail("shapes do not broadcast: dim " + std::to_string(off + i) + " is " + std::to_string(o.value) +
               " and " + std::to_string(d.value));
        else if (!(o == d)) o = o.known() ? o : d.known() ? d : Dim{};
      }
    }
    return out;
  }

 private:
  Graph& g_;
  const Node& n_;
};

bool is_unary_same(OpKind op) {
  switch (op) {
    case OpKind::Abs: case OpKind::Acos: case OpKind::Acosh: case OpKind::Asin: case OpKind::Asinh:
    case OpKind::Atan: case OpKind::Atanh: case OpKind::Ceil: case OpKind::Celu: case OpKind::Clip:
    case OpKind::Cos: case OpKind::Cosh: case OpKind::Elu: case OpKind::Erf: case OpKind::Exp:
    case OpKind::Floor: case OpKind::Gelu: case OpKind::HardSigmoid: case OpKind::HardSwish:
    case OpKind::Hardmax: case OpKind::Identity: case OpKind::LeakyRelu: case OpKind::Log:
    case OpKind::LogSoftmax: case OpKind::LRN: case OpKind::Mish: case OpKind::Neg: case OpKind::Reciprocal:
    case OpKind::Relu: case OpKind::Round: case OpKind::Selu: case OpKind::Shrink: case OpKind::Sigmoid:
    case OpKind::Sign: case OpKind::Sin: case OpKind::Sinh: case OpKind::Softmax: case OpKind::Softplus:
    case OpKind::Softsign: case OpKind::Sqrt: case OpKind::Swish: case OpKind::Tan: case OpKind::Tanh:
    case OpKind::ThresholdedRelu: case OpKind::BatchNormalization: case OpKind::InstanceNormalization:
    case OpKind::LayerNormalization: case OpKind::GroupNormalization: case OpKind::RMSNormalization:
    case OpKind::LpNormalization: case OpKind::MeanVarianceNormalization: case OpKind::Dropout:
    case OpKind::BitwiseNot: case OpKind::Not: case OpKind::CumSum: case OpKind::CumProd:
    case OpKind::Trilu: case OpKind::PRelu:  // PRelu: the slope broadcasts to X, never the reverse
      return true;
    default:
      return false;
  }
}

bool is_broadcast(OpKind op) {
  switch (op) {
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Pow:
    case OpKind::Mod: case OpKind::Max: case OpKind::Min: case OpKind::Mean: case OpKind::Sum:
    case OpKind::BitShift: case OpKind::BitwiseAnd: case OpKind::BitwiseOr:
    case OpKind::BitwiseXor: case OpKind::And: case OpKind::Or: case OpKind::Xor:
      return true;
    default:
      return false;
  }
}

bool is_comparison(OpKind op) {
  return op == OpKind::Equal || op == OpKind::Greater || op == OpKind::Less || op == OpKind::GreaterOrEqual ||
         op == OpKind::LessOrEqual;
}

// Output spatial size of a sliding window (Conv, pools), or unknown.
Dim window_out(const Dim& in, int64_t k, int64_t stride, int64_t dil, int64_t pad_begin, int64_t pad_total,
               const std::string& auto_pad, bool ceil_mode) {
  if (!in.known() || k <= 0 || stride <= 0 || dil <= 0) return Dim{};
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") return known((in.value + stride - 1) / stride);
  int64_t eff = dil * (k - 1) + 1;
  int64_t span = in.value + (auto_pad == "VALID" ? 0 : pad_total) - eff;
  if (span < 0) return known(0);
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in.value + pad_begin) --out;  // last window must start inside
  return known(out);
}

void infer_node(Graph& g, const Node& n) {
  Rules r(g, n);
  const ValueType* x = r.in(0);
  OpKind op = n.domain.empty() || n.domain == kInternalDomain ? n.op : OpKind::unknown;
  if (op == OpKind::FusedConv) op = OpKind::Conv;  // same shape rule; the epilogue keeps shapes
  if (is_unary_same(op) && x) {
    r.set(0, *x);
    return;
  }
  if (is_broadcast(op)) {
    std::vector<const ValueType*> ins;
    for (size_t i = 0; i < n.inputs.size(); ++i) ins.push_back(r.in(i));
    r.set(0, r.broadcast(ins));
    return;
  }
  if (is_comparison(op)) {
    ValueType t = r.broadcast({r.in(0), r.in(1)});
    t.dtype = DType::boolean;
    r.set(0, t);
    return;
  }
  switch (op) {
    case OpKind::IsNaN: case OpKind::IsInf: {
      if (!x) return;
      ValueType t = *x;
      t.dtype = DType::boolean;
      r.set(0, t);
      return;
    }
    case OpKind::Where: {
      ValueType t = r.broadcast({r.in(0), r.in(1), r.in(2)});
      t.dtype = r.in(1) ? r.in(1)->dtype : DType::undefined;
      r.set(0, t);
      return;
    }
    case OpKind::Cast: case OpKind::CastLike: {
      if (!x) return;
      ValueType t = *x;
      if (op == OpKind::Cast) {
        int64_t to = r.attr_i("to", 0);
        if (!dtype_supported(static_cast<int32_t>(to)))
          throw ShapeError{unsupported(n.label() + ": cast to " + dtype_name(static_cast<int32_t>(to)) + " is not supported")};
        t.dtype = static_cast<DType>(to);
      } else {
        t.dtype = r.in(1) ? r.in(1)->dtype : DType::undefined;
      }
      r.set(0, t);
      return;
    }
    case OpKind::Constant: {
      const Attribute* a = n.attr("value");
      if (!a || a->type != Attribute::Type::t) return;
      ValueType t;
      t.dtype = a->t.dtype();
      t.has_shape = true;
      for (int64_t d : a->t.shape()) t.dims.push_back(known(d));
      r.set(0, t);
      return;
    }
    case OpKind::Shape: {
      if (!x) return;
      ValueType t;
      t.dtype = DType::int64;
      t.has_shape = x->has_shape;
      if (x->has_shape) {
        int64_t rank = static_cast<int64_t>(x->dims.size());
        int64_t start = r.attr_i("start", 0), end = r.attr_i("end", rank);
        auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
        t.dims = {known(std::max<int64_t>(0, clamp(end) - clamp(start)))};
      }
      r.set(0, t);
      return;
    }
    case OpKind::Size: {
      ValueType t;
      t.dtype = DType::int64;
      t.has_shape = true;
      r.set(0, t);
      return;
    }
    case OpKind::Conv: case OpKind::MaxPool: case OpKind::AveragePool: case OpKind::LpPool: {
      if (!x || !x->has_shape || x->dims.size() < 3) {
        if (x && x->has_shape) r.fail("input must have rank >= 3, got " + x->to_string());
        return;
      }
      const size_t sp = x->dims.size() - 2;
      std::vector<int64_t> kernel = r.attr_ints("kernel_shape");
      Dim channels = x->dims[1];
      if (op == OpKind::Conv) {
        const ValueType* w = r.in(1);
        if (!w || !w->has_shape) return;
        if (w->dims.size() != x->dims.size())
          r.fail("weights " + w->to_string() + " do not match the rank of input " + x->to_string());
        int64_t group = r.attr_i("group", 1);
        if (x->dims[1].known() && w->dims[1].known() && x->dims[1].value != r.mul(w->dims[1].value, group))
          r.fail("input has " + std::to_string(x->dims[1].value) + " channels, weights expect " +
                 std::to_string(r.mul(w->dims[1].value, group)));
        channels = w->dims[0];
        if (kernel.empty())
          for (size_t i = 0; i < sp; ++i) kernel.push_back(w->dims[2 + i].known() ? w->dims[2 + i].value : -1);
      }
      if (kernel.size() != sp) {
        if (!kernel.empty()) r.fail("kernel_shape has " + std::to_string(kernel.size()) + " dims, expected " + std::to_string(sp));
        return;
      }
      std::vector<int64_t> strides = r.attr_ints("strides"), dils = r.attr_ints("dilations"), pads = r.attr_ints("pads");
      if (strides.empty()) strides.assign(sp, 1);
      if (dils.empty()) dils.assign(sp, 1);
      if (pads.empty()) pads.assign(2 * sp, 0);
      if (strides.size() != sp || dils.size() != sp || pads.size() != 2 * sp)
        r.fail("strides, dilations or pads do not match the " + std::to_string(sp) + " spatial dims");
      ValueType t;
      t.dtype = x->dtype;
      t.has_shape = true;
      t.dims = {x->dims[0], channels};
      std::string auto_pad = r.attr_s("auto_pad");
      bool ceil_mode = r.attr_i("ceil_mode", 0) != 0;
      for (size_t i = 0; i < sp; ++i)
        t.dims.push_back(window_out(x->dims[2 + i], kernel[i], strides[i], dils[i], pads[i], pads[i] + pads[i + sp], auto_pad, ceil_mode));
      r.set(0, t);
      return;
    }
    case OpKind::GlobalAveragePool: case OpKind::GlobalMaxPool: case OpKind::GlobalLpPool: {
      if (!x || !x->has_shape || x->dims.size() < 2) return;
      ValueType t = *x;
      for (size_t i = 2; i < t.dims.size(); ++i) t.dims[i] = known(1);
      r.set(0, t);
      return;
    }
    case OpKind::FusedElementwise: case OpKind::Reformat:
      if (x) r.set(0, *x);
      return;
    case OpKind::FusedAttention: {
      if (const Attribute* out = n.attr(kAttnOutShape)) {  // operand views (ir/strided.h)
        if (!x) return;
        ValueType t = *x;
        t.has_shape = true;
        t.dims.clear();
        for (int64_t d : out->ints) t.dims.push_back(known(d));
        r.set(0, t);
        return;
      }
      const ValueType* v = r.in(2);
      if (!x || !v || !x->has_shape || !v->has_shape || x->dims.size() < 2 || v->dims.size() != x->dims.size()) return;
      ValueType t = *x;
      t.dims.back() = v->dims.back();
      r.set(0, t);
      return;
    }
    case OpKind::MatMul: case OpKind::FusedMatMul: {
      const ValueType* b = r.in(1);
      if (!x || !b || !x->has_shape || !b->has_shape || x->dims.empty() || b->dims.empty()) return;
      std::vector<Dim> a = x->dims, bb = b->dims;
      if (op == OpKind::FusedMatMul && r.attr_i("transB", 0) != 0) {
        if (bb.size() != 2) r.fail("transB needs a 2-D B, got " + b->to_string());
        std::swap(bb[0], bb[1]);
      }
      bool a1 = a.size() == 1, b1 = bb.size() == 1;
      if (a1) a.insert(a.begin(), known(1));
      if (b1) bb.push_back(known(1));
      const Dim& k1 = a.back();
      const Dim& k2 = bb[bb.size() - 2];
      if (k1.known() && k2.known() && k1.value != k2.value)
        r.fail("inner dimensions differ: " + x->to_string() + " x " + b->to_string());
      ValueType ba, bb2;
      ba.has_shape = bb2.has_shape = true;
      ba.dims.assign(a.begin(), a.end() - 2);
      bb2.dims.assign(bb.begin(), bb.end() - 2);
      ValueType t = r.broadcast({&ba, &bb2});
      t.dtype = x->dtype;
      if (!a1) t.dims.push_back(a[a.size() - 2]);
      if (!b1) t.dims.push_back(bb.back());
      r.set(0, t);
      return;
    }
    case OpKind::Gemm: {
      const ValueType* b = r.in(1);
      if (!x || !b || !x->has_shape || !b->has_shape) return;
      if (x->dims.size() != 2 || b->dims.size() != 2) r.fail("A and B must be 2-D, got " + x->to_string() + " and " + b->to_string());
      bool ta = r.attr_i("transA", 0) != 0, tb = r.attr_i("transB", 0) != 0;
      const Dim& ka = x->dims[ta ? 0 : 1];
      const Dim& kb = b->dims[tb ? 1 : 0];
      if (ka.known() && kb.known() && ka.value != kb.value)
        r.fail("inner dimensions differ: " + x->to_string() + " x " + b->to_string());
      ValueType t;
      t.dtype = x->dtype;
      t.has_shape = true;
      t.dims = {x->dims[ta ? 1 : 0], b->dims[tb ? 0 : 1]};
      r.set(0, t);
      return;
    }
    case OpKind::Flatten: {
      if (!x || !x->has_shape) return;
      int64_t ax = r.attr_i("axis", 1);
      int64_t rank = static_cast<int64_t>(x->dims.size());
      if (ax < -rank || ax > rank) r.fail("axis " + std::to_string(ax) + " is out of range for rank " + std::to_string(rank));
      if (ax < 0) ax += rank;
      Dim outer = known(1), inner = known(1);
      for (int64_t i = 0; i < rank; ++i) {
        Dim& acc = i < ax ? outer : inner;
        const Dim& d = x->dims[static_cast<size_t>(i)];
        acc = acc.known() && d.known() ? known(r.mul(acc.value, d.value)) : Dim{};
      }
      ValueType t;
      t.dtype = x->dtype;
      t.has_shape = true;
      t.dims = {outer, inner};
      r.set(0, t);
      return;
    }
    case OpKind::Transpose: {
      if (!x || !x->has_shape) return;
      std::vector<int64_t> perm = r.attr_ints("perm");
      size_t rank = x->dims.size();
      if (perm.empty())
        for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
      if (perm.size() != rank) r.fail("perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(rank));
      ValueType t;
      t.dtype = x->dtype;
      t.has_shape = true;
      std::vector<bool> seen(rank, false);
      for (int64_t p : perm) {
        size_t a = static_cast<size_t>(r.axis(p, rank));
        if (seen[a]) r.fail("perm repeats axis " + std::to_string(p));
        seen[a] = true;
        t.dims.push_back(x->dims[a]);
      }
      r.set(0, t);
      return;
    }
    case OpKind::Concat: {
      if (!x || !x->has_shape) return;
      size_t rank = x->dims.size();
      int64_t ax = r.axis(r.attr_i("axis", 0), rank);
      ValueType t = *x;
      for (size_t i = 1; i < n.inputs.size(); ++i) {
        const ValueType* y = r.in(i);
        if (!y || !y->has_shape) return;
        if (y->dims.size() != rank) r.fail("inputs have different ranks");
        Dim& d = t.dims[static_cast<size_t>(ax)];
        const Dim& e = y->dims[static_cast<size_t>(ax)];
        d = d.known() && e.known() ? known(d.value + e.value) : Dim{};
      }
      r.set(0, t);
      return;
    }
    // Sizes given by constant inputs: known at build time, so a plan sizes them (and refuses
    // a size beyond the machine's memory) without computing them first.
    case OpKind::ConstantOfShape: {
      const Tensor* shape = r.constant(0);
      if (!shape || shape->rank() != 1) return;
      ValueType t;
      const Attribute* v = n.attr("value");
      t.dtype = v && v->type == Attribute::Type::t ? v->t.dtype() : DType::float32;
      t.has_shape = true;
      for (int64_t i = 0; i < shape->numel(); ++i) {
        if (shape->get_i64(i) < 0) return;  // the kernel says what is wrong
        t.dims.push_back(known(shape->get_i64(i)));
      }
      r.set(0, t);
      return;
    }
    case OpKind::Expand: {
      const Tensor* shape = r.constant(1);
      if (!x || !shape || shape->rank() != 1) return;
      ValueType target;
      target.dtype = x->dtype;
      target.has_shape = true;
      for (int64_t i = 0; i < shape->numel(); ++i) target.dims.push_back(known(shape->get_i64(i)));
      for (const Dim& d : target.dims)
        if (d.value < 0) return;
      r.set(0, r.broadcast({x, &target}));
      return;
    }
    case OpKind::Tile: {
      const Tensor* reps = r.constant(1);
      if (!x || !x->has_shape || !reps || reps->numel() != static_cast<int64_t>(x->dims.size())) return;
      ValueType t = *x;
      for (size_t i = 0; i < t.dims.size(); ++i) {
        const int64_t k = reps->get_i64(static_cast<int64_t>(i));
        if (k < 0) return;
        if (!t.dims[i].known()) continue;
        t.dims[i] = known(r.mul(t.dims[i].value, k));
      }
      r.set(0, t);
      return;
    }
    case OpKind::Range: {
      const Tensor *start = r.constant(0), *limit = r.constant(1), *delta = r.constant(2);
      if (!start || !limit || !delta || start->numel() != 1 || limit->numel() != 1 || delta->numel() != 1) return;
      ValueType t;
      t.dtype = start->dtype();
      t.has_shape = true;
      // ONNX: max(ceil((limit - start) / delta), 0) elements, computed as the reference kernel
      // does (ops_shape.cc range_kernel); where it would refuse, the rule leaves the shape open.
      int64_t count = 0;
      if (dtype_is_float(t.dtype)) {
        const double s0 = start->get_f64(0), l0 = limit->get_f64(0), d0 = delta->get_f64(0);
        if (d0 == 0 || !std::isfinite(s0) || !std::isfinite(l0) || !std::isfinite(d0)) return;
        const double nf = std::max(0.0, std::ceil((l0 - s0) / d0));
        if (nf > 1e12) return;
        count = static_cast<int64_t>(nf);
      } else {
        const int64_t s0 = start->get_i64(0), l0 = limit->get_i64(0), d0 = delta->get_i64(0);
        if (d0 == 0 || t.dtype == DType::boolean) return;
        const __int128 span = static_cast<__int128>(l0) - s0, step = d0;
        __int128 n128 = 0;
        if (step > 0 && span > 0) n128 = (span + step - 1) / step;
        if (step < 0 && span < 0) n128 = (-span - step - 1) / -step;
        if (n128 > (__int128{1} << 40)) return;
        count = static_cast<int64_t>(n128);
      }
      t.dims = {known(count)};
      r.set(0, t);
      return;
    }
    case OpKind::Reshape: {
      const Tensor* s = r.constant(1);
      if (!s || (s->dtype() != DType::int64) || s->rank() != 1) return;
      ValueType t;
      t.dtype = x ? x->dtype : DType::undefined;
      t.has_shape = true;
      bool allowzero = r.attr_i("allowzero", 0) != 0;
      int infer = -1;
      for (int64_t i = 0; i < s->numel(); ++i) {
        int64_t v = s->get_i64(i);
        if (v == 0 && !allowzero) {
          if (!x || !x->has_shape || static_cast<size_t>(i) >= x->dims.size()) return;
          t.dims.push_back(x->dims[static_cast<size_t>(i)]);
        } else if (v == -1) {
          if (infer >= 0) r.fail("shape has more than one -1");
          infer = static_cast<int>(i);
          t.dims.push_back(Dim{});
        } else if (v < 0) {
          r.fail("shape has a negative dim " + std::to_string(v));
        } else {
          t.dims.push_back(known(v));
        }
      }
      if (infer >= 0 && x && fully_known(*x)) {
        int64_t total = 1, rest = 1;
        for (const Dim& d : x->dims) total = r.mul(total, d.value);
        bool ok = true;
        for (size_t i = 0; i < t.dims.size(); ++i)
          if (static_cast<int>(i) != infer) {
            if (!t.dims[i].known()) ok = false;
            else rest = r.mul(rest, t.dims[i].value);
          }
        if (ok && rest > 0) {
          if (total % rest != 0) r.fail("cannot reshape " + x->to_string() + " with a -1 dim");
          t.dims[static_cast<size_t>(infer)] = known(total / rest);
        }
      }
      r.set(0, t);
      return;
    }
    case OpKind::Unsqueeze: case OpKind::Squeeze: {
      if (!x || !x->has_shape) return;
      std::vector<int64_t> axes = r.attr_ints("axes");
      if (n.opset >= 13) {
        axes.clear();
        if (const Tensor* a = r.constant(1))
          for (int64_t i = 0; i < a->numel(); ++i) axes.push_back(a->get_i64(i));
        else if (r.in(1)) return;  // axes computed at run time
      }
      ValueType t;
      t.dtype = x->dtype;
      t.has_shape = true;
      if (op == OpKind::Unsqueeze) {
        size_t out_rank = x->dims.size() + axes.size();
        std::vector<bool> inserted(out_rank, false);
        for (int64_t a : axes) {
          size_t k = static_cast<size_t>(r.axis(a, out_rank));
          if (inserted[k]) r.fail("axes repeat " + std::to_string(a));
          inserted[k] = true;
        }
        size_t j = 0;
        for (size_t i = 0; i < out_rank; ++i) t.dims.push_back(inserted[i] ? known(1) : x->dims[j++]);
      } else {
        std::vector<bool> drop(x->dims.size(), false);
        if (axes.empty()) {
          for (size_t i = 0; i < x->dims.size(); ++i) {
            if (!x->dims[i].known()) return;  // cannot tell which dims are 1
            drop[i] = x->dims[i].value == 1;
          }
        }
        for (int64_t a : axes) {
          size_t k = static_cast<size_t>(r.axis(a, x->dims.size()));
          if (x->dims[k].known() && x->dims[k].value != 1) r.fail("cannot squeeze axis " + std::to_string(a) + " of size " + std::to_string(x->dims[k].value));
          drop[k] = true;
        }
        for (size_t i = 0; i < x->dims.size(); ++i)
          if (!drop[i]) t.dims.push_back(x->dims[i]);
      }
      r.set(0, t);
      return;
    }
    case OpKind::Slice: {
      // ONNX's clamping: negative starts/ends count from the end, then starts clamp to [0, dim]
      // ([0, dim-1] for negative steps) and ends to [0, dim] ([-1, dim-1]).
      if (!x || !x->has_shape) return;
      std::vector<int64_t> starts, ends, axes, steps;
      if (n.opset < 10) {
        starts = r.attr_ints("starts"), ends = r.attr_ints("ends"), axes = r.attr_ints("axes");
      } else {
        auto ints = [&](size_t i, std::vector<int64_t>& v) {
          if (!r.in(i)) return true;
          const Tensor* c = r.constant(i);
          if (!c || (c->dtype() != DType::int64 && c->dtype() != DType::int32)) return false;
          for (int64_t k = 0; k < c->numel(); ++k) v.push_back(c->get_i64(k));
          return true;
        };
        if (!ints(1, starts) || !ints(2, ends) || !ints(3, axes) || !ints(4, steps)) return;  // computed at run time
      }
      if (starts.size() != ends.size()) r.fail("starts and ends differ in length");
      if (axes.empty())
        for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
      if (steps.empty()) steps.assign(starts.size(), 1);
      if (axes.size() != starts.size() || steps.size() != starts.size()) r.fail("starts, ends, axes and steps differ in length");
      ValueType t;
      t.dtype = x->dtype;
      t.has_shape = true;
      t.dims = x->dims;
      for (size_t i = 0; i < starts.size(); ++i) {
        Dim& d = t.dims[static_cast<size_t>(r.axis(axes[i], x->dims.size()))];
        if (steps[i] == 0) r.fail("a step is 0");
        if (!d.known()) continue;
        const int64_t dim = d.value, step = steps[i];
        int64_t b = starts[i], e = ends[i];
        if (b < 0) b += dim;
        if (e < 0) e += dim;
        int64_t len = 0;
        if (step > 0) {
          b = std::clamp<int64_t>(b, 0, dim), e = std::clamp<int64_t>(e, 0, dim);
          len = e > b ? (e - b + step - 1) / step : 0;
        } else {
          b = std::clamp<int64_t>(b, 0, dim - 1), e = std::clamp<int64_t>(e, -1, dim - 1);
          len = b > e ? (b - e - step - 1) / -step : 0;
        }
        d = known(len);
      }
      r.set(0, t);
      return;
    }
    case OpKind::Gather: {
      const ValueType* idx = r.in(1);
      if (!x || !idx || !x->has_shape || !idx->has_shape) return;
      if (x->dims.empty()) r.fail("data must have rank >= 1");
      size_t ax = static_cast<size_t>(r.axis(r.attr_i("axis", 0), x->dims.size()));
      ValueType t;
      t.dtype = x->dtype;
      t.has_shape = true;
      t.dims.assign(x->dims.begin(), x->dims.begin() + static_cast<long>(ax));
      t.dims.insert(t.dims.end(), idx->dims.begin(), idx->dims.end());
      t.dims.insert(t.dims.end(), x->dims.begin() + static_cast<long>(ax) + 1, x->dims.end());
      r.set(0, t);
      return;
    }
    case OpKind::ReduceMean: case OpKind::ReduceSum: case OpKind::ReduceMax: case OpKind::ReduceMin:
    case OpKind::ReduceProd: case OpKind::ReduceL1: case OpKind::ReduceL2: case OpKind::ReduceLogSum:
    case OpKind::ReduceLogSumExp: case OpKind::ReduceSumSquare: case OpKind::ArgMax: case OpKind::ArgMin: {
      if (!x || !x->has_shape) return;
      bool arg = op == OpKind::ArgMax || op == OpKind::ArgMin;
      std::vector<int64_t> axes;
      bool axes_input = !arg && ((op == OpKind::ReduceSum && n.opset >= 13) || n.opset >= 18);
      if (arg) axes = {r.attr_i("axis", 0)};
      else if (!axes_input) axes = r.attr_ints("axes");
      else if (const Tensor* a = r.constant(1))
        for (int64_t i = 0; i < a->numel(); ++i) axes.push_back(a->get_i64(i));
      else if (r.in(1)) return;
      bool keep = r.attr_i("keepdims", 1) != 0;
      if (axes.empty() && axes_input && r.attr_i("noop_with_empty_axes", 0) != 0) {
        r.set(0, *x);
        return;
      }
      std::vector<bool> red(x->dims.size(), axes.empty());
      for (int64_t a : axes) red[static_cast<size_t>(r.axis(a, x->dims.size()))] = true;
      ValueType t;
      t.dtype = arg ? DType::int64 : x->dtype;
      t.has_shape = true;
      for (size_t i = 0; i < x->dims.size(); ++i) {
        if (!red[i]) t.dims.push_back(x->dims[i]);
        else if (keep) t.dims.push_back(known(1));
      }
      r.set(0, t);
      return;
    }
    default:
      return;  // no rule: the declared type (if any) stays
  }
}

}  // namespace

Status infer_shapes(Model& m) {
  Graph& g = m.graph;
  for (const Node& n : g.nodes) {
    try {
      infer_node(g, n);
    } catch (const ShapeError& e) {
      return e.status.with_context(m.path + ": ");
    }
  }
  return Status::ok();
}

int count_known_shapes(const Graph& g) {
  int c = 0;
  for (const Value& v : g.values) c += v.type.dtype != DType::undefined && v.type.has_shape;
  return c;
}

}  // namespace tac::ir
