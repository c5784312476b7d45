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
 *   -DONE_ITEM_PER_GROUP for a local size of 1, with plain increments (CPUs, where local
 *   memory is ordinary memory and an atomic is a locked instruction). Each group then adds
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

#ifdef ITEM_SUB_HISTOGRAMS
#define WORDS (BINS / 2)
#define COUNT(v) (sub[(v) >> 1] += 1u << (((v) & 1u) << 4))
#elif defined(ONE_ITEM_PER_GROUP)
#define COUNT(v) (bins[v]++)
#else
#define COUNT(v) atomic_inc(&bins[v])
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
    __local uint bins[BINS];
    uint lid = get_local_id(0), lsize = get_local_size(0);
    for (uint i = lid; i < BINS; i += lsize)
        bins[i] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
#endif

    uint units = (count + PIXELS_PER_ITEM - 1) / PIXELS_PER_ITEM;
    for (uint c = get_global_id(0); c < units; c += get_global_size(0)) {
        uint x0 = c * PIXELS_PER_ITEM;
        if (x0 + PIXELS_PER_ITEM <= count) {
            uchar16 v = ((__global const uchar16 *)src)[c];
            COUNT(v.s0); COUNT(v.s1);
            COUNT(v.s2); COUNT(v.s3);
            COUNT(v.s4); COUNT(v.s5);
            COUNT(v.s6); COUNT(v.s7);
            COUNT(v.s8); COUNT(v.s9);
            COUNT(v.sa); COUNT(v.sb);
            COUNT(v.sc); COUNT(v.sd);
            COUNT(v.se); COUNT(v.sf);
        } else {
            for (uint x = x0; x < count; x++)
                COUNT(src[x]);
        }
    }

#ifndef ITEM_SUB_HISTOGRAMS
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint i = lid; i < BINS; i += lsize) {
        uint c = bins[i];
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
