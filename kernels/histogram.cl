/*
 * histogram.cl: exact 256-bin histogram of 8-bit luma (OpenCV's calcHist with 256 bins over
 * [0, 256)).
 *
 * histogram_count reads the width x height image src (dense luma: src_stride = width, as the
 *   caller must pass, so one flat run of width * height bytes) and adds its counts to
 *   hist[256], which the host zeroes first.
 *   Work size: 1-D, any number of work-groups of any local size; the work-items stride over
 *   the image in aligned units of 16 bytes (the buffer starts aligned; the last unit may be
 *   partial) and count into a local-memory sub-histogram with local atomics, or, built with
 *   -DONE_ITEM_PER_GROUP for a local size of 1, with plain increments into eight
 *   sub-histograms (CPUs, where local memory is ordinary memory and an atomic is a locked
 *   instruction). Each group then adds
 *   its non-zero bins to hist with global atomics: at most 256 per group, a handful beside
 *   the frame's pixels, and no second kernel to sum sub-histograms (which, one bin per
 *   work-item over hundreds of groups, waits on memory at every step).
 *
 * Built with -DITEM_SUB_HISTOGRAMS (Mali), histogram_count takes subs in place of hist: a
 *   sub-histogram of 128 words per work-item (global size x 128 words), bin v's count in
 *   the 16-bit half (v & 1) of word v / 2. Each work-item zeroes its own and counts into it
 *   with plain increments, so the kernel has no atomics, no local memory and no barriers:
 *   on Mali local memory is the same cached system memory as global memory, and a kernel
 *   without barriers lets the GPU split and merge its work-groups (Arm's Mali guides). The
 *   caller sizes the global size so that no work-item counts more than 65535 pixels
 *   (4095 units of 16), which keeps every 16-bit count from carrying into its neighbour.
 *   Work size as above.
 * histogram_sum (with -DITEM_SUB_HISTOGRAMS) reads the `rows` sub-histograms of subs and adds
 *   their sum to hist[256]: one work-item per word (global size >= 128, extra items
 *   return), each reading one word of every row, neighbouring items neighbouring words;
 *   plain adds, each bin belonging to one work-item. Its items read their `rows` words one
 *   after another: the price of counting without atomics, rows x 512 bytes beside the
 *   frame's width x height.
 */

#define PIXELS_PER_ITEM 16
#define BINS 256

/* COUNT(k, v): count value v, pixel k of its unit of 16. */
#ifdef ITEM_SUB_HISTOGRAMS
#define WORDS (BINS / 2)
#define COUNT(k, v) (sub[(v) >> 1] += 1u << (((v) & 1u) << 4))
#elif defined(ONE_ITEM_PER_GROUP)
/* CPUs: SUBS sub-histograms, pixel k of a unit counting into the (k % SUBS)th. A run of
 * equal pixels (any flat area: a dark scene, a saturated sky) would increment one word over
 * and over, each increment waiting for the one before (a store, then a load of the same
 * word); spread over eight words, eight chains run at once: a black frame counts over four
 * times faster with eight than with one, and random bytes as fast with any
 * (bench/notes/cpu-sobel-histogram.md#histogram-runs). */
#define SUBS 8
#define COUNT(k, v) (bins[((k) % SUBS) * BINS + (v)]++)
#else
#define SUBS 1
#define COUNT(k, v) atomic_inc(&bins[v])
#endif

/* Pixel k (vector lane `lane`) of the unit: CPUs load each byte on its own (a plain load,
 * where taking a byte out of a vector is a shuffle, and x86 has one port for those); GPUs
 * load the unit as one vector v. */
#ifdef ONE_ITEM_PER_GROUP
#define PIXEL(k, lane) unit[k]
#else
#define PIXEL(k, lane) v.s##lane
#endif

__kernel void histogram_count(__global const uchar *src, uint src_stride, uint width,
                              uint height, __global uint *hist)
{
    uint count = width * height;
#ifdef ITEM_SUB_HISTOGRAMS
    __global uint *sub = hist + (size_t)get_global_id(0) * WORDS;
    for (uint i = 0; i < WORDS; i += 4)
        vstore4((uint4)(0), 0, sub + i);
#else
    __local uint bins[BINS * SUBS];
    uint lid = get_local_id(0), lsize = get_local_size(0);
    for (uint i = lid; i < BINS * SUBS; i += lsize)
        bins[i] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
#endif

    uint units = (count + PIXELS_PER_ITEM - 1) / PIXELS_PER_ITEM;
    /* The whole units; a last, partial one is counted after the loop, by the work-item it
     * falls to. Inside the loop its byte-by-byte loop would cost an iteration of every
     * unit's even where it is not taken: Mesa's llvmpipe runs both sides of a branch
     * (masked) and ends a work-item's loops after 65535 iterations in all (integral.cl),
     * which the CPU tuning's 32 work-items, 32897 units each at the largest frame, then
     * overran, leaving the counts unmerged. */
    uint whole = count / PIXELS_PER_ITEM;
#ifdef ONE_ITEM_PER_GROUP
    /* CPUs: a work-item counts one run of whole units, streaming through it, where striding
     * by the global size would read 16 bytes of every 128 and every item pass over the
     * whole image. */
    uint items = get_global_size(0), k = get_global_id(0);
    uint first = (uint)((ulong)units * k / items);
    uint end = (uint)((ulong)units * (k + 1) / items);
    bool tail = first <= whole && whole < end;
    for (uint c = first; c < min(end, whole); c++) {
#else
    /* The work-item's index first, outside any branch: it adds the global work offset,
     * which Rusticl passes as a hidden kernel argument (integral.cl says why it matters). */
    uint items = get_global_size(0), k = get_global_id(0);
    bool tail = whole < units && k == whole % items;
    for (uint c = k; c < whole; c += items) {
#endif
        uint x0 = c * PIXELS_PER_ITEM;
#ifdef ONE_ITEM_PER_GROUP
        __global const uchar *unit = src + x0;
#else
        uchar16 v = ((__global const uchar16 *)src)[c];
#endif
        COUNT(0, PIXEL(0, 0)); COUNT(1, PIXEL(1, 1));
        COUNT(2, PIXEL(2, 2)); COUNT(3, PIXEL(3, 3));
        COUNT(4, PIXEL(4, 4)); COUNT(5, PIXEL(5, 5));
        COUNT(6, PIXEL(6, 6)); COUNT(7, PIXEL(7, 7));
        COUNT(8, PIXEL(8, 8)); COUNT(9, PIXEL(9, 9));
        COUNT(10, PIXEL(10, a)); COUNT(11, PIXEL(11, b));
        COUNT(12, PIXEL(12, c)); COUNT(13, PIXEL(13, d));
        COUNT(14, PIXEL(14, e)); COUNT(15, PIXEL(15, f));
    }
    if (tail) {
        for (uint x = whole * PIXELS_PER_ITEM; x < count; x++)
            COUNT(x, src[x]);
    }

#ifndef ITEM_SUB_HISTOGRAMS
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint i = lid; i < BINS; i += lsize) {
        uint c = 0;
        for (uint k = 0; k < SUBS; k++)
            c += bins[k * BINS + i];
        if (c)
            atomic_add(&hist[i], c);
    }
#endif
}

#ifdef ITEM_SUB_HISTOGRAMS
__kernel void histogram_sum(__global const uint *subs, uint rows, __global uint *hist)
{
    uint w = get_global_id(0);
    if (w >= WORDS)
        return;
    uint2 sum = (uint2)(0);
    for (uint r = 0; r < rows; r++) {
        uint c = subs[(size_t)r * WORDS + w];
        sum += (uint2)(c & 0xFFFFu, c >> 16);
    }
    vstore2(vload2(w, hist) + sum, w, hist);
}
#endif
