// f16.c: IEEE binary16 conversions for the references of the f16 kernels.
#include <string.h>

#include "gpt2_ref.h"

uint16_t ref_f16_from_f32(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
    if (e == 0xff) return (uint16_t)(sign | (mant ? 0x7e00u : 0x7c00u));
    int32_t he = (int32_t)e - 127 + 15;
    if (he >= 31) return (uint16_t)(sign | 0x7c00u);
    if (he <= 0) {  // subnormal or zero: round the shifted mantissa to nearest even
        if (he < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - he), hm = mant >> shift, rem = mant & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (hm & 1u))) hm++;
        return (uint16_t)(sign | hm);
    }
    uint32_t h = sign | ((uint32_t)he << 10) | (mant >> 13), rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;  // a carry into the exponent is right, up to inf
    return (uint16_t)h;
}

float ref_f32_from_f16(uint16_t h) {
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, mant = h & 0x3ffu, x;
    if (e == 0) {
        if (!mant) {
            x = sign;
        } else {  // subnormal: normalise
            int k = -1;
            do {
                mant <<= 1;
                k++;
            } while (!(mant & 0x400u));
            x = sign | ((uint32_t)(127 - 15 - k) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (e == 31) {
        x = sign | 0x7f800000u | (mant << 13);
    } else {
        x = sign | ((e - 15 + 127) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}
