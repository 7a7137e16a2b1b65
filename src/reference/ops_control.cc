// Reference kernels: control flow (If, Loop, Scan), sequences, optionals, recurrent layers.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>

#include "reference/helpers.h"

namespace tac::ref {

namespace {

using ir::OpKind;

// ---------------------------------------------------------------------------------------------
// Small tensor utilities (byte-level, dtype-agnostic).

int64_t prod(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

const std::byte* cbytes(const Tensor& t) { return static_cast<const std::byte*>(t.raw()); }
std::byte* mbytes(Tensor& t) { return static_cast<std::byte*>(t.raw()); }

void copy_bytes(std::byte* dst, const std::byte* src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}

// The slice at index i along `axis`, with that axis removed.
Tensor slice_axis(const KernelContext& ctx, const Tensor& t, int64_t axis, int64_t i) {
  const Shape& s = t.shape();
  const auto a = static_cast<size_t>(axis);
  Shape os = s;
  os.erase(os.begin() + axis);
  Tensor out = new_tensor(ctx, t.dtype(), os);
  const int64_t outer = prod(s, 0, a);
  const int64_t n = s[a];
  const size_t inner = static_cast<size_t>(prod(s, a + 1, s.size())) * dtype_size(t.dtype());
  for (int64_t o = 0; o < outer; ++o)
    copy_bytes(mbytes(out) + static_cast<size_t>(o) * inner, cbytes(t) + static_cast<size_t>(o * n + i) * inner, inner);
  return out;
}

// Concatenates `items` along `axis` (all of the same dtype and rank, equal dims but `axis`).
Tensor concat_axis(const KernelContext& ctx, const std::vector<Tensor>& items, int64_t axis, const char* what) {
  if (items.empty()) ctx.fail_invalid(std::string(what) + ": nothing to concatenate");
  const Shape& s0 = items[0].shape();
  const auto a = static_cast<size_t>(axis);
  Shape os = s0;
  os[a] = 0;
  for (const Tensor& t : items) {
    if (t.dtype() != items[0].dtype())
      ctx.fail_invalid(std::string(what) + ": elements have different types " + dtype_name(items[0].dtype()) +
                       " and " + dtype_name(t.dtype()));
    bool ok = t.shape().size() == s0.size();
    for (size_t k = 0; ok && k < s0.size(); ++k) ok = k == a || t.shape()[k] == s0[k];
    if (!ok)
      ctx.fail_invalid(std::string(what) + ": element shapes " + shape_to_string(s0) + " and " +
                       shape_to_string(t.shape()) + " do not match");
    os[a] += t.shape()[a];
  }
  Tensor out = new_tensor(ctx, items[0].dtype(), os);
  const int64_t outer = prod(s0, 0, a);
  const size_t esz = dtype_size(items[0].dtype());
  const size_t inner = static_cast<size_t>(prod(s0, a + 1, s0.size())) * esz;
  std::byte* dst = mbytes(out);
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor& t : items) {
      const size_t block = static_cast<size_t>(t.shape()[a]) * inner;
      copy_bytes(dst, cbytes(t) + static_cast<size_t>(o) * block, block);
      dst += block;
    }
  }
  return out;
}

// Stacks equally shaped `items` along a new axis `axis` (in [0, rank]).
Tensor stack_axis(const KernelContext& ctx, const std::vector<Tensor>& items, int64_t axis, const char* what) {
  if (items.empty()) ctx.fail_invalid(std::string(what) + ": nothing to stack");
  std::vector<Tensor> expanded;
  expanded.reserve(items.size());
  for (const Tensor& t : items) {
    if (t.shape() != items[0].shape())
      ctx.fail_invalid(std::string(what) + ": element shapes " + shape_to_string(items[0].shape()) + " and " +
                       shape_to_string(t.shape()) + " differ");
    Shape s = t.shape();
    s.insert(s.begin() + axis, 1);
    expanded.push_back(t.reshaped(s));
  }
  return concat_axis(ctx, expanded, axis, what);
}

Tensor bool_scalar(const KernelContext& ctx, bool v) {
  Tensor t = new_tensor(ctx, DType::boolean, {});
  t.data<bool>()[0] = v;
  return t;
}

Tensor i64_scalar(const KernelContext& ctx, int64_t v) {
  Tensor t = new_tensor(ctx, DType::int64, {});
  t.data<int64_t>()[0] = v;
  return t;
}

bool cond_value(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.numel() != 1) ctx.fail_invalid(std::string(what) + " must hold exactly one value");
  return t.get_i64(0) != 0;
}

const Tensor& datum_tensor(const KernelContext& ctx, const Datum& d, const std::string& what) {
  if (d.kind != Datum::Kind::tensor || d.tensor.empty()) ctx.fail_invalid(what + " must be a tensor");
  return d.tensor;
}

// An empty stacked output ([0, dims...]) for a subgraph output that never produced a value.
Tensor empty_stacked(const KernelContext& ctx, const ir::Graph& g, size_t out_index, const char* what) {
  const ir::ValueType& vt = g.values[static_cast<size_t>(g.outputs[out_index])].type;
  if (vt.dtype == DType::undefined || !dtype_supported(static_cast<int32_t>(vt.dtype)))
    ctx.fail_unsupported(std::string(what) + ": zero iterations and the element type of body output '" +
                         g.values[static_cast<size_t>(g.outputs[out_index])].name + "' is unknown");
  Shape s{0};
  if (vt.has_shape)
    for (const ir::Dim& d : vt.dims) s.push_back(d.known() ? d.value : 0);
  return new_tensor(ctx, vt.dtype, s);
}

// ---------------------------------------------------------------------------------------------
// If

void if_kernel(KernelContext& ctx) {
  const bool c = cond_value(ctx, ctx.input(0), "cond");
  const ir::Graph* g = ctx.attr_graph(c ? "then_branch" : "else_branch");
  if (!g) ctx.fail_invalid(std::string("attribute '") + (c ? "then_branch" : "else_branch") + "' is required");
  std::vector<Datum> outs = ctx.run_subgraph(*g, {});
  if (outs.size() != ctx.num_outputs())
    ctx.fail_invalid("branch produced " + std::to_string(outs.size()) + " outputs, the node has " +
                     std::to_string(ctx.num_outputs()));
  for (size_t i = 0; i < outs.size(); ++i) ctx.set_output_datum(i, std::move(outs[i]));
}

// ---------------------------------------------------------------------------------------------
// Loop

void loop_kernel(KernelContext& ctx) {
  const ir::Graph* body = ctx.attr_graph("body");
  if (!body) ctx.fail_invalid("attribute 'body' is required");
  const bool has_m = ctx.has_input(0);
  const int64_t max_trip = has_m ? scalar_i64(ctx, ctx.input(0), "M") : 0;
  bool cond = ctx.has_input(1) ? cond_value(ctx, ctx.input(1), "cond") : true;
  const size_t n_carried = ctx.num_inputs() >= 2 ? ctx.num_inputs() - 2 : 0;
  if (body->inputs.size() != n_carried + 2)
    ctx.fail_invalid("body takes " + std::to_string(body->inputs.size()) + " inputs, expected " +
                     std::to_string(n_carried + 2));
  if (body->outputs.size() < n_carried + 1)
    ctx.fail_invalid("body has " + std::to_string(body->outputs.size()) + " outputs, expected at least " +
                     std::to_string(n_carried + 1));
  const size_t n_scan = body->outputs.size() - 1 - n_carried;
  if (ctx.num_outputs() > n_carried + n_scan)
    ctx.fail_invalid("node has more outputs than the body produces");

  std::vector<Datum> carried(n_carried);
  for (size_t i = 0; i < n_carried; ++i) carried[i] = ctx.input_datum(i + 2);
  std::vector<std::vector<Tensor>> scans(n_scan);
  for (int64_t it = 0; (!has_m || it < max_trip) && cond; ++it) {
    std::vector<Datum> args;
    args.reserve(n_carried + 2);
    args.emplace_back(i64_scalar(ctx, it));
    args.emplace_back(bool_scalar(ctx, cond));
    for (const Datum& d : carried) args.push_back(d);
    std::vector<Datum> outs = ctx.run_subgraph(*body, std::move(args));
    cond = cond_value(ctx, datum_tensor(ctx, outs[0], "body output cond"), "body output cond");
    for (size_t i = 0; i < n_carried; ++i) carried[i] = std::move(outs[1 + i]);
    for (size_t k = 0; k < n_scan; ++k)
      scans[k].push_back(datum_tensor(ctx, outs[1 + n_carried + k], "scan output " + std::to_string(k)));
  }
  for (size_t i = 0; i < n_carried && i < ctx.num_outputs(); ++i) ctx.set_output_datum(i, std::move(carried[i]));
  for (size_t k = 0; k < n_scan && n_carried + k < ctx.num_outputs(); ++k) {
    if (!ctx.wants_output(n_carried + k)) continue;
    if (scans[k].empty()) ctx.set_output(n_carried + k, empty_stacked(ctx, *body, 1 + n_carried + k, "Loop"));
    else ctx.set_output(n_carried + k, stack_axis(ctx, scans[k], 0, "Loop scan output"));
  }
}

// ---------------------------------------------------------------------------------------------
// Scan

struct ScanResult {
  std::vector<Datum> states;
  std::vector<std::vector<Tensor>> elems;  // per scan output, in iteration order
};

// Runs `steps` iterations of `body` over the scan inputs (sliced along axes[j], reversed where
// dirs[j] != 0), threading the states.
ScanResult scan_core(KernelContext& ctx, const ir::Graph& body, std::vector<Datum> states,
                     const std::vector<Tensor>& inputs, const std::vector<int64_t>& axes,
                     const std::vector<int64_t>& dirs, int64_t length, int64_t steps) {
  const size_t n = states.size();
  if (body.inputs.size() != n + inputs.size())
    ctx.fail_invalid("body takes " + std::to_string(body.inputs.size()) + " inputs, expected " +
                     std::to_string(n + inputs.size()));
  if (body.outputs.size() < n) ctx.fail_invalid("body has fewer outputs than state variables");
  const size_t k_out = body.outputs.size() - n;
  ScanResult r;
  r.elems.resize(k_out);
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<Datum> args = states;
    for (size_t j = 0; j < inputs.size(); ++j) {
      const int64_t idx = dirs[j] ? length - 1 - t : t;
      args.emplace_back(slice_axis(ctx, inputs[j], axes[j], idx));
    }
    std::vector<Datum> outs = ctx.run_subgraph(body, std::move(args));
    for (size_t i = 0; i < n; ++i) states[i] = std::move(outs[i]);
    for (size_t k = 0; k < k_out; ++k)
      r.elems[k].push_back(datum_tensor(ctx, outs[n + k], "scan output " + std::to_string(k)));
  }
  r.states = std::move(states);
  return r;
}

std::vector<int64_t> dir_attr(const KernelContext& ctx, const char* name, size_t count) {
  std::vector<int64_t> v = ctx.attr_ints(name, std::vector<int64_t>(count, 0));
  if (v.size() != count)
    ctx.fail_invalid(std::string("attribute '") + name + "' must have " + std::to_string(count) + " entries");
  for (int64_t d : v)
    if (d != 0 && d != 1) ctx.fail_invalid(std::string("attribute '") + name + "' entries must be 0 or 1");
  return v;
}

void scan9_kernel(KernelContext& ctx) {
  const ir::Graph* body = ctx.attr_graph("body");
  if (!body) ctx.fail_invalid("attribute 'body' is required");
  const int64_t m = ctx.require_int("num_scan_inputs");
  if (m < 1 || static_cast<size_t>(m) > ctx.num_inputs()) ctx.fail_invalid("bad num_scan_inputs");
  const size_t n = ctx.num_inputs() - static_cast<size_t>(m);
  std::vector<Datum> states;
  for (size_t i = 0; i < n; ++i) states.push_back(ctx.input_datum(i));
  std::vector<Tensor> inputs;
  for (size_t j = 0; j < static_cast<size_t>(m); ++j) inputs.push_back(ctx.input(n + j));
  std::vector<int64_t> axes = ctx.attr_ints("scan_input_axes", std::vector<int64_t>(inputs.size(), 0));
  if (axes.size() != inputs.size()) ctx.fail_invalid("scan_input_axes must have num_scan_inputs entries");
  std::vector<int64_t> dirs = dir_attr(ctx, "scan_input_directions", inputs.size());
  int64_t length = -1;
  for (size_t j = 0; j < inputs.size(); ++j) {
    axes[j] = normalize_axis(ctx, axes[j], inputs[j].rank());
    const int64_t l = inputs[j].dim(axes[j]);
    if (length >= 0 && l != length) ctx.fail_invalid("scan inputs have different sequence lengths");
    length = l;
  }
  if (body->outputs.size() < n) ctx.fail_invalid("body has fewer outputs than state variables");
  const size_t k_out = body->outputs.size() - n;
  std::vector<int64_t> out_axes = ctx.attr_ints("scan_output_axes", std::vector<int64_t>(k_out, 0));
  if (out_axes.size() != k_out) ctx.fail_invalid("scan_output_axes must have one entry per scan output");
  std::vector<int64_t> out_dirs = dir_attr(ctx, "scan_output_directions", k_out);
  ScanResult r = scan_core(ctx, *body, std::move(states), inputs, axes, dirs, length, length);
  for (size_t i = 0; i < n && i < ctx.num_outputs(); ++i) ctx.set_output_datum(i, std::move(r.states[i]));
  for (size_t k = 0; k < k_out && n + k < ctx.num_outputs(); ++k) {
    if (!ctx.wants_output(n + k)) continue;
    std::vector<Tensor>& el = r.elems[k];
    if (el.empty()) {
      Tensor e = empty_stacked(ctx, *body, n + k, "Scan");
      const int64_t ax = out_axes[k] < 0 ? out_axes[k] + e.rank() : out_axes[k];
      if (ax < 0 || ax >= e.rank()) ctx.fail_invalid("scan_output_axes entry out of range");
      Shape s = e.shape();
      s.erase(s.begin());
      s.insert(s.begin() + ax, 0);
      ctx.set_output(n + k, new_tensor(ctx, e.dtype(), s));
      continue;
    }
    const int64_t ax = normalize_axis(ctx, out_axes[k], el[0].rank() + 1);
    if (out_dirs[k]) std::reverse(el.begin(), el.end());
    ctx.set_output(n + k, stack_axis(ctx, el, ax, "Scan output"));
  }
}

// Opset 8: inputs (sequence_lens?, states..., scan inputs...) all with a leading batch axis; the
// scan axis is 1. Scan outputs past a batch entry's sequence length are zero.
void scan8_kernel(KernelContext& ctx) {
  const ir::Graph* body = ctx.attr_graph("body");
  if (!body) ctx.fail_invalid("attribute 'body' is required");
  const int64_t m = ctx.require_int("num_scan_inputs");
  if (m < 1 || static_cast<size_t>(m) + 1 > ctx.num_inputs()) ctx.fail_invalid("bad num_scan_inputs");
  const size_t n = ctx.num_inputs() - 1 - static_cast<size_t>(m);
  std::vector<int64_t> dirs = dir_attr(ctx, "directions", static_cast<size_t>(m));
  std::vector<Tensor> states, inputs;
  for (size_t i = 0; i < n; ++i) states.push_back(ctx.input(1 + i));
  for (size_t j = 0; j < static_cast<size_t>(m); ++j) inputs.push_back(ctx.input(1 + n + j));
  int64_t batch = -1, max_len = -1;
  for (const Tensor& t : states) {
    if (t.rank() < 1) ctx.fail_invalid("state variables need a batch axis");
    if (batch >= 0 && t.dim(0) != batch) ctx.fail_invalid("inputs disagree on the batch size");
    batch = t.dim(0);
  }
  for (const Tensor& t : inputs) {
    if (t.rank() < 2) ctx.fail_invalid("scan inputs need batch and sequence axes");
    if (batch >= 0 && t.dim(0) != batch) ctx.fail_invalid("inputs disagree on the batch size");
    if (max_len >= 0 && t.dim(1) != max_len) ctx.fail_invalid("scan inputs have different sequence lengths");
    batch = t.dim(0);
    max_len = t.dim(1);
  }
  std::vector<int64_t> lens(static_cast<size_t>(batch), max_len);
  if (ctx.has_input(0)) {
    lens = to_int_vector(ctx.input(0));
    if (static_cast<int64_t>(lens.size()) != batch) ctx.fail_invalid("sequence_lens must have one entry per batch");
    for (int64_t l : lens)
      if (l < 0 || l > max_len) ctx.fail_invalid("sequence_lens entry out of range");
  }
  if (body->outputs.size() < n) ctx.fail_invalid("body has fewer outputs than state variables");
  const size_t k_out = body->outputs.size() - n;
  std::vector<std::vector<Tensor>> final_states(n), outs(k_out);
  std::vector<std::vector<std::vector<Tensor>>> per_batch(k_out);
  std::vector<Shape> elem_shape(k_out);
  std::vector<DType> elem_dtype(k_out, DType::undefined);
  std::vector<int64_t> axes(inputs.size(), 0);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Datum> st;
    for (const Tensor& t : states) st.emplace_back(slice_axis(ctx, t, 0, b));
    std::vector<Tensor> in;
    for (const Tensor& t : inputs) in.push_back(slice_axis(ctx, t, 0, b));
    const int64_t len = lens[static_cast<size_t>(b)];
    // With a shorter sequence, reverse iteration starts at the last valid element.
    ScanResult r = scan_core(ctx, *body, std::move(st), in, axes, dirs, len, len);
    for (size_t i = 0; i < n; ++i) final_states[i].push_back(datum_tensor(ctx, r.states[i], "state output"));
    for (size_t k = 0; k < k_out; ++k) {
      if (!r.elems[k].empty()) {
        elem_shape[k] = r.elems[k][0].shape();
        elem_dtype[k] = r.elems[k][0].dtype();
      }
      per_batch[k].push_back(std::move(r.elems[k]));
    }
  }
  for (size_t i = 0; i < n && i < ctx.num_outputs(); ++i)
    if (ctx.wants_output(i)) ctx.set_output(i, stack_axis(ctx, final_states[i], 0, "Scan state"));
  for (size_t k = 0; k < k_out && n + k < ctx.num_outputs(); ++k) {
    if (!ctx.wants_output(n + k)) continue;
    if (elem_dtype[k] == DType::undefined) {
      Tensor e = empty_stacked(ctx, *body, n + k, "Scan");
      Shape s = e.shape();
      s[0] = max_len;
      s.insert(s.begin(), batch);
      ctx.set_output(n + k, new_tensor(ctx, e.dtype(), s));
      continue;
    }
    std::vector<Tensor> rows;
    for (auto& el : per_batch[k]) {
      while (static_cast<int64_t>(el.size()) < max_len) el.push_back(new_tensor(ctx, elem_dtype[k], elem_shape[k]));
      rows.push_back(stack_axis(ctx, el, 0, "Scan output"));
    }
    ctx.set_output(n + k, stack_axis(ctx, rows, 0, "Scan output"));
  }
}

void scan_kernel(KernelContext& ctx) {
  if (ctx.opset < 9) scan8_kernel(ctx);
  else scan9_kernel(ctx);
}

// ---------------------------------------------------------------------------------------------
// Sequences

const Datum& seq_input(const KernelContext& ctx, size_t i) {
  const Datum& d = ctx.input_datum(i);
  if (d.kind != Datum::Kind::sequence) ctx.fail_invalid("input " + std::to_string(i) + " must be a sequence");
  return d;
}

// Position input (int32/int64 scalar) normalized to [0, n) (or [0, n] when `allow_end`).
int64_t seq_position(const KernelContext& ctx, size_t i, int64_t n, bool allow_end) {
  const Tensor& p = ctx.input(i);
  if (p.dtype() != DType::int32 && p.dtype() != DType::int64) ctx.fail_invalid("position must be int32 or int64");
  int64_t pos = scalar_i64(ctx, p, "position");
  const int64_t hi = allow_end ? n : n - 1;
  if (pos < -n || pos > hi)
    ctx.fail_invalid("position " + std::to_string(pos) + " is out of range for a sequence of length " +
                     std::to_string(n));
  return pos < 0 ? pos + n : pos;
}

void sequence_construct_kernel(KernelContext& ctx) {
  std::vector<Tensor> items;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    items.push_back(ctx.input(i));
    if (items.back().dtype() != items[0].dtype()) ctx.fail_invalid("inputs have different types");
  }
  if (items.empty()) ctx.fail_invalid("needs at least one input");
  DType dt = items[0].dtype();
  ctx.set_output_datum(0, Datum::make_sequence(std::move(items), dt));
}

void sequence_empty_kernel(KernelContext& ctx) {
  const int64_t dt = ctx.attr_int("dtype", static_cast<int64_t>(DType::float32));
  if (!dtype_supported(static_cast<int32_t>(dt))) ctx.fail_unsupported("dtype " + dtype_name(static_cast<int32_t>(dt)));
  ctx.set_output_datum(0, Datum::make_sequence({}, static_cast<DType>(dt)));
}

void sequence_at_kernel(KernelContext& ctx) {
  const Datum& s = seq_input(ctx, 0);
  const int64_t n = static_cast<int64_t>(s.sequence.size());
  ctx.set_output(0, s.sequence[static_cast<size_t>(seq_position(ctx, 1, n, false))]);
}

void sequence_insert_kernel(KernelContext& ctx) {
  const Datum& s = seq_input(ctx, 0);
  const Tensor& t = ctx.input(1);
  if (s.elem_dtype != DType::undefined && t.dtype() != s.elem_dtype)
    ctx.fail_invalid("tensor type " + dtype_name(t.dtype()) + " does not match the sequence type " +
                     dtype_name(s.elem_dtype));
  const int64_t n = static_cast<int64_t>(s.sequence.size());
  const int64_t pos = ctx.has_input(2) ? seq_position(ctx, 2, n, true) : n;
  std::vector<Tensor> items = s.sequence;
  items.insert(items.begin() + pos, t);
  ctx.set_output_datum(0, Datum::make_sequence(std::move(items), t.dtype()));
}

void sequence_erase_kernel(KernelContext& ctx) {
  const Datum& s = seq_input(ctx, 0);
  const int64_t n = static_cast<int64_t>(s.sequence.size());
  if (n == 0) ctx.fail_invalid("cannot erase from an empty sequence");
  const int64_t pos = ctx.has_input(1) ? seq_position(ctx, 1, n, false) : n - 1;
  std::vector<Tensor> items = s.sequence;
  items.erase(items.begin() + pos);
  ctx.set_output_datum(0, Datum::make_sequence(std::move(items), s.elem_dtype));
}

void sequence_length_kernel(KernelContext& ctx) {
  const Datum& s = seq_input(ctx, 0);
  ctx.set_output(0, i64_scalar(ctx, static_cast<int64_t>(s.sequence.size())));
}

void split_to_sequence_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 1) ctx.fail_invalid("input must have rank >= 1");
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  const int64_t dim = x.dim(axis);
  std::vector<int64_t> lens;
  bool squeeze = false;
  if (ctx.has_input(1)) {
    const Tensor& sp = ctx.input(1);
    if (sp.dtype() != DType::int32 && sp.dtype() != DType::int64) ctx.fail_invalid("split must be int32 or int64");
    std::vector<int64_t> v = to_int_vector(sp);
    if (sp.rank() == 0) {
      if (v[0] <= 0) ctx.fail_invalid("split must be positive");
      for (int64_t at = 0; at < dim; at += v[0]) lens.push_back(std::min(v[0], dim - at));
    } else if (sp.rank() == 1) {
      int64_t sum = 0;
      for (int64_t l : v) {
        if (l < 0) ctx.fail_invalid("split lengths must be non-negative");
        sum += l;
      }
      if (sum != dim)
        ctx.fail_invalid("split lengths sum to " + std::to_string(sum) + ", the axis has " + std::to_string(dim));
      lens = v;
    } else {
      ctx.fail_invalid("split must be a scalar or 1-D");
    }
  } else {
    lens.assign(static_cast<size_t>(dim), 1);
    squeeze = ctx.attr_int("keepdims", 1) == 0;
  }
  const auto a = static_cast<size_t>(axis);
  const int64_t outer = prod(x.shape(), 0, a);
  const size_t inner = static_cast<size_t>(prod(x.shape(), a + 1, x.shape().size())) * dtype_size(x.dtype());
  std::vector<Tensor> items;
  int64_t start = 0;
  for (int64_t l : lens) {
    Shape s = x.shape();
    s[a] = l;
    Tensor t = new_tensor(ctx, x.dtype(), s);
    for (int64_t o = 0; o < outer; ++o)
      copy_bytes(mbytes(t) + static_cast<size_t>(o * l) * inner, cbytes(x) + static_cast<size_t>(o * dim + start) * inner,
                 static_cast<size_t>(l) * inner);
    if (squeeze) {
      s.erase(s.begin() + axis);
      t = t.reshaped(s);
    }
    items.push_back(std::move(t));
    start += l;
  }
  ctx.set_output_datum(0, Datum::make_sequence(std::move(items), x.dtype()));
}

void concat_from_sequence_kernel(KernelContext& ctx) {
  const Datum& s = seq_input(ctx, 0);
  if (s.sequence.empty()) ctx.fail_invalid("cannot concatenate an empty sequence");
  const int64_t axis = ctx.require_int("axis");
  const bool new_axis = ctx.attr_int("new_axis", 0) != 0;
  const int64_t rank = s.sequence[0].rank();
  if (new_axis) {
    ctx.set_output(0, stack_axis(ctx, s.sequence, normalize_axis(ctx, axis, rank + 1), "ConcatFromSequence"));
  } else {
    if (rank < 1) ctx.fail_invalid("cannot concatenate scalars without new_axis");
    ctx.set_output(0, concat_axis(ctx, s.sequence, normalize_axis(ctx, axis, rank), "ConcatFromSequence"));
  }
}

void sequence_map_kernel(KernelContext& ctx) {
  const ir::Graph* body = ctx.attr_graph("body");
  if (!body) ctx.fail_invalid("attribute 'body' is required");
  const Datum& s0 = seq_input(ctx, 0);
  const size_t n = s0.sequence.size();
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const Datum& d = ctx.input_datum(i);
    if (d.kind == Datum::Kind::sequence && d.sequence.size() != n)
      ctx.fail_invalid("input sequences have different lengths");
    if (d.kind == Datum::Kind::none) ctx.fail_invalid("input " + std::to_string(i) + " is an empty optional");
  }
  std::vector<std::vector<Tensor>> outs(body->outputs.size());
  for (size_t it = 0; it < n; ++it) {
    std::vector<Datum> args;
    args.emplace_back(s0.sequence[it]);
    for (size_t i = 1; i < ctx.num_inputs(); ++i) {
      const Datum& d = ctx.input_datum(i);
      if (d.kind == Datum::Kind::sequence) args.emplace_back(d.sequence[it]);
      else args.push_back(d);
    }
    std::vector<Datum> r = ctx.run_subgraph(*body, std::move(args));
    for (size_t k = 0; k < r.size(); ++k) outs[k].push_back(datum_tensor(ctx, r[k], "body output"));
  }
  if (ctx.num_outputs() > outs.size()) ctx.fail_invalid("node has more outputs than the body produces");
  for (size_t k = 0; k < ctx.num_outputs(); ++k) {
    DType dt = outs[k].empty() ? body->values[static_cast<size_t>(body->outputs[k])].type.dtype : outs[k][0].dtype();
    ctx.set_output_datum(k, Datum::make_sequence(std::move(outs[k]), dt));
  }
}

// ---------------------------------------------------------------------------------------------
// Optionals

void optional_kernel(KernelContext& ctx) {
  if (ctx.has_input(0)) ctx.set_output_datum(0, ctx.input_datum(0));
  else ctx.set_output_datum(0, Datum::make_none());
}

void optional_has_element_kernel(KernelContext& ctx) {
  const bool has = ctx.has_input(0) && ctx.input_datum(0).kind != Datum::Kind::none;
  ctx.set_output(0, bool_scalar(ctx, has));
}

void optional_get_element_kernel(KernelContext& ctx) {
  const Datum& d = ctx.input_datum(0);
  if (d.kind == Datum::Kind::none) ctx.fail_invalid("the optional input is empty");
  ctx.set_output_datum(0, d);
}

}  // namespace

void add_control_rnn_kernels(KernelTable& t);  // ops_control_rnn.cc

void add_control_kernels(KernelTable& t) {
  t.add(OpKind::If, if_kernel);
  t.add(OpKind::Loop, loop_kernel);
  t.add(OpKind::Scan, scan_kernel);
  t.add(OpKind::SequenceConstruct, sequence_construct_kernel);
  t.add(OpKind::SequenceEmpty, sequence_empty_kernel);
  t.add(OpKind::SequenceAt, sequence_at_kernel);
  t.add(OpKind::SequenceInsert, sequence_insert_kernel);
  t.add(OpKind::SequenceErase, sequence_erase_kernel);
  t.add(OpKind::SequenceLength, sequence_length_kernel);
  t.add(OpKind::SplitToSequence, split_to_sequence_kernel);
  t.add(OpKind::ConcatFromSequence, concat_from_sequence_kernel);
  t.add(OpKind::SequenceMap, sequence_map_kernel);
  t.add(OpKind::Optional, optional_kernel);
  t.add(OpKind::OptionalHasElement, optional_has_element_kernel);
  t.add(OpKind::OptionalGetElement, optional_get_element_kernel);
  add_control_rnn_kernels(t);
}

}  // namespace tac::ref
