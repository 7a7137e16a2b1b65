// The elementwise kernels compiled for AVX2 + FMA (selected at run time; see common.h).
#include <cmath>
#include <type_traits>

#include "kernels/elementwise/common.h"
#include "kernels/elementwise/simd.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace tac::kernels::ew::isa_avx2 {
#include "kernels/elementwise/isa_kernels.inc"
}  // namespace tac::kernels::ew::isa_avx2
#pragma GCC pop_options
