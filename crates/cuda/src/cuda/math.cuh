// Portable transcendentals: line-by-line ports of the `libm` crate (itself a port of
// musl / FreeBSD msun) that rlgrad's Cpu device uses through `Float::exp_portable` and
// friends. Compiled with FMA contraction off (`--fmad=false`), IEEE division and square
// root, and no flush to zero, every operation here is the same IEEE operation in the same
// order as in Rust, so the results are the Cpu's bits (NaN payloads aside: GPU arithmetic
// returns the canonical NaN).
//
// Literals carry an `f` suffix in the single-precision functions: an unsuffixed literal is
// a double in C and would promote the whole expression.
//
// The file also compiles as host C++ (tests/host_math.rs checks it against `libm` on the
// CPU), so it uses only `RL_FN`, fixed-width integers and the bit-cast helpers below.

#ifndef RL_FN
#define RL_FN __device__ __forceinline__
#define RL_F32_BITS(x) __float_as_uint(x)
#define RL_F32_FROM(u) __uint_as_float(u)
#define RL_F64_BITS(x) ((unsigned long long)__double_as_longlong(x))
#define RL_F64_FROM(u) __longlong_as_double((long long)(u))
#endif

typedef unsigned int rl_u32;
typedef int rl_i32;
typedef unsigned long long rl_u64;

// ---- scalbn (generic/scalbn.rs) ------------------------------------------------------

RL_FN float rl_scalbnf(float x, rl_i32 n) {
    const float exp_max = RL_F32_FROM(0x7f000000u);  // 2^127
    const float mul = RL_F32_FROM(0x0c800000u);      // 2^-126 * 2^24 = 2^-102
    if (n > 127) {
        x *= exp_max;
        n -= 127;
        if (n > 127) {
            x *= exp_max;
            n -= 127;
            if (n > 127) n = 127;
        }
    } else if (n < -126) {
        x *= mul;
        n += 102;
        if (n < -126) {
            x *= mul;
            n += 102;
            if (n < -126) n = -126;
        }
    }
    return x * RL_F32_FROM((rl_u32)(127 + n) << 23);
}

RL_FN double rl_scalbn(double x, rl_i32 n) {
    const double exp_max = RL_F64_FROM(0x7fe0000000000000ull);  // 2^1023
    const double mul = RL_F64_FROM(0x0360000000000000ull);      // 2^-1022 * 2^53 = 2^-969
    if (n > 1023) {
        x *= exp_max;
        n -= 1023;
        if (n > 1023) {
            x *= exp_max;
            n -= 1023;
            if (n > 1023) n = 1023;
        }
    } else if (n < -1022) {
        x *= mul;
        n += 969;
        if (n < -1022) {
            x *= mul;
            n += 969;
            if (n < -1022) n = -1022;
        }
    }
    return x * RL_F64_FROM((rl_u64)(1023 + n) << 52);
}

// ---- expf (expf.rs) ------------------------------------------------------------------

RL_FN float rl_expf(float x) {
    const float ln2_hi = 6.9314575195e-01f;
    const float ln2_lo = 1.4286067653e-06f;
    const float inv_ln2 = 1.4426950216e+00f;
    const float p1 = 1.6666625440e-1f;
    const float p2 = -2.7667332906e-3f;
    const float x1p127 = RL_F32_FROM(0x7f000000u);
    rl_u32 hx = RL_F32_BITS(x);
    rl_i32 sign = (rl_i32)(hx >> 31);
    hx &= 0x7fffffffu;
    if (hx >= 0x42aeac50u) {
        if (hx > 0x7f800000u) return x;
        if (hx >= 0x42b17218u && !sign) return x * x1p127;
        if (sign && hx >= 0x42cff1b5u) return 0.0f;
    }
    rl_i32 k;
    float hi, lo;
    if (hx > 0x3eb17218u) {
        if (hx > 0x3f851592u) {
            k = (rl_i32)(inv_ln2 * x + (sign ? -0.5f : 0.5f));
        } else {
            k = 1 - sign - sign;
        }
        float kf = (float)k;
        hi = x - kf * ln2_hi;
        lo = kf * ln2_lo;
        x = hi - lo;
    } else if (hx > 0x39000000u) {
        k = 0;
        hi = x;
        lo = 0.0f;
    } else {
        return 1.0f + x;
    }
    float xx = x * x;
    float c = x - xx * (p1 + xx * p2);
    float y = 1.0f + (x * c / (2.0f - c) - lo + hi);
    return k == 0 ? y : rl_scalbnf(y, k);
}

// ---- exp (exp.rs) --------------------------------------------------------------------

RL_FN double rl_exp(double x) {
    const double ln2hi = 6.93147180369123816490e-01;
    const double ln2lo = 1.90821492927058770002e-10;
    const double invln2 = 1.44269504088896338700e+00;
    const double p1 = 1.66666666666666019037e-01;
    const double p2 = -2.77777777770155933842e-03;
    const double p3 = 6.61375632143793436117e-05;
    const double p4 = -1.65339022054652515390e-06;
    const double p5 = 4.13813679705723846039e-08;
    const double x1p1023 = RL_F64_FROM(0x7fe0000000000000ull);
    rl_u32 hx = (rl_u32)(RL_F64_BITS(x) >> 32);
    rl_i32 sign = (rl_i32)(hx >> 31);
    hx &= 0x7fffffffu;
    if (hx >= 0x4086232bu) {
        if (x != x) return x;
        if (x > 709.782712893383973096) return x * x1p1023;
        if (x < -708.39641853226410622 && x < -745.13321910194110842) return 0.0;
    }
    double hi, lo;
    rl_i32 k;
    if (hx > 0x3fd62e42u) {
        if (hx >= 0x3ff0a2b2u) {
            k = (rl_i32)(invln2 * x + (sign ? -0.5 : 0.5));
        } else {
            k = 1 - sign - sign;
        }
        hi = x - (double)k * ln2hi;
        lo = (double)k * ln2lo;
        x = hi - lo;
    } else if (hx > 0x3e300000u) {
        k = 0;
        hi = x;
        lo = 0.0;
    } else {
        return 1.0 + x;
    }
    double xx = x * x;
    double c = x - xx * (p1 + xx * (p2 + xx * (p3 + xx * (p4 + xx * p5))));
    double y = 1.0 + (x * c / (2.0 - c) - lo + hi);
    return k == 0 ? y : rl_scalbn(y, k);
}

// ---- logf (logf.rs) ------------------------------------------------------------------

RL_FN float rl_logf(float x) {
    const float ln2_hi = 6.9313812256e-01f;
    const float ln2_lo = 9.0580006145e-06f;
    const float lg1 = 0.66666662693f;
    const float lg2 = 0.40000972152f;
    const float lg3 = 0.28498786688f;
    const float lg4 = 0.24279078841f;
    const float x1p25 = RL_F32_FROM(0x4c000000u);
    rl_u32 ix = RL_F32_BITS(x);
    rl_i32 k = 0;
    if (ix < 0x00800000u || (ix >> 31) != 0) {
        if ((ix << 1) == 0) return -1.0f / (x * x);
        if ((ix >> 31) != 0) return (x - x) / 0.0f;
        k -= 25;
        x *= x1p25;
        ix = RL_F32_BITS(x);
    } else if (ix >= 0x7f800000u) {
        return x;
    } else if (ix == 0x3f800000u) {
        return 0.0f;
    }
    ix += 0x3f800000u - 0x3f3504f3u;
    k += (rl_i32)(ix >> 23) - 0x7f;
    ix = (ix & 0x007fffffu) + 0x3f3504f3u;
    x = RL_F32_FROM(ix);
    float f = x - 1.0f;
    float s = f / (2.0f + f);
    float z = s * s;
    float w = z * z;
    float t1 = w * (lg2 + w * lg4);
    float t2 = z * (lg1 + w * lg3);
    float r = t2 + t1;
    float hfsq = 0.5f * f * f;
    float dk = (float)k;
    return s * (hfsq + r) + dk * ln2_lo - hfsq + f + dk * ln2_hi;
}

// ---- log (log.rs) --------------------------------------------------------------------

RL_FN double rl_log(double x) {
    const double ln2_hi = 6.93147180369123816490e-01;
    const double ln2_lo = 1.90821492927058770002e-10;
    const double lg1 = 6.666666666666735130e-01;
    const double lg2 = 3.999999999940941908e-01;
    const double lg3 = 2.857142874366239149e-01;
    const double lg4 = 2.222219843214978396e-01;
    const double lg5 = 1.818357216161805012e-01;
    const double lg6 = 1.531383769920937332e-01;
    const double lg7 = 1.479819860511658591e-01;
    const double x1p54 = RL_F64_FROM(0x4350000000000000ull);
    rl_u64 ui = RL_F64_BITS(x);
    rl_u32 hx = (rl_u32)(ui >> 32);
    rl_i32 k = 0;
    if (hx < 0x00100000u || (hx >> 31) != 0) {
        if ((ui << 1) == 0) return -1.0 / (x * x);
        if ((hx >> 31) != 0) return (x - x) / 0.0;
        k -= 54;
        x *= x1p54;
        ui = RL_F64_BITS(x);
        hx = (rl_u32)(ui >> 32);
    } else if (hx >= 0x7ff00000u) {
        return x;
    } else if (hx == 0x3ff00000u && (ui << 32) == 0) {
        return 0.0;
    }
    hx += 0x3ff00000u - 0x3fe6a09eu;
    k += (rl_i32)(hx >> 20) - 0x3ff;
    hx = (hx & 0x000fffffu) + 0x3fe6a09eu;
    ui = ((rl_u64)hx << 32) | (ui & 0xffffffffull);
    x = RL_F64_FROM(ui);
    double f = x - 1.0;
    double hfsq = 0.5 * f * f;
    double s = f / (2.0 + f);
    double z = s * s;
    double w = z * z;
    double t1 = w * (lg2 + w * (lg4 + w * lg6));
    double t2 = z * (lg1 + w * (lg3 + w * (lg5 + w * lg7)));
    double r = t2 + t1;
    double dk = (double)k;
    return s * (hfsq + r) + dk * ln2_lo - hfsq + f + dk * ln2_hi;
}

// ---- expm1f (expm1f.rs) and tanhf (tanhf.rs) ----------------------------------------

RL_FN float rl_expm1f(float x) {
    const float ln2_hi = 6.9313812256e-01f;
    const float ln2_lo = 9.0580006145e-06f;
    const float inv_ln2 = 1.4426950216e+00f;
    const float q1 = -3.3333212137e-2f;
    const float q2 = 1.5807170421e-3f;
    const float x1p127 = RL_F32_FROM(0x7f000000u);
    rl_u32 hx = RL_F32_BITS(x);
    int sign = (hx >> 31) != 0;
    hx &= 0x7fffffffu;
    if (hx >= 0x4195b844u) {
        if (hx > 0x7f800000u) return x;
        if (sign) return -1.0f;
        if (hx > 0x42b17217u) return x * x1p127;
    }
    rl_i32 k;
    float hi, lo, c = 0.0f;
    if (hx > 0x3eb17218u) {
        if (hx < 0x3F851592u) {
            if (!sign) {
                hi = x - ln2_hi;
                lo = ln2_lo;
                k = 1;
            } else {
                hi = x + ln2_hi;
                lo = -ln2_lo;
                k = -1;
            }
        } else {
            k = (rl_i32)(inv_ln2 * x + (sign ? -0.5f : 0.5f));
            float t = (float)k;
            hi = x - t * ln2_hi;
            lo = t * ln2_lo;
        }
        x = hi - lo;
        c = (hi - x) - lo;
    } else if (hx < 0x33000000u) {
        return x;
    } else {
        k = 0;
    }
    float hfx = 0.5f * x;
    float hxs = x * hfx;
    float r1 = 1.0f + hxs * (q1 + hxs * q2);
    float t = 3.0f - r1 * hfx;
    float e = hxs * ((r1 - t) / (6.0f - x * t));
    if (k == 0) return x - (x * e - hxs);
    e = x * (e - c) - c;
    e -= hxs;
    if (k == -1) return 0.5f * (x - e) - 0.5f;
    if (k == 1) {
        if (x < -0.25f) return -2.0f * (e - (x + 0.5f));
        return 1.0f + 2.0f * (x - e);
    }
    float twopk = RL_F32_FROM((rl_u32)(0x7f + k) << 23);
    if (k < 0 || k > 56) {
        float y = x - e + 1.0f;
        if (k == 128) {
            y = y * 2.0f * x1p127;
        } else {
            y = y * twopk;
        }
        return y - 1.0f;
    }
    float uf = RL_F32_FROM((rl_u32)(0x7f - k) << 23);
    if (k < 23) return (x - e + (1.0f - uf)) * twopk;
    return (x - (e + uf) + 1.0f) * twopk;
}

RL_FN float rl_tanhf(float x) {
    rl_u32 ix = RL_F32_BITS(x);
    int sign = (ix >> 31) != 0;
    ix &= 0x7fffffffu;
    x = RL_F32_FROM(ix);
    rl_u32 w = ix;
    float tt;
    if (w > 0x3f0c9f54u) {
        if (w > 0x41200000u) {
            tt = 1.0f + 0.0f / x;
        } else {
            float t = rl_expm1f(2.0f * x);
            tt = 1.0f - 2.0f / (t + 2.0f);
        }
    } else if (w > 0x3e82c578u) {
        float t = rl_expm1f(2.0f * x);
        tt = t / (t + 2.0f);
    } else if (w >= 0x00800000u) {
        float t = rl_expm1f(-2.0f * x);
        tt = -t / (t + 2.0f);
    } else {
        tt = x;
    }
    return sign ? -tt : tt;
}

// ---- expm1 (expm1.rs) and tanh (tanh.rs) ---------------------------------------------

RL_FN double rl_expm1(double x) {
    const double o_threshold = 7.09782712893383973096e+02;
    const double ln2_hi = 6.93147180369123816490e-01;
    const double ln2_lo = 1.90821492927058770002e-10;
    const double invln2 = 1.44269504088896338700e+00;
    const double q1 = -3.33333333333331316428e-02;
    const double q2 = 1.58730158725481460165e-03;
    const double q3 = -7.93650757867487942473e-05;
    const double q4 = 4.00821782732936239552e-06;
    const double q5 = -2.01099218183624371326e-07;
    const double x1p1023 = RL_F64_FROM(0x7fe0000000000000ull);
    rl_u64 ui = RL_F64_BITS(x);
    rl_u32 hx = (rl_u32)((ui >> 32) & 0x7fffffffu);
    rl_i32 sign = (rl_i32)(ui >> 63);
    if (hx >= 0x4043687Au) {
        if (x != x) return x;
        if (sign != 0) return -1.0;
        if (x > o_threshold) return x * x1p1023;
    }
    double hi, lo, c;
    rl_i32 k;
    if (hx > 0x3fd62e42u) {
        if (hx < 0x3FF0A2B2u) {
            if (sign == 0) {
                hi = x - ln2_hi;
                lo = ln2_lo;
                k = 1;
            } else {
                hi = x + ln2_hi;
                lo = -ln2_lo;
                k = -1;
            }
        } else {
            k = (rl_i32)(invln2 * x + (sign != 0 ? -0.5 : 0.5));
            double t = (double)k;
            hi = x - t * ln2_hi;
            lo = t * ln2_lo;
        }
        x = hi - lo;
        c = (hi - x) - lo;
    } else if (hx < 0x3c900000u) {
        return x;
    } else {
        c = 0.0;
        k = 0;
    }
    double hfx = 0.5 * x;
    double hxs = x * hfx;
    double r1 = 1.0 + hxs * (q1 + hxs * (q2 + hxs * (q3 + hxs * (q4 + hxs * q5))));
    double t = 3.0 - r1 * hfx;
    double e = hxs * ((r1 - t) / (6.0 - x * t));
    if (k == 0) return x - (x * e - hxs);
    e = x * (e - c) - c;
    e -= hxs;
    if (k == -1) return 0.5 * (x - e) - 0.5;
    if (k == 1) {
        if (x < -0.25) return -2.0 * (e - (x + 0.5));
        return 1.0 + 2.0 * (x - e);
    }
    double twopk = RL_F64_FROM((rl_u64)(0x3ff + k) << 52);
    if (k < 0 || k > 56) {
        double y = x - e + 1.0;
        if (k == 1024) {
            y = y * 2.0 * x1p1023;
        } else {
            y = y * twopk;
        }
        return y - 1.0;
    }
    double uf = RL_F64_FROM((rl_u64)(0x3ff - k) << 52);
    if (k < 20) return (x - e + (1.0 - uf)) * twopk;
    return (x - (e + uf) + 1.0) * twopk;
}

RL_FN double rl_tanh(double x) {
    rl_u64 ui = RL_F64_BITS(x);
    int sign = (ui >> 63) != 0;
    ui &= 0x7fffffffffffffffull;
    x = RL_F64_FROM(ui);
    rl_u32 w = (rl_u32)(ui >> 32);
    double t;
    if (w > 0x3fe193eau) {
        if (w > 0x40340000u) {
            t = 1.0 - 0.0 / x;
        } else {
            t = rl_expm1(2.0 * x);
            t = 1.0 - 2.0 / (t + 2.0);
        }
    } else if (w > 0x3fd058aeu) {
        t = rl_expm1(2.0 * x);
        t = t / (t + 2.0);
    } else if (w >= 0x00100000u) {
        t = rl_expm1(-2.0 * x);
        t = -t / (t + 2.0);
    } else {
        t = x;
    }
    return sign ? -t : t;
}

// ---- powf (powf.rs) ------------------------------------------------------------------

RL_FN float rl_powf(float x, float y) {
    // libm's two-element tables bp, dp_h and dp_l as pairs of scalars picked by k: an
    // array indexed by a variable would live in the GPU thread's local memory.
    const float bp0 = 1.0f, bp1 = 1.5f;
    const float dp_h0 = 0.0f, dp_h1 = 5.84960938e-01f;
    const float dp_l0 = 0.0f, dp_l1 = 1.56322085e-06f;
    const float two24 = 16777216.0f;
    const float huge = 1.0e30f;
    const float tiny = 1.0e-30f;
    const float l1 = 6.0000002384e-01f, l2 = 4.2857143283e-01f, l3 = 3.3333334327e-01f;
    const float l4 = 2.7272811532e-01f, l5 = 2.3066075146e-01f, l6 = 2.0697501302e-01f;
    const float p1 = 1.6666667163e-01f, p2 = -2.7777778450e-03f, p3 = 6.6137559770e-05f;
    const float p4 = -1.6533901999e-06f, p5 = 4.1381369442e-08f;
    const float lg2 = 6.9314718246e-01f, lg2_h = 6.93145752e-01f, lg2_l = 1.42860654e-06f;
    const float ovt = 4.2995665694e-08f;
    const float cp = 9.6179670095e-01f, cp_h = 9.6191406250e-01f, cp_l = -1.1736857402e-04f;
    const float ivln2 = 1.4426950216e+00f, ivln2_h = 1.4426879883e+00f;
    const float ivln2_l = 7.0526075433e-06f;

    float z, ax, z_h, z_l, p_h, p_l, y1, t1, t2, r, s, sn, t, u, v, w;
    rl_i32 i, j, k, yisint, n, hx, hy, ix, iy, is;

    hx = (rl_i32)RL_F32_BITS(x);
    hy = (rl_i32)RL_F32_BITS(y);
    ix = hx & 0x7fffffff;
    iy = hy & 0x7fffffff;
    if (iy == 0) return 1.0f;
    if (hx == 0x3f800000) return 1.0f;
    if (ix > 0x7f800000 || iy > 0x7f800000) return x + y;
    yisint = 0;
    if (hx < 0) {
        if (iy >= 0x4b800000) {
            yisint = 2;
        } else if (iy >= 0x3f800000) {
            k = (iy >> 23) - 0x7f;
            j = iy >> (23 - k);
            if ((j << (23 - k)) == iy) yisint = 2 - (j & 1);
        }
    }
    if (iy == 0x7f800000) {
        if (ix == 0x3f800000) return 1.0f;
        if (ix > 0x3f800000) return hy >= 0 ? y : 0.0f;
        return hy >= 0 ? 0.0f : -y;
    }
    if (iy == 0x3f800000) return hy >= 0 ? x : 1.0f / x;
    if (hy == 0x40000000) return x * x;
    if (hy == 0x3f000000 && hx >= 0) return sqrtf(x);

    ax = RL_F32_FROM((rl_u32)ix);
    if (ix == 0x7f800000 || ix == 0 || ix == 0x3f800000) {
        z = ax;
        if (hy < 0) z = 1.0f / z;
        if (hx < 0) {
            if (((ix - 0x3f800000) | yisint) == 0) {
                z = (z - z) / (z - z);
            } else if (yisint == 1) {
                z = -z;
            }
        }
        return z;
    }
    sn = 1.0f;
    if (hx < 0) {
        if (yisint == 0) return (x - x) / (x - x);
        if (yisint == 1) sn = -1.0f;
    }
    if (iy > 0x4d000000) {
        if (ix < 0x3f7ffff8) return hy < 0 ? sn * huge * huge : sn * tiny * tiny;
        if (ix > 0x3f800007) return hy > 0 ? sn * huge * huge : sn * tiny * tiny;
        t = ax - 1.0f;
        w = (t * t) * (0.5f - t * (0.333333333333f - t * 0.25f));
        u = ivln2_h * t;
        v = t * ivln2_l - w * ivln2;
        t1 = u + v;
        is = (rl_i32)RL_F32_BITS(t1);
        t1 = RL_F32_FROM((rl_u32)is & 0xfffff000u);
        t2 = v - (t1 - u);
    } else {
        float s2, s_h, s_l, t_h, t_l;
        n = 0;
        if (ix < 0x00800000) {
            ax *= two24;
            n -= 24;
            ix = (rl_i32)RL_F32_BITS(ax);
        }
        n += (ix >> 23) - 0x7f;
        j = ix & 0x007fffff;
        ix = j | 0x3f800000;
        if (j <= 0x1cc471) {
            k = 0;
        } else if (j < 0x5db3d7) {
            k = 1;
        } else {
            k = 0;
            n += 1;
            ix -= 0x00800000;
        }
        ax = RL_F32_FROM((rl_u32)ix);
        u = ax - (k ? bp1 : bp0);
        v = 1.0f / (ax + (k ? bp1 : bp0));
        s = u * v;
        s_h = s;
        is = (rl_i32)RL_F32_BITS(s_h);
        s_h = RL_F32_FROM((rl_u32)is & 0xfffff000u);
        is = (rl_i32)((((rl_u32)ix >> 1) & 0xfffff000u) | 0x20000000u);
        t_h = RL_F32_FROM((rl_u32)is + 0x00400000u + ((rl_u32)k << 21));
        t_l = ax - (t_h - (k ? bp1 : bp0));
        s_l = v * ((u - s_h * t_h) - s_h * t_l);
        s2 = s * s;
        r = s2 * s2 * (l1 + s2 * (l2 + s2 * (l3 + s2 * (l4 + s2 * (l5 + s2 * l6)))));
        r += s_l * (s_h + s);
        s2 = s_h * s_h;
        t_h = 3.0f + s2 + r;
        is = (rl_i32)RL_F32_BITS(t_h);
        t_h = RL_F32_FROM((rl_u32)is & 0xfffff000u);
        t_l = r - ((t_h - 3.0f) - s2);
        u = s_h * t_h;
        v = s_l * t_h + t_l * s;
        p_h = u + v;
        is = (rl_i32)RL_F32_BITS(p_h);
        p_h = RL_F32_FROM((rl_u32)is & 0xfffff000u);
        p_l = v - (p_h - u);
        z_h = cp_h * p_h;
        z_l = cp_l * p_h + p_l * cp + (k ? dp_l1 : dp_l0);
        t = (float)n;
        t1 = ((z_h + z_l) + (k ? dp_h1 : dp_h0)) + t;
        is = (rl_i32)RL_F32_BITS(t1);
        t1 = RL_F32_FROM((rl_u32)is & 0xfffff000u);
        t2 = z_l - (((t1 - t) - (k ? dp_h1 : dp_h0)) - z_h);
    }
    is = (rl_i32)RL_F32_BITS(y);
    y1 = RL_F32_FROM((rl_u32)is & 0xfffff000u);
    p_l = (y - y1) * t1 + y * t2;
    p_h = y1 * t1;
    z = p_l + p_h;
    j = (rl_i32)RL_F32_BITS(z);
    if (j > 0x43000000) {
        return sn * huge * huge;
    } else if (j == 0x43000000) {
        if (p_l + ovt > z - p_h) return sn * huge * huge;
    } else if ((j & 0x7fffffff) > 0x43160000) {
        return sn * tiny * tiny;
    } else if ((rl_u32)j == 0xc3160000u && p_l <= z - p_h) {
        return sn * tiny * tiny;
    }
    i = j & 0x7fffffff;
    k = (i >> 23) - 0x7f;
    n = 0;
    if (i > 0x3f000000) {
        n = j + (0x00800000 >> (k + 1));
        k = ((n & 0x7fffffff) >> 23) - 0x7f;
        t = RL_F32_FROM((rl_u32)n & ~(0x007fffffu >> k));
        n = ((n & 0x007fffff) | 0x00800000) >> (23 - k);
        if (j < 0) n = -n;
        p_h -= t;
    }
    t = p_l + p_h;
    is = (rl_i32)RL_F32_BITS(t);
    t = RL_F32_FROM((rl_u32)is & 0xffff8000u);
    u = t * lg2_h;
    v = (p_l - (t - p_h)) * lg2 + t * lg2_l;
    z = u + v;
    w = v - (z - u);
    t = z * z;
    t1 = z - t * (p1 + t * (p2 + t * (p3 + t * (p4 + t * p5))));
    r = (z * t1) / (t1 - 2.0f) - (w + z * w);
    z = 1.0f - (r - z);
    j = (rl_i32)RL_F32_BITS(z);
    j += (rl_i32)((rl_u32)n << 23);
    if ((j >> 23) <= 0) {
        z = rl_scalbnf(z, n);
    } else {
        z = RL_F32_FROM((rl_u32)j);
    }
    return sn * z;
}

// ---- pow (pow.rs) --------------------------------------------------------------------

RL_FN double rl_with_high(double f, rl_u32 hi) {
    return RL_F64_FROM((RL_F64_BITS(f) & 0x00000000ffffffffull) | ((rl_u64)hi << 32));
}

RL_FN double rl_with_low(double f, rl_u32 lo) {
    return RL_F64_FROM((RL_F64_BITS(f) & 0xffffffff00000000ull) | (rl_u64)lo);
}

RL_FN double rl_pow(double x, double y) {
    // libm's tables as pairs of scalars, as in rl_powf.
    const double bp0 = 1.0, bp1 = 1.5;
    const double dp_h0 = 0.0, dp_h1 = 5.84962487220764160156e-01;
    const double dp_l0 = 0.0, dp_l1 = 1.35003920212974897128e-08;
    const double two53 = 9007199254740992.0;
    const double huge = 1.0e300;
    const double tiny = 1.0e-300;
    const double l1 = 5.99999999999994648725e-01, l2 = 4.28571428578550184252e-01;
    const double l3 = 3.33333329818377432918e-01, l4 = 2.72728123808534006489e-01;
    const double l5 = 2.30660745775561754067e-01, l6 = 2.06975017800338417784e-01;
    const double p1 = 1.66666666666666019037e-01, p2 = -2.77777777770155933842e-03;
    const double p3 = 6.61375632143793436117e-05, p4 = -1.65339022054652515390e-06;
    const double p5 = 4.13813679705723846039e-08;
    const double lg2 = 6.93147180559945286227e-01, lg2_h = 6.93147182464599609375e-01;
    const double lg2_l = -1.90465429995776804525e-09;
    const double ovt = 8.0085662595372944372e-017;
    const double cp = 9.61796693925975554329e-01, cp_h = 9.61796700954437255859e-01;
    const double cp_l = -7.02846165095275826516e-09;
    const double ivln2 = 1.44269504088896338700e+00, ivln2_h = 1.44269502162933349609e+00;
    const double ivln2_l = 1.92596299112661746887e-08;

    double t1, t2;
    rl_i32 hx = (rl_i32)(RL_F64_BITS(x) >> 32);
    rl_u32 lx = (rl_u32)RL_F64_BITS(x);
    rl_i32 hy = (rl_i32)(RL_F64_BITS(y) >> 32);
    rl_u32 ly = (rl_u32)RL_F64_BITS(y);
    rl_i32 ix = hx & 0x7fffffff;
    rl_i32 iy = hy & 0x7fffffff;

    if (((rl_u32)iy | ly) == 0) return 1.0;
    if (hx == 0x3ff00000 && lx == 0) return 1.0;
    if (ix > 0x7ff00000 || (ix == 0x7ff00000 && lx != 0) || iy > 0x7ff00000 ||
        (iy == 0x7ff00000 && ly != 0)) {
        return x + y;
    }
    rl_i32 yisint = 0, k, j;
    if (hx < 0) {
        if (iy >= 0x43400000) {
            yisint = 2;
        } else if (iy >= 0x3ff00000) {
            k = (iy >> 20) - 0x3ff;
            if (k > 20) {
                j = (rl_i32)(ly >> (52 - k));
                if (((rl_u32)j << (52 - k)) == ly) yisint = 2 - (j & 1);
            } else if (ly == 0) {
                j = iy >> (20 - k);
                if ((j << (20 - k)) == iy) yisint = 2 - (j & 1);
            }
        }
    }
    if (ly == 0) {
        if (iy == 0x7ff00000) {
            if (((ix - 0x3ff00000) | (rl_i32)lx) == 0) return 1.0;
            if (ix >= 0x3ff00000) return hy >= 0 ? y : 0.0;
            return hy >= 0 ? 0.0 : -y;
        }
        if (iy == 0x3ff00000) return hy >= 0 ? x : 1.0 / x;
        if (hy == 0x40000000) return x * x;
        if (hy == 0x3fe00000 && hx >= 0) return sqrt(x);
    }
    double ax = RL_F64_FROM(RL_F64_BITS(x) & 0x7fffffffffffffffull);
    if (lx == 0) {
        if (ix == 0x7ff00000 || ix == 0 || ix == 0x3ff00000) {
            double z = ax;
            if (hy < 0) z = 1.0 / z;
            if (hx < 0) {
                if (((ix - 0x3ff00000) | yisint) == 0) {
                    z = (z - z) / (z - z);
                } else if (yisint == 1) {
                    z = -z;
                }
            }
            return z;
        }
    }
    double s = 1.0;
    if (hx < 0) {
        if (yisint == 0) return (x - x) / (x - x);
        if (yisint == 1) s = -1.0;
    }
    if (iy > 0x41e00000) {
        if (iy > 0x43f00000) {
            if (ix <= 0x3fefffff) return hy < 0 ? huge * huge : tiny * tiny;
            if (ix >= 0x3ff00000) return hy > 0 ? huge * huge : tiny * tiny;
        }
        if (ix < 0x3fefffff) return hy < 0 ? s * huge * huge : s * tiny * tiny;
        if (ix > 0x3ff00000) return hy > 0 ? s * huge * huge : s * tiny * tiny;
        double t = ax - 1.0;
        double w = (t * t) * (0.5 - t * (0.3333333333333333333333 - t * 0.25));
        double u = ivln2_h * t;
        double v = t * ivln2_l - w * ivln2;
        t1 = rl_with_low(u + v, 0);
        t2 = v - (t1 - u);
    } else {
        rl_i32 n = 0;
        if (ix < 0x00100000) {
            ax *= two53;
            n -= 53;
            ix = (rl_i32)(RL_F64_BITS(ax) >> 32);
        }
        n += (ix >> 20) - 0x3ff;
        j = ix & 0x000fffff;
        ix = j | 0x3ff00000;
        if (j <= 0x3988E) {
            k = 0;
        } else if (j < 0xBB67A) {
            k = 1;
        } else {
            k = 0;
            n += 1;
            ix -= 0x00100000;
        }
        ax = rl_with_high(ax, (rl_u32)ix);
        double u = ax - (k ? bp1 : bp0);
        double v = 1.0 / (ax + (k ? bp1 : bp0));
        double ss = u * v;
        double s_h = rl_with_low(ss, 0);
        double t_h = rl_with_high(
            0.0, (((rl_u32)ix >> 1) | 0x20000000u) + 0x00080000u + ((rl_u32)k << 18));
        double t_l = ax - (t_h - (k ? bp1 : bp0));
        double s_l = v * ((u - s_h * t_h) - s_h * t_l);
        double s2 = ss * ss;
        double r = s2 * s2 * (l1 + s2 * (l2 + s2 * (l3 + s2 * (l4 + s2 * (l5 + s2 * l6)))));
        r += s_l * (s_h + ss);
        s2 = s_h * s_h;
        t_h = rl_with_low(3.0 + s2 + r, 0);
        t_l = r - ((t_h - 3.0) - s2);
        u = s_h * t_h;
        v = s_l * t_h + t_l * ss;
        double p_h = rl_with_low(u + v, 0);
        double p_l = v - (p_h - u);
        double z_h = cp_h * p_h;
        double z_l = cp_l * p_h + p_l * cp + (k ? dp_l1 : dp_l0);
        double t = (double)n;
        t1 = rl_with_low(((z_h + z_l) + (k ? dp_h1 : dp_h0)) + t, 0);
        t2 = z_l - (((t1 - t) - (k ? dp_h1 : dp_h0)) - z_h);
    }
    double y1 = rl_with_low(y, 0);
    double p_l = (y - y1) * t1 + y * t2;
    double p_h = y1 * t1;
    double z = p_l + p_h;
    j = (rl_i32)(RL_F64_BITS(z) >> 32);
    rl_i32 i = (rl_i32)RL_F64_BITS(z);
    if (j >= 0x40900000) {
        if (((j - 0x40900000) | i) != 0) return s * huge * huge;
        if (p_l + ovt > z - p_h) return s * huge * huge;
    } else if ((j & 0x7fffffff) >= 0x4090cc00) {
        if ((((rl_u32)j - 0xc090cc00u) | (rl_u32)i) != 0) return s * tiny * tiny;
        if (p_l <= z - p_h) return s * tiny * tiny;
    }
    i = j & 0x7fffffff;
    k = (i >> 20) - 0x3ff;
    rl_i32 n = 0;
    if (i > 0x3fe00000) {
        n = j + (0x00100000 >> (k + 1));
        k = ((n & 0x7fffffff) >> 20) - 0x3ff;
        double t = rl_with_high(0.0, (rl_u32)(n & ~(0x000fffff >> k)));
        n = ((n & 0x000fffff) | 0x00100000) >> (20 - k);
        if (j < 0) n = -n;
        p_h -= t;
    }
    double t = rl_with_low(p_l + p_h, 0);
    double u = t * lg2_h;
    double v = (p_l - (t - p_h)) * lg2 + t * lg2_l;
    z = u + v;
    double w = v - (z - u);
    t = z * z;
    t1 = z - t * (p1 + t * (p2 + t * (p3 + t * (p4 + t * p5))));
    double r = (z * t1) / (t1 - 2.0) - (w + z * w);
    z = 1.0 - (r - z);
    j = (rl_i32)(RL_F64_BITS(z) >> 32);
    j += (rl_i32)((rl_u32)n << 20);
    if ((j >> 20) <= 0) {
        z = rl_scalbn(z, n);
    } else {
        z = rl_with_high(z, (rl_u32)j);
    }
    return s * z;
}

// ---- sin, cos (sin.rs, cos.rs, k_sin.rs, k_cos.rs, rem_pio2.rs) ------------------------
//
// For |x| < 2^20 * pi / 2 only: rem_pio2's small and medium reductions are ported, not its
// large one (rem_pio2_large, for |x| from 2^20 * pi / 2 up), so larger finite arguments
// give NaN here where libm gives their sine. The callers stay far below: the normal
// samples' Box-Muller angle 2 pi u lies in [0, 2 pi).

RL_FN double rl_k_sin(double x, double y, rl_i32 iy) {
    const double s1 = -1.66666666666666324348e-01;
    const double s2 = 8.33333333332248946124e-03;
    const double s3 = -1.98412698298579493134e-04;
    const double s4 = 2.75573137070700676789e-06;
    const double s5 = -2.50507602534068634195e-08;
    const double s6 = 1.58969099521155010221e-10;
    double z = x * x;
    double w = z * z;
    double r = s2 + z * (s3 + z * s4) + z * w * (s5 + z * s6);
    double v = z * x;
    if (iy == 0) return x + v * (s1 + z * r);
    return x - ((z * (0.5 * y - v * r) - y) - v * s1);
}

RL_FN double rl_k_cos(double x, double y) {
    const double c1 = 4.16666666666666019037e-02;
    const double c2 = -1.38888888888741095749e-03;
    const double c3 = 2.48015872894767294178e-05;
    const double c4 = -2.75573143513906633035e-07;
    const double c5 = 2.08757232129817482790e-09;
    const double c6 = -1.13596475577881948265e-11;
    double z = x * x;
    double w = z * z;
    double r = z * (c1 + z * (c2 + z * c3)) + w * w * (c4 + z * (c5 + z * c6));
    double hz = 0.5 * z;
    w = 1.0 - hz;
    return w + (((1.0 - w) - hz) + (z * r - x * y));
}

#define RL_PIO2_1 1.57079632673412561417e+00
#define RL_PIO2_1T 6.07710050650619224932e-11

RL_FN rl_i32 rl_rem_pio2_medium(double x, rl_u32 ix, double* y0, double* y1) {
    const double to_int = 1.5 / 2.2204460492503131e-16;
    const double inv_pio2 = 6.36619772367581382433e-01;
    const double pio2_2 = 6.07710050630396597660e-11;
    const double pio2_2t = 2.02226624879595063154e-21;
    const double pio2_3 = 2.02226624871116645580e-21;
    const double pio2_3t = 8.47842766036889956997e-32;
    double tmp = x * inv_pio2 + to_int;
    double f_n = tmp - to_int;
    rl_i32 n = (rl_i32)f_n;
    double r = x - f_n * RL_PIO2_1;
    double w = f_n * RL_PIO2_1T;
    double y = r - w;
    rl_i32 ey = (rl_i32)(RL_F64_BITS(y) >> 52) & 0x7ff;
    rl_i32 ex = (rl_i32)(ix >> 20);
    if (ex - ey > 16) {
        double t = r;
        w = f_n * pio2_2;
        r = t - w;
        w = f_n * pio2_2t - ((t - r) - w);
        y = r - w;
        ey = (rl_i32)(RL_F64_BITS(y) >> 52) & 0x7ff;
        if (ex - ey > 49) {
            t = r;
            w = f_n * pio2_3;
            r = t - w;
            w = f_n * pio2_3t - ((t - r) - w);
            y = r - w;
        }
    }
    *y0 = y;
    *y1 = (r - y) - w;
    return n;
}

// x = n * pi / 2 + (y0 + y1), for finite |x| < 2^20 * pi / 2 (the caller checks).
RL_FN rl_i32 rl_rem_pio2(double x, double* y0, double* y1) {
    rl_u64 bits = RL_F64_BITS(x);
    rl_i32 sign = (rl_i32)(bits >> 63);
    rl_u32 ix = (rl_u32)(bits >> 32) & 0x7fffffffu;
    if (ix <= 0x400f6a7au) {
        if ((ix & 0xfffffu) == 0x921fbu) return rl_rem_pio2_medium(x, ix, y0, y1);
        if (ix <= 0x4002d97cu) {
            if (sign == 0) {
                double z = x - RL_PIO2_1;
                *y0 = z - RL_PIO2_1T;
                *y1 = (z - *y0) - RL_PIO2_1T;
                return 1;
            }
            double z = x + RL_PIO2_1;
            *y0 = z + RL_PIO2_1T;
            *y1 = (z - *y0) + RL_PIO2_1T;
            return -1;
        }
        if (sign == 0) {
            double z = x - 2.0 * RL_PIO2_1;
            *y0 = z - 2.0 * RL_PIO2_1T;
            *y1 = (z - *y0) - 2.0 * RL_PIO2_1T;
            return 2;
        }
        double z = x + 2.0 * RL_PIO2_1;
        *y0 = z + 2.0 * RL_PIO2_1T;
        *y1 = (z - *y0) + 2.0 * RL_PIO2_1T;
        return -2;
    }
    if (ix <= 0x401c463bu) {
        if (ix <= 0x4015fdbcu) {
            if (ix == 0x4012d97cu) return rl_rem_pio2_medium(x, ix, y0, y1);
            if (sign == 0) {
                double z = x - 3.0 * RL_PIO2_1;
                *y0 = z - 3.0 * RL_PIO2_1T;
                *y1 = (z - *y0) - 3.0 * RL_PIO2_1T;
                return 3;
            }
            double z = x + 3.0 * RL_PIO2_1;
            *y0 = z + 3.0 * RL_PIO2_1T;
            *y1 = (z - *y0) + 3.0 * RL_PIO2_1T;
            return -3;
        }
        if (ix == 0x401921fbu) return rl_rem_pio2_medium(x, ix, y0, y1);
        if (sign == 0) {
            double z = x - 4.0 * RL_PIO2_1;
            *y0 = z - 4.0 * RL_PIO2_1T;
            *y1 = (z - *y0) - 4.0 * RL_PIO2_1T;
            return 4;
        }
        double z = x + 4.0 * RL_PIO2_1;
        *y0 = z + 4.0 * RL_PIO2_1T;
        *y1 = (z - *y0) + 4.0 * RL_PIO2_1T;
        return -4;
    }
    return rl_rem_pio2_medium(x, ix, y0, y1);
}

// libm's sin (iy: 0) or cos (1) of x, |x| < 2^20 * pi / 2 (NaN beyond, see above).
RL_FN double rl_sin_or_cos(double x, rl_i32 cosine) {
    rl_u32 ix = (rl_u32)(RL_F64_BITS(x) >> 32) & 0x7fffffffu;
    if (ix <= 0x3fe921fbu) {
        if (cosine) {
            if (ix < 0x3e46a09eu && (rl_i32)x == 0) return 1.0;
            return rl_k_cos(x, 0.0);
        }
        if (ix < 0x3e500000u) return x;
        return rl_k_sin(x, 0.0, 0);
    }
    if (ix >= 0x7ff00000u) return x - x;
    if (ix >= 0x413921fbu) return RL_F64_FROM(0x7ff8000000000000ull);
    double y0, y1;
    rl_i32 n = rl_rem_pio2(x, &y0, &y1) + cosine;
    switch (n & 3) {
        case 0: return rl_k_sin(y0, y1, 1);
        case 1: return rl_k_cos(y0, y1);
        case 2: return -rl_k_sin(y0, y1, 1);
        default: return -rl_k_cos(y0, y1);
    }
}

RL_FN double rl_sin(double x) { return rl_sin_or_cos(x, 0); }
RL_FN double rl_cos(double x) { return rl_sin_or_cos(x, 1); }
