// The geometry of an ONNX LSTM / GRU / RNN step, shared by its tactics (onednn_rnn.cc on the
// CPU, cuda_rnn.cc on CUDA): sizes, direction, layout, which optional inputs and outputs are
// present, and the refusals every tactic makes (peepholes, clip, input_forget, activations other
// than the defaults, non-constant weights, sequence_lens other than all seq_length).
#pragma once

#include "kernels/tactic.h"

namespace tac::kernels::rnn {

enum class Cell { rnn, gru, lstm };
enum class Act { tanh, relu, sigmoid };  // RNN's one activation (LSTM and GRU: the defaults only)

struct RnnGeom {
  Cell cell = Cell::lstm;
  int64_t T = 0, N = 0, I = 0, H = 0, D = 1;
  int64_t G = 4;  // gates
  bool reverse = false;  // one direction, right to left
  bool layout1 = false;  // ONNX layout=1: batch first
  bool lbr = false;      // GRU linear_before_reset
  Act act = Act::tanh;   // RNN's activation
  DType dtype = DType::undefined;  // X's, and that of every float input and output
  bool has_b = false, has_h0 = false, has_c0 = false;
  bool want_y = false, want_yh = false, want_yc = false;

  bool lstm() const { return cell == Cell::lstm; }
  // Y [seq, dirs, batch, H] (layout 0) is [seq, batch, dirs*H] in memory when dirs or batch is 1;
  // layout 1's Y [batch, seq, dirs, H] is [batch, seq, dirs*H] always.
  bool y_plain() const { return layout1 || D == 1 || N == 1; }
  // States [dirs, batch, H] (layout 0), or layout 1's [batch, dirs, H] with one direction or batch 1.
  bool states_plain() const { return !layout1 || D == 1 || N == 1; }
  // Initial states are given (an LSTM's h or c: the omitted one is zeros); final states are wanted.
  bool src_iter() const { return has_h0 || has_c0; }
  bool dst_iter() const { return want_yh || want_yc; }
  // Flops of the input projection X*W of every step and direction.
  double layer_flops() const { return 2.0 * static_cast<double>(D * T * N * G * H * I); }
};

bool wants_output(const StepDesc& s, size_t k);

// The step's geometry, or not_applicable naming what no tactic of ours runs. X, W, R, B, the
// initial states and the outputs must be of one float type (RnnGeom::dtype); each backend says
// which types it takes.
Result<RnnGeom> rnn_geom(const StepDesc& s);

}  // namespace tac::kernels::rnn
