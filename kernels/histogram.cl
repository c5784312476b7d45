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
 */

#define PIXELS_PER_ITEM 16
#define BINS 256

#ifdef ONE_ITEM_PER_GROUP
#define COUNT(v) (bins[v]++)
#else
#define COUNT(v) atomic_inc(&bins[v])
#endif

__kernel void histogram_count(__global const uchar *src, uint src_stride, uint width,
                              uint height, __global uint *hist)
{
    uint count = width * height;
    __local uint bins[BINS];
    uint lid = get_local_id(0), lsize = get_local_size(0);
    for (uint i = lid; i < BINS; i += lsize)
        bins[i] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);

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
    barrier(CLK_LOCAL_MEM_FENCE);

    for (uint i = lid; i < BINS; i += lsize) {
        uint c = bins[i];
        if (c)
            atomic_add(&hist[i], c);
    }
}
