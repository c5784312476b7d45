/*
 * sobel.cl: 3x3 Sobel derivatives, gradient magnitude and edge mask in one pass over luma.
 *
 * sobel3x3 reads  src (uchar luma, row stride src_stride bytes), width x height;
 *          writes dx, dy (short, full precision), mag (uchar) and edges (uchar, 0 or 255),
 *          all with a row stride of dst_stride elements.
 * Work size: 2-D, x = ceil(width / (16 x CHUNKS_PER_ITEM)) work-items of CHUNKS_PER_ITEM
 * runs of 16 pixels, y = height rows. A run whose 18-pixel window lies inside the row
 * takes the uchar16 path (three overlapping 16-byte loads per row); the first run of a
 * row, the last partial run and any row of a narrow image take the scalar path, which
 * maps every coordinate through the border rule.
 *
 * dx and dy equal OpenCV's Sobel(src, CV_16S, 1, 0 / 0, 1, ksize=3, borderType) bit for bit:
 *   dx = [-1 0 1; -2 0 2; -1 0 1],  dy = [-1 -2 -1; 0 0 0; 1 2 1]   (|value| <= 1020)
 * Border (the `border` argument): 0 = BORDER_REFLECT_101 (gfedcb|abcdefgh|gfedcba, a
 * length-1 axis reflects onto itself), 1 = BORDER_REPLICATE, 2 = BORDER_CONSTANT with 0.
 *
 * Magnitude (the `l2` argument):
 *   0: L1 = min(|dx| + |dy|, 255)
 *   1: L2 = min(round(sqrt(dx^2 + dy^2)), 255), computed exactly in integers: the nearest
 *      integer to the root (never a tie, as dx^2 + dy^2 is an integer), then saturated.
 * Edge mask: 255 where mag >= edge_threshold, else 0.
 * Built with -DSTREAMING_STORES (CPUs), sobel3x3 writes aligned rows with non-temporal
 * stores.
 * Built with -DNO_GRADIENTS, every kernel takes neither dx nor dy (the parameters are gone,
 * not ignored); built with -DNO_EDGE_MASK, it takes no edges buffer (edge_threshold stays
 * and goes unused). The outputs left stay exactly as above: a pipeline that never reads
 * dx, dy and the edge mask (the daemon's, whose integral stage counts edges from the
 * magnitude itself) neither allocates nor writes their 5 bytes a pixel.
 */

#define PIXELS_PER_ITEM 16
/* How many runs of 16 pixels along its row one sobel3x3 work-item computes: 1 by default;
 * CPU builds set more (-DCHUNKS_PER_ITEM), so that the row's set-up (border rules, row
 * pointers, about as many instructions as 16 pixels' arithmetic) is paid once a run. */
#ifndef CHUNKS_PER_ITEM
#define CHUNKS_PER_ITEM 1
#endif
#define BORDER_REFLECT_101 0
#define BORDER_REPLICATE 1
#define BORDER_CONSTANT 2

/* The dx and dy parameters of every function that stores a pixel, and their arguments. */
#ifdef NO_GRADIENTS
#define GRADIENT_PARAMS
#define GRADIENT_ARGS
#else
#define GRADIENT_PARAMS __global short *dx, __global short *dy,
#define GRADIENT_ARGS dx, dy,
#endif

/* The edges parameter of every function that stores a pixel, and its argument. */
#ifdef NO_EDGE_MASK
#define EDGE_PARAM
#define EDGE_ARG
#else
#define EDGE_PARAM __global uchar *edges,
#define EDGE_ARG edges,
#endif

/* Built with -DOTSU_BESIDE (after otsu.cl, in one program), every kernel also takes Otsu's
 * arguments (hist, total, results: otsu_threshold's) and its launch one more row of
 * work-groups, the first: that row's first group computes the threshold of the counts
 * (otsu_group, with the group's work-items), the rest of the row returns, and Sobel's rows
 * start at the second row of groups. Sobel never reads the threshold, so the one launch
 * does both at once where a GPU runs them side by side; the first group starts first. */
#ifdef OTSU_BESIDE
#define OTSU_PARAMS , __global uint *hist, uint total, __global uint *results
#define SOBEL_ITEM_ROW(item_row)                                                            \
    __local OtsuScratch otsu_scratch;                                                       \
    if (get_group_id(1) == 0) {                                                             \
        if (get_group_id(0) == 0)                                                           \
            otsu_group(hist, total, results, &otsu_scratch,                                 \
                       (uint)(get_local_id(1) * get_local_size(0) + get_local_id(0)),       \
                       (uint)(get_local_size(0) * get_local_size(1)));                      \
        return;                                                                             \
    }                                                                                       \
    int item_row = (int)(get_global_id(1) - get_local_size(1))
#else
#define OTSU_PARAMS
#define SOBEL_ITEM_ROW(item_row) int item_row = (int)get_global_id(1)
#endif

/* Maps a coordinate at most one pixel outside [0, len) into it; -1 means "constant 0". */
inline int border_map(int p, int len, int border)
{
    if (p >= 0 && p < len)
        return p;
    if (border == BORDER_CONSTANT)
        return -1;
    if (border == BORDER_REPLICATE || len == 1)
        return p < 0 ? 0 : len - 1;
    return p < 0 ? -p : 2 * len - 2 - p;
}

/* The rows above, at and below row y, mapped through the border rule; in constant mode a
 * missing row weighs 0 (kt, kb) and points at row y. */
typedef struct {
    __global const uchar *t, *m, *b;
    int kt, kb;
} Rows;

inline Rows border_rows(__global const uchar *src, uint src_stride, int y, int h, int border)
{
    int yt = border_map(y - 1, h, border), yb = border_map(y + 1, h, border);
    Rows r;
    r.kt = yt >= 0;
    r.kb = yb >= 0;
    r.t = src + (size_t)(r.kt ? yt : y) * src_stride;
    r.m = src + (size_t)y * src_stride;
    r.b = src + (size_t)(r.kb ? yb : y) * src_stride;
    return r;
}

/* Nearest integer to sqrt(s) for 0 <= s <= 64770 (the largest s whose root rounds to 254). */
inline int rounded_sqrt(int s)
{
    int m = (int)sqrt((float)s);
    if (m * m > s)
        m--;
    if ((m + 1) * (m + 1) <= s)
        m++;
    return s - m * m > m ? m + 1 : m;
}

inline uchar magnitude_of(int dx, int dy, int l2)
{
    if (!l2)
        return (uchar)min(abs(dx) + abs(dy), 255u);
    int s = dx * dx + dy * dy;
    return s > 64770 ? 255 : (uchar)rounded_sqrt(s);
}

/* 16 magnitudes at once, in 16-bit lanes where possible (|dx| + |dy| <= 2040 fits). Written
 * with operators and ?: (component-wise on vectors), not abs, min, select and
 * convert_*_sat: POCL 3 and 5 build those vector built-ins from 2-lane pieces, with a lane
 * extract and insert each (the generated x86 code, seen in POCL's kernel cache), where an
 * operator is one SIMD instruction on 128-bit and 256-bit units alike. */
inline uchar16 magnitude_of16(short16 dx, short16 dy, int l2)
{
    if (!l2) {
        short16 s = (dx < (short)0 ? -dx : dx) + (dy < (short)0 ? -dy : dy);
        return convert_uchar16(s > (short)255 ? (short16)255 : s);
    }
    int16 x = convert_int16(dx), y = convert_int16(dy);
    int16 s = x * x + y * y;
    s = s > 64771 ? (int16)64771 : s;
    int16 m = convert_int16(sqrt(convert_float16(s)));
    m = m * m > s ? m - 1 : m;
    m = (m + 1) * (m + 1) <= s ? m + 1 : m;
    m = s - m * m > m ? m + 1 : m;
    return convert_uchar16(m); /* s = 64771 rounds to 255, the saturated value */
}

/* 16-element loads and stores at addresses of any alignment. POCL's vstore16 stores
 * element by element (16 scalar stores for a uchar16) and its vload16 of an unaligned
 * uchar16 loads four 4-byte pieces and shuffles them together (seen in POCL's kernel
 * cache); through a vector type whose alignment is lowered to its element's, each is one
 * unaligned SIMD load or store. CPU builds only (STREAMING_STORES): vload16 and vstore16
 * are the portable forms, which GPU compilers lower well. */
#ifdef STREAMING_STORES
typedef uchar16 __attribute__((aligned(1))) unaligned_uchar16;
typedef short16 __attribute__((aligned(2))) unaligned_short16;
#define LOAD16_UCHAR(p) (*(__global const unaligned_uchar16 *)(p))
#define STORE16_UCHAR(v, p) (*(__global unaligned_uchar16 *)(p) = (v))
#define STORE16_SHORT(v, p) (*(__global unaligned_short16 *)(p) = (v))
#else
#define LOAD16_UCHAR(p) vload16(0, (p))
#define STORE16_UCHAR(v, p) vstore16((v), 0, (p))
#define STORE16_SHORT(v, p) vstore16((v), 0, (p))
#endif

inline int pixel(__global const uchar *row, int x)
{
    return x < 0 ? 0 : row[x];
}

/* dx, dy, magnitude and edge of one pixel from its eight neighbours (t: the row above, m:
 * its own row, b: the row below; 0, 1, 2 from left to right), stored at index i. */
inline void sobel_store(int t0, int t1, int t2, int m0, int m2, int b0, int b1, int b2, int l2,
                        int edge_threshold, GRADIENT_PARAMS __global uchar *mag,
                        EDGE_PARAM size_t i)
{
    int gx = (t2 - t0) + 2 * (m2 - m0) + (b2 - b0);
    int gy = (b0 + 2 * b1 + b2) - (t0 + 2 * t1 + t2);
    uchar m = magnitude_of(gx, gy, l2);
#ifndef NO_GRADIENTS
    dx[i] = (short)gx;
    dy[i] = (short)gy;
#endif
    mag[i] = m;
#ifndef NO_EDGE_MASK
    edges[i] = m >= edge_threshold ? 255 : 0;
#endif
}

/* One pixel with every coordinate mapped through the border rule (r: the rows above, at
 * and below, a missing row weighing 0 in constant mode). */
inline void sobel_border_pixel(Rows r, int x, int w, int border, int l2, int edge_threshold,
                               GRADIENT_PARAMS __global uchar *mag, EDGE_PARAM size_t o)
{
    int xl = border_map(x - 1, w, border), xr = border_map(x + 1, w, border);
    sobel_store(pixel(r.t, xl) * r.kt, pixel(r.t, x) * r.kt, pixel(r.t, xr) * r.kt,
                pixel(r.m, xl), pixel(r.m, xr), pixel(r.b, xl) * r.kb, pixel(r.b, x) * r.kb,
                pixel(r.b, xr) * r.kb, l2, edge_threshold, GRADIENT_ARGS mag, EDGE_ARG o + x);
}

__kernel void sobel3x3(__global const uchar *src, uint src_stride, uint width, uint height,
                       int border, int l2, int edge_threshold,
                       GRADIENT_PARAMS __global uchar *mag, EDGE_PARAM uint dst_stride
                       OTSU_PARAMS)
{
    SOBEL_ITEM_ROW(y);
    int first = (int)get_global_id(0) * PIXELS_PER_ITEM * CHUNKS_PER_ITEM;
    int w = (int)width, h = (int)height;
    if (first >= w || y >= h)
        return;

    /* Rows above and below; in constant mode a missing row weighs 0. */
    Rows rows = border_rows(src, src_stride, y, h, border);
    __global const uchar *rt = rows.t, *rm = rows.m, *rb = rows.b;
    int kt = rows.kt, kb = rows.kb;
    size_t o = (size_t)y * dst_stride;
    int run_end = min(first + PIXELS_PER_ITEM * CHUNKS_PER_ITEM, w);

    for (int x0 = first; x0 < run_end; x0 += PIXELS_PER_ITEM) {
    if (x0 >= 1 && x0 + PIXELS_PER_ITEM < w) {
        short16 lt = convert_short16(LOAD16_UCHAR(rt + x0 - 1)) * (short)kt;
        short16 ct = convert_short16(LOAD16_UCHAR(rt + x0)) * (short)kt;
        short16 qt = convert_short16(LOAD16_UCHAR(rt + x0 + 1)) * (short)kt;
        short16 lm = convert_short16(LOAD16_UCHAR(rm + x0 - 1));
        short16 qm = convert_short16(LOAD16_UCHAR(rm + x0 + 1));
        short16 lb = convert_short16(LOAD16_UCHAR(rb + x0 - 1)) * (short)kb;
        short16 cb = convert_short16(LOAD16_UCHAR(rb + x0)) * (short)kb;
        short16 qb = convert_short16(LOAD16_UCHAR(rb + x0 + 1)) * (short)kb;
        short16 gx = (qt - lt) + (short)2 * (qm - lm) + (qb - lb);
        short16 gy = (lb + (short)2 * cb + qb) - (lt + (short)2 * ct + qt);
        uchar16 m = magnitude_of16(gx, gy, l2);
#ifndef NO_EDGE_MASK
        /* A vector comparison gives all ones (255) where true. */
        uchar16 e = as_uchar16(m >= (uchar16)(uchar)edge_threshold);
#endif
#ifdef STREAMING_STORES
        /* Non-temporal where the outputs are aligned (rows a multiple of 16 wide): an
         * ordinary store first reads the line it overwrites, a third more memory traffic
         * for these write-once images (BENCHMARKS.md). */
        if ((o + x0) % PIXELS_PER_ITEM == 0) {
#ifndef NO_GRADIENTS
            __builtin_nontemporal_store(gx, (__global short16 *)(dx + o + x0));
            __builtin_nontemporal_store(gy, (__global short16 *)(dy + o + x0));
#endif
            __builtin_nontemporal_store(m, (__global uchar16 *)(mag + o + x0));
#ifndef NO_EDGE_MASK
            __builtin_nontemporal_store(e, (__global uchar16 *)(edges + o + x0));
#endif
            continue;
        }
#endif
#ifndef NO_GRADIENTS
        STORE16_SHORT(gx, dx + o + x0);
        STORE16_SHORT(gy, dy + o + x0);
#endif
        STORE16_UCHAR(m, mag + o + x0);
#ifndef NO_EDGE_MASK
        STORE16_UCHAR(e, edges + o + x0);
#endif
        continue;
    }

    int x_end = min(x0 + PIXELS_PER_ITEM, w);
    for (int x = x0; x < x_end; x++)
        sobel_border_pixel(rows, x, w, border, l2, edge_threshold, GRADIENT_ARGS mag,
                           EDGE_ARG o);
    }
}

/*
 * sobel3x3_pixel: the same outputs with one work-item per pixel (2-D, x = width, y =
 * height): neighbouring work-items read neighbouring bytes, which a GPU coalesces, where
 * the uchar16 path's unaligned vector loads are split into narrow ones.
 */
__kernel void sobel3x3_pixel(__global const uchar *src, uint src_stride, uint width,
                             uint height, int border, int l2, int edge_threshold,
                             GRADIENT_PARAMS __global uchar *mag, EDGE_PARAM
                             uint dst_stride OTSU_PARAMS)
{
    SOBEL_ITEM_ROW(y);
    int x = (int)get_global_id(0);
    int w = (int)width, h = (int)height;
    if (x >= w || y >= h)
        return;
    size_t o = (size_t)y * dst_stride;
    if (x >= 1 && x + 1 < w && y >= 1 && y + 1 < h) {
        __global const uchar *rt = src + (size_t)(y - 1) * src_stride + x;
        __global const uchar *rm = rt + src_stride, *rb = rm + src_stride;
        sobel_store(rt[-1], rt[0], rt[1], rm[-1], rm[1], rb[-1], rb[0], rb[1], l2,
                    edge_threshold, GRADIENT_ARGS mag, EDGE_ARG o + x);
        return;
    }
    Rows rows = border_rows(src, src_stride, y, h, border);
    sobel_border_pixel(rows, x, w, border, l2, edge_threshold, GRADIENT_ARGS mag, EDGE_ARG o);
}

/*
 * sobel3x3_quad: the same outputs with four pixels per work-item and QUAD_ROWS rows of them
 * (2-D, x = width / 4, y = ceil(height / QUAD_ROWS)), for widths that are a multiple of 4
 * with src_stride and dst_stride equal to the width: every row then starts 4-byte aligned,
 * so the item loads each source row as one aligned uchar4 plus the two neighbouring bytes
 * and stores whole short4 and uchar4 vectors, a quarter of the memory instructions of one
 * pixel per item. Down its rows the item keeps the last two source rows in registers, so
 * QUAD_ROWS rows load QUAD_ROWS + 2 source rows rather than 3 each (GPU builds set 2:
 * NVIDIA H100 Sobel 23 -> 17 us at 4K; 4 rows gave the same, 8 took 26 us: BENCHMARKS.md).
 */
#ifndef QUAD_ROWS
#define QUAD_ROWS 1
#endif

/* A source row's four pixels at x0 (v) and each one's left (vl) and right (vr) neighbour. */
#define QUAD_LOAD(row, v, vl, vr)                                                           \
    do {                                                                                    \
        __global const uchar *p_ = (row);                                                   \
        v = convert_int4(*(__global const uchar4 *)p_);                                     \
        vl = (int4)(p_[-1], v.s012);                                                        \
        vr = (int4)(v.s123, p_[4]);                                                         \
    } while (0)

/* One output row of a quad item from its source rows above (t), at (m) and below (b),
 * stored from element `at`. */
inline void quad_row(int4 t, int4 tl, int4 tr, int4 m, int4 ml, int4 mr, int4 b, int4 bl,
                     int4 br, int l2, int edge_threshold, GRADIENT_PARAMS
                     __global uchar *mag, EDGE_PARAM size_t at)
{
    int4 gx = (tr - tl) + 2 * (mr - ml) + (br - bl);
    int4 gy = (bl + 2 * b + br) - (tl + 2 * t + tr);
    uchar4 mv;
    if (!l2) {
        mv = convert_uchar4_sat(abs(gx) + abs(gy));
    } else {
        mv = (uchar4)(magnitude_of(gx.s0, gy.s0, 1), magnitude_of(gx.s1, gy.s1, 1),
                      magnitude_of(gx.s2, gy.s2, 1), magnitude_of(gx.s3, gy.s3, 1));
    }
#ifndef NO_GRADIENTS
    *(__global short4 *)(dx + at) = convert_short4(gx);
    *(__global short4 *)(dy + at) = convert_short4(gy);
#endif
    *(__global uchar4 *)(mag + at) = mv;
#ifndef NO_EDGE_MASK
    /* A vector comparison gives all ones (255) where true. */
    *(__global uchar4 *)(edges + at) = as_uchar4(mv >= (uchar4)(uchar)edge_threshold);
#endif
}

__kernel void sobel3x3_quad(__global const uchar *src, uint src_stride, uint width,
                            uint height, int border, int l2, int edge_threshold,
                            GRADIENT_PARAMS __global uchar *mag, EDGE_PARAM
                            uint dst_stride OTSU_PARAMS)
{
    SOBEL_ITEM_ROW(item_row);
    int x0 = (int)get_global_id(0) * 4, y0 = item_row * QUAD_ROWS;
    int w = (int)width, h = (int)height;
    if (x0 >= w || y0 >= h)
        return;
    if (x0 >= 1 && x0 + 4 < w && y0 >= 1 && y0 + QUAD_ROWS < h) {
        __global const uchar *row = src + (size_t)(y0 - 1) * src_stride + x0;
        int4 t, tl, tr, m, ml, mr, b, bl, br;
        QUAD_LOAD(row, t, tl, tr);
        QUAD_LOAD(row + src_stride, m, ml, mr);
        for (int k = 0; k < QUAD_ROWS; k++) {
            QUAD_LOAD(row + (size_t)(k + 2) * src_stride, b, bl, br);
            quad_row(t, tl, tr, m, ml, mr, b, bl, br, l2, edge_threshold, GRADIENT_ARGS mag,
                     EDGE_ARG (size_t)(y0 + k) * dst_stride + x0);
            t = m;
            tl = ml;
            tr = mr;
            m = b;
            ml = bl;
            mr = br;
        }
        return;
    }
    for (int y = y0; y < min(y0 + QUAD_ROWS, h); y++) {
        Rows rows = border_rows(src, src_stride, y, h, border);
        size_t o = (size_t)y * dst_stride;
        for (int x = x0; x < min(x0 + 4, w); x++)
            sobel_border_pixel(rows, x, w, border, l2, edge_threshold, GRADIENT_ARGS mag,
                               EDGE_ARG o);
    }
}
