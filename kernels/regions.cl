/*
 * regions.cl: the sums of luma, of its square and of its edge and foreground pixels over
 * rectangles (the whole frame, the configured regions, the health grid's cells), each in
 * O(1) from the blocked integrals of integral.cl.
 *
 * Built after integral.cl and motion.cl, in one program with them (src/cl's
 * INTEGRAL_MOTION_REGIONS_CL): what it reads is the blocked form integral.cl's opening
 * comment defines (I(x, y) as the sum of corner, left, top and local), and it counts a
 * row of pixels with integral.cl's own TILE, load_partial16, packed_row and unpacked, so
 * that a pixel is an edge or foreground here exactly where the integral passes count it
 * so. One program rather than three: POCL builds each program it is given and keeps its
 * preprocessed source and LLVM module with it (bench/notes/round3.md#memory).
 *
 * With motion (motion != 0: motion.cl's motion_tiles ran on this frame, of `parity`),
 * each rect's moving pixels too, at moving_out's ulong MOTION_STATS / 2 + k: counted from
 * the tiles' mask (moving_pixels below, over the rect's rows of tiles: at most its rows
 * plus its tiles / 16 vector loads), but the whole frame's, the first rect's, which
 * motion_tiles summed and the first rect's group (or work-item) copies out with the
 * frame's counts (motion.cl's motion_counts). Counted here rather than in a launch of
 * motion's own after this one, which an NVIDIA H100 took 0.005 ms for at any size
 * (bench/notes/motion-device.md#motion-steps). (A region of a frame over 65535 tiles tall,
 * 16 pixels wide, is the one whose rows pass llvmpipe's loop budget, integral.cl's
 * header: no camera, and the kernel tests' largest frames run without motion.)
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
 *         also its blocked parts, each with the corner's sign, and the rect's rows of
 *         tiles lid, lid + 64, ...; the group then adds up its 64 signed parts and
 *         moving pixels in local memory.
 *   CPUs and Mali  region_sums_items: 1-D, a work-item per rect (no local memory, no
 *         barriers), the four corners' rows one after another, then the rows of tiles.
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

#ifdef NARROW_ROWS
/* Built with -DNARROW_ROWS (Bifrost and Valhall Malis): the same two functions a byte at
 * a time. Mesa's Panfrost compiler gives every lane of a vector a register of its own, so
 * the 16-lane forms below took region_sums_items past 64 registers there (75 spilled);
 * a byte load is what Mali makes of an unaligned vector load anyway. */

/* The n < 16 pixels of luma and the magnitude from element at, as (sum, squared sum,
 * edges, foreground): one row of a corner's in-tile part. */
inline uint4 row_part(__global const uchar *luma, __global const uchar *magnitude, size_t at,
                      uint n, size_t pixels, uint edge_threshold, uchar threshold)
{
    uint4 sums = 0;
    for (uint i = 0; i < n; i++) {
        uint v = luma[at + i];
        sums += (uint4)(v, v * v, magnitude[at + i] >= edge_threshold, v > threshold);
    }
    return sums;
}

/* The moving tiles among n mask bytes from p (room, the bytes of the mask from p on, is
 * the wide form's). */
inline uint mask_count(__global const uchar *p, uint n, size_t room)
{
    uint sum = 0;
    for (uint k = 0; k < n; k++)
        sum += p[k];
    return sum;
}
#else
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
         * more (bench/notes/integrals-without-local.md#regions-on-cpus). */
        l = vload16(0, luma + at) & inside;
        m = vload16(0, magnitude + at) & inside;
    } else {
        l = load_partial16(luma + at, n);
        m = load_partial16(magnitude + at, n);
    }
    uint16 v = convert_uint16(l), s = packed_row(l, m, n, edge_threshold, threshold);
    return unpacked((uint2)(sum16(s), sum16(v * v)));
}

/* The moving tiles among n mask bytes from p, room bytes of the mask from p on. */
inline uint mask_count(__global const uchar *p, uint n, size_t room)
{
    const uchar16 lanes = (uchar16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    uint16 sum = 0;
    uint k = 0;
    for (; k + TILE <= n; k += TILE)
        sum += convert_uint16(vload16(0, p + k));
    if (k < n) {
        uchar16 inside = as_uchar16(lanes < (uchar16)(uchar)(n - k));
        sum += convert_uint16(k + TILE <= room ? vload16(0, p + k) & inside
                                               : load_partial16(p + k, n - k));
    }
    return sum16(sum);
}

#endif

/* The moving pixels of rect (x, y, w, h, inside the frame) in its rows of tiles first,
 * first + step, ...: a pixel moves where the tile it falls in does, the last column and
 * row of tiles taking the pixels past the whole tiles (a width or height not a multiple
 * of 16). Along a row of tiles its first and last tiles count the columns the rectangle
 * covers of them, those between 16 each; a row of tiles counts the rows it covers alike.
 * At most width x height, a uint. */
inline uint moving_pixels(__global const uchar *mask, uint width, uint height, uint4 rect,
                          uint first, uint step)
{
    uint tiles_x = width / TILE, tiles_y = height / TILE;
    uint x1 = rect.x + rect.z, y1 = rect.y + rect.w;
    uint c0 = min(rect.x / TILE, tiles_x - 1), c1 = min((x1 - 1) / TILE, tiles_x - 1);
    uint r0 = min(rect.y / TILE, tiles_y - 1), r1 = min((y1 - 1) / TILE, tiles_y - 1);
    uint left = (c0 == c1 ? x1 : TILE * (c0 + 1)) - rect.x, right = x1 - TILE * c1;
    uint top = (r0 == r1 ? y1 : TILE * (r0 + 1)) - rect.y, bottom = y1 - TILE * r1;
    size_t tiles = (size_t)tiles_x * tiles_y;
    uint inner = c1 > c0 ? c1 - c0 - 1 : 0, sum = 0;
    for (uint r = r0 + first; r <= r1; r += step) {
        size_t row = (size_t)r * tiles_x;
        uint across = left * mask[row + c0];
        if (c1 > c0)
            across += right * mask[row + c1] +
                      TILE * mask_count(mask + row + c0 + 1, inner, tiles - row - c0 - 1);
        sum += across * (r == r0 ? top : r == r1 ? bottom : TILE);
    }
    return sum;
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
            __global ulong *out, __global const uchar *mask, uint motion,
            __global uint *acc, __global uint *light, uint parity, __global uint *moving_out)
{
    __local ulong4 parts[REGION_ITEMS];
    __local uint moving[REGION_ITEMS];
    /* Exactly count groups run (the host launches no more). No early return for groups
     * past them: with one before its barriers and the motion branch after it, POCL's armv7
     * build (Debian 12) ran this kernel forever. */
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
    /* The whole frame's (the first rect's) motion_tiles counted, and motion_counts copies. */
    bool count_moving = motion && get_group_id(0) > 0;
    moving[lid] = count_moving ? moving_pixels(mask, width, height, rect, lid, REGION_ITEMS) : 0;
    if (motion && get_group_id(0) == 0)
        motion_counts(acc, light, parity, moving_out, lid, REGION_ITEMS);
    for (uint n = REGION_ITEMS / 2; n > 0; n /= 2) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < n) {
            parts[lid] += parts[lid + n];
            moving[lid] += moving[lid + n];
        }
    }
    if (lid == 0) {
        vstore4(parts[0], get_group_id(0), out);
        if (count_moving)
            ((__global ulong *)(moving_out + MOTION_STATS))[get_group_id(0)] = moving[0];
    }
}

__kernel void region_sums_items(__global const uchar *luma, uint width, uint height,
                                __global const uchar *magnitude, uint edge_threshold,
                                __global const uint *results, __global const uint *left,
                                __global const ulong *left_sq, __global const uint *top,
                                __global const ulong *top_sq, __global const uint *corner,
                                __global const ulong *corner_sq, __global const uint4 *rects,
                                uint count, __global ulong *out, __global const uchar *mask,
                                uint motion, __global uint *acc, __global uint *light,
                                uint parity, __global uint *moving_out)
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
    if (motion && i == 0)
        motion_counts(acc, light, parity, moving_out, 0, 1);
    else if (motion)
        ((__global ulong *)(moving_out + MOTION_STATS))[i] =
            moving_pixels(mask, width, height, rect, 0, 1);
}
