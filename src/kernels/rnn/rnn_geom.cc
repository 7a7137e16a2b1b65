// ONNX LSTM / GRU / RNN steps as our tactics see them (rnn_geom.h).
#include "kernels/rnn/rnn_geom.h"

#include <cctype>
#include <string>
#include <vector>

namespace tac::kernels::rnn {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

int64_t int_attr(const StepDesc& s, const char* key, int64_t def) {
  const ir::Attribute* a = s.node->attr(key);
  return a ? a->i : def;
}

}  // namespace

bool wants_output(const StepDesc& s, size_t k) { return k < s.out_dtypes.size() && s.out_dtypes[k] != DType::undefined; }

Result<RnnGeom> rnn_geom(const StepDesc& s) {
  RnnGeom g;
  const ir::OpKind op = s.node->op;
  g.cell = op == ir::OpKind::LSTM ? Cell::lstm : op == ir::OpKind::GRU ? Cell::gru : Cell::rnn;
  g.G = g.lstm() ? 4 : g.cell == Cell::gru ? 3 : 1;
  if (s.dynamic) return not_applicable("shapes known only at run time");
  for (size_t i = 0; i < 3; ++i)
    if (!s.has_input(i)) return not_applicable("X, W and R are needed");
  g.dtype = s.in_dtypes[0];
  if (!dtype_is_float(g.dtype)) return not_applicable("float X only");
  for (size_t i = 1; i < 3; ++i)
    if (s.in_dtypes[i] != g.dtype) return not_applicable("W and R of X's type");
  if (!s.constants[1] || !s.constants[2]) return not_applicable("W and R are not constant (reordered at prepare)");
  if (s.has_input(3) && !s.constants[3]) return not_applicable("B is not constant (folded at prepare)");
  const Shape& x = s.in_shapes[0];
  const Shape& w = s.in_shapes[1];
  if (x.size() != 3 || w.size() != 3 || s.in_shapes[2].size() != 3) return not_applicable("X, W, R of rank 3 only");
  const int64_t layout = int_attr(s, "layout", 0);
  if (layout != 0 && layout != 1) return not_applicable("layout other than 0 or 1");
  g.layout1 = layout == 1;
  g.T = g.layout1 ? x[1] : x[0];
  g.N = g.layout1 ? x[0] : x[1];
  g.I = x[2];
  const ir::Attribute* dir = s.node->attr("direction");
  const std::string direction = dir ? dir->s : "forward";
  if (direction == "bidirectional") g.D = 2;
  else if (direction == "reverse") g.reverse = true;
  else if (direction != "forward") return not_applicable("direction '" + direction + "'");
  if (w[0] != g.D || w[1] % g.G != 0 || w[2] != g.I) return not_applicable("W's shape does not fit X");
  g.H = w[1] / g.G;
  if (g.T <= 0 || g.N <= 0 || g.I <= 0 || g.H <= 0) return not_applicable("an empty dimension");
  if (s.in_shapes[2] != Shape{g.D, g.G * g.H, g.H}) return not_applicable("R's shape does not fit W");
  if (int_attr(s, "hidden_size", g.H) != g.H) return not_applicable("hidden_size does not match W");
  g.has_b = s.has_input(3);
  if (g.has_b && (s.in_dtypes[3] != g.dtype || s.in_shapes[3] != Shape{g.D, 2 * g.G * g.H}))
    return not_applicable("B's type or shape");
  if (s.has_input(4)) {  // sequence_lens: all seq_length, known at build time
    const Tensor* lens = s.constants[4];
    if (!lens) return not_applicable("sequence_lens not constant");
    if (lens->numel() != g.N) return not_applicable("sequence_lens of another batch");
    for (int64_t i = 0; i < lens->numel(); ++i)
      if (lens->get_i64(i) != g.T) return not_applicable("sequence_lens not all seq_length");
  }
  const Shape state = g.layout1 ? Shape{g.N, g.D, g.H} : Shape{g.D, g.N, g.H};
  g.has_h0 = s.has_input(5);
  if (g.has_h0 && (s.in_dtypes[5] != g.dtype || s.in_shapes[5] != state)) return not_applicable("initial_h's type or shape");
  if (g.lstm()) {
    g.has_c0 = s.has_input(6);
    if (g.has_c0 && (s.in_dtypes[6] != g.dtype || s.in_shapes[6] != state))
      return not_applicable("initial_c's type or shape");
    if (s.has_input(7)) return not_applicable("peepholes (P)");
    if (int_attr(s, "input_forget", 0) != 0) return not_applicable("input_forget");
  }
  if (g.cell == Cell::gru) g.lbr = int_attr(s, "linear_before_reset", 0) != 0;
  if (s.node->attr("clip")) return not_applicable("clip");
  // Activations: the defaults only (oneDNN's cells hard-wire them), but RNN's one activation may
  // be Tanh, Relu or Sigmoid. None of these take activation_alpha / activation_beta.
  if (const ir::Attribute* a = s.node->attr("activations"); a && !a->strings.empty()) {
    std::vector<std::string> want = g.lstm() ? std::vector<std::string>{"sigmoid", "tanh", "tanh"}
                                    : g.cell == Cell::gru ? std::vector<std::string>{"sigmoid", "tanh"}
                                                          : std::vector<std::string>{lower(a->strings[0])};
    if (g.cell == Cell::rnn) {
      if (want[0] == "relu") g.act = Act::relu;
      else if (want[0] == "sigmoid") g.act = Act::sigmoid;
      else if (want[0] != "tanh") return not_applicable("activation " + a->strings[0]);
    }
    std::vector<std::string> got;
    for (const std::string& n : a->strings) got.push_back(lower(n));
    std::vector<std::string> per_dir = want;
    if (got.size() == want.size() * 2) want.insert(want.end(), per_dir.begin(), per_dir.end());
    if (got != want) return not_applicable("activations other than the defaults");
  }
  for (size_t k = 0; k < s.out_dtypes.size(); ++k)
    if (wants_output(s, k) && s.out_dtypes[k] != g.dtype) return not_applicable("outputs of X's type");
  g.want_y = wants_output(s, 0);
  g.want_yh = wants_output(s, 1);
  g.want_yc = g.lstm() && wants_output(s, 2);
  return g;
}


}  // namespace tac::kernels::rnn
