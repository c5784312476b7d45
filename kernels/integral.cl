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
 * The kernels that read the width x height inputs take (luma, src_stride, width, height,
 * magnitude, edge_threshold, results, ...): luma and the gradient magnitude are dense and
 * share their row offsets, so src_stride must equal width. They count a pixel as an edge
 * where magnitude >= edge_threshold (sobel.cl's edge mask) and as foreground where
 * luma > results[256], the threshold otsu_threshold wrote (otsu.cl's binarize,
 * THRESH_BINARY): the masks themselves are never read, and need not exist.
 *
 * GPUs (integral_band_sums, integral_band_carries, integral_band_images): bands of rows,
 * a work-group per band that scans each row in chunks and keeps the column totals in
 * registers; described below.
 *
 * The images equal cv2.integral2(src, sdepth=CV_32S, sqdepth=CV_64F) (sum and squared
 * sum; uint holds the sum for frames of up to 16843009 pixels) and cv2.integral of the
 * edge and foreground masks divided by 255 (counts).
 *
 * region_sums              reads rects (uint4: x, y, w, h; inside the image) and writes, per
 *                          rect, 4 ulongs: pixel sum, squared sum, edge count, foreground
 *                          count (one work-item per rect). Its src is the sum image, of a
 *                          width x height frame: src_stride is the integrals' width + 1.
 */

/* Sum of the w x h rect at (x, y) from the four corners; uint arithmetic wraps, but the
 * true sum fits. */
#define RECT_SUM(I, stride, x, y, w, h) \
    (I[((y) + (h)) * (stride) + (x) + (w)] - I[((y) + (h)) * (stride) + (x)] - \
     I[(y) * (stride) + (x) + (w)] + I[(y) * (stride) + (x)])

__kernel void region_sums(__global const uint *sum, uint src_stride, uint width, uint height,
                          __global const ulong *sqsum, __global const uint *edges,
                          __global const uint *foreground, __global const uint4 *rects,
                          uint count, __global ulong *out)
{
    uint i = get_global_id(0);
    if (i >= count)
        return;
    uint4 rect = rects[i];
    uint x = rect.x, y = rect.y, w = rect.z, h = rect.w;
    size_t stride = src_stride;
    out[4 * i + 0] = (uint)RECT_SUM(sum, stride, x, y, w, h);
    out[4 * i + 1] = RECT_SUM(sqsum, stride, x, y, w, h);
    out[4 * i + 2] = (uint)RECT_SUM(edges, stride, x, y, w, h);
    out[4 * i + 3] = (uint)RECT_SUM(foreground, stride, x, y, w, h);
}

/*
 * GPU passes: bands of `band_rows` rows, about one band per compute unit, three kernels.
 *   integral_band_sums     2-D: x = a work-item per 4 columns, y = band. Writes each band's
 *                          column sums (luma, luma^2, edge and foreground pixels, uint each)
 *                          as one uint4 per column: cols[band * width + x].
 *   integral_band_carries  1-D: a work-item per column. Turns the bands' column sums into
 *                          exclusive prefix sums down the bands: what lies above each band.
 *   integral_band_images   a work-group per band (global = bands x local). Walks the row in
 *                          chunks of 4 x local-size columns, 4 neighbouring columns per
 *                          work-item: scans the sums above the band along the chunk (the
 *                          integral row at the band's top), then for each of the band's rows
 *                          scans the row's four values along the chunk (one group scan of a
 *                          uint4 per work-item), adds them to the column totals it keeps in
 *                          registers, and writes all four images through local memory, so
 *                          that neighbouring work-items store neighbouring elements.
 * Inputs are read twice, each output is written once, and the images are never read back
 * (a column pass over written images would read and write them again). Storing each
 * work-item's four elements straight from registers puts addresses 16 or 32 bytes apart
 * across a warp, which on a GPU is much slower than the staged stores (BENCHMARKS.md).
 */
#define BAND_GROUP_MAX 256
#define BAND_ROWS_MAX 64

/* Four pixels of a row from x on (zeros past the end), as uint; `aligned` when every row
 * starts on a 4-byte boundary (the width is a multiple of 4), for one 4-byte load. */
inline uint4 load4(__global const uchar *row, uint x, uint width, int aligned)
{
    if (x + 4 <= width)
        return convert_uint4(aligned ? *(__global const uchar4 *)(row + x) : vload4(0, row + x));
    uint4 v = 0;
    if (x < width)
        v.s0 = row[x];
    if (x + 1 < width)
        v.s1 = row[x + 1];
    if (x + 2 < width)
        v.s2 = row[x + 2];
    return v;
}

/* 1 where a pixel is an edge: its magnitude at least the threshold (sobel.cl's mask). */
inline uint4 edge4(uint4 magnitude, uint edge_threshold)
{
    return select((uint4)0, (uint4)1, magnitude >= edge_threshold);
}

/* 1 where a pixel is foreground: its luma above the Otsu threshold (binarize's mask). */
inline uint4 foreground4(uint4 luma, uint threshold)
{
    return select((uint4)0, (uint4)1, luma > threshold);
}

/* Inclusive prefix along the 4 lanes. */
inline uint4 prefix4(uint4 v)
{
    return (uint4)(v.s0, v.s0 + v.s1, v.s0 + v.s1 + v.s2, v.s0 + v.s1 + v.s2 + v.s3);
}

/* Exclusive scan of v over the work-group (Hillis-Steele, ping-pong buffers of 2 x
 * BAND_GROUP_MAX: one barrier a step). Sets *total to the group's sum. Every work-item of
 * the group must call it. */
inline uint4 group_exclusive_scan(uint4 v, __local uint4 *buf, uint lid, uint n, uint4 *total)
{
    __local uint4 *src = buf, *dst = buf + BAND_GROUP_MAX;
    src[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint off = 1; off < n; off <<= 1) {
        uint4 t = src[lid];
        if (lid >= off)
            t += src[lid - off];
        dst[lid] = t;
        barrier(CLK_LOCAL_MEM_FENCE);
        __local uint4 *swap = src;
        src = dst;
        dst = swap;
    }
    uint4 inclusive = src[lid];
    *total = src[n - 1];
    /* The next call writes buf again: everyone must have read it first. */
    barrier(CLK_LOCAL_MEM_FENCE);
    return inclusive - v;
}

__kernel void integral_band_sums(__global const uchar *luma, uint src_stride, uint width,
                                 uint height, __global const uchar *magnitude,
                                 uint edge_threshold, __global const uint *results,
                                 uint band_rows, __global uint4 *cols)
{
    uint x = 4 * get_global_id(0), b = get_global_id(1);
    uint y0 = b * band_rows;
    if (x >= width || y0 >= height)
        return;
    uint y1 = min(y0 + band_rows, height);
    int aligned = (width & 3) == 0;
    uint t = results[256];
    uint4 s = 0, q = 0, e = 0, f = 0;
    for (uint y = y0; y < y1; y++) {
        size_t row = (size_t)y * width;
        uint4 v = load4(luma + row, x, width, aligned);
        s += v;
        q += v * v;
        e += edge4(load4(magnitude + row, x, width, aligned), edge_threshold);
        f += foreground4(v, t);
    }
    __global uint4 *out = cols + (size_t)b * width + x;
    out[0] = (uint4)(s.s0, q.s0, e.s0, f.s0);
    if (x + 1 < width)
        out[1] = (uint4)(s.s1, q.s1, e.s1, f.s1);
    if (x + 2 < width)
        out[2] = (uint4)(s.s2, q.s2, e.s2, f.s2);
    if (x + 3 < width)
        out[3] = (uint4)(s.s3, q.s3, e.s3, f.s3);
}

__kernel void integral_band_carries(uint width, uint bands, __global uint4 *cols)
{
    uint x = get_global_id(0);
    if (x >= width)
        return;
    __global uint4 *c = cols + x;
    uint4 run = 0;
    uint b = 0;
    /* Eight loads issued before their sums are needed: the running sum is the only
     * dependency, and a load each iteration would wait out the memory latency every time. */
    for (; b + 8 <= bands; b += 8) {
        uint4 t[8];
        for (uint k = 0; k < 8; k++)
            t[k] = c[(size_t)(b + k) * width];
        for (uint k = 0; k < 8; k++) {
            c[(size_t)(b + k) * width] = run;
            run += t[k];
        }
    }
    for (; b < bands; b++) {
        uint4 t = c[(size_t)b * width];
        c[(size_t)b * width] = run;
        run += t;
    }
}

__kernel void integral_band_images(__global const uchar *luma, uint src_stride, uint width,
                                   uint height, __global const uchar *magnitude,
                                   uint edge_threshold, __global const uint *results,
                                   uint band_rows,
                                   __global const uint4 *cols,
                                   __global uint *sum, __global ulong *sqsum,
                                   __global uint *ecount, __global uint *fcount)
{
    __local uint4 buf[2 * BAND_GROUP_MAX];
    /* A row's values for the chunk, 4 per work-item, on their way to global memory. */
    __local uint stage1[4 * BAND_GROUP_MAX], stagee[4 * BAND_GROUP_MAX],
        stagef[4 * BAND_GROUP_MAX];
    __local ulong stage2[4 * BAND_GROUP_MAX];
    /* Each row's sums over the chunks to the left (sum, sum of squares, edges, foreground:
     * a row's squared sum fits uint for widths up to 66051). */
    __local uint4 row_carry[BAND_ROWS_MAX];
    uint b = get_group_id(0), lid = get_local_id(0), n = get_local_size(0);
    uint y0 = b * band_rows;
    if (y0 >= height)
        return;
    uint y1 = min(y0 + band_rows, height);
    size_t stride = (size_t)width + 1;
    int aligned = (width & 3) == 0;
    uint t = results[256];
    for (uint r = lid; r < y1 - y0; r += n)
        row_carry[r] = 0;
    for (uint y = y0 + lid; y < y1; y += n) {
        sum[(y + 1) * stride] = 0;
        sqsum[(y + 1) * stride] = 0;
        ecount[(y + 1) * stride] = 0;
        fcount[(y + 1) * stride] = 0;
    }
    if (b == 0) {
        for (size_t x = lid; x < stride; x += n) {
            sum[x] = 0;
            sqsum[x] = 0;
            ecount[x] = 0;
            fcount[x] = 0;
        }
    }
    /* The integral row y0 at the column left of the chunk. */
    uint top1 = 0, tope = 0, topf = 0;
    ulong top2 = 0;
    for (uint base = 0; base < width; base += 4 * n) {
        uint x = base + 4 * lid;
        uint chunk = min(4 * n, width - base);
        /* Column sums above the band for this work-item's 4 columns (zeros past the end). */
        __global const uint4 *above = cols + (size_t)b * width + x;
        uint4 k0 = x < width ? above[0] : 0, k1 = x + 1 < width ? above[1] : 0,
              k2 = x + 2 < width ? above[2] : 0, k3 = x + 3 < width ? above[3] : 0;
        uint4 c1 = (uint4)(k0.s0, k1.s0, k2.s0, k3.s0), c2 = (uint4)(k0.s1, k1.s1, k2.s1, k3.s1),
              ce = (uint4)(k0.s2, k1.s2, k2.s2, k3.s2), cf = (uint4)(k0.s3, k1.s3, k2.s3, k3.s3);
        /* Scan them along the chunk: the integral row y0. The squared sums (up to 2^32
         * each) are scanned as 16-bit halves so that the scan stays in uint. */
        uint4 p1 = prefix4(c1), pe = prefix4(ce), pf = prefix4(cf);
        uint4 p2lo = prefix4(c2 & 0xFFFF), p2hi = prefix4(c2 >> 16);
        uint4 tot_a, tot_b;
        uint4 ex_a = group_exclusive_scan((uint4)(p1.s3, pe.s3, pf.s3, 0), buf, lid, n, &tot_a);
        uint4 ex_b = group_exclusive_scan((uint4)(p2lo.s3, p2hi.s3, 0, 0), buf, lid, n, &tot_b);
        uint4 a1 = top1 + ex_a.s0 + p1;
        uint4 ae = tope + ex_a.s1 + pe;
        uint4 af = topf + ex_a.s2 + pf;
        ulong4 a2 = top2 + (convert_ulong4(ex_b.s1 + p2hi) << 16) + convert_ulong(ex_b.s0) +
                    convert_ulong4(p2lo);
        top1 += tot_a.s0;
        tope += tot_a.s1;
        topf += tot_a.s2;
        top2 += ((ulong)tot_b.s1 << 16) + tot_b.s0;
        /* The next row's pixels are loaded before this row's scan, so the memory latency
         * overlaps the scan's barriers instead of adding to them. */
        size_t in = (size_t)y0 * width;
        uint4 v = load4(luma + in, x, width, aligned);
        uint4 vm = load4(magnitude + in, x, width, aligned);
        for (uint y = y0; y < y1; y++) {
            /* Lanes past the width count too, but only into sums right of the row's end,
             * which are never stored. */
            uint4 r1 = prefix4(v), r2 = prefix4(v * v);
            uint4 re = prefix4(edge4(vm, edge_threshold)), rf = prefix4(foreground4(v, t));
            if (y + 1 < y1) {
                in += width;
                v = load4(luma + in, x, width, aligned);
                vm = load4(magnitude + in, x, width, aligned);
            }
            /* Read before the scan, whose barriers order it before work-item 0's update
             * and after the staging reads of the row before. */
            uint4 left = row_carry[y - y0];
            uint4 tot;
            uint4 ex = group_exclusive_scan((uint4)(r1.s3, r2.s3, re.s3, rf.s3), buf, lid, n,
                                            &tot);
            a1 += left.s0 + ex.s0 + r1;
            a2 += convert_ulong4(left.s1 + ex.s1 + r2);
            ae += left.s2 + ex.s2 + re;
            af += left.s3 + ex.s3 + rf;
            if (lid == 0)
                row_carry[y - y0] = left + tot;
            vstore4(a1, lid, stage1);
            vstore4(a2, lid, stage2);
            vstore4(ae, lid, stagee);
            vstore4(af, lid, stagef);
            barrier(CLK_LOCAL_MEM_FENCE);
            size_t o = (y + 1) * stride + base + 1;
            for (uint i = lid; i < chunk; i += n) {
                sum[o + i] = stage1[i];
                sqsum[o + i] = stage2[i];
                ecount[o + i] = stagee[i];
                fcount[o + i] = stagef[i];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

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
/* A vector store to an address aligned to the vector's size: non-temporal where the host
 * asks for STREAMING_STORES (CPUs, where an ordinary store first reads the line it
 * overwrites, a third more memory traffic for write-once images). */
#ifdef STREAMING_STORES
#define STORE_ALIGNED(v, p) __builtin_nontemporal_store((v), (p))
#else
#define STORE_ALIGNED(v, p) (*(p) = (v))
#endif

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

__kernel void integral_band_columns(__global const uchar *luma, uint src_stride, uint width,
                                    uint height, __global const uchar *magnitude,
                                    uint edge_threshold, __global const uint *results,
                                    uint bands, __global uint *cols)
{
    uint b = get_global_id(0);
    if (b >= bands)
        return;
    uint y0 = (uint)((ulong)height * b / bands), y1 = (uint)((ulong)height * (b + 1) / bands);
    size_t plane = (size_t)bands * width;
    uint t = results[256];
    uchar16 et = (uchar16)(uchar)edge_threshold, tv = (uchar16)(uchar)t;
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
            uchar16 l = vload16(0, luma + row + x);
            uint16 v = convert_uint16(l);
            vstore16(vload16(0, c1 + x) + v, 0, c1 + x);
            vstore16(vload16(0, c2 + x) + v * v, 0, c2 + x);
            vstore16(vload16(0, ce + x) + (convert_uint16(vload16(0, magnitude + row + x) >= et) & 1), 0, ce + x);
            vstore16(vload16(0, cf + x) + (convert_uint16(l > tv) & 1), 0, cf + x);
        }
        for (; x < width; x++) {
            uint v = luma[row + x];
            c1[x] += v;
            c2[x] += v * v;
            ce[x] += magnitude[row + x] >= edge_threshold;
            cf[x] += v > t;
        }
    }
}

/* Columns x0 .. x1 of an integral_bands row one at a time (the row's unaligned head and
 * its tail): adds each pixel to the row's running sums r, those to the running row t and
 * writes the result to the output row o. */
inline void integral_bands_scalar(uint x0, uint x1, __global const uchar *luma,
                                  __global const uchar *magnitude, uint edge_threshold,
                                  uint t, uint4 *r, __global uint *t1, __global ulong *t2,
                                  __global uint *te, __global uint *tf, __global uint *o1,
                                  __global ulong *o2, __global uint *oe, __global uint *of)
{
    uint4 s = *r;
    for (uint x = x0; x < x1; x++) {
        uint v = luma[x];
        s += (uint4)(v, v * v, magnitude[x] >= edge_threshold, v > t);
        o1[x + 1] = t1[x + 1] += s.s0;
        o2[x + 1] = t2[x + 1] += s.s1;
        oe[x + 1] = te[x + 1] += s.s2;
        of[x + 1] = tf[x + 1] += s.s3;
    }
    *r = s;
}

__kernel void integral_bands(__global const uchar *luma, uint src_stride, uint width,
                             uint height, __global const uchar *magnitude,
                             uint edge_threshold, __global const uint *results, uint bands,
                             __global const uint *cols,
                             __global uint *tops, __global ulong *tops2, __global uint *sum,
                             __global ulong *sqsum, __global uint *ecount, __global uint *fcount)
{
    uint b = get_global_id(0);
    if (b >= bands)
        return;
    uint y0 = (uint)((ulong)height * b / bands), y1 = (uint)((ulong)height * (b + 1) / bands);
    size_t stride = (size_t)width + 1;
    size_t plane = (size_t)bands * width;
    uint t = results[256];
    uchar16 et = (uchar16)(uchar)edge_threshold, tv = (uchar16)(uchar)t;
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
    /* The band's top row becomes its running row: each row adds its prefix sums to it and
     * the result is copied out. The running row stays in the core's cache while the
     * images stream past it (written with non-temporal stores where STREAMING_STORES:
     * no read of each output line before it is overwritten). */
    for (uint y = y0; y < y1; y++) {
        size_t in = (size_t)y * width, o = (size_t)(y + 1) * stride;
        __global uint *o1 = sum + o, *oe = ecount + o, *of = fcount + o;
        __global ulong *o2 = sqsum + o;
        o1[0] = 0;
        o2[0] = 0;
        oe[0] = 0;
        of[0] = 0;
        /* Scalar columns up to where the output row reaches a 16-element boundary, so the
         * vector stores below are aligned. */
        uint head = min((uint)((16 - (o + 1) % 16) % 16), width);
        uint4 r = 0; /* the row's running sums: luma, luma^2, edges, foreground */
        integral_bands_scalar(0, head, luma + in, magnitude + in, edge_threshold, t, &r, t1, t2,
                              te, tf, o1, o2, oe, of);
        uint x = head;
        /* 16 pixels at a time: the running sum is a carried dependency per pixel, which a
         * scalar loop cannot vectorize; a prefix within the vector plus one carried add
         * per 16 pixels can. */
        for (; x + 16 <= width; x += 16) {
            uchar16 l = vload16(0, luma + in + x);
            uint16 v = convert_uint16(l);
            uint16 p1 = prefix16(v) + r.s0;
            uint16 p2 = prefix16(v * v) + r.s1;
            uint16 pe = prefix16(convert_uint16(vload16(0, magnitude + in + x) >= et) & 1) + r.s2;
            uint16 pf = prefix16(convert_uint16(l > tv) & 1) + r.s3;
            r = (uint4)(p1.sf, p2.sf, pe.sf, pf.sf);
            uint16 a1 = vload16(0, t1 + x + 1) + p1;
            ulong16 a2 = vload16(0, t2 + x + 1) + convert_ulong16(p2);
            uint16 ae = vload16(0, te + x + 1) + pe;
            uint16 af = vload16(0, tf + x + 1) + pf;
            vstore16(a1, 0, t1 + x + 1);
            vstore16(a2, 0, t2 + x + 1);
            vstore16(ae, 0, te + x + 1);
            vstore16(af, 0, tf + x + 1);
            STORE_ALIGNED(a1, (__global uint16 *)(o1 + x + 1));
            STORE_ALIGNED(a2, (__global ulong16 *)(o2 + x + 1));
            STORE_ALIGNED(ae, (__global uint16 *)(oe + x + 1));
            STORE_ALIGNED(af, (__global uint16 *)(of + x + 1));
        }
        integral_bands_scalar(x, width, luma + in, magnitude + in, edge_threshold, t, &r, t1, t2,
                              te, tf, o1, o2, oe, of);
    }
}
