// The elementwise kernels compiled for AVX-512 (F, BW, VL, DQ) (selected at run time; see common.h).
// GCC 12 flags the _mm512_undefined_ps() pass-through operand inside its own AVX-512 intrinsics
// (max_ps, scalef_ps, roundscale_ps, ...) as maybe-uninitialized: a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cmath>
#include <type_traits>

#include "kernels/elementwise/common.h"
#include "kernels/elementwise/simd.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")
namespace tac::kernels::ew::isa_avx512 {
#include "kernels/elementwise/isa_kernels.inc"
}  // namespace tac::kernels::ew::isa_avx512
#pragma GCC pop_options
