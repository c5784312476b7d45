/*
 * histogram.cl: exact 256-bin histogram of 8-bit luma (OpenCV's calcHist with 256 bins over
 * [0, 256)), in two kernels and with no global atomics.
 *
 * histogram_partial reads src (uchar, row stride src_stride bytes), width x height, and
 *   writes partial[group * 256 + bin]: one sub-histogram per work-group.
 *   Work size: 1-D, any number of work-groups of any local size; the work-items stride over
 *   the image in units of 16 pixels of one row (uchar16 load, scalar tail at a row's end)
 *   and count into a local-memory sub-histogram with local atomics, or, built with
 *   -DONE_ITEM_PER_GROUP for a local size of 1, with plain increments (CPUs, where local
 *   memory is ordinary memory and an atomic is a locked instruction).
 * histogram_reduce reads the `groups` sub-histograms and writes hist[256]
 *   (one work-item per bin, global size >= 256).
 */

#define PIXELS_PER_ITEM 16
#define BINS 256

#ifdef ONE_ITEM_PER_GROUP
#define COUNT(v) (bins[v]++)
#else
#define COUNT(v) atomic_inc(&bins[v])
#endif

__kernel void histogram_partial(__global const uchar *src, uint src_stride, uint width,
                                uint height, __global uint *partial)
{
    __local uint bins[BINS];
    uint lid = get_local_id(0), lsize = get_local_size(0);
    for (uint i = lid; i < BINS; i += lsize)
        bins[i] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);

    uint per_row = (width + PIXELS_PER_ITEM - 1) / PIXELS_PER_ITEM;
    uint items = per_row * height;
    for (uint c = get_global_id(0); c < items; c += get_global_size(0)) {
        uint y = c / per_row;
        uint x0 = (c - y * per_row) * PIXELS_PER_ITEM;
        __global const uchar *row = src + (size_t)y * src_stride;
        if (x0 + PIXELS_PER_ITEM <= width) {
            uchar16 v = vload16(0, row + x0);
            COUNT(v.s0); COUNT(v.s1);
            COUNT(v.s2); COUNT(v.s3);
            COUNT(v.s4); COUNT(v.s5);
            COUNT(v.s6); COUNT(v.s7);
            COUNT(v.s8); COUNT(v.s9);
            COUNT(v.sa); COUNT(v.sb);
            COUNT(v.sc); COUNT(v.sd);
            COUNT(v.se); COUNT(v.sf);
        } else {
            for (uint x = x0; x < width; x++)
                COUNT(row[x]);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    __global uint *out = partial + (size_t)get_group_id(0) * BINS;
    for (uint i = lid; i < BINS; i += lsize)
        out[i] = bins[i];
}

__kernel void histogram_reduce(__global const uint *partial, uint groups, __global uint *hist)
{
    uint bin = get_global_id(0);
    if (bin >= BINS)
        return;
    uint sum = 0;
    for (uint g = 0; g < groups; g++)
        sum += partial[(size_t)g * BINS + bin];
    hist[bin] = sum;
}
