/*
 * motion.cl: motion against a learned background, per tile of 16 x 16 pixels. It has no
 * launch of its own: the integral stage's last launch (integral_corners_split on GPUs,
 * integral_corners on CPUs and Mali, integral.cl) runs motion_tiles below in groups of
 * its own beside the corner sums, and the region stage's launch (regions.cl) counts each
 * rectangle's moving pixels and copies the frame's counts out (motion_counts). On an
 * NVIDIA H100 any launch costs about 0.006 ms, a tenth of the whole pipeline there
 * (bench/notes/motion-device.md#motion-steps).
 *
 * Built first in one program with integral.cl and regions.cl (src/cl's
 * INTEGRAL_MOTION_REGIONS_CL). The unit is integral.cl's whole tile (TILE x TILE pixels;
 * tiles_x = width / 16 across, tiles_y = height / 16 down), whose luma sum S comes from
 * the left integral complete by then: in a band's last row left holds the band's sums over
 * the tiles 0..t (left[t * height + 16 b + 15]), so S is that less the same of tile t - 1,
 * two reads a tile and no pass over the pixels. A tile's mean averages the sensor's noise
 * over 256 pixels (a sixteenth of its deviation), which is what lets a threshold of a few
 * luma levels work on a noisy camera.
 *
 * Fixed point, no floating point (the reference, src/reference/motion.rs, is the same
 * integer arithmetic): means are in 1/65536 of a luma level, so a tile's is S << 8 and
 * the background `background[i]` (at most 255 x 65536 < 2^24) is its exponential moving
 * average.
 *
 * motion_tiles, by every work-item of the groups that run it (the item-th of `items` runs of
 * the tiles in column order each), on the frame of `parity` (0 and 1 in turn):
 *   light     The light gain: this frame's sum F over the tiles that did not move on the
 *             last frame against their background's B (each tile's background >> 8), F *
 *             65536 / B clamped to [65536 / 8, 65536 * 8] (1 where B is 0). A cloud or the
 *             camera's exposure scales every tile alike, and the background is compared
 *             scaled by it, so a change of light alone is not motion; taken over the still
 *             tiles only, so that a bright thing walking in does not raise the gain and
 *             make the rest of the frame "move". It needs no pass of its own: B was
 *             summed by the last frame, from the background it left (light[parity]), and F
 *             is every whole tile's sum (the bands' ends of left's last whole tile column)
 *             less the sums of the tiles the last frame saw move, which it listed
 *             (moved[parity * tiles ..], light[2 + parity] of them): each group sums that
 *             list (short while little moves; with over half the tiles moving the host
 *             learns afresh anyway), and item 0 keeps F at light[4].
 *   moving    with e = bg * gain >> 16 (the background in this light) and the light's
 *             change there c = |e - bg|, the tile's distance from the range
 *             [min(bg, e) - c, max(bg, e) + c] more than threshold << 8 (threshold in
 *             1/256 of a luma level): mask[i] = 1, else 0. A range, not e alone: a
 *             highlight clipped at 255 (a window, a lamp) or a shadow at black does not
 *             follow the light, and light rarely changes alike everywhere (a cloud's edge,
 *             the sun moving across a room), so a tile may change up to twice as much as
 *             the frame's light did, either way. While the light is as learned (the
 *             background follows it), c is next to nothing. (A light switched on or the
 *             infrared switch changes most tiles in other ways besides: the host takes
 *             that as a change of scene.)
 *   counts    that distance's histogram in DIFF_BINS bins of a quarter luma level (the
 *             last holds the rest) and the moving tiles, added into acc[0..DIFF_BINS] and
 *             acc[DIFF_BINS] (a group's in local memory first, then one global atomic per
 *             non-zero bin): the host's noise estimate for the next frame's threshold; and
 *             the whole frame's moving pixels into light[5] (a tile's 256, the last column
 *             and row of tiles taking the pixels past the whole tiles, as regions.cl
 *             counts a rectangle's).
 *   update    background += sign(d) * ((|d| * r + 32768) >> 16), d = (S << 8) -
 *             background: r / 65536 of the way to this frame (65536 sets it to the frame:
 *             learning from scratch), where r is `rate` for a moving tile (something is
 *             there: it becomes background only after background_seconds) and
 *             `still_rate` for a still one, which follows within a second: light that
 *             changes unevenly and faster than the slow rate (the sun on one facade, a
 *             cloud's edge) would otherwise drift a static tile past the threshold. Only
 *             what was within the threshold is taken in fast, so a thing that leaves
 *             leaves no ghost past it.
 *   next      for the next frame (the other parity): a still tile adds its new background
 *             >> 8 into light[1 - parity]; a moving one is listed in moved[(1 - parity) *
 *             tiles ..] at the count light[3 - parity] had (their order is the atomics',
 *             the sum over them is not).
 * regions.cl's region_sums then copies the counts, F, B, the gain and the frame's moving
 * pixels out (motion_counts) and zeroes acc and light[parity], light[2 + parity] and
 * light[5], which a later frame sums into again. A frame narrower or shorter than one tile
 * has no tiles and nothing moves: the host runs no motion then.
 */

/* integral.cl's tile, defined alike. */
#define TILE 16
/* The host's bins (motion_tiles.rs), given as a build option so that the two agree. */
#ifndef DIFF_BINS
#error "DIFF_BINS is given by the host (-DDIFF_BINS=...)"
#endif
/* A bin is a quarter of a luma level: 65536 / 4 = 2^14 units. */
#define DIFF_BIN_SHIFT 14
#define GAIN_ONE 65536u
#define GAIN_MIN (GAIN_ONE / 8)
#define GAIN_MAX (GAIN_ONE * 8)
/* The readout's motion part begins with these uints: the histogram, the moving tiles, F,
 * B, the gain; then a ulong a rectangle (regions.cl). */
#define MOTION_STATS (DIFF_BINS + 4)
/* light's words: B of parity 0 and 1, the moving tiles listed for parity 0 and 1, F, the
 * frame's moving pixels. */
#define LIGHT_LISTED 2
#define LIGHT_FRAME_SUM 4
#define LIGHT_MOVING 5
/* motion_tiles' local memory, words: the histogram and the moving tiles, and group_sum's. */
#define MOTION_LOCAL (DIFF_BINS + 2)

/* Whole tile (t, b)'s luma sum, from left's last row of band b (plane 0, the sums). */
inline uint tile_sum(__global const uint *left, uint height, uint t, uint b)
{
    __global const uint *end = left + (size_t)t * height + TILE * b + TILE - 1;
    return t > 0 ? end[0] - end[-(long)height] : end[0];
}

inline uint light_gain(uint frame_sum, uint background_sum)
{
    if (background_sum == 0)
        return GAIN_ONE;
    ulong g = ((ulong)frame_sum << 16) / background_sum;
    return (uint)clamp(g, (ulong)GAIN_MIN, (ulong)GAIN_MAX);
}

/* Adds v (one per work-item, 0 for none) up within the group into *sum and returns the
 * group's total to every work-item. */
inline uint group_sum(__local uint *sum, uint v)
{
    barrier(CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0 && get_local_id(1) == 0)
        *sum = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (v)
        atomic_add(sum, v);
    barrier(CLK_LOCAL_MEM_FENCE);
    return *sum;
}

/* The parameters that integral.cl's last launches take for motion_tiles, after their own;
 * motion 0: none this frame. */
#define MOTION_PARAMS                                                                      \
    uint motion, __global uchar *mask, __global uint *background, __global uint *light,    \
        __global uint *moved, uint parity, uint rate, uint still_rate, uint threshold,     \
        __global uint *acc

/* The item-th of `items` runs of the frame's tiles (see the top): called by every
 * work-item of a group (lid, lsize: its place in the group), with MOTION_LOCAL words of
 * local. */
inline void motion_tiles(uint item, uint items, uint lid, uint lsize, uint width, uint height,
                         __global const uint *left, __global uchar *mask,
                         __global uint *background, __global uint *light,
                         __global uint *moved, uint parity, uint rate, uint still_rate,
                         uint threshold, __global uint *acc, __local uint *local_words)
{
    __local uint *bins = local_words, *sum = local_words + DIFF_BINS + 1;
    uint tiles_x = width / TILE, tiles_y = height / TILE, tiles = tiles_x * tiles_y;
    for (uint k = lid; k <= DIFF_BINS; k += lsize)
        bins[k] = 0;
    /* F: every whole tile less those the last frame saw move (modulo 2^32 in parts, exact
     * in all). */
    __global const uint *last_moved = moved + (size_t)parity * tiles;
    uint listed = light[LIGHT_LISTED + parity], s = 0;
    for (uint b = lid; b < tiles_y; b += lsize)
        s += left[(size_t)(tiles_x - 1) * height + TILE * b + TILE - 1];
    for (uint k = lid; k < listed; k += lsize) {
        uint t = last_moved[k];
        s -= tile_sum(left, height, t % tiles_x, t / tiles_x);
    }
    uint frame_sum = group_sum(sum, s);
    uint gain = light_gain(frame_sum, light[parity]);
    if (item == 0)
        light[LIGHT_FRAME_SUM] = frame_sum;
    uint next = 1 - parity, still = 0, pixels = 0;
    /* Its share of the tiles, one run down the columns (tile column after tile column,
     * band after band in each): a CPU's work-item walks left and the background in
     * order, and no tile costs a division. Built with -DNO_LONG_DIVISION (Bifrost and
     * Valhall Malis): runs of ceil(tiles / items), the last ones shorter or empty, in
     * 32-bit arithmetic, where a 64-bit division is a long software routine that took
     * Panfrost's compiler past its registers (20 spilled); elsewhere runs within one tile
     * of each other, as measured on POCL and NVIDIA's OpenCL before
     * (bench/notes/mali-compiler.md#mali-decisions). */
#ifdef NO_LONG_DIVISION
    uint run = (tiles + items - 1) / items;
    uint first = min(item * run, tiles), end = min(first + run, tiles);
#else
    uint first = (uint)((ulong)tiles * item / items);
    uint end = (uint)((ulong)tiles * (item + 1) / items);
#endif
    uint t = first / max(tiles_y, 1u), b = first % max(tiles_y, 1u);
    for (uint j = first; j < end; j++, b = b + 1 == tiles_y ? 0 : b + 1, t += b == 0) {
        uint i = b * tiles_x + t;
        long target = (long)tile_sum(left, height, t, b) << 8;
        uint bg = background[i];
        long expected = (long)(((ulong)bg * gain) >> 16);
        long change = abs(expected - (long)bg);
        long lo = min((long)bg, expected) - change, hi = max((long)bg, expected) + change;
        ulong diff = target < lo ? (ulong)(lo - target) : target > hi ? (ulong)(target - hi) : 0;
        uchar moving = diff > ((ulong)threshold << 8);
        mask[i] = moving;
        atomic_inc(&bins[min(diff >> DIFF_BIN_SHIFT, (ulong)(DIFF_BINS - 1))]);
        long d = target - (long)bg;
        ulong step = ((ulong)abs(d) * (moving ? rate : still_rate) + 32768) >> 16;
        uint next_bg = d < 0 ? bg - (uint)step : bg + (uint)step;
        background[i] = next_bg;
        if (moving) {
            atomic_inc(&bins[DIFF_BINS]);
            moved[(size_t)next * tiles + atomic_inc(&light[LIGHT_LISTED + next])] = i;
            pixels += (t == tiles_x - 1 ? width - TILE * t : TILE) *
                      (b == tiles_y - 1 ? height - TILE * b : TILE);
        } else {
            still += next_bg >> 8;
        }
    }
    /* group_sum's barriers also finish the bins' atomics. */
    still = group_sum(sum, still);
    if (lid == 0 && still)
        atomic_add(&light[next], still);
    pixels = group_sum(sum, pixels);
    if (lid == 0 && pixels)
        atomic_add(&light[LIGHT_MOVING], pixels);
    for (uint k = lid; k <= DIFF_BINS; k += lsize) {
        if (bins[k])
            atomic_add(&acc[k], bins[k]);
    }
}

/* region_sums' copy of the frame's counts (its work-items first, first + step, ... share
 * it) into out[0..MOTION_STATS) and the whole frame's moving pixels after them (the first
 * rectangle's), zeroing what a later frame sums into again. */
inline void motion_counts(__global uint *acc, __global uint *light, uint parity,
                          __global uint *out, uint first, uint step)
{
    for (uint k = first; k <= DIFF_BINS; k += step) {
        out[k] = acc[k];
        acc[k] = 0;
    }
    if (first == 0) {
        uint f = light[LIGHT_FRAME_SUM], b = light[parity];
        out[DIFF_BINS + 1] = f;
        out[DIFF_BINS + 2] = b;
        out[DIFF_BINS + 3] = light_gain(f, b);
        ((__global ulong *)(out + MOTION_STATS))[0] = light[LIGHT_MOVING];
        light[parity] = 0;
        light[LIGHT_LISTED + parity] = 0;
        light[LIGHT_MOVING] = 0;
    }
}
