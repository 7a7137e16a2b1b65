// CPU tactics of LSTM / GRU / RNN through oneDNN's RNN primitives (to be filled in).
#include "kernels/tactic.h"

namespace tac::kernels {

std::span<const Tactic> rnn_tactics() { return {}; }

}  // namespace tac::kernels
