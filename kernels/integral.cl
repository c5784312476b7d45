/*
 * integral.cl: integral images in OpenCV's layout and the region sums read from them.
 *
 * An integral image of a width x height image has (height + 1) x (width + 1) elements, row
 * stride width + 1; row 0 and column 0 are zero, and
 *   I[y][x] = sum of src[j][i] for j < y, i < x          (OpenCV's integral / integral2)
 * Built in two passes: a row pass (one work-item per image row, global size >= height)
 * writes the running sums of its row into row y + 1, and a column pass (one work-item per
 * strip of COLS_PER_ITEM columns, global size >= ceil(width / COLS_PER_ITEM)) adds each row
 * to the next, top to bottom. Option: -DCOLS_PER_ITEM=1 (the default) or 16.
 *
 * integral_rows_sum_sqsum  reads uchar src; writes sum (uint) and sqsum (ulong): equal to
 *                          cv2.integral2(src, sdepth=CV_32S, sqdepth=CV_64F) as integers.
 *                          uint holds the sum for frames of up to 16843009 pixels.
 * integral_rows_count      reads a uchar mask; writes the integral of (mask != 0) (uint).
 * integral_cols_uint/_ulong  the column pass for either element type.
 * region_sums              reads rects (uint4: x, y, w, h; inside the image) and writes, per
 *                          rect, 4 ulongs: pixel sum, squared sum, edge count, foreground
 *                          count (one work-item per rect).
 */

#define PIXELS_PER_ITEM 16
#ifndef COLS_PER_ITEM
#define COLS_PER_ITEM 1
#endif

__kernel void integral_rows_sum_sqsum(__global const uchar *src, uint src_stride, uint width,
                                      uint height, __global uint *sum, __global ulong *sqsum)
{
    uint y = get_global_id(0);
    if (y >= height)
        return;
    size_t stride = (size_t)width + 1;
    if (y == 0) {
        for (size_t x = 0; x < stride; x++) {
            sum[x] = 0;
            sqsum[x] = 0;
        }
    }
    __global const uchar *row = src + (size_t)y * src_stride;
    __global uint *s = sum + (y + 1) * stride;
    __global ulong *q = sqsum + (y + 1) * stride;
    uint acc = 0, acc2 = 0; /* one row's squared sum fits in uint: width * 65025 < 2^32 */
    s[0] = 0;
    q[0] = 0;
    uint x = 0;
    for (; x + PIXELS_PER_ITEM <= width; x += PIXELS_PER_ITEM) {
        uint16 v = convert_uint16(vload16(0, row + x));
        uint16 v2 = v * v;
        uint vals[PIXELS_PER_ITEM], sq[PIXELS_PER_ITEM];
        vstore16(v, 0, vals);
        vstore16(v2, 0, sq);
        for (uint i = 0; i < PIXELS_PER_ITEM; i++) {
            acc += vals[i];
            acc2 += sq[i];
            s[x + i + 1] = acc;
            q[x + i + 1] = acc2;
        }
    }
    for (; x < width; x++) {
        uint v = row[x];
        acc += v;
        acc2 += v * v;
        s[x + 1] = acc;
        q[x + 1] = acc2;
    }
}

__kernel void integral_rows_count(__global const uchar *src, uint src_stride, uint width,
                                  uint height, __global uint *count)
{
    uint y = get_global_id(0);
    if (y >= height)
        return;
    size_t stride = (size_t)width + 1;
    if (y == 0) {
        for (size_t x = 0; x < stride; x++)
            count[x] = 0;
    }
    __global const uchar *row = src + (size_t)y * src_stride;
    __global uint *c = count + (y + 1) * stride;
    uint acc = 0;
    c[0] = 0;
    for (uint x = 0; x < width; x++) {
        acc += row[x] != 0;
        c[x + 1] = acc;
    }
}

/* COLS_PER_ITEM columns per work-item, walked top to bottom. 16 (the host's choice on CPUs)
 * gives one contiguous vector load and store per row; 1 (on GPUs) gives one work-item per
 * column, so neighbouring work-items read neighbouring words and there are enough of them. */
#if COLS_PER_ITEM == 16
#define CARRY_STRIP(T, T16)                                                                    \
    if (x0 + COLS_PER_ITEM <= stride) {                                                        \
        T16 acc = 0;                                                                           \
        for (size_t y = 1; y <= height; y++) {                                                 \
            __global T *p = integral + y * stride + x0;                                        \
            acc += vload16(0, p);                                                              \
            vstore16(acc, 0, p);                                                               \
        }                                                                                      \
        return;                                                                                \
    }
#else
#define CARRY_STRIP(T, T16)
#endif

#define INTEGRAL_COLS(NAME, T, T16)                                                            \
__kernel void NAME(uint width, uint height, __global T *integral)                              \
{                                                                                              \
    size_t x0 = get_global_id(0) * COLS_PER_ITEM + 1;                                          \
    if (x0 > width)                                                                            \
        return;                                                                                \
    size_t stride = (size_t)width + 1;                                                         \
    CARRY_STRIP(T, T16)                                                                        \
    size_t x_end = min(x0 + COLS_PER_ITEM, stride);                                            \
    for (size_t x = x0; x < x_end; x++) {                                                      \
        T acc = 0;                                                                             \
        for (size_t y = 1; y <= height; y++) {                                                 \
            acc += integral[y * stride + x];                                                   \
            integral[y * stride + x] = acc;                                                    \
        }                                                                                      \
    }                                                                                          \
}
INTEGRAL_COLS(integral_cols_uint, uint, uint16)
INTEGRAL_COLS(integral_cols_ulong, ulong, ulong16)

/* Sum of a rect from the four corners; uint arithmetic wraps, but the true sum fits. */
#define RECT_SUM(I, stride, r) \
    (I[(r.y + r.w) * stride + r.x + r.z] - I[(r.y + r.w) * stride + r.x] - \
     I[r.y * stride + r.x + r.z] + I[r.y * stride + r.x])

__kernel void region_sums(uint width, __global const uint4 *rects, uint count,
                          __global const uint *sum, __global const ulong *sqsum,
                          __global const uint *edges, __global const uint *foreground,
                          __global ulong *out)
{
    uint i = get_global_id(0);
    if (i >= count)
        return;
    uint4 r = rects[i];
    size_t stride = (size_t)width + 1;
    out[4 * i + 0] = (uint)RECT_SUM(sum, stride, r);
    out[4 * i + 1] = RECT_SUM(sqsum, stride, r);
    out[4 * i + 2] = (uint)RECT_SUM(edges, stride, r);
    out[4 * i + 3] = (uint)RECT_SUM(foreground, stride, r);
}
