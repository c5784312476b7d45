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
 * On GPUs the same two passes are spread over many more work-items (see the second half of
 * this file): the row pass gives each row to a work-group that scans it in tiles of
 * 4 x local-size pixels (coalesced loads, a scan in local memory), and the column pass is a
 * two-level scan: every work-item scans one column over a chunk of rows and leaves the
 * chunk's total, one work-item per column turns the totals into offsets, and a fully
 * parallel pass adds each chunk's offset to its elements.
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

/*
 * GPU row pass: one work-group per row (global size = height x local size, local size at
 * most SCAN_GROUP). Each work-item takes 4 neighbouring pixels of a tile of 4 x local-size
 * pixels, the group scans the work-items' totals in local memory, and a running carry
 * links the tiles.
 *   integral_rows_group_sum_sqsum  as integral_rows_sum_sqsum
 *   integral_rows_group_count      as integral_rows_count
 */
#define SCAN_GROUP 256

/* Inclusive scan over the work-group of a (and b), Hillis-Steele in local memory; on return
 * ta/tb hold the inclusive scans, so ta[n - 1] is the total. Every work-item must call it. */
#define GROUP_SCAN(ta, a)                                                                      \
    ta[lid] = a;                                                                               \
    barrier(CLK_LOCAL_MEM_FENCE);                                                              \
    for (uint off = 1; off < n; off <<= 1) {                                                   \
        uint add = lid >= off ? ta[lid - off] : 0;                                             \
        barrier(CLK_LOCAL_MEM_FENCE);                                                          \
        ta[lid] += add;                                                                        \
        barrier(CLK_LOCAL_MEM_FENCE);                                                          \
    }
#define GROUP_SCAN2(ta, a, tb, b)                                                              \
    ta[lid] = a;                                                                               \
    tb[lid] = b;                                                                               \
    barrier(CLK_LOCAL_MEM_FENCE);                                                              \
    for (uint off = 1; off < n; off <<= 1) {                                                   \
        uint add = lid >= off ? ta[lid - off] : 0;                                             \
        uint add2 = lid >= off ? tb[lid - off] : 0;                                            \
        barrier(CLK_LOCAL_MEM_FENCE);                                                          \
        ta[lid] += add;                                                                        \
        tb[lid] += add2;                                                                       \
        barrier(CLK_LOCAL_MEM_FENCE);                                                          \
    }

/* The 4 pixels of this work-item (zeros past the row's end). */
inline uint4 load4(__global const uchar *row, uint x0, uint width)
{
    if (x0 + 4 <= width)
        return convert_uint4(vload4(0, row + x0));
    uint4 v = 0;
    if (x0 < width)
        v.s0 = row[x0];
    if (x0 + 1 < width)
        v.s1 = row[x0 + 1];
    if (x0 + 2 < width)
        v.s2 = row[x0 + 2];
    return v;
}

__kernel void integral_rows_group_sum_sqsum(__global const uchar *src, uint src_stride,
                                            uint width, uint height, __global uint *sum,
                                            __global ulong *sqsum)
{
    __local uint ta[SCAN_GROUP], tb[SCAN_GROUP];
    uint y = get_group_id(0), lid = get_local_id(0), n = get_local_size(0);
    if (y >= height)
        return;
    size_t stride = (size_t)width + 1;
    if (y == 0) {
        for (size_t x = lid; x < stride; x += n) {
            sum[x] = 0;
            sqsum[x] = 0;
        }
    }
    __global const uchar *row = src + (size_t)y * src_stride;
    __global uint *s = sum + (y + 1) * stride;
    __global ulong *q = sqsum + (y + 1) * stride;
    if (lid == 0) {
        s[0] = 0;
        q[0] = 0;
    }
    uint carry = 0, carry2 = 0; /* a row's squared sum fits in uint (see above) */
    for (uint base = 0; base < width; base += 4 * n) {
        uint x0 = base + 4 * lid;
        uint4 v = load4(row, x0, width);
        uint4 v2 = v * v;
        uint4 p = (uint4)(v.s0, v.s0 + v.s1, v.s0 + v.s1 + v.s2, v.s0 + v.s1 + v.s2 + v.s3);
        uint4 p2 = (uint4)(v2.s0, v2.s0 + v2.s1, v2.s0 + v2.s1 + v2.s2,
                           v2.s0 + v2.s1 + v2.s2 + v2.s3);
        GROUP_SCAN2(ta, p.s3, tb, p2.s3)
        uint before = carry + ta[lid] - p.s3, before2 = carry2 + tb[lid] - p2.s3;
        carry += ta[n - 1];
        carry2 += tb[n - 1];
        p += before;
        p2 += before2;
        if (x0 + 4 <= width) {
            vstore4(p, 0, s + x0 + 1);
            vstore4(convert_ulong4(p2), 0, q + x0 + 1);
        } else {
            for (uint k = 0; k < 3 && x0 + k < width; k++) {
                s[x0 + k + 1] = k == 0 ? p.s0 : k == 1 ? p.s1 : p.s2;
                q[x0 + k + 1] = k == 0 ? p2.s0 : k == 1 ? p2.s1 : p2.s2;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* ta, tb are read above before the next tile's scan */
    }
}

__kernel void integral_rows_group_count(__global const uchar *src, uint src_stride,
                                        uint width, uint height, __global uint *count)
{
    __local uint ta[SCAN_GROUP];
    uint y = get_group_id(0), lid = get_local_id(0), n = get_local_size(0);
    if (y >= height)
        return;
    size_t stride = (size_t)width + 1;
    if (y == 0) {
        for (size_t x = lid; x < stride; x += n)
            count[x] = 0;
    }
    __global const uchar *row = src + (size_t)y * src_stride;
    __global uint *c = count + (y + 1) * stride;
    if (lid == 0)
        c[0] = 0;
    uint carry = 0;
    for (uint base = 0; base < width; base += 4 * n) {
        uint x0 = base + 4 * lid;
        uint4 v = select((uint4)0, (uint4)1, load4(row, x0, width) != 0);
        uint4 p = (uint4)(v.s0, v.s0 + v.s1, v.s0 + v.s1 + v.s2, v.s0 + v.s1 + v.s2 + v.s3);
        GROUP_SCAN(ta, p.s3)
        uint before = carry + ta[lid] - p.s3;
        carry += ta[n - 1];
        p += before;
        if (x0 + 4 <= width) {
            vstore4(p, 0, c + x0 + 1);
        } else {
            for (uint k = 0; k < 3 && x0 + k < width; k++)
                c[x0 + k + 1] = k == 0 ? p.s0 : k == 1 ? p.s1 : p.s2;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/*
 * GPU column pass, a two-level scan over chunks of rows_per_chunk rows (rows 1..height):
 *   NAME_chunks   2-D: x = column - 1 (< width), y = chunk; scans its column within the
 *                 chunk in place and writes the chunk's total to totals[chunk * width + x]
 *   NAME_offsets  1-D: x = column - 1; turns the column's totals into exclusive prefix sums
 *   NAME_add      2-D: x = column - 1, y = row - 1 (< height); adds the offset of its
 *                 row's chunk (chunk 0 has none)
 */
#define INTEGRAL_COLS_CHUNKED(NAME, T)                                                         \
__kernel void NAME##_chunks(uint width, uint height, uint rows_per_chunk,                      \
                            __global T *integral, __global T *totals)                          \
{                                                                                              \
    size_t x = get_global_id(0) + 1;                                                           \
    size_t chunk = get_global_id(1);                                                           \
    size_t y0 = 1 + chunk * rows_per_chunk;                                                    \
    if (x > width || y0 > height)                                                              \
        return;                                                                                \
    size_t stride = (size_t)width + 1;                                                         \
    size_t y1 = min(y0 + rows_per_chunk, (size_t)height + 1);                                  \
    T acc = 0;                                                                                 \
    for (size_t y = y0; y < y1; y++) {                                                         \
        acc += integral[y * stride + x];                                                       \
        integral[y * stride + x] = acc;                                                        \
    }                                                                                          \
    totals[chunk * width + x - 1] = acc;                                                       \
}                                                                                              \
__kernel void NAME##_offsets(uint width, uint chunks, __global T *totals)                      \
{                                                                                              \
    size_t x = get_global_id(0);                                                               \
    if (x >= width)                                                                            \
        return;                                                                                \
    T run = 0;                                                                                 \
    for (size_t c = 0; c < chunks; c++) {                                                      \
        T t = totals[c * width + x];                                                           \
        totals[c * width + x] = run;                                                           \
        run += t;                                                                              \
    }                                                                                          \
}                                                                                              \
__kernel void NAME##_add(uint width, uint height, uint rows_per_chunk,                         \
                         __global T *integral, __global const T *totals)                       \
{                                                                                              \
    size_t x = get_global_id(0);                                                               \
    size_t y = get_global_id(1);                                                               \
    if (x >= width || y >= height)                                                             \
        return;                                                                                \
    size_t chunk = y / rows_per_chunk;                                                         \
    if (chunk == 0)                                                                            \
        return;                                                                                \
    integral[(y + 1) * ((size_t)width + 1) + x + 1] += totals[chunk * width + x];              \
}
INTEGRAL_COLS_CHUNKED(integral_cols_uint, uint)
INTEGRAL_COLS_CHUNKED(integral_cols_ulong, ulong)
