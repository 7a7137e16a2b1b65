#include <bit>
#include <cmath>

#include "tactician/tensor.h"

namespace tac {

std::string dtype_name(int32_t code) {
  switch (code) {
    case 0: return "undefined";
    case 1: return "float";
    case 2: return "uint8";
    case 3: return "int8";
    case 4: return "uint16";
    case 5: return "int16";
    case 6: return "int32";
    case 7: return "int64";
    case 8: return "string";
    case 9: return "bool";
    case 10: return "float16";
    case 11: return "double";
    case 12: return "uint32";
    case 13: return "uint64";
    case 14: return "complex64";
    case 15: return "complex128";
    case 16: return "bfloat16";
    case 17: return "float8e4m3fn";
    case 18: return "float8e4m3fnuz";
    case 19: return "float8e5m2";
    case 20: return "float8e5m2fnuz";
    case 21: return "uint4";
    case 22: return "int4";
    case 23: return "float4e2m1";
    case 24: return "float8e8m0";
    case 25: return "uint2";
    case 26: return "int2";
    default: return "dtype(" + std::to_string(code) + ")";
  }
}

std::string dtype_name(DType t) { return dtype_name(static_cast<int32_t>(t)); }

size_t dtype_size(DType t) {
  switch (t) {
    case DType::float32: return 4;
    case DType::uint8: return 1;
    case DType::int8: return 1;
    case DType::uint16: return 2;
    case DType::int16: return 2;
    case DType::int32: return 4;
    case DType::int64: return 8;
    case DType::boolean: return 1;
    case DType::float16: return 2;
    case DType::float64: return 8;
    case DType::uint32: return 4;
    case DType::uint64: return 8;
    case DType::bfloat16: return 2;
    default: return 0;
  }
}

bool dtype_supported(int32_t code) {
  return code >= 1 && code <= 16 && code != 8 && code != 14 && code != 15;
}

bool dtype_is_float(DType t) {
  return t == DType::float32 || t == DType::float64 || t == DType::float16 || t == DType::bfloat16;
}
bool dtype_is_signed_int(DType t) {
  return t == DType::int8 || t == DType::int16 || t == DType::int32 || t == DType::int64;
}
bool dtype_is_unsigned_int(DType t) {
  return t == DType::uint8 || t == DType::uint16 || t == DType::uint32 || t == DType::uint64 ||
         t == DType::boolean;
}

// IEEE 754 binary16 <-> binary32, round to nearest even, with subnormals, Inf and NaN.
Float16::Float16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN
    bits = static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    return;
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to Inf
    bits = static_cast<uint16_t>(sign | 0x7c00u);
    return;
  }
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    // value = abs_float * 2^24 in half-subnormal units; round to nearest even.
    float v = std::bit_cast<float>(abs) * 16777216.0f;  // exact scaling by 2^24
    float r = std::nearbyint(v);                        // default rounding: nearest even
    bits = static_cast<uint16_t>(sign | static_cast<uint32_t>(r));
    return;
  }
  uint32_t mant = abs & 0x7fffffu;
  uint32_t exp = (abs >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carries into exponent correctly
  bits = static_cast<uint16_t>(sign | h);
}

Float16::operator float() const {
  uint32_t sign = (static_cast<uint32_t>(bits) & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  if (exp == 0) {
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

BFloat16::BFloat16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    bits = static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
    return;
  }
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  bits = static_cast<uint16_t>((x + rounding) >> 16);
}

BFloat16::operator float() const { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

}  // namespace tac
