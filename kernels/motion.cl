/*
 * motion.cl: motion against a learned background, per tile of 16 x 16 pixels, and the
 * moving pixels of any rectangle in O(1).
 *
 * The unit is integral.cl's whole tile (TILE x TILE pixels; tiles_x = width / 16 across,
 * tiles_y = height / 16 down): its luma sum S comes from the corner integral the integral
 * stage has just written (corner[b * tiles_x + t] = the sum over i < 16 (t + 1),
 * j < 16 (b + 1)), four reads a tile and no pass over the pixels. A tile's mean averages
 * the sensor's noise over 256 pixels (a sixteenth of its deviation), which is what lets a
 * fixed threshold of a few luma levels work on a noisy camera.
 *
 * Fixed point, no floating point (the reference, src/reference.rs's motion, is the same
 * integer arithmetic): means are in 1/65536 of a luma level, so a tile's is S << 8 and
 * the background `background[i]` (at most 255 x 65536 < 2^24) is its exponential moving
 * average.
 *
 * motion_light, a work-item per whole tile (1-D, any local size): the tiles that did not
 *   move on the last frame (mask[i] still 0) add this frame's S and their background >> 8
 *   into totals[0] and totals[1] (a group's in local memory first). Their ratio is the
 *   light gain: a cloud or the camera's exposure scales every tile alike and the
 *   background is compared scaled by it, so a change of light alone is not motion; taken
 *   over the still tiles only, so that a bright thing walking in does not raise the gain
 *   and make the rest of the frame "move". (A light switched on or the infrared switch
 *   changes most tiles in other ways besides: the host takes that as a change of scene.)
 *
 * motion_tiles, a work-item per whole tile (1-D, any local size; items past the tiles
 * return after the group's barriers):
 *   gain      F = totals[0], B = totals[1]: gain = F * 65536 / B clamped to
 *             [65536 / 8, 65536 * 8] (1 where B is 0).
 *   moving    with e = bg * gain >> 16 (the background in this light) and the light's
 *             change there c = |e - bg|, the tile's distance from the range
 *             [min(bg, e) - c, max(bg, e) + c] more than threshold << 8 (threshold in
 *             1/256 of a luma level): mask[i] = 1, else 0. A range, not e alone: a
 *             highlight clipped at 255 (a window, a lamp) or a shadow at black does not
 *             follow the light, and light rarely changes alike everywhere (a cloud's edge,
 *             the sun moving across a room), so a tile may change up to twice as much as
 *             the frame's light did, either way. While the light is as learned (the
 *             background follows it), c is next to nothing.
 *   counts    that distance's histogram in DIFF_BINS bins of a quarter luma level (the
 *             last holds the rest) and the moving tiles, added into acc[0..DIFF_BINS] and
 *             acc[DIFF_BINS] (a group's in local memory first, then one global atomic per
 *             non-zero bin): the host's noise estimate for the next frame's threshold.
 *   update    background += sign(d) * ((|d| * rate + 32768) >> 16), d = (S << 8) -
 *             background: rate / 65536 of the way to this frame (rate 65536 sets it to the
 *             frame: learning from scratch).
 *
 * motion_sums, one work-group (launched as exactly one; its size any):
 *   1. copies acc and this frame's F, B and gain into out[0..MOTION_STATS) and zeroes
 *      acc and totals (which the next frame sums into);
 *   2. the exclusive integral of the mask, G[b * (tiles_x + 1) + t] = the moving tiles
 *      of bands < b and tiles < t ((tiles_x + 1) x (tiles_y + 1) uints): each band's row
 *      prefix, a barrier, the prefix of each column down the bands;
 *   3. per rectangle (x, y, w, h of rects, as the region stage measures them: the whole
 *      frame, the regions, the health grid's cells) the moving pixels, at out's ulong
 *      MOTION_STATS / 2 + k, a pixel moving where the tile it falls in does, the last
 *      column and row of tiles taking the pixels past the whole tiles (a width or height
 *      not a multiple of 16). From the four corners' P(x, y), the moving pixels left of
 *      x and above y: with c = min(x / 16, tiles_x - 1), lx = x - 16 c, r and ly alike,
 *        P = 256 G(c, r) + 16 lx (G(c + 1, r) - G(c, r)) + 16 ly (G(c, r + 1) - G(c, r))
 *            + lx ly m(c, r),   m the mask of tile (c, r)
 *      (the whole tiles above-left, the columns of tile c left of x over the bands above,
 *      the rows of band r above y over the tiles left, the rest).
 * A frame narrower or shorter than one tile has no tiles and nothing moves: the host
 * launches neither kernel then.
 */

#define TILE 16
#define DIFF_BINS 64
/* A bin is a quarter of a luma level: 65536 / 4 = 2^14 units. */
#define DIFF_BIN_SHIFT 14
#define GAIN_ONE 65536u
#define GAIN_MIN (GAIN_ONE / 8)
#define GAIN_MAX (GAIN_ONE * 8)
/* out's first uints: the histogram, the moving tiles, F, B, the gain. */
#define MOTION_STATS 68

inline uint tile_sum(__global const uint *corner, uint tiles_x, uint t, uint b)
{
    size_t i = (size_t)b * tiles_x + t;
    uint s = corner[i];
    if (t > 0)
        s -= corner[i - 1];
    if (b > 0)
        s -= corner[i - tiles_x];
    if (t > 0 && b > 0)
        s += corner[i - tiles_x - 1];
    return s;
}

inline uint light_gain(uint frame_sum, uint background_sum)
{
    if (background_sum == 0)
        return GAIN_ONE;
    ulong g = ((ulong)frame_sum << 16) / background_sum;
    return (uint)clamp(g, (ulong)GAIN_MIN, (ulong)GAIN_MAX);
}

/* Adds v (one per work-item, 0 for none) up within the group into sum, then into *out
 * with one atomic a group. */
inline void group_add(__local uint *sum, uint v, __global uint *out)
{
    if (get_local_id(0) == 0)
        *sum = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (v)
        atomic_add(sum, v);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0 && *sum)
        atomic_add(out, *sum);
}

__kernel void motion_light(__global const uint *corner, uint tiles_x, uint tiles_y,
                           __global const uint *background, __global const uchar *mask,
                           __global uint *totals)
{
    __local uint frame_sum, background_sum;
    uint i = get_global_id(0);
    uint s = 0, bg = 0;
    if (i < tiles_x * tiles_y && mask[i] == 0) {
        s = tile_sum(corner, tiles_x, i % tiles_x, i / tiles_x);
        bg = background[i] >> 8;
    }
    group_add(&frame_sum, s, totals);
    group_add(&background_sum, bg, totals + 1);
}

__kernel void motion_tiles(__global const uint *corner, uint tiles_x, uint tiles_y,
                           __global uint *background, __global const uint *totals,
                           uint rate, uint threshold, __global uchar *mask,
                           __global uint *acc)
{
    /* The histogram and the moving tiles. */
    __local uint bins[DIFF_BINS + 1];
    uint lid = get_local_id(0), lsize = get_local_size(0);
    uint tiles = tiles_x * tiles_y, i = get_global_id(0);
    for (uint k = lid; k <= DIFF_BINS; k += lsize)
        bins[k] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i < tiles) {
        uint gain = light_gain(totals[0], totals[1]);
        long target = (long)tile_sum(corner, tiles_x, i % tiles_x, i / tiles_x) << 8;
        uint bg = background[i];
        long expected = (long)(((ulong)bg * gain) >> 16);
        long change = abs(expected - (long)bg);
        long lo = min((long)bg, expected) - change, hi = max((long)bg, expected) + change;
        ulong diff = target < lo ? (ulong)(lo - target) : target > hi ? (ulong)(target - hi) : 0;
        uchar moving = diff > ((ulong)threshold << 8);
        mask[i] = moving;
        atomic_inc(&bins[min(diff >> DIFF_BIN_SHIFT, (ulong)(DIFF_BINS - 1))]);
        if (moving)
            atomic_inc(&bins[DIFF_BINS]);
        long d = target - (long)bg;
        ulong step = ((ulong)abs(d) * rate + 32768) >> 16;
        background[i] = d < 0 ? bg - (uint)step : bg + (uint)step;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint k = lid; k <= DIFF_BINS; k += lsize) {
        if (bins[k])
            atomic_add(&acc[k], bins[k]);
    }
}

/* G's entry for tile column t (0..tiles_x) and band b (0..tiles_y). */
#define G_AT(t, b) grid[(size_t)(b) * (tiles_x + 1) + (t)]

/* The moving pixels left of x and above y (integral form: P(x, y) above). */
inline ulong moving_before(__global const uint *grid, uint tiles_x, uint tiles_y, uint x,
                           uint y)
{
    uint c = min(x / TILE, tiles_x - 1), r = min(y / TILE, tiles_y - 1);
    ulong lx = x - TILE * c, ly = y - TILE * r;
    ulong g = G_AT(c, r), right = G_AT(c + 1, r), below = G_AT(c, r + 1);
    ulong m = G_AT(c + 1, r + 1) + g - right - below;
    return TILE * TILE * g + TILE * lx * (right - g) + TILE * ly * (below - g) + lx * ly * m;
}

__kernel void motion_sums(__global const uchar *mask, uint tiles_x, uint tiles_y,
                          __global uint *totals,
                          __global uint *acc, __global uint *grid,
                          __global const uint4 *rects, uint count, __global uint *out)
{
    uint lid = get_local_id(0), lsize = get_local_size(0);
    if (lid == 0) {
        uint f = totals[0], b = totals[1];
        out[DIFF_BINS + 1] = f;
        out[DIFF_BINS + 2] = b;
        out[DIFF_BINS + 3] = light_gain(f, b);
        totals[0] = 0;
        totals[1] = 0;
    }
    for (uint k = lid; k <= DIFF_BINS; k += lsize) {
        out[k] = acc[k];
        acc[k] = 0;
    }
    /* Each band's row of G: 0, then the running count of its moving tiles; band 0's row
     * (G's top row) is all zeros. */
    for (uint b = lid; b <= tiles_y; b += lsize) {
        G_AT(0, b) = 0;
        if (b == 0) {
            for (uint t = 1; t <= tiles_x; t++)
                G_AT(t, 0) = 0;
            continue;
        }
        __global const uchar *row = mask + (size_t)(b - 1) * tiles_x;
        uint run = 0, t = 0;
        for (; t + 16 <= tiles_x; t += 16) {
            uchar16 v = vload16(0, row + t);
            uint s[16];
            vstore16(convert_uint16(v), 0, s);
            for (uint k = 0; k < 16; k++) {
                run += s[k];
                G_AT(t + k + 1, b) = run;
            }
        }
        for (; t < tiles_x; t++) {
            run += row[t];
            G_AT(t + 1, b) = run;
        }
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    /* Down each column, 8 loads before their sums. */
    for (uint t = lid; t <= tiles_x; t += lsize) {
        uint run = 0, b = 1;
        for (; b + 8 <= tiles_y + 1; b += 8) {
            uint v[8];
            for (uint k = 0; k < 8; k++)
                v[k] = G_AT(t, b + k);
            for (uint k = 0; k < 8; k++) {
                run += v[k];
                G_AT(t, b + k) = run;
            }
        }
        for (; b <= tiles_y; b++) {
            run += G_AT(t, b);
            G_AT(t, b) = run;
        }
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    __global ulong *moving = (__global ulong *)(out + MOTION_STATS);
    for (uint k = lid; k < count; k += lsize) {
        uint4 r = rects[k];
        ulong p = moving_before(grid, tiles_x, tiles_y, r.x + r.z, r.y + r.w) -
                  moving_before(grid, tiles_x, tiles_y, r.x, r.y + r.w) -
                  moving_before(grid, tiles_x, tiles_y, r.x + r.z, r.y) +
                  moving_before(grid, tiles_x, tiles_y, r.x, r.y);
        moving[k] = p;
    }
}
