/*
 * sobel.cl: 3x3 Sobel derivatives, gradient magnitude and edge mask in one pass over luma.
 *
 * Over 500 lines as one room: one program holds every Sobel kernel (the runs of 16, the
 * CPU's byte pairs, the GPU's four-pixel rows) because they share the border rules, the
 * magnitude's rounding and the edge test, which must be the same code to give the same
 * bytes with every tuning; most of the length is the comments that say why each is so.
 *
 * sobel3x3 reads  src (uchar luma, row stride src_stride bytes), width x height;
 *          writes dx, dy (short, full precision), mag (uchar) and edges (uchar, 0 or 255),
 *          all with a row stride of dst_stride elements.
 * Work size: 2-D, x = ceil(width / (16 x CHUNKS_PER_ITEM)) work-items of CHUNKS_PER_ITEM
 * runs of 16 pixels, y = height rows. Every whole run of 16 pixels takes the uchar16
 * path (three overlapping 16-byte loads per row; at the row's ends the neighbour outside
 * it comes from the run's own bytes by the border rule); a row's last run shorter than 16,
 * and so every row of an image narrower than 16, takes the scalar path, which maps every
 * coordinate through the border rule.
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
 * stores; with -DBYTE_PAIRS as well, it takes two runs at a time inside a row as pairs of
 * bytes (sobel_pairs).
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
 * does both at once where a GPU runs them side by side; the first group starts first.
 * The item's row is worked out before that branch: get_global_id reads the global work
 * offset, which Rusticl (Mesa 22.3) passes as a hidden kernel argument, and Mesa's
 * llvmpipe warns of an argument first read after the branch ("Treating load_kernel_arg in
 * control flow as uniform": harmless for an argument, integral.cl says why). */
#ifdef OTSU_BESIDE
#define OTSU_PARAMS , __global uint *hist, uint total, __global uint *results
#define SOBEL_ITEM_ROW(item_row)                                                            \
    __local OtsuScratch otsu_scratch;                                                       \
    int item_row = (int)(get_global_id(1) - get_local_size(1));                             \
    if (get_group_id(1) == 0) {                                                             \
        if (get_group_id(0) == 0)                                                           \
            otsu_group(hist, total, results, &otsu_scratch,                                 \
                       (uint)(get_local_id(1) * get_local_size(0) + get_local_id(0)),       \
                       (uint)(get_local_size(0) * get_local_size(1)));                      \
        return;                                                                             \
    }
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

/* |v|, which LLVM compiles to one vpabsw on x86 (POCL 3 and 5), where v < 0 ? -v : v becomes
 * four instructions: a vector ?: selects by each lane's top bit, a pattern it does not see
 * as an absolute value. |v| <= 2040 here, so -v never overflows. */
inline short16 abs16(short16 v)
{
    short16 n = -v;
    return v > n ? v : n;
}

/* 16 magnitudes at once, 0 to 255 in 16-bit lanes, computed in 16-bit lanes where possible
 * (|dx| + |dy| <= 2040 fits). Written with operators and ?: (component-wise on vectors),
 * not abs, min, select and convert_*_sat: POCL 3 and 5 build those vector built-ins from
 * 2-lane pieces, with a lane extract and insert each (the generated x86 code, seen in
 * POCL's kernel cache), where an operator is one SIMD instruction on 128-bit and 256-bit
 * units alike. */
inline short16 magnitude_of16(short16 dx, short16 dy, int l2)
{
    if (!l2) {
        short16 s = abs16(dx) + abs16(dy);
        return s > (short)255 ? (short16)255 : s;
    }
    int16 x = convert_int16(dx), y = convert_int16(dy);
    int16 s = x * x + y * y;
    s = s > 64771 ? (int16)64771 : s;
    int16 m = convert_int16(sqrt(convert_float16(s)));
    m = m * m > s ? m - 1 : m;
    m = (m + 1) * (m + 1) <= s ? m + 1 : m;
    m = s - m * m > m ? m + 1 : m;
    return convert_short16(m); /* s = 64771 rounds to 255, the saturated value */
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

/* A row's 16 bytes from x0 - 1 on, for the chunk at x0 = 0, from the chunk's own bytes c:
 * the pixel left of the row is the border rule's (reflect 101: pixel 1, replicate: pixel 0,
 * constant: 0; a chunk needs a row of 16 or more, so pixel 1 exists). */
inline uchar16 with_left_border(uchar16 c, int border)
{
    uchar e = border == BORDER_CONSTANT ? 0 : border == BORDER_REPLICATE ? c.s0 : c.s1;
    return (uchar16)(e, c.s0, c.s12, c.s3456, c.s789abcde);
}

/* A row's 16 bytes from x0 + 1 on, for a chunk that ends the row, from its own bytes c. */
inline uchar16 with_right_border(uchar16 c, int border)
{
    uchar e = border == BORDER_CONSTANT ? 0 : border == BORDER_REPLICATE ? c.sf : c.se;
    return (uchar16)(c.s12345678, c.s9abc, c.sde, c.sf, e);
}

/* gx and gy of 16 pixels from their left neighbours (l), own pixels (c) and right
 * neighbours (q) in the rows above (t), at (m) and below (b). A row outside the image in
 * constant mode weighs 0: mask_t and mask_b are 0 there, all ones elsewhere, and mask the
 * row's two sums (an and, where multiplying each of the row's three loads by 0 or 1 cost
 * three multiplies). */
inline void gradients16(short16 lt, short16 ct, short16 qt, short16 lm, short16 qm,
                        short16 lb, short16 cb, short16 qb, short mask_t, short mask_b,
                        short16 *gx, short16 *gy)
{
    *gx = ((qt - lt) & mask_t) + (short)2 * (qm - lm) + ((qb - lb) & mask_b);
    *gy = ((lb + (short)2 * cb + qb) & mask_b) - ((lt + (short)2 * ct + qt) & mask_t);
}

/* Stores 16 pixels' outputs from element `at` on: gx, gy, their magnitude m and its edge
 * mask. */
inline void store16(short16 gx, short16 gy, uchar16 m, int edge_threshold,
                    GRADIENT_PARAMS __global uchar *mag, EDGE_PARAM size_t at)
{
#ifndef NO_EDGE_MASK
    /* A vector comparison gives all ones (255) where true. */
    uchar16 e = as_uchar16(m >= (uchar16)(uchar)edge_threshold);
#endif
#ifdef STREAMING_STORES
    /* Non-temporal where the outputs are aligned (rows a multiple of 16 wide): an ordinary
     * store first reads the line it overwrites, a third more memory traffic for these
     * write-once images (bench/notes/round2.md#streaming-stores). */
    if (at % PIXELS_PER_ITEM == 0) {
#ifndef NO_GRADIENTS
        __builtin_nontemporal_store(gx, (__global short16 *)(dx + at));
        __builtin_nontemporal_store(gy, (__global short16 *)(dy + at));
#endif
        __builtin_nontemporal_store(m, (__global uchar16 *)(mag + at));
#ifndef NO_EDGE_MASK
        __builtin_nontemporal_store(e, (__global uchar16 *)(edges + at));
#endif
        return;
    }
#endif
#ifndef NO_GRADIENTS
    STORE16_SHORT(gx, dx + at);
    STORE16_SHORT(gy, dy + at);
#endif
    STORE16_UCHAR(m, mag + at);
#ifndef NO_EDGE_MASK
    STORE16_UCHAR(e, edges + at);
#endif
}

/* The outputs of 16 pixels from element `at` on, from the bytes around them (as for
 * gradients16). */
inline void sobel_chunk(uchar16 lt, uchar16 ct, uchar16 qt, uchar16 lm, uchar16 qm,
                        uchar16 lb, uchar16 cb, uchar16 qb, short mask_t, short mask_b,
                        int l2, int edge_threshold, GRADIENT_PARAMS __global uchar *mag,
                        EDGE_PARAM size_t at)
{
    short16 gx, gy;
    gradients16(convert_short16(lt), convert_short16(ct), convert_short16(qt),
                convert_short16(lm), convert_short16(qm), convert_short16(lb),
                convert_short16(cb), convert_short16(qb), mask_t, mask_b, &gx, &gy);
    store16(gx, gy, convert_uchar16(magnitude_of16(gx, gy, l2)), edge_threshold,
            GRADIENT_ARGS mag, EDGE_ARG at);
}

/* Built with -DBYTE_PAIRS (CPUs, with STREAMING_STORES' unaligned loads), runs of 32
 * pixels inside a row go through sobel_pairs: each row is loaded from x0 - 1, x0 and
 * x0 + 1 as 16 pairs of bytes, and a pair's low and high bytes, split by an and and a shift,
 * give the even pixels (x0 + 2k) and the odd ones (x0 + 2k + 1) with their neighbours in
 * 16-bit lanes. Widening bytes with convert_short16 is a shuffle on x86 (vpmovzxbw: 8 of
 * them per 16 pixels, all on the one port that shuffles, its bound), where an and or a
 * shift runs on any vector port; the two halves' magnitudes are joined the same way, by a
 * shift and an or. Little-endian devices only: the low byte of a pair comes first. The two
 * rows of the image's edges in constant mode, where a row weighs 0, keep the 16-pixel path. */
#if defined(BYTE_PAIRS) && defined(STREAMING_STORES) && defined(__ENDIAN_LITTLE__)
#define SOBEL_PAIRS 1
/* 32 bytes from p, any alignment, as 16 pairs: two unaligned uchar16 loads, which LLVM
 * joins into one 32-byte load on x86 (one ushort16 load through a type aligned like a
 * byte failed the kernel tests on an NVIDIA GPU running this build). */
#define LOAD16_PAIRS(p)                                                                     \
    ((ushort16)(as_ushort8(LOAD16_UCHAR(p)), as_ushort8(LOAD16_UCHAR((p) + 16))))

/* A row's bytes around x0 .. x0 + 31 in 16-bit lanes: pixels x0 + 2k - 1 (l), x0 + 2k
 * (even), x0 + 2k + 1 (odd) and x0 + 2k + 2 (r). */
#define ROW_PAIRS(row, l, even, odd, r)                                                     \
    do {                                                                                    \
        ushort16 a_ = LOAD16_PAIRS((row) + x0);                                             \
        even = as_short16(a_ & (ushort)0xff);                                               \
        odd = as_short16(a_ >> (ushort)8);                                                  \
        l = as_short16(LOAD16_PAIRS((row) + x0 - 1) & (ushort)0xff);                        \
        r = as_short16(LOAD16_PAIRS((row) + x0 + 1) >> (ushort)8);                          \
    } while (0)

/* Elements 0-7 (lo) or 8-15 (hi) of a and b, interleaved: a0 b0 a1 b1 ... */
#define INTERLEAVE8(a, b, half)                                                             \
    as_short16(convert_uint8(as_ushort8((a).half)) |                                        \
               (convert_uint8(as_ushort8((b).half)) << 16))

/* The outputs of the 32 pixels from x0 on (1 <= x0, x0 + 32 < the width) of a row with
 * rows above and below it (no row weighs 0), stored from element `at` on (always inlined:
 * POCL otherwise calls it, once per 32 pixels). The kernels are separated, each column's
 * sums taken once for both pixels that read them:
 *   gx = s(x + 1) - s(x - 1),  s = top + 2 middle + bottom
 *   gy = d(x - 1) + 2 d(x) + d(x + 1),  d = bottom - top */
__attribute__((always_inline)) inline void
sobel_pairs(__global const uchar *rt, __global const uchar *rm, __global const uchar *rb,
            int x0, int l2, int edge_threshold, GRADIENT_PARAMS __global uchar *mag,
            EDGE_PARAM size_t at)
{
    short16 tl, te, to, tr, ml, me, mo, mr, bl, be, bo, br;
    ROW_PAIRS(rt, tl, te, to, tr);
    ROW_PAIRS(rm, ml, me, mo, mr);
    ROW_PAIRS(rb, bl, be, bo, br);
    short16 sl = tl + (short)2 * ml + bl, se = te + (short)2 * me + be;
    short16 so = to + (short)2 * mo + bo, sr = tr + (short)2 * mr + br;
    short16 dl = bl - tl, de = be - te, d_o = bo - to, dr = br - tr;
    /* Even pixels x0 + 2k: left l, centre e, right o; odd ones: left e, centre o, right r. */
    short16 gxe = so - sl, gye = dl + (short)2 * de + d_o;
    short16 gxo = sr - se, gyo = de + (short)2 * d_o + dr;
    /* Both magnitudes are at most 255: the odd pixel's goes in the high byte. */
    ushort16 m = as_ushort16(magnitude_of16(gxe, gye, l2)) |
                 (as_ushort16(magnitude_of16(gxo, gyo, l2)) << (ushort)8);
    /* The interleaved gradients are unused with -DNO_GRADIENTS, and so never computed. */
    store16(INTERLEAVE8(gxe, gxo, lo), INTERLEAVE8(gye, gyo, lo), as_uchar16(m.lo),
            edge_threshold, GRADIENT_ARGS mag, EDGE_ARG at);
    store16(INTERLEAVE8(gxe, gxo, hi), INTERLEAVE8(gye, gyo, hi), as_uchar16(m.hi),
            edge_threshold, GRADIENT_ARGS mag, EDGE_ARG at + 16);
}
#endif

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
    short mask_t = (short)-rows.kt, mask_b = (short)-rows.kb;
    size_t o = (size_t)y * dst_stride;
    int run_end = min(first + PIXELS_PER_ITEM * CHUNKS_PER_ITEM, w);

    for (int x0 = first; x0 < run_end; x0 += PIXELS_PER_ITEM) {
#ifdef SOBEL_PAIRS
        if (x0 % (2 * PIXELS_PER_ITEM) == 0 && x0 >= 1 && x0 + 2 * PIXELS_PER_ITEM < w &&
            (mask_t & mask_b)) {
            sobel_pairs(rt, rm, rb, x0, l2, edge_threshold, GRADIENT_ARGS mag,
                        EDGE_ARG o + x0);
            x0 += PIXELS_PER_ITEM;
            continue;
        }
#endif
        if (x0 >= 1 && x0 + PIXELS_PER_ITEM < w) {
            sobel_chunk(LOAD16_UCHAR(rt + x0 - 1), LOAD16_UCHAR(rt + x0),
                        LOAD16_UCHAR(rt + x0 + 1), LOAD16_UCHAR(rm + x0 - 1),
                        LOAD16_UCHAR(rm + x0 + 1), LOAD16_UCHAR(rb + x0 - 1),
                        LOAD16_UCHAR(rb + x0), LOAD16_UCHAR(rb + x0 + 1), mask_t, mask_b, l2,
                        edge_threshold, GRADIENT_ARGS mag, EDGE_ARG o + x0);
        } else if (x0 + PIXELS_PER_ITEM <= w) {
            /* A whole chunk at an end of the row: the neighbours past the end come from the
             * chunk's own bytes by the border rule, so each row's first and last 16 pixels
             * take this vector path too (through the scalar one they cost about as much as
             * the rest of a 1080p row on a CPU:
             * bench/notes/cpu-sobel-histogram.md#cpu-sobel-pairs). */
            uchar16 ct = LOAD16_UCHAR(rt + x0), cm = LOAD16_UCHAR(rm + x0);
            uchar16 cb = LOAD16_UCHAR(rb + x0);
            uchar16 lt, lm, lb, qt, qm, qb;
            if (x0 >= 1) {
                lt = LOAD16_UCHAR(rt + x0 - 1);
                lm = LOAD16_UCHAR(rm + x0 - 1);
                lb = LOAD16_UCHAR(rb + x0 - 1);
            } else {
                lt = with_left_border(ct, border);
                lm = with_left_border(cm, border);
                lb = with_left_border(cb, border);
            }
            if (x0 + PIXELS_PER_ITEM < w) {
                qt = LOAD16_UCHAR(rt + x0 + 1);
                qm = LOAD16_UCHAR(rm + x0 + 1);
                qb = LOAD16_UCHAR(rb + x0 + 1);
            } else {
                qt = with_right_border(ct, border);
                qm = with_right_border(cm, border);
                qb = with_right_border(cb, border);
            }
            sobel_chunk(lt, ct, qt, lm, qm, lb, cb, qb, mask_t, mask_b, l2, edge_threshold,
                        GRADIENT_ARGS mag, EDGE_ARG o + x0);
        } else {
            /* The row's last chunk, shorter than 16 pixels. */
            for (int x = x0; x < w; x++)
                sobel_border_pixel(rows, x, w, border, l2, edge_threshold, GRADIENT_ARGS mag,
                                   EDGE_ARG o);
        }
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
 * QUAD_ROWS rows load QUAD_ROWS + 2 source rows rather than 3 each (GPU builds set 2, the
 * fastest on an NVIDIA H100: bench/notes/sobel-two-rows.md#sobel-two-rows).
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
