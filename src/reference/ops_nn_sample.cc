// Reference kernels: sampling ops of the NN family (RoiAlign, GridSample, AffineGrid,
// DeformConv, Col2Im, CausalConvWithState). Registered via add_nn_kernels().
#include <algorithm>
#include <cmath>
#include <string>

#include "reference/ops_nn_common.h"

namespace tac::ref::nn {

namespace {

using ir::OpKind;

}  // namespace

void add_sample_kernels(KernelTable& t) { (void)t; }

}  // namespace tac::ref::nn
