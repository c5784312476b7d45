/*
 * luma.cl: 8-bit luma (Y) from the pixel formats cameras deliver.
 *
 * Every kernel reads  src (uchar, row stride src_stride in bytes), width x height pixels,
 * and writes          dst (uchar, row stride dst_stride in bytes), one luma byte per pixel.
 * Work size: 2-D, x = ceil(width / 16) work-items (16 pixels each, a uchar16 fast path and a
 * scalar tail for the last partial group of a row), y = height rows. Work-items outside the
 * image return at once, so the host may round the global size up to its local size.
 *
 * RGB to Y matches OpenCV's cvtColor(COLOR_RGB2GRAY) for 8-bit images bit for bit:
 *   Y = (9798 R + 19235 G + 3735 B + 16384) >> 15   (15-bit fixed point, round half up)
 * The largest sum is 255 * 32768 + 16384, so Y never exceeds 255 and needs no saturation.
 */

#define PIXELS_PER_ITEM 16

/* 16-byte loads and stores at any alignment. On CPUs (STREAMING_STORES, POCL) one
 * unaligned SIMD instruction each, through a uchar16 type aligned like a uchar: POCL's
 * vload16 and vstore16 split them into 4-byte pieces and single bytes (as in sobel.cl). */
#ifdef STREAMING_STORES
typedef uchar16 __attribute__((aligned(1))) unaligned_uchar16;
#define LOAD16(p) (*(__global const unaligned_uchar16 *)(p))
#define STORE16(v, p) (*(__global unaligned_uchar16 *)(p) = (v))
#else
#define LOAD16(p) vload16(0, (p))
#define STORE16(v, p) vstore16((v), 0, (p))
#endif

inline uchar y_from_rgb(uint r, uint g, uint b)
{
    return (uchar)((9798u * r + 19235u * g + 3735u * b + 16384u) >> 15);
}

inline uchar16 y_from_rgb16(uchar16 r, uchar16 g, uchar16 b)
{
    uint16 y = (convert_uint16(r) * 9798u + convert_uint16(g) * 19235u +
                convert_uint16(b) * 3735u + 16384u) >> 15;
    return convert_uchar16(y);
}

/* GREY frames and the Y plane of NV12 (the plane that comes first, height rows). */
__kernel void luma_grey(__global const uchar *src, uint src_stride, uint width, uint height,
                        __global uchar *dst, uint dst_stride)
{
    uint x0 = get_global_id(0) * PIXELS_PER_ITEM;
    uint y = get_global_id(1);
    if (x0 >= width || y >= height)
        return;
    __global const uchar *s = src + (size_t)y * src_stride;
    __global uchar *d = dst + (size_t)y * dst_stride;
    if (x0 + PIXELS_PER_ITEM <= width) {
        STORE16(LOAD16(s + x0), d + x0);
    } else {
        for (uint x = x0; x < width; x++)
            d[x] = s[x];
    }
}

/* Packed 4:2:2: YUYV has Y in the even bytes, UYVY in the odd bytes. */
#define PACKED_422_KERNEL(NAME, Y_OFFSET, SWIZZLE)                                              \
__kernel void NAME(__global const uchar *src, uint src_stride, uint width, uint height,         \
                   __global uchar *dst, uint dst_stride)                                        \
{                                                                                               \
    uint x0 = get_global_id(0) * PIXELS_PER_ITEM;                                               \
    uint y = get_global_id(1);                                                                  \
    if (x0 >= width || y >= height)                                                             \
        return;                                                                                 \
    __global const uchar *s = src + (size_t)y * src_stride;                                     \
    __global uchar *d = dst + (size_t)y * dst_stride;                                           \
    if (x0 + PIXELS_PER_ITEM <= width) {                                                        \
        uchar16 a = LOAD16(s + 2 * x0);                                                         \
        uchar16 b = LOAD16(s + 2 * x0 + 16);                                                    \
        STORE16((uchar16)(a.SWIZZLE, b.SWIZZLE), d + x0);                                       \
    } else {                                                                                    \
        for (uint x = x0; x < width; x++)                                                       \
            d[x] = s[2 * x + Y_OFFSET];                                                         \
    }                                                                                           \
}
PACKED_422_KERNEL(luma_yuyv, 0, even)
PACKED_422_KERNEL(luma_uyvy, 1, odd)

/* Split 16 pixels at p into channel vectors c0, c1, c2 (in memory order). 24-bit pixels are
 * three uchar16 loads; 32-bit pixels four, whose fourth byte (padding or alpha) is ignored. */
#define SPLIT_24(p)                                                                             \
    uchar16 a = LOAD16(p), b = LOAD16(p + 16), c = LOAD16(p + 32);                              \
    uchar16 c0 = (uchar16)(a.s0369, a.scf, b.s258b, b.se, c.s147a, c.sd);                       \
    uchar16 c1 = (uchar16)(a.s147a, a.sd, b.s0369, b.scf, c.s258b, c.se);                       \
    uchar16 c2 = (uchar16)(a.s258b, a.se, b.s147a, b.sd, c.s0369, c.scf);
#define SPLIT_32(p)                                                                             \
    uchar16 a = LOAD16(p), b = LOAD16(p + 16);                                                  \
    uchar16 c = LOAD16(p + 32), e = LOAD16(p + 48);                                             \
    uchar16 c0 = (uchar16)(a.s048c, b.s048c, c.s048c, e.s048c);                                 \
    uchar16 c1 = (uchar16)(a.s159d, b.s159d, c.s159d, e.s159d);                                 \
    uchar16 c2 = (uchar16)(a.s26ae, b.s26ae, c.s26ae, e.s26ae);

/* RGB24, BGR24, RGBX, BGRX: BPP bytes per pixel, R and B name the channels (c0 or c2). */
#define RGB_KERNEL(NAME, BPP, SPLIT, R, B)                                                      \
__kernel void NAME(__global const uchar *src, uint src_stride, uint width, uint height,         \
                   __global uchar *dst, uint dst_stride)                                        \
{                                                                                               \
    uint x0 = get_global_id(0) * PIXELS_PER_ITEM;                                               \
    uint y = get_global_id(1);                                                                  \
    if (x0 >= width || y >= height)                                                             \
        return;                                                                                 \
    __global const uchar *s = src + (size_t)y * src_stride;                                     \
    __global uchar *d = dst + (size_t)y * dst_stride;                                           \
    if (x0 + PIXELS_PER_ITEM <= width) {                                                        \
        SPLIT(s + BPP * x0)                                                                     \
        STORE16(y_from_rgb16(R, c1, B), d + x0);                                                \
    } else {                                                                                    \
        for (uint x = x0; x < width; x++) {                                                     \
            __global const uchar *p = s + BPP * x;                                              \
            uchar c0 = p[0], c1 = p[1], c2 = p[2];                                              \
            d[x] = y_from_rgb(R, c1, B);                                                        \
        }                                                                                       \
    }                                                                                           \
}
RGB_KERNEL(luma_rgb24, 3, SPLIT_24, c0, c2)
RGB_KERNEL(luma_bgr24, 3, SPLIT_24, c2, c0)
RGB_KERNEL(luma_rgbx, 4, SPLIT_32, c0, c2)
RGB_KERNEL(luma_bgrx, 4, SPLIT_32, c2, c0)
