#include "builder/precision.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "backends/cuda/device.h"
#include "builder/passes/pass.h"
#include "core/tensor_cache.h"
#include "io/test_case.h"
#include "kernels/tactic.h"
#include "kernels/tactic_check.h"
#include "reference/interpreter.h"

namespace tac::builder {

namespace {

using ir::OpKind;

const ir::Value& value(const ir::Graph& g, int v) { return g.values[static_cast<size_t>(v)]; }

bool known_f32(const ir::Graph& g, int v, size_t min_rank) {
  if (v == ir::kNoValue) return false;
  const ir::ValueType& t = value(g, v).type;
  if (t.kind != ir::ValueKind::tensor || t.dtype != DType::float32 || !t.has_shape || t.dims.size() < min_rank)
    return false;
  for (const ir::Dim& d : t.dims)
    if (!d.known() || d.value <= 0) return false;
  return true;
}
bool is_const(const ir::Graph& g, int v) { return v != ir::kNoValue && value(g, v).initializer.has_value(); }
bool present(const ir::Node& n, size_t i) { return i < n.inputs.size() && n.inputs[i] != ir::kNoValue; }

bool is_conv(const ir::Node& n) { return n.op == OpKind::Conv || n.op == OpKind::FusedConv; }
bool is_matmul(const ir::Node& n) { return n.op == OpKind::MatMul || n.op == OpKind::FusedMatMul; }

// Index of the residual input (FusedConv / FusedMatMul input 3, Gemm's C), or -1.
int residual_index(const ir::Node& n) {
  if (n.op == OpKind::FusedConv || n.op == OpKind::FusedMatMul) return 3;
  if (n.op == OpKind::Gemm) return 2;
  return -1;
}

std::string unique_value_name(const ir::Graph& g, const std::string& base) {
  std::string name = base;
  for (int k = 2; g.find_value(name) != ir::kNoValue; ++k) name = base + "_" + std::to_string(k);
  return name;
}
// A new (non-constant) value with `like`'s shape and dtype `dt`.
int add_value_like(ir::Graph& g, int like, const std::string& base, DType dt) {
  const std::string name = unique_value_name(g, base);
  ir::ValueType t = value(g, like).type;  // copy first: get_or_add_value grows g.values
  t.dtype = dt;
  const int v = g.get_or_add_value(name);
  g.values[static_cast<size_t>(v)].type = t;
  return v;
}

ir::Attribute int_attr(int64_t i) {
  ir::Attribute a;
  a.type = ir::Attribute::Type::i;
  a.i = i;
  return a;
}

// Constants derived from a weight (its bf16 / fp16 copy, its int8 quantization and scales), kept
// across builds while set_derived_constant_cache_bytes says (core/tensor_cache.h), keyed by how
// they were derived.
TensorCache<std::string, std::vector<Tensor>>& derived_constants() {
  static TensorCache<std::string, std::vector<Tensor>> c;
  return c;
}
std::vector<Tensor> derived(const Tensor& w, const std::string& how, const std::function<std::vector<Tensor>()>& make) {
  return derived_constants().get(w, how, make, [](const std::vector<Tensor>& out) {
    size_t bytes = 0;
    for (const Tensor& t : out) bytes += t.bytes();
    return bytes;
  });
}

// An fp32 constant in bf16 or fp16 (round to nearest even).
Tensor to_low(const Tensor& t, DType low) {
  Tensor out = Tensor::create(low, t.shape()).value();
  const float* src = t.data<float>();
  if (low == DType::float16) {
    Float16* dst = out.data<Float16>();
    for (int64_t i = 0; i < t.numel(); ++i) dst[i] = Float16(src[i]);
  } else {
    BFloat16* dst = out.data<BFloat16>();
    for (int64_t i = 0; i < t.numel(); ++i) dst[i] = BFloat16(src[i]);
  }
  return out;
}

bool is_low(DType t) { return t == DType::bfloat16 || t == DType::float16; }
const char* low_suffix(DType t) { return t == DType::float16 ? ".fp16" : ".bf16"; }
DType low_dtype(const std::string& p) { return p == "fp16" ? DType::float16 : DType::bfloat16; }

struct Rewriter {
  ir::Graph& g;
  PrecisionReport* report;
  std::set<std::string> node_names;
  std::vector<ir::Node> added;
  std::map<std::pair<int, DType>, int> low_of;  // (fp32 value, bf16/fp16) -> its Cast (one per value)
  std::map<std::pair<int, int>, int> quantized_of;  // (fp32 value, u8?) -> QuantizeLinear output

  std::string unique_node_name(const std::string& base) {
    std::string name = base;
    for (int k = 2; node_names.count(name); ++k) name = base + "_" + std::to_string(k);
    node_names.insert(name);
    return name;
  }
  void add_node(std::string name, OpKind op, std::vector<int> inputs, int output, std::map<std::string, ir::Attribute> attrs) {
    ir::Node c;
    c.name = unique_node_name(name);
    c.op = op;
    c.op_type = ir::op_name(op);
    c.opset = 19;
    c.inputs = std::move(inputs);
    c.outputs = {output};
    c.attrs = std::move(attrs);
    added.push_back(std::move(c));
  }
  // The bf16 / fp16 version of fp32 activation `v` (a Cast node, shared by every consumer).
  int cast_to_low(int v, DType low) {
    auto it = low_of.find({v, low});
    if (it != low_of.end()) return it->second;
    const std::string base = value(g, v).name;
    const int out = add_value_like(g, v, base + low_suffix(low), low);
    add_node(base + (low == DType::float16 ? ".to_fp16" : ".to_bf16"), OpKind::Cast, {v}, out,
             {{"to", int_attr(static_cast<int64_t>(low))}});
    low_of[{v, low}] = out;
    return out;
  }
  int low_constant(int v, DType low) {
    const Tensor& w = *value(g, v).initializer;
    Tensor lw = derived(w, dtype_name(low), [&] { return std::vector<Tensor>{to_low(w, low)}; })[0];
    return add_constant(g, value(g, v).name + low_suffix(low), std::move(lw));
  }
  // `n`'s fp32 output k becomes a `low` value; a Cast writes the fp32 value for the consumers.
  void cast_output_back(ir::Node& n, size_t k, DType low) {
    const int y = n.outputs[k];
    const int y16 = add_value_like(g, y, value(g, y).name + low_suffix(low), low);
    n.outputs[k] = y16;
    add_node(n.name + (k ? ".out" + std::to_string(k) : std::string()) + ".to_fp32", OpKind::Cast, {y16}, y,
             {{"to", int_attr(static_cast<int64_t>(DType::float32))}});
  }

  // Node `n` computes in bf16 / fp16: inputs cast, weights converted, output cast back.
  void lower_low(ir::Node& n, DType low) {
    const int res = residual_index(n);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const int v = n.inputs[i];
      if (v == ir::kNoValue) continue;
      const bool operand = i == 0 || i == 1 || static_cast<int>(i) == res;  // bias stays fp32
      if (!operand) continue;
      n.inputs[i] = is_const(g, v) ? low_constant(v, low) : cast_to_low(v, low);
    }
    cast_output_back(n, 0, low);
    ++(low == DType::float16 ? report->fp16_nodes : report->bf16_nodes);
  }

  // The calibrated range of n's activation input (placeholders without calibration: the knob
  // space needs only the graph's structure), its |max| 1 where the data gave none usable.
  Result<Calibration::Range> input_range(const ir::Node& n, const Calibration* calib) const {
    Calibration::Range range{1.0f, false};
    if (calib) {
      const std::string& name = value(g, n.inputs[0]).name;
      auto it = calib->ranges.find(name);
      if (it == calib->ranges.end()) return internal_error(n.label() + ": no calibration range for input '" + name + "'");
      range = it->second;
    }
    if (!(range.absmax > 0 && std::isfinite(range.absmax))) range.absmax = 1.0f;
    return range;
  }

  // Node `n` computes in fp8 on CUDA (see precision.h): as in fp16, marked for the cublaslt_fp8
  // tactics with the calibrated |max| of its activation input.
  Status lower_fp8(ir::Node& n, const Calibration* calib) {
    if (!fp8_candidate(g, n))
      return invalid_argument("precision." + n.name + "=fp8: " + n.label() +
                              " cannot compute in fp8 (needs constant 2-D weights with both dims multiples of 16)");
    TAC_ASSIGN_OR_RETURN(const Calibration::Range range, input_range(n, calib));
    lower_low(n, DType::float16);
    --report->fp16_nodes;
    ++report->fp8_nodes;
    ir::Attribute math;
    math.type = ir::Attribute::Type::s;
    math.s = "fp8";
    n.attrs["tac_math"] = math;
    ir::Attribute amax;
    amax.type = ir::Attribute::Type::f;
    amax.f = range.absmax;
    n.attrs["tac_fp8_amax"] = amax;
    return Status::ok();
  }

  // Node `n` computes in int8 (see precision.h).
  Status lower_int8(ir::Node& n, const Calibration* calib) {
    if (n.op == OpKind::Conv) {
      n.op = OpKind::FusedConv;
      n.op_type = ir::op_name(OpKind::FusedConv);
      n.domain = ir::kInternalDomain;
    } else if (n.op == OpKind::MatMul) {
      n.op = OpKind::FusedMatMul;
      n.op_type = ir::op_name(OpKind::FusedMatMul);
      n.domain = ir::kInternalDomain;
    }
    const int x = n.inputs[0];
    TAC_ASSIGN_OR_RETURN(const Calibration::Range range, input_range(n, calib));
    const bool u8 = range.nonnegative;
    const float absmax = range.absmax;
    const float x_scale = absmax / (u8 ? 255.0f : 127.0f);
    // Weights: symmetric per output channel (conv: W's axis 0; matmul: B's column, or its row
    // with transB).
    const Tensor w = *value(g, n.inputs[1]).initializer;
    const bool trans_b = n.op == OpKind::FusedMatMul && n.attr("transB") && n.attr("transB")->i != 0;
    const Shape& ws = w.shape();
    int64_t channels, inner, stride_c, stride_i;  // element (c, i) at c * stride_c + i * stride_i
    if (is_conv(n) || trans_b) {
      channels = ws[0];
      inner = w.numel() / channels;
      stride_c = inner;
      stride_i = 1;
    } else {
      channels = ws.back();
      inner = w.numel() / channels;
      stride_c = 1;
      stride_i = channels;
    }
    auto quantize = [&] {
      Tensor wq = Tensor::create(DType::int8, ws).value();
      Tensor scales = Tensor::create(DType::float32, {channels}).value();
      const float* wf = w.data<float>();
      int8_t* wqp = wq.data<int8_t>();
      for (int64_t c = 0; c < channels; ++c) {
        float m = 0;
        for (int64_t i = 0; i < inner; ++i) m = std::max(m, std::fabs(wf[c * stride_c + i * stride_i]));
        const float s = m > 0 ? m / 127.0f : 1.0f;
        scales.data<float>()[c] = s;
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t k = c * stride_c + i * stride_i;
          wqp[k] = static_cast<int8_t>(std::clamp(std::nearbyint(wf[k] / s), -127.0f, 127.0f));
        }
      }
      return std::vector<Tensor>{std::move(wq), std::move(scales)};
    };
    const std::vector<Tensor> q = derived(w, stride_c == 1 ? "s8/columns" : "s8/rows", quantize);
    const float* sp = q[1].data<float>();
    std::vector<float> w_scales(sp, sp + channels);
    n.inputs[1] = add_constant(g, value(g, n.inputs[1]).name + ".s8", q[0]);
    // Activation: one QuantizeLinear per (value, signedness), shared by its consumers.
    auto key = std::make_pair(x, u8 ? 1 : 0);
    auto it = quantized_of.find(key);
    // Consumers sharing a quantized input must agree on its scale; they do (one range per value).
    if (it == quantized_of.end()) {
      const std::string base = value(g, x).name;
      Tensor scale = Tensor::create(DType::float32, {}).value();
      scale.data<float>()[0] = x_scale;
      Tensor zp = Tensor::create(u8 ? DType::uint8 : DType::int8, {}).value();  // zeros
      const int sv = add_constant(g, base + ".scale", std::move(scale));
      const int zv = add_constant(g, base + ".zero_point", std::move(zp));
      const int q = add_value_like(g, x, base + (u8 ? ".u8" : ".s8"), u8 ? DType::uint8 : DType::int8);
      add_node(base + ".quantize", OpKind::QuantizeLinear, {x, sv, zv}, q, {});
      it = quantized_of.emplace(key, q).first;
      ++report->quantizes;
    }
    n.inputs[0] = it->second;
    ir::Attribute xs;
    xs.type = ir::Attribute::Type::f;
    xs.f = x_scale;
    n.attrs["x_scale"] = xs;
    ir::Attribute wsa;
    wsa.type = ir::Attribute::Type::floats;
    wsa.floats = std::move(w_scales);
    n.attrs["w_scales"] = wsa;
    ++report->int8_nodes;
    return Status::ok();
  }
};

// Drops Cast(low->fp32) -> Cast(fp32->low) pairs (low: bf16 or fp16, the same on both sides): the
// second reads the first's input instead.
Status cancel_casts(ir::Graph& g, PrecisionReport* report) {
  std::vector<bool> dead(g.nodes.size(), false);
  int cancelled = 0;
  for (const ir::Node& n : g.nodes) {
    if (n.op != OpKind::Cast || n.inputs.size() != 1 || n.outputs.size() != 1) continue;
    const int src = n.inputs[0];
    const DType low = value(g, n.outputs[0]).type.dtype;
    if (value(g, src).type.dtype != DType::float32 || !is_low(low)) continue;
    const int p = value(g, src).producer;
    if (p < 0) continue;
    const ir::Node& up = g.nodes[static_cast<size_t>(p)];
    if (up.op != OpKind::Cast || value(g, up.inputs[0]).type.dtype != low) continue;
    replace_uses(g, n.outputs[0], up.inputs[0]);
    dead[static_cast<size_t>(n.index)] = true;
    ++cancelled;
  }
  if (cancelled) report->log.push_back("precision: " + std::to_string(cancelled) + " cast pairs cancelled");
  return cancelled ? remove_nodes(g, dead) : Status::ok();
}

// An int8 node whose fp32 output only feeds one QuantizeLinear (the next int8 node's input)
// writes the quantized values itself: attributes y_scale and y_dtype, the QuantizeLinear goes.
// Not with a residual (it is fp32, added before the output is quantized, which oneDNN's int8
// sum post-op would read in the output's type).
Status chain_int8(ir::Graph& g, PrecisionReport* report) {
  const auto users = value_users(g);
  std::vector<bool> dead(g.nodes.size(), false);
  int chained = 0;
  for (ir::Node& a : g.nodes) {
    if (!a.attr("x_scale") || a.attr("y_scale") || a.outputs.size() != 1) continue;
    if (a.op == OpKind::FusedConv || a.op == OpKind::FusedMatMul)
      if (present(a, 3)) continue;
    const int y = a.outputs[0];
    if (!has_single_user(users, y)) continue;
    ir::Node& q = g.nodes[static_cast<size_t>(users[static_cast<size_t>(y)][0])];
    if (q.op != OpKind::QuantizeLinear || q.inputs.size() != 3 || q.inputs[0] != y) continue;
    const Tensor* scale = constant_of(g, q.inputs[1]);
    const Tensor* zp = constant_of(g, q.inputs[2]);
    if (!scale || !zp || scale->numel() != 1 || zp->numel() != 1 || zp->get_f64(0) != 0) continue;
    ir::Attribute ys;
    ys.type = ir::Attribute::Type::f;
    ys.f = scale->data<float>()[0];
    a.attrs["y_scale"] = ys;
    a.attrs["y_dtype"] = int_attr(static_cast<int64_t>(zp->dtype()));
    a.outputs[0] = q.outputs[0];
    dead[static_cast<size_t>(q.index)] = true;
    ++chained;
  }
  if (!chained) return Status::ok();
  report->quantizes -= chained;
  report->log.push_back("precision: " + std::to_string(chained) + " int8 nodes write int8 for the next one (QuantizeLinear absorbed)");
  return remove_nodes(g, dead);
}


// CUDA: which ops follow their neighbours into bf16 / fp16 (their CUDA kernels take fp32, fp16
// and bf16), and which of their inputs are float operands, converted with them (LayerNorm's
// scale and bias and Clip's bounds too, as ONNX types them like x; shapes, indices and the
// starts of a Slice keep their types).
bool follows_low(const ir::Node& n, size_t input) {
  switch (n.op) {
    case OpKind::Relu: case OpKind::Sigmoid: case OpKind::Tanh: case OpKind::Erf: case OpKind::Exp: case OpKind::Neg:
    case OpKind::Abs: case OpKind::Sqrt: case OpKind::Reciprocal: case OpKind::Gelu: case OpKind::LeakyRelu:
    case OpKind::HardSigmoid: case OpKind::HardSwish: case OpKind::Softmax:
    case OpKind::Transpose: case OpKind::Reshape: case OpKind::Flatten: case OpKind::MaxPool: case OpKind::AveragePool:
    case OpKind::GlobalAveragePool: case OpKind::BatchNormalization:  // x only: the parameters stay (folded at prepare)
    case OpKind::Squeeze: case OpKind::Unsqueeze: case OpKind::Identity: case OpKind::Slice: case OpKind::Gather:
      return input == 0;
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Max: case OpKind::Min:
    case OpKind::Concat: case OpKind::LayerNormalization: case OpKind::Clip:
    case OpKind::FusedAttention:  // Q, K, V and the mask (its CUDA kernel takes them in one type)
    case OpKind::FusedElementwise:  // X and the chain's tensor operands (constants in the program stay fp32)
      return true;
    default:
      return false;
  }
}
bool follows_low(const ir::Node& n) {
  const bool ours = n.domain == ir::kInternalDomain && (n.op == OpKind::FusedAttention || n.op == OpKind::FusedElementwise);
  if ((n.domain != "" && !ours) || n.outputs.empty()) return false;
  for (size_t k = 1; k < n.outputs.size(); ++k)
    if (n.outputs[k] != ir::kNoValue) return false;
  return follows_low(n, 0);
}

// CUDA only: an op of follows_low() with an fp32 operand that comes out of Cast(low -> fp32)
// computes in that type too (constant operands converted, other activations cast), and its
// output is cast back. Sweeps until nothing changes, so chains follow; cancel_casts() then drops the pairs, and
// activations stay in bf16 / fp16 between the lowered layers instead of paying two casts around
// every LayerNorm, Softmax, residual Add and reshape.
Status propagate_low(ir::Graph& g, Rewriter& rw, PrecisionReport* report) {
  int followed = 0;
  for (int sweep = 0; sweep < 64; ++sweep) {
    rw.added.clear();
    int changed = 0;
    const size_t n_nodes = g.nodes.size();
    for (size_t ni = 0; ni < n_nodes; ++ni) {
      ir::Node& n = g.nodes[ni];
      if (!follows_low(n) || value(g, n.outputs[0]).type.dtype != DType::float32) continue;
      // The low type of the operands that come out of a Cast(low -> fp32); other fp32 operands
      // (an attention mask computed from an input, say) get a Cast of their own, shared by
      // every consumer, instead of keeping this node -- and the casts around it -- in fp32.
      DType low = DType::undefined;
      bool ok = true;
      auto cast_source = [&](int v) -> int {  // the low value v was cast from, or -1
        const int p = value(g, v).producer;
        const ir::Node* up = p >= 0 ? &g.nodes[static_cast<size_t>(p)] : nullptr;
        return up && up->op == OpKind::Cast && up->inputs.size() == 1 && is_low(value(g, up->inputs[0]).type.dtype)
                   ? up->inputs[0]
                   : -1;
      };
      for (size_t i = 0; i < n.inputs.size() && ok; ++i) {
        const int v = n.inputs[i];
        if (v == ir::kNoValue || !follows_low(n, i)) continue;
        if (value(g, v).type.dtype != DType::float32) ok = false;
        else if (const int src = cast_source(v); src >= 0) {
          const DType t = value(g, src).type.dtype;
          if (low != DType::undefined && low != t) ok = false;
          low = t;
        }
      }
      if (!ok || low == DType::undefined) continue;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const int v = n.inputs[i];
        if (v == ir::kNoValue || !follows_low(n, i)) continue;
        if (is_const(g, v)) n.inputs[i] = value(g, v).initializer->dtype() == DType::float32 ? rw.low_constant(v, low) : v;
        else if (const int src = cast_source(v); src >= 0) n.inputs[i] = src;
        else n.inputs[i] = rw.cast_to_low(v, low);
      }
      rw.cast_output_back(n, 0, low);
      ++changed;
    }
    if (!changed) break;
    followed += changed;
    for (ir::Node& c : rw.added) {
      c.index = static_cast<int>(g.nodes.size());
      g.nodes.push_back(std::move(c));
    }
    rw.added.clear();
    TAC_RETURN_IF_ERROR(g.sort_topologically());
  }
  report->followed_nodes = followed;
  if (!followed) return Status::ok();
  report->log.push_back("precision: " + std::to_string(followed) + " elementwise / movement nodes follow into bf16/fp16");
  // The Casts back to fp32 that nothing reads any more go (remove_nodes drops unused nodes).
  return remove_nodes(g, std::vector<bool>(g.nodes.size(), false));
}

}  // namespace

std::vector<std::string> precision_values(kernels::Backend backend) {
  if (backend != kernels::Backend::cuda) return precision_values();
  std::vector<std::string> v = {"fp32", "tf32", "fp16", "bf16"};
  if (cuda::device_capability() >= kFp8Capability) v.push_back("fp8");
  return v;
}

std::vector<std::string> precision_values() {
  std::vector<std::string> v = {"fp32"};
  if (kernels::cpu_features().avx512_bf16) v.push_back("bf16");
  if (kernels::cpu_features().avx512_vnni) v.push_back("int8");
  return v;
}

std::string stored_precision(const ir::Model& m, kernels::Backend backend) {
  std::map<DType, int64_t> bytes;
  for (const ir::Value& v : m.graph.values)
    if (v.initializer && dtype_is_float(v.initializer->dtype()))
      bytes[v.initializer->dtype()] += v.initializer->numel();
  std::string stored = "fp32";
  if (bytes[DType::float16] > bytes[DType::float32] + bytes[DType::bfloat16]) stored = "fp16";
  if (bytes[DType::bfloat16] > bytes[DType::float32] + bytes[DType::float16]) stored = "bf16";
  const std::vector<std::string> values = precision_values(backend);
  return std::find(values.begin(), values.end(), stored) != values.end() ? stored : "fp32";
}

bool precision_candidate(const ir::Graph& g, const ir::Node& n) {
  if (n.outputs.size() != 1 || !known_f32(g, n.outputs[0], 0)) return false;
  if (!present(n, 0) || !present(n, 1)) return false;
  for (size_t i = 2; i < n.inputs.size(); ++i)
    if (present(n, i) && !known_f32(g, n.inputs[i], 0)) return false;
  if (is_conv(n)) {
    if (!known_f32(g, n.inputs[0], 4) || !known_f32(g, n.inputs[1], 4) || value(g, n.inputs[0]).type.dims.size() != 4)
      return false;
    if (!is_const(g, n.inputs[1])) return false;
    if (n.op == OpKind::FusedConv && present(n, 3)) {  // the residual has the output's shape (no broadcast)
      const auto& r = value(g, n.inputs[3]).type.dims;
      const auto& y = value(g, n.outputs[0]).type.dims;
      if (r != y) return false;
    }
    return true;
  }
  if (is_matmul(n) || n.op == OpKind::Gemm) {
    if (!known_f32(g, n.inputs[0], 2) || !known_f32(g, n.inputs[1], 2)) return false;
    if (n.op == OpKind::Gemm && (value(g, n.inputs[0]).type.dims.size() != 2 || value(g, n.inputs[1]).type.dims.size() != 2))
      return false;
    return true;
  }
  return false;
}

// int8 needs constant weights of the shapes the per-channel scales are defined for.
bool int8_candidate(const ir::Graph& g, const ir::Node& n) {
  if (!precision_candidate(g, n) || n.op == OpKind::Gemm) return false;
  if (!is_const(g, n.inputs[1])) return false;
  if (is_matmul(n) && value(g, n.inputs[1]).type.dims.size() != 2) return false;
  return true;
}

bool fp8_candidate(const ir::Graph& g, const ir::Node& n) {
  if (!precision_candidate(g, n) || !is_matmul(n) || !is_const(g, n.inputs[1])) return false;
  const auto& b = value(g, n.inputs[1]).type.dims;
  if (b.size() != 2 || !b[0].known() || !b[1].known()) return false;
  return b[0].value % 16 == 0 && b[1].value % 16 == 0;
}

std::map<std::string, std::string> chosen_precisions(const ir::Graph& g, const RouteView& route,
                                                     std::vector<std::string>* inactive) {
  std::map<std::string, std::string> out;
  const std::string def = route.get(knob::kPrecisionDefault);
  for (const ir::Node& n : g.nodes) {
    if (!precision_candidate(g, n)) continue;
    std::string p = route.get_node(knob::kPrecision, n.name);
    if (p.empty() || p == "default") {
      // The default applies where the node has such a tactic: int8 needs constant weights.
      p = def.empty() ? "fp32" : def;
      if (p == "int8" && !int8_candidate(g, n)) p = "fp32";
      if (p == "fp8" && !fp8_candidate(g, n)) p = "fp16";
    } else if (p == "fp8" && !fp8_candidate(g, n)) {
      if (inactive)
        inactive->push_back("precision." + n.name + "=fp8 (" + n.name +
                            " has no constant 2-D weights with both dims multiples of 16 under this route: it computes in fp16)");
      p = "fp16";
    } else if (p == "int8" && !int8_candidate(g, n)) {
      // The knob offers int8 because the default passes make the weights constant; this
      // route's passes (fold_constants=off) leave them computed.
      if (inactive)
        inactive->push_back("precision." + n.name + "=int8 (" + n.name +
                            " has no constant 2-D/4-D weights under this route: it computes in fp32)");
      p = "fp32";
    }
    out[n.name] = p;
  }
  return out;
}

void set_derived_constant_cache_bytes(size_t bytes) { derived_constants().set_limit(bytes); }

Status apply_precision(ir::Model& m, const std::map<std::string, std::string>& choice, const Calibration* calib,
                       PrecisionReport* report, kernels::Backend backend) {
  ir::Graph& g = m.graph;
  PrecisionReport local;
  if (!report) report = &local;
  Rewriter rw{g, report, {}, {}, {}, {}};
  for (const ir::Node& n : g.nodes) rw.node_names.insert(n.name);
  bool any = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node& n = g.nodes[i];
    auto it = choice.find(n.name);
    if (it == choice.end() || it->second == "fp32") continue;
    const bool cuda = backend == kernels::Backend::cuda;
    if (it->second == "bf16" || (cuda && it->second == "fp16")) {
      if (!precision_candidate(g, n))
        return invalid_argument("precision." + n.name + "=" + it->second + ": " + n.label() + " cannot compute in " + it->second);
      rw.lower_low(n, low_dtype(it->second));
    } else if (cuda && it->second == "tf32") {
      ir::Attribute a;
      a.type = ir::Attribute::Type::s;
      a.s = "tf32";
      n.attrs["tac_math"] = a;  // read by the cuBLASLt and cuDNN tactics (math mode, no casts)
      ++report->tf32_nodes;
    } else if (cuda && it->second == "fp8") {
      TAC_RETURN_IF_ERROR(rw.lower_fp8(n, calib));
    } else if (cuda && it->second == "int8") {
      return invalid_argument("precision." + n.name + "=int8: not on the CUDA backend (fp32, tf32, fp16, bf16)");
    } else if (it->second == "int8") {
      if (!int8_candidate(g, n))
        return invalid_argument("precision." + n.name + "=int8: " + n.label() +
                                " cannot compute in int8 (needs constant 2-D/4-D weights; Gemm stays fp32/bf16)");
      TAC_RETURN_IF_ERROR(rw.lower_int8(n, calib));
    } else {
      return invalid_argument("precision." + n.name + ": unknown precision '" + it->second + "'");
    }
    any = true;
  }
  if (!any) return Status::ok();
  for (ir::Node& c : rw.added) {
    c.index = static_cast<int>(g.nodes.size());
    g.nodes.push_back(std::move(c));
  }
  TAC_RETURN_IF_ERROR(g.sort_topologically());
  if (backend == kernels::Backend::cuda && report->bf16_nodes + report->fp16_nodes + report->fp8_nodes > 0)
    TAC_RETURN_IF_ERROR(propagate_low(g, rw, report));
  TAC_RETURN_IF_ERROR(cancel_casts(g, report));
  TAC_RETURN_IF_ERROR(chain_int8(g, report));
  report->casts = 0;
  for (const ir::Node& n : g.nodes) report->casts += n.op == OpKind::Cast && n.domain.empty() ? 1 : 0;
  report->log.push_back("precision: " + std::to_string(report->bf16_nodes) + " nodes in bf16, " +
                        (backend == kernels::Backend::cuda
                             ? std::to_string(report->fp16_nodes) + " in fp16, " + std::to_string(report->tf32_nodes) +
                                   " in tf32, " + std::to_string(report->fp8_nodes) + " in fp8, "
                             : std::string()) +
                        std::to_string(report->int8_nodes) + " in int8; " + std::to_string(report->casts) + " casts, " +
                        std::to_string(report->quantizes) + " quantizes");
  return Status::ok();
}

Result<std::vector<std::vector<Datum>>> calibration_inputs(const ir::Model& m, size_t max_sets, std::string& source,
                                                           const std::string& dir) {
  std::vector<std::vector<Datum>> sets;
  if (!dir.empty()) {
    auto data = io::load_data_sets(m, dir);
    if (!data) return data.status().with_context("int8 calibration data: ");
    for (size_t i = 0; i < data->size() && i < max_sets; ++i) sets.push_back((*data)[i].inputs);
    source = std::to_string(sets.size()) + " input set(s) of " + dir;
    return sets;
  }
  if (!m.path.empty()) {
    std::string model_dir = m.path;
    if (auto slash = model_dir.find_last_of('/'); slash != std::string::npos) model_dir.resize(slash);
    else model_dir = ".";
    if (io::is_test_dir(model_dir)) {
      // Only the sets whose inputs fit the model as built (a set of batch 2 beside a model whose
      // batch dimension was bound to 1 does not): the others are not calibration data for it.
      auto fits = [&](const std::vector<Datum>& in) {
        if (in.size() != m.graph.inputs.size()) return false;
        for (size_t i = 0; i < in.size(); ++i) {
          const ir::ValueType& t = value(m.graph, m.graph.inputs[i]).type;
          if (!in[i].is_tensor() || in[i].tensor.dtype() != t.dtype || in[i].tensor.shape().size() != t.dims.size())
            return false;
          for (size_t d = 0; d < t.dims.size(); ++d)
            if (t.dims[d].known() && t.dims[d].value != in[i].tensor.shape()[d]) return false;
        }
        return true;
      };
      auto data = io::load_test_data(m, model_dir);
      if (data)
        for (size_t i = 0; i < data->size() && sets.size() < max_sets; ++i)
          if (fits((*data)[i].inputs)) sets.push_back((*data)[i].inputs);
      if (!sets.empty()) {
        source = std::to_string(sets.size()) + " test_data_set input(s) of " + model_dir;
        return sets;
      }
    }
  }
  std::vector<Datum> one;
  for (size_t i = 0; i < m.graph.inputs.size(); ++i) {
    const ir::ValueType& t = value(m.graph, m.graph.inputs[i]).type;
    Shape s;
    for (const ir::Dim& d : t.dims) s.push_back(d.known() ? d.value : 1);
    one.push_back(Datum(kernels::random_tensor(t.dtype, s, 1000 + i)));
  }
  sets.push_back(std::move(one));
  source = "seeded random inputs (normal(0,1), seed 1000+input index)";
  return sets;
}

// p99.9 was tried and dropped: it clipped squeezenet1.1's last activations to cos 0.961 with no
// model better than under max (p99.99: within 0.0002 of max on the zoo, either way).
std::vector<std::string> calibration_methods() { return {"max", "p99.99"}; }

Result<Calibration> calibrate_ranges(const ir::Model& m, const std::vector<std::string>& nodes,
                                     const std::vector<std::vector<Datum>>& input_sets, std::string source,
                                     const std::string& method) {
  const std::vector<std::string> methods = calibration_methods();
  if (std::find(methods.begin(), methods.end(), method) == methods.end())
    return invalid_argument("precision.calibration: unknown method '" + method + "'");
  const double pct = method == "max" ? 100.0 : std::strtod(method.c_str() + 1, nullptr);
  const ir::Graph& g = m.graph;
  std::set<std::string> wanted(nodes.begin(), nodes.end());
  std::set<int> watched;
  for (const ir::Node& n : g.nodes)
    if (wanted.count(n.name) && !n.inputs.empty() && n.inputs[0] != ir::kNoValue) watched.insert(n.inputs[0]);
  Calibration c;
  c.source = std::move(source) + (method == "max" ? "" : ", " + method.substr(1) + "th percentile of |x|");
  std::map<int, std::vector<float>> seen;  // percentiles: every |x| per value
  auto record = [&](int v, const Datum& d) {
    if (!watched.count(v) || !d.is_tensor() || d.tensor.dtype() != DType::float32) return;
    Calibration::Range& r = c.ranges[value(g, v).name];
    const float* p = d.tensor.data<float>();
    std::vector<float>* all = pct < 100.0 ? &seen[v] : nullptr;
    for (int64_t i = 0; i < d.tensor.numel(); ++i) {
      r.absmax = std::max(r.absmax, std::fabs(p[i]));
      r.nonnegative = r.nonnegative && !(p[i] < 0);
      if (all) all->push_back(std::fabs(p[i]));
    }
  };
  for (const std::vector<Datum>& inputs : input_sets) {
    for (size_t i = 0; i < inputs.size() && i < g.inputs.size(); ++i) record(g.inputs[i], inputs[i]);
    auto out = ref::run_model(m, inputs, [&](const ir::Node& n, const std::vector<Datum>& outs) {
      for (size_t k = 0; k < outs.size() && k < n.outputs.size(); ++k)
        if (n.outputs[k] != ir::kNoValue) record(n.outputs[k], outs[k]);
    });
    if (!out) return out.status().with_context("int8 calibration: ");
  }
  for (auto& [v, all] : seen) {
    if (all.empty()) continue;
    const size_t k = std::min(all.size() - 1, static_cast<size_t>(std::ceil(pct / 100.0 * static_cast<double>(all.size()))) - 1);
    std::nth_element(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end());
    Calibration::Range& r = c.ranges[value(g, v).name];
    if (all[k] > 0) r.absmax = all[k];  // a value that is almost always 0 keeps its max
  }
  for (int v : watched)  // constants and inputs the sets did not cover keep a range of 1
    c.ranges.try_emplace(value(g, v).name, Calibration::Range{1.0f, false});
  return c;
}

namespace {

std::string cache_file(const std::string& dir, const std::string& key) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (unsigned char ch : key) h = (h ^ ch) * 1099511628211ull;
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.calib", static_cast<unsigned long long>(h));
  return dir + "/" + name;
}

constexpr const char* kCalibrationMagic = "tactician-calibration 1";

}  // namespace

// File: the magic line, "key <key>", "source <source>", then "<absmax> <0|1 nonnegative> <name>"
// per value (a name is the rest of its line; keys, sources or names holding a newline are not cached).
std::optional<Calibration> load_calibration(const std::string& dir, const std::string& key) {
  std::ifstream in(cache_file(dir, key));
  std::string line;
  if (!in || !std::getline(in, line) || line != kCalibrationMagic) return std::nullopt;
  if (!std::getline(in, line) || line != "key " + key) return std::nullopt;
  Calibration c;
  if (!std::getline(in, line) || line.rfind("source ", 0) != 0) return std::nullopt;
  c.source = line.substr(7);
  while (std::getline(in, line)) {
    char* end = nullptr;
    const float absmax = std::strtof(line.c_str(), &end);
    if (end == line.c_str() || end[0] != ' ' || (end[1] != '0' && end[1] != '1') || end[2] != ' ') return std::nullopt;
    c.ranges[std::string(end + 3)] = {absmax, end[1] == '1'};
  }
  return c;
}

Status save_calibration(const std::string& dir, const std::string& key, const Calibration& c) {
  auto has_newline = [](const std::string& s) { return s.find('\n') != std::string::npos; };
  if (has_newline(key) || has_newline(c.source)) return Status::ok();
  for (const auto& [name, r] : c.ranges)
    if (has_newline(name)) return Status::ok();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = cache_file(dir, key), tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp);
    out << kCalibrationMagic << "\nkey " << key << "\nsource " << c.source << "\n";
    char num[32];
    for (const auto& [name, r] : c.ranges) {
      std::snprintf(num, sizeof num, "%.9g", static_cast<double>(r.absmax));
      out << num << ' ' << (r.nonnegative ? '1' : '0') << ' ' << name << '\n';
    }
    if (!out) return io_error(tmp + ": cannot write the calibration cache");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return io_error(path + ": cannot write the calibration cache");
  return Status::ok();
}

}  // namespace tac::builder
