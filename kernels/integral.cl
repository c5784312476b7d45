/*
 * integral.cl: integral images in OpenCV's layout and the region sums read from them.
 *
 * An integral image of a width x height image has (height + 1) x (width + 1) elements, row
 * stride width + 1; row 0 and column 0 are zero, and
 *   I[y][x] = sum of src[j][i] for j < y, i < x          (OpenCV's integral / integral2)
 * Two layouts compute the same images (the host picks one per device kind):
 *
 * CPUs (integral_band_columns, integral_bands, at the end of this file): bands of rows,
 * column sums per band first, then each band writes all four images row by row.
 *
 * GPUs: a row pass, a work-group per row scanning it in tiles of 4 x local-size pixels
 * (coalesced loads, a scan in local memory), then a two-level column scan: every
 * work-item scans one column over a chunk of rows and leaves the chunk's total, one
 * work-item per column turns the totals into offsets, and a fully parallel pass adds each
 * chunk's offset to its elements.
 *   integral_rows_group_sum_sqsum  reads uchar src; writes the row sums of sum (uint) and
 *                                  sqsum (ulong); with the column pass equal to
 *                                  cv2.integral2(src, sdepth=CV_32S, sqdepth=CV_64F).
 *                                  uint holds the sum for frames of up to 16843009 pixels.
 *   integral_rows_group_count      reads a uchar mask; the row sums of (mask != 0) (uint)
 *   integral_cols_{uint,ulong}_{chunks,offsets,add}   the column pass
 * region_sums              reads rects (uint4: x, y, w, h; inside the image) and writes, per
 *                          rect, 4 ulongs: pixel sum, squared sum, edge count, foreground
 *                          count (one work-item per rect).
 */

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
    uint carry = 0, carry2 = 0; /* a row's squared sum fits in uint: 65535 * 65025 < 2^32 */
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

/*
 * CPU passes: all four integrals, the image cut into `bands` bands of rows, one work-item
 * per band (work-group size 1), everything read and written row by row (streams a CPU's
 * prefetchers follow).
 *   integral_band_columns  writes, per band b and column x, the band's column sums of
 *                          luma, luma^2, edge and foreground pixels (uint each; a band has
 *                          at most 66051 rows) to cols[(k * bands + b) * width + x], k = 0..3
 *   integral_bands         writes the band's rows of sum (uint), sqsum (ulong), edge and
 *                          foreground counts (uint): each row is the row above plus the
 *                          row's running sums; the row above the band's first row (the sums
 *                          of the bands above, prefix-summed along the row) goes to `tops`
 *                          first. Band 0 also writes row 0; every band writes column 0.
 * Inputs are read twice, each output is written once.
 */
/* Inclusive prefix sum of 16 lanes in four log-step shifts (lanes shifted in are zero). */
inline uint16 prefix16(uint16 v)
{
    const uint16 z = 0;
    v += shuffle2(z, v, (uint16)(0, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30));
    v += shuffle2(z, v, (uint16)(0, 0, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29));
    v += shuffle2(z, v, (uint16)(0, 0, 0, 0, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27));
    v += shuffle2(z, v, (uint16)(0, 0, 0, 0, 0, 0, 0, 0, 16, 17, 18, 19, 20, 21, 22, 23));
    return v;
}

__kernel void integral_band_columns(uint width, uint height, uint bands,
                                    __global const uchar *luma, __global const uchar *edges,
                                    __global const uchar *mask, __global uint *cols)
{
    uint b = get_global_id(0);
    if (b >= bands)
        return;
    uint y0 = (uint)((ulong)height * b / bands), y1 = (uint)((ulong)height * (b + 1) / bands);
    size_t plane = (size_t)bands * width;
    __global uint *c1 = cols + (size_t)b * width, *c2 = c1 + plane, *ce = c2 + plane,
                  *cf = ce + plane;
    for (uint x = 0; x < width; x++) {
        c1[x] = 0;
        c2[x] = 0;
        ce[x] = 0;
        cf[x] = 0;
    }
    for (uint y = y0; y < y1; y++) {
        size_t row = (size_t)y * width;
        uint x = 0;
        for (; x + 16 <= width; x += 16) {
            uint16 v = convert_uint16(vload16(0, luma + row + x));
            vstore16(vload16(0, c1 + x) + v, 0, c1 + x);
            vstore16(vload16(0, c2 + x) + v * v, 0, c2 + x);
            vstore16(vload16(0, ce + x) + (convert_uint16(vload16(0, edges + row + x) != (uchar16)0) & 1), 0, ce + x);
            vstore16(vload16(0, cf + x) + (convert_uint16(vload16(0, mask + row + x) != (uchar16)0) & 1), 0, cf + x);
        }
        for (; x < width; x++) {
            uint v = luma[row + x];
            c1[x] += v;
            c2[x] += v * v;
            ce[x] += edges[row + x] != 0;
            cf[x] += mask[row + x] != 0;
        }
    }
}

__kernel void integral_bands(uint width, uint height, uint bands, __global const uchar *luma,
                             __global const uchar *edges, __global const uchar *mask,
                             __global const uint *cols, __global uint *tops,
                             __global ulong *tops2, __global uint *sum, __global ulong *sqsum,
                             __global uint *ecount, __global uint *fcount)
{
    uint b = get_global_id(0);
    if (b >= bands)
        return;
    uint y0 = (uint)((ulong)height * b / bands), y1 = (uint)((ulong)height * (b + 1) / bands);
    size_t stride = (size_t)width + 1;
    size_t plane = (size_t)bands * width;
    /* The integral row y0: column sums of the bands above, summed along the row. */
    __global uint *t1 = tops + (size_t)b * 3 * stride, *te = t1 + stride, *tf = te + stride;
    __global ulong *t2 = tops2 + (size_t)b * stride;
    uint a = 0, ae = 0, af = 0;
    ulong a2 = 0;
    t1[0] = 0;
    t2[0] = 0;
    te[0] = 0;
    tf[0] = 0;
    for (uint x = 0; x < width; x++) {
        uint s1 = 0, se = 0, sf = 0;
        ulong s2 = 0;
        for (uint k = 0; k < b; k++) {
            size_t i = (size_t)k * width + x;
            s1 += cols[i];
            s2 += cols[plane + i];
            se += cols[2 * plane + i];
            sf += cols[3 * plane + i];
        }
        a += s1;
        a2 += s2;
        ae += se;
        af += sf;
        t1[x + 1] = a;
        t2[x + 1] = a2;
        te[x + 1] = ae;
        tf[x + 1] = af;
    }
    if (b == 0) {
        for (size_t x = 0; x < stride; x++) {
            sum[x] = 0;
            sqsum[x] = 0;
            ecount[x] = 0;
            fcount[x] = 0;
        }
    }
    __global const uint *u1 = t1, *ue = te, *uf = tf;
    __global const ulong *u2 = t2;
    for (uint y = y0; y < y1; y++) {
        size_t in = (size_t)y * width, o = (size_t)(y + 1) * stride;
        __global uint *o1 = sum + o, *oe = ecount + o, *of = fcount + o;
        __global ulong *o2 = sqsum + o;
        o1[0] = 0;
        o2[0] = 0;
        oe[0] = 0;
        of[0] = 0;
        uint r1 = 0, r2 = 0, re = 0, rf = 0;
        uint x = 0;
        /* 16 pixels at a time: the running sum is a carried dependency per pixel, which a
         * scalar loop cannot vectorize; a prefix within the vector plus one carried add
         * per 16 pixels can. */
        for (; x + 16 <= width; x += 16) {
            uint16 v = convert_uint16(vload16(0, luma + in + x));
            uint16 p1 = prefix16(v) + r1;
            uint16 p2 = prefix16(v * v) + r2;
            uint16 pe = prefix16(convert_uint16(vload16(0, edges + in + x) != (uchar16)0) & 1) + re;
            uint16 pf = prefix16(convert_uint16(vload16(0, mask + in + x) != (uchar16)0) & 1) + rf;
            r1 = p1.sf;
            r2 = p2.sf;
            re = pe.sf;
            rf = pf.sf;
            vstore16(vload16(0, u1 + x + 1) + p1, 0, o1 + x + 1);
            vstore16(vload16(0, u2 + x + 1) + convert_ulong16(p2), 0, o2 + x + 1);
            vstore16(vload16(0, ue + x + 1) + pe, 0, oe + x + 1);
            vstore16(vload16(0, uf + x + 1) + pf, 0, of + x + 1);
        }
        for (; x < width; x++) {
            uint v = luma[in + x];
            r1 += v;
            r2 += v * v;
            re += edges[in + x] != 0;
            rf += mask[in + x] != 0;
            o1[x + 1] = u1[x + 1] + r1;
            o2[x + 1] = u2[x + 1] + r2;
            oe[x + 1] = ue[x + 1] + re;
            of[x + 1] = uf[x + 1] + rf;
        }
        u1 = o1;
        u2 = o2;
        ue = oe;
        uf = of;
    }
}
