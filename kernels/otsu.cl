/*
 * otsu.cl: Otsu's threshold from the 256-bin histogram, on the device, and the 0/255 mask.
 *
 * Over 500 lines as one room: the threshold is OpenCV's only with its double arithmetic
 * rounded as OpenCV's is, so the binary64 emulation (most of the file) lives beside the
 * one loop that uses it, and is built into Sobel's program with it (-DOTSU_BESIDE).
 *
 * otsu_threshold reads hist[256] and total (= width * height), writes the counts and the
 *   threshold to results[0..256] and results[256], and leaves hist zeroed for the next
 *   frame's counting (no separate command to clear it).
 *   Work size: one work-group of any size up to 256 (global size = local size). Its body,
 *   otsu_group, also runs as the first work-group of Sobel's launch (sobel.cl built with
 *   -DOTSU_BESIDE after this file), beside Sobel's groups. It runs OpenCV's own
 *   algorithm (getThreshVal_Otsu_8u, the code cv2.threshold(THRESH_OTSU) runs without IPP)
 *   step for step, in the same order of operations, with every double operation done by the
 *   binary64 emulation below, so the result is the one OpenCV computes, rounding included:
 *   flat stretches of the histogram, where mu1 * q1 / q1 may drift by an ulp, and exact ties
 *   (the first maximum wins) come out as they do there. No cl_khr_fp64 is needed.
 *   Only the running sums q1 and mu1 are sequential: one work-item computes them step by
 *   step, then the work-items score the thresholds in parallel and the first maximum is
 *   found by a reduction that prefers the lower threshold on equal scores.
 *   Built with -DOTSU_FP64 (devices with cl_khr_fp64) the same code runs on native
 *   doubles, which round every operation as the emulation does, and the sequential part
 *   is shorter: the divisions by q1 leave it (otsu_chain_fast: reciprocals of all q1 in
 *   parallel, quotients from them by multiply and one correction, every quotient then
 *   checked in parallel against its neighbours, the exact chain run again if one is off).
 *
 *   The emulation covers what the algorithm can produce: zero and normal numbers with
 *   round-to-nearest-even add, subtract, multiply and divide. Operands are sums of at most
 *   2^32 pixels and values below 256, quotients by probabilities >= FLT_EPSILON, so no result
 *   leaves the normal range (no infinity, NaN or subnormal arises).
 *
 * binarize reads the width x height image src and the threshold (results[256] of
 *   otsu_threshold), writes the width x height image dst: 255 where
 *   src > threshold, else 0 (THRESH_BINARY). Both images are dense (src_stride = width, as
 *   the caller must pass), so the kernel treats them as one flat run of
 *   count = width * height bytes. Work size: 1-D, ceil(count / 16)
 *   work-items of 16 bytes (aligned 16-byte loads and stores; the buffers start aligned),
 *   the last one finishing a partial run byte by byte. Built with -DSTREAMING_STORES
 *   (CPUs), the stores are non-temporal.
 */

#ifdef OTSU_FP64
/* -DOTSU_FP64, on devices with cl_khr_fp64: the same code on the device's own doubles, whose
 * add, subtract, multiply and divide are correctly rounded; contraction into fused
 * multiply-adds is off, so every operation rounds as OpenCV's do. */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF
typedef double f64;
#define F64_ONE 1.0
#define F64_FLT_EPSILON 0x1p-23
#define F64_ONE_MINUS_FLT_EPSILON (1.0 - 0x1p-23) /* exact */
inline f64 f64_from_ulong(ulong n) { return (double)n; }
inline f64 f64_add(f64 a, f64 b) { return a + b; }
inline f64 f64_sub(f64 a, f64 b) { return a - b; }
inline f64 f64_mul(f64 a, f64 b) { return a * b; }
inline f64 f64_div(f64 a, f64 b) { return a / b; }
inline int f64_lt(f64 a, f64 b) { return a < b; }
#else
typedef ulong f64;

#define F64_SIGN (1UL << 63)
#define F64_HIDDEN (1UL << 52)
#define F64_FRACTION (F64_HIDDEN - 1)
#define F64_ONE 0x3FF0000000000000UL
#define F64_FLT_EPSILON 0x3E80000000000000UL /* 2^-23, FLT_EPSILON as a double */
#define F64_ONE_MINUS_FLT_EPSILON 0x3FEFFFFFC0000000UL /* 1 - 2^-23, exact */

inline int f64_exp(f64 a) { return (int)((a >> 52) & 0x7FF); }
inline ulong f64_mant(f64 a) { return (a & F64_FRACTION) | F64_HIDDEN; }
inline int f64_is_zero(f64 a) { return (a & ~F64_SIGN) == 0; }

/*
 * Packs sign, exponent and a significand whose leading one is at bit 62 (value =
 * m * 2^(exp - 1023 - 62)); bit 0 may carry a sticky bit. Rounds to nearest, ties to even.
 */
inline f64 f64_round_pack(ulong sign, int exp, ulong m)
{
    ulong dropped = m & 0x3FF;
    m >>= 10;
    if (dropped > 0x200 || (dropped == 0x200 && (m & 1)))
        m++;
    if (m == (1UL << 53)) {
        m >>= 1;
        exp++;
    }
    return sign | ((ulong)exp << 52) | (m & F64_FRACTION);
}

/* Moves the leading one of a non-zero m to bit 62, adjusting exp; shifts right keep a sticky bit. */
inline f64 f64_normalize_round_pack(ulong sign, int exp, ulong m)
{
    int shift = (int)clz(m) - 1;
    if (shift < 0) {
        m = (m >> 1) | (m & 1);
        exp += 1;
    } else {
        m <<= shift;
        exp -= shift;
    }
    return f64_round_pack(sign, exp, m);
}

/* Exact for n < 2^53, which holds for every integer the algorithm converts. */
inline f64 f64_from_ulong(ulong n)
{
    if (n == 0)
        return 0;
    return f64_normalize_round_pack(0, 1023 + 62, n);
}

/* Shifts right, ORing every bit shifted out into bit 0 (SoftFloat's "jamming"). */
inline ulong shift_right_jam(ulong m, int d)
{
    if (d == 0)
        return m;
    if (d >= 64)
        return m != 0;
    return (m >> d) | ((m << (64 - d)) != 0);
}

inline f64 f64_add(f64 a, f64 b)
{
    if (f64_is_zero(a))
        return f64_is_zero(b) ? (a & b) : b; /* -0 + -0 = -0, otherwise +0 */
    if (f64_is_zero(b))
        return a;
    /* Order so that |a| >= |b|. */
    if ((a & ~F64_SIGN) < (b & ~F64_SIGN)) {
        f64 t = a;
        a = b;
        b = t;
    }
    int ea = f64_exp(a), eb = f64_exp(b);
    ulong ma = f64_mant(a) << 10, mb = shift_right_jam(f64_mant(b) << 10, ea - eb);
    ulong sign = a & F64_SIGN;
    if ((a ^ b) & F64_SIGN) {
        ulong m = ma - mb;
        if (m == 0)
            return 0;
        return f64_normalize_round_pack(sign, ea, m);
    }
    return f64_normalize_round_pack(sign, ea, ma + mb);
}

inline f64 f64_sub(f64 a, f64 b) { return f64_add(a, b ^ F64_SIGN); }

inline f64 f64_mul(f64 a, f64 b)
{
    ulong sign = (a ^ b) & F64_SIGN;
    if (f64_is_zero(a) || f64_is_zero(b))
        return sign;
    ulong ma = f64_mant(a), mb = f64_mant(b);
    ulong hi = mul_hi(ma, mb), lo = ma * mb; /* product in [2^104, 2^106) */
    ulong m = (hi << 22) | (lo >> 42) | ((lo & ((1UL << 42) - 1)) != 0);
    return f64_normalize_round_pack(sign, f64_exp(a) + f64_exp(b) - 1023, m);
}

inline f64 f64_div(f64 a, f64 b)
{
    ulong sign = (a ^ b) & F64_SIGN;
    if (f64_is_zero(a))
        return sign;
    ulong ma = f64_mant(a), mb = f64_mant(b);
    int exp = f64_exp(a) - f64_exp(b) + 1023;
    if (ma < mb) {
        ma <<= 1;
        exp--;
    }
    /* Long division: 63 quotient bits, the first one set, then the remainder as sticky.
     * mb <= ma < 2 mb gives the first bit; the integer divider then gives 10 bits a step
     * (the remainder is below mb < 2^53, so shifted by 10 it still fits in 64 bits). */
    ulong q = 1, rem = ma - mb;
    for (int i = 0; i < 6; i++) {
        ulong r = rem << 10;
        ulong d = r / mb;
        q = (q << 10) | d;
        rem = r - d * mb;
    }
    ulong r = rem << 2;
    ulong d = r / mb;
    q = (q << 2) | d;
    rem = r - d * mb;
    return f64_round_pack(sign, exp, q | (rem != 0));
}

/* a < b for zero or normal numbers of either sign. */
inline int f64_lt(f64 a, f64 b)
{
    if (f64_is_zero(a) && f64_is_zero(b))
        return 0;
    int na = (a & F64_SIGN) != 0, nb = (b & F64_SIGN) != 0;
    if (na != nb)
        return na;
    return na ? a > b : a < b;
}

#endif /* OTSU_FP64 */

#define BINS 256

/* Whether OpenCV skips the step whose sums are q1 and q2 = 1 - q1:
 * min(q1, q2) < FLT_EPSILON || max(q1, q2) > 1 - FLT_EPSILON. */
inline int otsu_skips(f64 q1, f64 q2)
{
    return f64_lt(q1, F64_FLT_EPSILON) || f64_lt(q2, F64_FLT_EPSILON) ||
           f64_lt(F64_ONE_MINUS_FLT_EPSILON, q1) || f64_lt(F64_ONE_MINUS_FLT_EPSILON, q2);
}

/*
 * The recurrences of q1 and mu1 in OpenCV's order, one work-item: each step rounds, so
 * they are sequential. Keeps every step's q1 and mu1 and whether OpenCV scores it.
 */
inline void otsu_chain(__local const f64 *p, __local const f64 *ip, __local f64 *q1s,
                       __local f64 *mu1s, __local uchar *scored)
{
    f64 mu1 = 0, q1 = 0;
    for (uint i = 0; i < BINS; i++) {
        mu1 = f64_mul(mu1, q1);
        q1 = f64_add(q1, p[i]);
        int skip = otsu_skips(q1, f64_sub(F64_ONE, q1));
        if (!skip)
            mu1 = f64_div(f64_add(mu1, ip[i]), q1);
        q1s[i] = q1;
        mu1s[i] = mu1;
        scored[i] = !skip;
    }
}

#ifdef OTSU_FP64
/* Steps of a sequential loop whose operands are loaded together (a divisor of BINS). */
#define CHAIN_BATCH 8

/*
 * x / b from r = 1 / b without a division: y = x * r is within an ulp of the quotient, and
 * one correction from its exact remainder (a fused multiply-add) rounds it correctly
 * (Markstein's theorem, for r the correctly rounded reciprocal). otsu_chain_fast does not
 * rely on the theorem: it checks every quotient with quotient_is_nearest.
 */
inline double quotient_from_reciprocal(double x, double b, double r)
{
    double y = x * r;
#ifdef OTSU_TEST_SKEW
    /* Tests only: every quotient an ulp off, so that every check fails. */
    return nextafter(fma(fma(-b, y, x), r, y), (double)INFINITY);
#else
    return fma(fma(-b, y, x), r, y);
#endif
}

/*
 * Whether y is x / b rounded to nearest, for b > 0: y must be strictly nearer to the
 * quotient than both its neighbours. |x - b z| is |b| times the distance from z to x / b,
 * and the fused multiply-adds round it monotonically, so "strictly smaller" after rounding
 * implies strictly smaller before (equal or NaN fails the check, never passes it wrongly).
 */
inline int quotient_is_nearest(double x, double b, double y)
{
    if (x == 0.0)
        return as_ulong(y) == as_ulong(x); /* 0 / b is 0 of x's sign */
    double here = fabs(fma(-b, y, x));
    double up = fabs(fma(-b, nextafter(y, (double)INFINITY), x));
    double down = fabs(fma(-b, nextafter(y, -(double)INFINITY), x));
    return here < up && here < down;
}

/*
 * otsu_chain's results with the division taken off the sequential path, all work-items
 * calling. Only the q1 sums and mu1's multiply, add and correction stay on one work-item;
 * the reciprocals of q1 and the checks of every quotient run in parallel. Where any
 * quotient is not the correctly rounded one (never seen; the check is the proof), the
 * exact chain runs again, so the results are otsu_chain's in every case.
 */
inline void otsu_chain_fast(__local const f64 *p, __local const f64 *ip, __local f64 *q1s,
                            __local f64 *mu1s, __local uchar *scored, __local f64 *scratch,
                            __local f64 *reciprocal, volatile __local int *wrong, uint lid,
                            uint n)
{
    /* The loops on one work-item take CHAIN_BATCH steps' operands into registers first, so
     * that only the arithmetic waits on the step before (one GPU thread issues in order:
     * a load in the chain would add its whole latency to every step). */
    if (lid == 0) {
        f64 q1 = 0;
        for (uint i = 0; i < BINS; i += CHAIN_BATCH) {
            f64 pv[CHAIN_BATCH];
#pragma unroll
            for (uint j = 0; j < CHAIN_BATCH; j++)
                pv[j] = p[i + j];
#pragma unroll
            for (uint j = 0; j < CHAIN_BATCH; j++) {
                q1 = q1 + pv[j];
                q1s[i + j] = q1;
            }
        }
        *wrong = 0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint i = lid; i < BINS; i += n) {
        f64 q1 = q1s[i];
        int skip = otsu_skips(q1, 1.0 - q1);
        scored[i] = !skip;
        reciprocal[i] = skip ? 0.0 : 1.0 / q1;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* scratch keeps each step's dividend for the checks. An unscored step's quotient
     * (by a reciprocal of 0) is computed and dropped rather than branched around. */
    if (lid == 0) {
        f64 mu1 = 0, q1 = 0;
        for (uint i = 0; i < BINS; i += CHAIN_BATCH) {
            f64 qv[CHAIN_BATCH], rv[CHAIN_BATCH], av[CHAIN_BATCH];
            uchar sv[CHAIN_BATCH];
#pragma unroll
            for (uint j = 0; j < CHAIN_BATCH; j++) {
                qv[j] = q1s[i + j];
                rv[j] = reciprocal[i + j];
                av[j] = ip[i + j];
                sv[j] = scored[i + j];
            }
#pragma unroll
            for (uint j = 0; j < CHAIN_BATCH; j++) {
                f64 m = mu1 * q1;
                q1 = qv[j];
                f64 x = m + av[j];
                f64 y = quotient_from_reciprocal(x, q1, rv[j]);
                mu1 = sv[j] ? y : m;
                scratch[i + j] = x;
                mu1s[i + j] = mu1;
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint i = lid; i < BINS; i += n)
        if (scored[i] && !quotient_is_nearest(scratch[i], q1s[i], mu1s[i]))
            atomic_or(wrong, 1);
    barrier(CLK_LOCAL_MEM_FENCE);
    /* wrong is the same for every work-item here: the barrier below is reached by all or none. */
    if (*wrong) {
        if (lid == 0)
            otsu_chain(p, ip, q1s, mu1s, scored);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}
#endif

/* otsu_group's local memory: one work-group's, declared by the kernel that calls it (OpenCL C
 * 1.2 allows __local variables only at a kernel's outermost scope). About 15 KB with
 * OTSU_FP64, 13 KB without. */
typedef struct {
    f64 p[BINS], ip[BINS], q1s[BINS], mu1s[BINS], lane_sigma[BINS];
    uint lane_index[BINS];
    ulong weights[BINS];
    uchar scored[BINS];
    f64 mean; /* mu */
#ifdef OTSU_FP64
    f64 reciprocal[BINS];
    int wrong;
#endif
} OtsuScratch;

/*
 * The threshold of the counts in hist, by one whole work-group of n <= 256 work-items
 * (lid = 0 .. n - 1, every one calling: it has barriers), as otsu_threshold describes.
 */
inline void otsu_group(__global uint *hist, uint total, __global uint *results,
                       __local OtsuScratch *s, uint lid, uint n)
{
    /* Every work-item divides for itself: no barrier before the bins are read. */
    f64 scale = f64_div(F64_ONE, f64_from_ulong(total));
    /* p_i = h[i] * scale and i * p_i depend on i alone. */
    for (uint i = lid; i < BINS; i += n) {
        uint h = hist[i];
        f64 p_i = f64_mul(f64_from_ulong(h), scale);
        s->p[i] = p_i;
        s->ip[i] = f64_mul(f64_from_ulong(i), p_i);
        s->weights[i] = (ulong)i * h;
        /* This work-item's bins are read for the last time here. */
        results[i] = h;
        hist[i] = 0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* mu = sum(i * h[i]) * scale. The sum is an integer below 2^53, so OpenCV's running
     * double sum is exact and equals this integer sum. The last work-item adds it while the
     * first runs the chain below (in another warp or wavefront, in a group of more than
     * one); the chain's barriers publish it before the scores read it. */
    if (lid == n - 1) {
        ulong weighted = 0;
        for (uint i = 0; i < BINS; i++)
            weighted += s->weights[i];
        s->mean = f64_mul(f64_from_ulong(weighted), scale);
    }

#ifdef OTSU_FP64
    otsu_chain_fast(s->p, s->ip, s->q1s, s->mu1s, s->scored, s->lane_sigma, s->reciprocal,
                    &s->wrong, lid, n);
#else
    if (lid == 0)
        otsu_chain(s->p, s->ip, s->q1s, s->mu1s, s->scored);
    barrier(CLK_LOCAL_MEM_FENCE);
#endif

    /* Each threshold's score depends only on that step's q1 and mu1: in parallel. Scores are
     * >= +0 (q1, q2 > 0, times d twice), so their bit patterns order like their values. Each
     * work-item keeps its first strict maximum above 0, as OpenCV's loop does. */
    f64 mu = s->mean, best = 0;
    uint best_i = 0;
    for (uint i = lid; i < BINS; i += n) {
        if (!s->scored[i])
            continue;
        f64 q1 = s->q1s[i], mu1 = s->mu1s[i];
        f64 q2 = f64_sub(F64_ONE, q1);
        f64 mu2 = f64_div(f64_sub(mu, f64_mul(q1, mu1)), q2);
        f64 d = f64_sub(mu1, mu2);
        f64 sigma = f64_mul(f64_mul(f64_mul(q1, q2), d), d);
        if (f64_lt(best, sigma)) {
            best = sigma;
            best_i = i;
        }
    }
    s->lane_sigma[lid] = best;
    s->lane_index[lid] = best_i;
    barrier(CLK_LOCAL_MEM_FENCE);
    /* The largest score, the lowest threshold among equal ones (OpenCV's first maximum),
     * by a tree over the lanes; a lane without a score above 0 holds (0, 0), so the
     * result is 0 when no score exceeds 0. */
    for (uint d = 1; d < n; d <<= 1) {
        if (lid % (2 * d) == 0 && lid + d < n) {
            f64 a = s->lane_sigma[lid], b = s->lane_sigma[lid + d];
            uint ia = s->lane_index[lid], ib = s->lane_index[lid + d];
            if (f64_lt(a, b) || (b == a && b != 0 && ib < ia)) {
                s->lane_sigma[lid] = b;
                s->lane_index[lid] = ib;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        results[BINS] = s->lane_index[0];
}

__kernel void otsu_threshold(__global uint *hist, uint total, __global uint *results)
{
    __local OtsuScratch scratch;
    otsu_group(hist, total, results, &scratch, get_local_id(0), get_local_size(0));
}

#ifndef OTSU_FP64
/*
 * otsu_f64_selftest: for tests only. For each i < count writes a+b, a-b, a*b, a/b and a<b
 * of the binary64 bit patterns a[i], b[i] to out[5 * i ...], so the emulation can be
 * compared bit for bit with the host's doubles. One work-item per pair.
 */
__kernel void otsu_f64_selftest(__global const ulong *a, __global const ulong *b, uint count,
                                __global ulong *out)
{
    uint i = get_global_id(0);
    if (i >= count)
        return;
    out[5 * i + 0] = f64_add(a[i], b[i]);
    out[5 * i + 1] = f64_sub(a[i], b[i]);
    out[5 * i + 2] = f64_mul(a[i], b[i]);
    out[5 * i + 3] = f64_div(a[i], b[i]);
    out[5 * i + 4] = f64_lt(a[i], b[i]);
}
#endif

#ifdef OTSU_FP64
/*
 * otsu_quotient_selftest: for tests only. For each i < count, with q = a[i] / b[i] (bit
 * patterns of doubles, b > 0), writes quotient_from_reciprocal(a, b, 1 / b) and
 * quotient_is_nearest of q, of the next double above q and of the next below to
 * out[4 * i ...].
 */
__kernel void otsu_quotient_selftest(__global const ulong *a, __global const ulong *b,
                                     uint count, __global ulong *out)
{
    uint i = get_global_id(0);
    if (i >= count)
        return;
    double x = as_double(a[i]), d = as_double(b[i]), q = x / d;
    out[4 * i + 0] = as_ulong(quotient_from_reciprocal(x, d, 1.0 / d));
    out[4 * i + 1] = quotient_is_nearest(x, d, q);
    out[4 * i + 2] = quotient_is_nearest(x, d, nextafter(q, (double)INFINITY));
    out[4 * i + 3] = quotient_is_nearest(x, d, nextafter(q, -(double)INFINITY));
}
#endif

#define PIXELS_PER_ITEM 16

__kernel void binarize(__global const uchar *src, uint src_stride, uint width, uint height,
                       __global const uint *results, __global uchar *dst)
{
    uint count = width * height;
    uint i = get_global_id(0);
    uint x0 = i * 16;
    if (x0 >= count)
        return;
    uchar t = (uchar)results[BINS];
    if (x0 + 16 <= count) {
        uchar16 v = ((__global const uchar16 *)src)[i];
        /* A vector comparison gives all ones (255) where true. */
        uchar16 m = as_uchar16(v > (uchar16)t);
#ifdef STREAMING_STORES
        /* Non-temporal on CPUs: no read of the line before it is overwritten. */
        __builtin_nontemporal_store(m, (__global uchar16 *)dst + i);
#else
        ((__global uchar16 *)dst)[i] = m;
#endif
    } else {
        for (uint x = x0; x < count; x++)
            dst[x] = src[x] > t ? 255 : 0;
    }
}
