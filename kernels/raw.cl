/*
 * raw.cl: 8-bit luma from a raw sensor's samples: wide mono (luma_mono) and Bayer mosaics
 * (luma_bayer).
 *
 * Both kernels read  src (uchar, row stride src_stride in bytes), width x height samples,
 * and write          dst (uchar, row stride dst_stride in bytes), one luma byte per pixel;
 * shift is the sample's bits beyond 8, red_x and red_y (luma_bayer) the column and row
 * parities of the mosaic's red pixel (V4L2's RGGB: 0, 0; GRBG: 1, 0; GBRG: 0, 1; BGGR: 1, 1).
 * Work size: 2-D, x = ceil(width / 16) work-items (16 pixels each, a vector fast path and a
 * scalar path for the row's ends), y = height rows. Work-items outside the image return at
 * once, so the host may round the global size up to its local size.
 *
 * How the samples are stored is a build option:
 *   (none)          one byte a sample
 *   -DSAMPLES_LE16  a little-endian 16-bit word a sample (10, 12 or 16 bits), read a byte
 *                   at a time, so any stride works
 *   -DSAMPLES_MIPI10  MIPI CSI-2 RAW10: 4 samples in 5 bytes, high 8 bits each, then their
 *                   low 2 bits (the first sample's in bits 0-1)
 *   -DSAMPLES_MIPI12  MIPI CSI-2 RAW12: 2 samples in 3 bytes, high 8 bits each, then their
 *                   low 4 bits (the first sample's in bits 0-3)
 *   -DSTREAMING_STORES  16-byte accesses as one unaligned SIMD instruction (CPUs, as in
 *                   luma.cl)
 * Each sample v is first reduced to 8 bits, rounding half up and saturating:
 *   s8 = min(255, (v + 2^(shift-1)) >> shift) = min(255, (v >> shift) + bit (shift-1) of v)
 * (the second form cannot overflow a 16-bit lane). A word with bits set above its depth
 * saturates.
 *
 * luma_bayer then matches OpenCV's cvtColor(COLOR_Bayer..2GRAY) on the 8-bit samples bit
 * for bit (V4L2's RGGB is OpenCV's BayerBG: OpenCV names the 2x2 cell at (1, 1)). Off the
 * border, each pixel weighs its own sample and the bilinear estimates of the other two
 * colours with OpenCV's 14-bit weights R 4899, G 9617, B 1868, in one sum whose weights
 * add up to 65536:
 *   red or blue pixel: 4 own * self + G * (4 side neighbours) + other * (4 diagonals)
 *   green pixel:       2 * (2 G * self + row colour * (left + right)
 *                           + the other colour * (up + down))
 *   luma = (sum + 32768) >> 16
 * The border copies its neighbour inside (column 0 is column 1, the last column the one
 * before it, then row 0 is row 1 and the last row the one before it); a frame narrower or
 * shorter than 3 pixels is all 0, as OpenCV leaves it.
 */

#define PIXELS_PER_ITEM 16

#define R2Y 4899u
#define G2Y 9617u
#define B2Y 1868u

#ifdef STREAMING_STORES
typedef uchar16 __attribute__((aligned(1))) unaligned_uchar16;
#define LOAD16(p) (*(__global const unaligned_uchar16 *)(p))
#define STORE16(v, p) (*(__global unaligned_uchar16 *)(p) = (v))
#else
#define LOAD16(p) vload16(0, (p))
#define STORE16(v, p) vstore16((v), 0, (p))
#endif

/* Sample x of a row, reduced to 8 bits. */
inline uint sample8(__global const uchar *row, uint x, uint shift)
{
#if defined(SAMPLES_LE16)
    uint v = (uint)row[2 * x] | (uint)row[2 * x + 1] << 8;
#elif defined(SAMPLES_MIPI10)
    __global const uchar *g = row + 5 * (x >> 2);
    uint v = (uint)g[x & 3] << 2 | ((uint)g[4] >> (2 * (x & 3)) & 3u);
#elif defined(SAMPLES_MIPI12)
    __global const uchar *g = row + 3 * (x >> 1);
    uint v = (uint)g[x & 1] << 4 | ((uint)g[2] >> (4 * (x & 1)) & 15u);
#else
    return row[x];
#endif
#if defined(SAMPLES_LE16) || defined(SAMPLES_MIPI10) || defined(SAMPLES_MIPI12)
    return min((v >> shift) + (v >> (shift - 1) & 1u), 255u);
#endif
}

/* Samples x .. x + 15 of a row, reduced to 8 bits, in 16-bit lanes (8-bit and
 * little-endian word samples). */
inline ushort16 samples16(__global const uchar *row, uint x, uint shift)
{
#if defined(SAMPLES_LE16)
    uchar16 a = LOAD16(row + 2 * x), b = LOAD16(row + 2 * x + 16);
    ushort16 v = convert_ushort16((uchar16)(a.even, b.even)) |
                 convert_ushort16((uchar16)(a.odd, b.odd)) << (ushort)8;
    ushort16 s = (v >> (ushort)shift) + (v >> (ushort)(shift - 1) & (ushort)1);
    return min(s, (ushort16)255);
#else
    return convert_ushort16(LOAD16(row + x));
#endif
}

#if defined(SAMPLES_MIPI10) || defined(SAMPLES_MIPI12)
/* MIPI-packed rows are unpacked a window at a time: the 30 bytes of the packing groups
 * that hold samples x0 - 1 to x0 + 16 (x0 a multiple of 16, at least 16), loaded as two
 * overlapping uchar16 (bytes 0-15 and 14-29, so nothing past the group of x0 + 16 is
 * read), and spread by shuffles into three vectors: samples from x0 - 1, x0 and x0 + 1.
 * Reduced to 8 bits, a sample is its high byte plus its rounding bit, the highest of its
 * low bits, saturated. The swizzles pick each lane's high and low-bits bytes from a
 * (bytes 0-15) and b (bytes 14-29), constant shuffles the compiler turns into a
 * byte-shuffle instruction where there is one (POCL's shuffle2 builtin went element by
 * element, 20 times slower); each lane's rounding bit is tested with a mask (a shift
 * by a count per 16-bit lane has no AVX2 instruction) and added with saturation. */
#if defined(SAMPLES_MIPI10)
#define GROUP_SAMPLES 4
#define GROUP_BYTES 5
#define LEFT_HI (uchar16)(a.s3, a.s5, a.s6, a.s7, a.s8, a.sa, a.sb, a.sc, a.sd, a.sf, b.s2, b.s3, b.s4, b.s6, b.s7, b.s8)
#define LEFT_LO (uchar16)(a.s4, a.s9, a.s9, a.s9, a.s9, a.se, a.se, a.se, a.se, b.s5, b.s5, b.s5, b.s5, b.sa, b.sa, b.sa)
#define LEFT_BIT (uchar16)(128, 2, 8, 32, 128, 2, 8, 32, 128, 2, 8, 32, 128, 2, 8, 32)
#define CENTRE_HI (uchar16)(a.s5, a.s6, a.s7, a.s8, a.sa, a.sb, a.sc, a.sd, a.sf, b.s2, b.s3, b.s4, b.s6, b.s7, b.s8, b.s9)
#define CENTRE_LO (uchar16)(a.s9, a.s9, a.s9, a.s9, a.se, a.se, a.se, a.se, b.s5, b.s5, b.s5, b.s5, b.sa, b.sa, b.sa, b.sa)
#define CENTRE_BIT (uchar16)(2, 8, 32, 128, 2, 8, 32, 128, 2, 8, 32, 128, 2, 8, 32, 128)
#define RIGHT_HI (uchar16)(a.s6, a.s7, a.s8, a.sa, a.sb, a.sc, a.sd, a.sf, b.s2, b.s3, b.s4, b.s6, b.s7, b.s8, b.s9, b.sb)
#define RIGHT_LO (uchar16)(a.s9, a.s9, a.s9, a.se, a.se, a.se, a.se, b.s5, b.s5, b.s5, b.s5, b.sa, b.sa, b.sa, b.sa, b.sf)
#define RIGHT_BIT (uchar16)(8, 32, 128, 2, 8, 32, 128, 2, 8, 32, 128, 2, 8, 32, 128, 2)
#else
#define GROUP_SAMPLES 2
#define GROUP_BYTES 3
#define LEFT_HI (uchar16)(a.s1, a.s3, a.s4, a.s6, a.s7, a.s9, a.sa, a.sc, a.sd, a.sf, b.s2, b.s4, b.s5, b.s7, b.s8, b.sa)
#define LEFT_LO (uchar16)(a.s2, a.s5, a.s5, a.s8, a.s8, a.sb, a.sb, a.se, a.se, b.s3, b.s3, b.s6, b.s6, b.s9, b.s9, b.sc)
#define LEFT_BIT (uchar16)(128, 8, 128, 8, 128, 8, 128, 8, 128, 8, 128, 8, 128, 8, 128, 8)
#define CENTRE_HI (uchar16)(a.s3, a.s4, a.s6, a.s7, a.s9, a.sa, a.sc, a.sd, a.sf, b.s2, b.s4, b.s5, b.s7, b.s8, b.sa, b.sb)
#define CENTRE_LO (uchar16)(a.s5, a.s5, a.s8, a.s8, a.sb, a.sb, a.se, a.se, b.s3, b.s3, b.s6, b.s6, b.s9, b.s9, b.sc, b.sc)
#define CENTRE_BIT (uchar16)(8, 128, 8, 128, 8, 128, 8, 128, 8, 128, 8, 128, 8, 128, 8, 128)
#define RIGHT_HI (uchar16)(a.s4, a.s6, a.s7, a.s9, a.sa, a.sc, a.sd, a.sf, b.s2, b.s4, b.s5, b.s7, b.s8, b.sa, b.sb, b.sd)
#define RIGHT_LO (uchar16)(a.s5, a.s8, a.s8, a.sb, a.sb, a.se, a.se, b.s3, b.s3, b.s6, b.s6, b.s9, b.s9, b.sc, b.sc, b.sf)
#define RIGHT_BIT (uchar16)(128, 8, 128, 8, 128, 8, 128, 8, 128, 8, 128, 8, 128, 8, 128, 8)
#endif

inline ushort16 unpack16(uchar16 high, uchar16 low, uchar16 rounding_bit)
{
    uchar16 round_up = as_uchar16((low & rounding_bit) != (uchar16)0) & (uchar)1;
    return convert_ushort16(add_sat(high, round_up));
}
#endif

/* Samples x0 - 1 .. x0 + 14 (left), x0 .. x0 + 15 (centre) and x0 + 1 .. x0 + 16 (right)
 * of a row, reduced to 8 bits, for x0 a multiple of 16 with 1 <= x0 and x0 + 16 < width. */
inline void window16(__global const uchar *row, uint x0, uint shift, ushort16 *left,
                     ushort16 *centre, ushort16 *right)
{
#if defined(SAMPLES_MIPI10) || defined(SAMPLES_MIPI12)
    __global const uchar *p = row + GROUP_BYTES * (x0 / GROUP_SAMPLES - 1);
    uchar16 a = LOAD16(p), b = LOAD16(p + 14);
    *left = unpack16(LEFT_HI, LEFT_LO, LEFT_BIT);
    *centre = unpack16(CENTRE_HI, CENTRE_LO, CENTRE_BIT);
    *right = unpack16(RIGHT_HI, RIGHT_LO, RIGHT_BIT);
#else
    *left = samples16(row, x0 - 1, shift);
    *centre = samples16(row, x0, shift);
    *right = samples16(row, x0 + 1, shift);
#endif
}

/* Mono samples wider than 8 bits (V4L2 Y10, Y12, Y16, Y10P, Y12P). red_x and red_y are
 * not read; the parameters are luma_bayer's, so the host launches both alike. */
__kernel void luma_mono(__global const uchar *src, uint src_stride, uint width, uint height,
                        __global uchar *dst, uint dst_stride, uint shift, uint red_x,
                        uint red_y)
{
    uint x0 = get_global_id(0) * PIXELS_PER_ITEM;
    uint y = get_global_id(1);
    if (x0 >= width || y >= height)
        return;
    __global const uchar *s = src + (size_t)y * src_stride;
    __global uchar *d = dst + (size_t)y * dst_stride;
#if defined(SAMPLES_MIPI10) || defined(SAMPLES_MIPI12)
    /* The packed window reads one sample on each side. */
    if (x0 >= 1 && x0 + PIXELS_PER_ITEM <= width - 1) {
        __global const uchar *p = s + GROUP_BYTES * (x0 / GROUP_SAMPLES - 1);
        uchar16 a = LOAD16(p), b = LOAD16(p + 14);
        STORE16(convert_uchar16(unpack16(CENTRE_HI, CENTRE_LO, CENTRE_BIT)), d + x0);
        return;
    }
#else
    if (x0 + PIXELS_PER_ITEM <= width) {
        STORE16(convert_uchar16(samples16(s, x0, shift)), d + x0);
        return;
    }
#endif
    for (uint x = x0; x < min(x0 + PIXELS_PER_ITEM, width); x++)
        d[x] = (uchar)sample8(s, x, shift);
}

/* One pixel off the border (1 <= x <= width - 2, 1 <= y <= height - 2); `up`, `mid` and
 * `down` are rows y - 1, y and y + 1. */
inline uchar bayer_pixel(__global const uchar *up, __global const uchar *mid,
                         __global const uchar *down, uint x, uint shift, bool red_row,
                         bool own_colour)
{
    uint self = sample8(mid, x, shift);
    uint left = sample8(mid, x - 1, shift), right = sample8(mid, x + 1, shift);
    uint above = sample8(up, x, shift), below = sample8(down, x, shift);
    uint sum;
    if (own_colour) {
        uint diagonal = sample8(up, x - 1, shift) + sample8(up, x + 1, shift) +
                        sample8(down, x - 1, shift) + sample8(down, x + 1, shift);
        uint own = red_row ? R2Y : B2Y, other = red_row ? B2Y : R2Y;
        sum = 4u * own * self + G2Y * (left + right + above + below) + other * diagonal;
    } else {
        uint beside = red_row ? R2Y : B2Y, across = red_row ? B2Y : R2Y;
        sum = 2u * (2u * G2Y * self + beside * (left + right) + across * (above + below));
    }
    return (uchar)((sum + 32768u) >> 16);
}

/* Bayer mosaics at every sample depth (V4L2 RGGB, RG10, RG12, RG16, pRAA, pRCC and the
 * other three patterns of each). */
__kernel void luma_bayer(__global const uchar *src, uint src_stride, uint width, uint height,
                         __global uchar *dst, uint dst_stride, uint shift, uint red_x,
                         uint red_y)
{
    uint x0 = get_global_id(0) * PIXELS_PER_ITEM;
    uint y = get_global_id(1);
    if (x0 >= width || y >= height)
        return;
    __global uchar *d = dst + (size_t)y * dst_stride;
    uint end = min(x0 + PIXELS_PER_ITEM, width);
    if (width < 3 || height < 3) {
        for (uint x = x0; x < end; x++)
            d[x] = 0;
        return;
    }
    /* The border rows are copies of their neighbours inside. */
    uint yc = clamp(y, 1u, height - 2);
    __global const uchar *mid = src + (size_t)yc * src_stride;
    __global const uchar *up = mid - src_stride, *down = mid + src_stride;
    bool red_row = (yc & 1u) == red_y;
    /* The column parity of this row's red or blue pixels (the others are green). */
    uint own_parity = red_row ? red_x : red_x ^ 1u;
    if (x0 >= 1 && x0 + PIXELS_PER_ITEM <= width - 1) {
        ushort16 ul, uc, ur, ml, mc, mr, dl, dc, dr;
        window16(up, x0, shift, &ul, &uc, &ur);
        window16(mid, x0, shift, &ml, &mc, &mr);
        window16(down, x0, shift, &dl, &dc, &dr);
        uint16 self = convert_uint16(mc);
        uint16 horizontal = convert_uint16(ml + mr);
        uint16 vertical = convert_uint16(uc + dc);
        uint16 diagonal = convert_uint16(ul + ur + dl + dr);
        uint own = red_row ? R2Y : B2Y, other = red_row ? B2Y : R2Y;
        uint16 coloured = 4u * own * self + G2Y * (horizontal + vertical) + other * diagonal;
        uint16 green = 2u * (2u * G2Y * self + own * horizontal + other * vertical);
        /* Lanes whose column has the row's own colour take `coloured` (x0 is a multiple
         * of 16, so a lane's column parity is its own). */
        int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        int16 own_lane = (lane & 1) == (int)own_parity;
        uint16 sum = select(green, coloured, own_lane);
        STORE16(convert_uchar16((sum + 32768u) >> 16), d + x0);
    } else {
        for (uint x = x0; x < end; x++) {
            uint xc = clamp(x, 1u, width - 2);
            d[x] = bayer_pixel(up, mid, down, xc, shift, red_row, (xc & 1u) == own_parity);
        }
    }
}
