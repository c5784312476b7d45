/*
 * regions.cl: the sums of luma, of its square and of its edge and foreground pixels over
 * rectangles (the whole frame, the configured regions, the health grid's cells), each in
 * O(1) from the blocked integrals of integral.cl.
 *
 * Built after integral.cl, in one program with it (src/cl's INTEGRAL_REGIONS_CL): what it
 * reads is the blocked form integral.cl's opening comment defines (I(x, y) as the sum of
 * corner, left, top and local), and it counts a row of pixels with integral.cl's own
 * TILE, load_partial16, packed_row and unpacked, so that a pixel is an edge or foreground
 * here exactly where the integral passes count it so. One program rather than two: POCL
 * builds each program it is given and keeps its preprocessed source and LLVM module with
 * it (BENCHMARKS.md, "3. Memory").
 *
 * region_sums reads rects (uint4: x, y, w, h; inside the frame) and writes, per rect, 4
 * ulongs: pixel sum, squared sum, edge count, foreground count, each from the four
 * corners' I: left, top and corner from the blocked parts, and the part inside the
 * corner's tile (what local would hold: at most 15 rows of at most 15 pixels) summed
 * from luma and the magnitude, so that local need not exist. Its pixels' edges and
 * foreground are counted as the integral passes count them (magnitude >= edge_threshold,
 * luma > results[256]). Sums run modulo 2^64, and the total, a region's exact sum, fits.
 * Two layouts, the same arguments:
 *   GPUs  region_sums: 1-D, a work-group of REGION_ITEMS per rect, exactly count groups:
 *         work-item (k, j), lid = 16 k + j, takes row j of corner k's in-tile part (k =
 *         0..3: (x, y), (x + w, y), (x, y + h), (x + w, y + h)), the first of each corner
 *         also its blocked parts, each with the corner's sign; the group then adds up its
 *         64 signed parts in local memory.
 *   CPUs and Mali  region_sums_items: 1-D, a work-item per rect (no local memory, no
 *         barriers), the four corners' rows one after another.
 */
#define REGION_ITEMS 64

/* The blocked parts of I(x, y), corner, left and top, for (sum, squared sum, edges,
 * foreground): each where its condition holds. */
inline ulong4 blocked_at(uint x, uint y, uint width, uint height, __global const uint *left,
                         __global const ulong *left_sq, __global const uint *top,
                         __global const ulong *top_sq, __global const uint *corner,
                         __global const ulong *corner_sq)
{
    uint t = x / TILE, l = x % TILE, b = y / TILE, r = y % TILE;
    size_t whole_tiles = width / TILE, whole_bands = height / TILE;
    size_t padded = TILE * (size_t)((width + TILE - 1) / TILE);
    ulong4 v = 0;
    if (t > 0 && b > 0) {
        size_t plane = whole_tiles * whole_bands, i = (b - 1) * whole_tiles + t - 1;
        v += (ulong4)(corner[i], corner_sq[i], corner[plane + i], corner[2 * plane + i]);
    }
    if (t > 0 && r > 0) {
        size_t plane = whole_tiles * height, i = (size_t)(t - 1) * height + y - 1;
        v += (ulong4)(left[i], left_sq[i], left[plane + i], left[2 * plane + i]);
    }
    if (b > 0 && l > 0) {
        size_t plane = whole_bands * padded, i = (b - 1) * padded + x - 1;
        v += (ulong4)(top[i], top_sq[i], top[plane + i], top[2 * plane + i]);
    }
    return v;
}

inline uint sum16(uint16 v)
{
    uint8 a = v.lo + v.hi;
    uint4 b = a.lo + a.hi;
    uint2 c = b.lo + b.hi;
    return c.x + c.y;
}

/* The n < 16 pixels of luma and the magnitude from element at of their `pixels`, as (sum,
 * squared sum, edges, foreground): one row of a corner's in-tile part. Packed as the GPU
 * pass packs a row (15 pixels' sum fits its 12 bits). */
inline uint4 row_part(__global const uchar *luma, __global const uchar *magnitude, size_t at,
                      uint n, size_t pixels, uint edge_threshold, uchar threshold)
{
    const uchar16 lanes = (uchar16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    uchar16 inside = as_uchar16(lanes < (uchar16)(uchar)n);
    uchar16 l, m;
    if (at + TILE <= pixels) {
        /* Whole vectors, the lanes past n cleared: loads byte by byte cost POCL far
         * more (BENCHMARKS.md, "Integrals without local"). */
        l = vload16(0, luma + at) & inside;
        m = vload16(0, magnitude + at) & inside;
    } else {
        l = load_partial16(luma + at, n);
        m = load_partial16(magnitude + at, n);
    }
    uint16 v = convert_uint16(l), s = packed_row(l, m, n, edge_threshold, threshold);
    return unpacked((uint2)(sum16(s), sum16(v * v)));
}

/* I(x + w, y + h) - I(x + w, y) - I(x, y + h) + I(x, y): corner k's sign. */
inline ulong4 signed_part(uint k, ulong4 v)
{
    return k == 0 || k == 3 ? v : (ulong4)0 - v;
}

__kernel __attribute__((reqd_work_group_size(REGION_ITEMS, 1, 1))) void
region_sums(__global const uchar *luma, uint width, uint height,
            __global const uchar *magnitude, uint edge_threshold,
            __global const uint *results, __global const uint *left,
            __global const ulong *left_sq, __global const uint *top,
            __global const ulong *top_sq, __global const uint *corner,
            __global const ulong *corner_sq, __global const uint4 *rects, uint count,
            __global ulong *out)
{
    __local ulong4 parts[REGION_ITEMS];
    /* A whole group returns or none does: the barriers below are never split. */
    if (get_group_id(0) >= count)
        return;
    uint lid = get_local_id(0), k = lid / TILE, j = lid % TILE;
    uint4 rect = rects[get_group_id(0)];
    uint x = rect.x + (k & 1 ? rect.z : 0), y = rect.y + (k & 2 ? rect.w : 0);
    uint l = x % TILE, r = y % TILE;
    ulong4 v = 0;
    if (j < r && l > 0)
        v = convert_ulong4(row_part(luma, magnitude, (size_t)(y - r + j) * width + x - l, l,
                                    (size_t)width * height, edge_threshold,
                                    (uchar)results[256]));
    if (j == 0)
        v += blocked_at(x, y, width, height, left, left_sq, top, top_sq, corner, corner_sq);
    parts[lid] = signed_part(k, v);
    for (uint n = REGION_ITEMS / 2; n > 0; n /= 2) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < n)
            parts[lid] += parts[lid + n];
    }
    if (lid == 0)
        vstore4(parts[0], get_group_id(0), out);
}

__kernel void region_sums_items(__global const uchar *luma, uint width, uint height,
                                __global const uchar *magnitude, uint edge_threshold,
                                __global const uint *results, __global const uint *left,
                                __global const ulong *left_sq, __global const uint *top,
                                __global const ulong *top_sq, __global const uint *corner,
                                __global const ulong *corner_sq, __global const uint4 *rects,
                                uint count, __global ulong *out)
{
    uint i = get_global_id(0);
    if (i >= count)
        return;
    uint4 rect = rects[i];
    uchar threshold = (uchar)results[256];
    ulong4 sums = 0;
    for (uint k = 0; k < 4; k++) {
        uint x = rect.x + (k & 1 ? rect.z : 0), y = rect.y + (k & 2 ? rect.w : 0);
        uint l = x % TILE, r = y % TILE;
        uint4 inside = 0;
        for (uint j = 0; l > 0 && j < r; j++)
            inside += row_part(luma, magnitude, (size_t)(y - r + j) * width + x - l, l,
                               (size_t)width * height, edge_threshold, threshold);
        ulong4 v = convert_ulong4(inside) +
                   blocked_at(x, y, width, height, left, left_sq, top, top_sq, corner, corner_sq);
        sums += signed_part(k, v);
    }
    vstore4(sums, i, out);
}
