/*
 * integral.cl: the integrals of luma, of its square and of its edge and foreground pixels,
 * kept in a compact blocked form, from which regions.cl reads any rectangle's sums in O(1).
 *
 * Over 500 lines as one room: the three layouts of the first pass and the two families of
 * scans after it write one blocked form, defined once below, with the running sums and
 * row prefixes they share. motion.cl and regions.cl are built after this file in the same
 * program and count with its TILE, load_partial16, sum16, packed_row and unpacked.
 *
 * What is defined, for 0 <= x <= width and 0 <= y <= height, is OpenCV's exclusive integral
 *   I(x, y) = sum of p(i, j) over j < y, i < x
 * of four quantities p: luma, luma^2, edge (1 where magnitude >= edge_threshold: sobel.cl's
 * edge mask) and foreground (1 where luma > results[256], the threshold otsu_threshold left
 * on the device: otsu.cl's binarize, THRESH_BINARY). These equal cv2.integral2(luma,
 * sdepth=CV_32S, sqdepth=CV_64F) and cv2.integral of the two masks divided by 255. The
 * masks are never read, and need not exist.
 *
 * I itself is never stored (OpenCV's layout takes 20 bytes a pixel). The frame is cut into
 * tiles of 16 x 16 pixels, in bands of 16 rows (the last band, and the last tile of each
 * band, may be partial); with W16 = width / 16 whole tiles a band, H16 = height / 16 whole
 * bands and P = 16 * ceil(width / 16) the row length padded to whole tiles:
 *
 *   local   per pixel, the inclusive prefix within its tile: the sum of p(i, j) over the
 *           tile's pixels with i <= x and j <= y. Sum ushort (at most 255 x 256), squared
 *           sum uint (65025 x 256), edges and foreground uchar (see below). Stored tile
 *           after tile, each tile's rows of 16 in a run (a tile row is one 16-element
 *           vector), the last tile of a band padded to 16 columns (pixels past the width
 *           count 0): band b starts at element 16 b P and pixel (x, y) is at
 *             16 b P + 16 t rows_b + 16 r + l, t = x / 16, l = x % 16, b = y / 16,
 *                                                 r = y % 16, rows_b = min(16, height - 16 b)
 *   left    per row y and whole tile t < W16: the sum over the tiles 0..t of the band's rows
 *           up to y (i < 16 (t + 1), 16 b <= j <= y), at left[t * height + y].
 *   top     per whole band b < H16 and padded column c < P: the sum over the bands 0..b of
 *           the columns of c's tile up to c (16 (c / 16) <= i <= c, j < 16 (b + 1)), at
 *           top[b * P + c].
 *   corner  per whole band b < H16 and whole tile t < W16: the sum over i < 16 (t + 1),
 *           j < 16 (b + 1), at corner[b * W16 + t].
 *   left, top and corner are uint for the sum, edges and foreground (three planes of one
 *   buffer, in that order, each as long as the part has entries) and ulong for the
 *   squared sum (a separate buffer).
 *
 * Then, with t = x / 16, l = x % 16, b = y / 16, r = y % 16, and each part taken only where
 * its condition holds (0 otherwise):
 *   I(x, y) =  corner[(b - 1) W16 + t - 1]       t > 0, b > 0  whole tiles above-left
 *            + left[(t - 1) height + y - 1]      t > 0, r > 0  whole tiles left, rows of band b above y
 *            + top[(b - 1) P + x - 1]            b > 0, l > 0  columns of tile t left of x, bands above
 *            + local(x - 1, y - 1)               l > 0, r > 0  the rest, inside the tile
 * A corner on a tile boundary takes no local part, so local is never read in a tile's last
 * row or column: what is read counts at most 15 x 15 = 225 pixels and fits a byte, and
 * only at a tile's last pixel (256 pixels) may a stored count have wrapped (modulo 256).
 *
 * Local is 8 of these bytes a pixel, and the only part a pixel has: the passes write it
 * only where the host passes keep_local (process --raw, whose OpenCV-layout images the
 * host assembles from it). regions.cl never reads it: a corner's local part is at most
 * 15 x 15 pixels, which it sums from luma and the magnitude, so the daemon's integrals
 * are left, top and corner alone, about 2.6 bytes a pixel.
 *
 * Widths: FrameLayout::validate accepts at most 16843009 pixels, so any sum of luma over
 * any part of the frame fits uint (255 x 16843009 = 2^32 - 1), and so does any count; a
 * squared sum over more than a tile needs ulong (16 rows of 65535 pixels of 65025 reach
 * 6.8e10). Per pixel this is 8 bytes of local, 20 / 16 each of left and top and 20 / 256
 * of corner: about 10.6 bytes against OpenCV's 20, 2.6 without local.
 *
 * Four layouts write local (with keep_local), left and top (the host picks one per device
 * kind); then integral_tops and integral_corners sum top down the bands and left's band
 * ends into corner (CPUs and Mali), or on GPUs integral_left_tops and
 * integral_corners_split:
 *   CPUs  integral_tile_bands: a work-item per run of bands, tile after tile along each
 *         band, 16-lane vector prefixes, registers and global memory only.
 *   GPUs  integral_group_tiles: a work-group per 8 tiles of a band, one barrier between
 *         the prefixes along the rows (a work-item per tile row, in registers) and those
 *         down the columns (a work-item per column, through local memory); then
 *         integral_left_tops turns the tiles' row sums into left as integral_left_rows
 *         does, and sums top, in one launch.
 *   Mali  integral_tiles (Midgard): a work-item per tile, registers only, or
 *         integral_tile_parts (Bifrost, Valhall): a work-item per part of a tile, four
 *         columns at a time; then integral_left_rows.
 * The kernels that read the width x height inputs take (luma, src_stride, width, height,
 * magnitude, edge_threshold, results, ...): luma and the magnitude are dense and share
 * their row offsets, so src_stride must equal width.
 *
 * Loops per work-item: Mesa's llvmpipe (Rusticl's CPU device, seen with Mesa 22.3.6 of
 * Debian 12) counts every iteration of every loop a work-item runs (8 work-items side by
 * side as vector lanes, counted together) against one budget, LP_MAX_TGSI_LOOP_ITERATIONS
 * = 65535 (gallivm's guard against endless shaders), and once it is spent ends each loop
 * after its current iteration, silently: the results are left incomplete. It runs both
 * sides of a branch (masked), so a loop inside a branch costs an iteration wherever it is
 * reached, taken or not. OpenCL has no such limit (POCL and GPU drivers run any loop to
 * its end); llvmpipe's compute units are 8, and its work-groups at most 32. On the
 * 65535 x 257 frame one work-item of integral_tile_bands walked a band of 4096 tiles of
 * 16 rows (about 18 iterations a tile) and wrote nothing past its 3640th tile or so; a
 * one-pixel-wide frame lost most of its 1052688 bands in the CPU pass and in
 * integral_left_tops (one work-item a column, as llvmpipe allows groups of only 32). So
 * every work-item here stays far inside that budget on any device, results unchanged:
 *   integral_tile takes a tile's rows four at a time (ROWS_PER_STEP, written out: Mesa
 *   unrolls no loop this large), about 6 iterations a tile where there were 18, and the
 *   host gives a work-item of integral_tile_bands at most 4096 tiles, each band counted
 *   one more (ITEM_TILES_MAX in integral.rs): at most about 25000 iterations;
 *   integral_tile_parts walks one tile's rows once per quarter of its columns, every
 *   part's walk counted where llvmpipe runs every branch: a few hundred;
 *   the split scans keep SPLIT_CHUNKS runs a line where a device allows fewer work-items
 *   a group, and take fewer lines (integral.rs): a run is at most 131586 entries, two
 *   loops of 16449 steps of 8;
 *   the chains walk at most 1052688 (integral_tops), 65793 (integral_corners) and 4095
 *   (integral_left_rows) entries a work-item in steps of SCAN_BATCH, whose inner loops
 *   Mesa unrolls: at most 32896 iterations.
 * llvmpipe also says "Treating load_kernel_arg in control flow as uniform, results may be
 * incorrect" (once a process) when a kernel argument is first read inside a branch or a
 * loop, including the hidden ones Rusticl appends (the global work offset, the address of
 * the program's constant data). It reads the argument at the first lane's offset, the
 * same in every lane for an argument, so nothing is wrong then; the kernels still avoid
 * it (integral_tile sets its prefix member by member, as an initializer would be copied
 * from constant memory inside the loops; sobel.cl), so that the warning, should it come
 * back, points at something new.
 */

#define TILE 16

/* The rows of a tile integral_tile takes in one step of its loop (written out four times):
 * Mesa's llvmpipe counts every iteration of a work-item's loops against one budget (see
 * the top of the file). */
#define ROWS_PER_STEP 4

/* The scans along a row of tiles or down the bands (left, top, corner) of CPUs and Mali
 * load this many entries before adding them up: each work-item's chain of dependent loads
 * is what bounds these small passes on a GPU, which has few of them to run (one per row or
 * column), so the more loads in flight the shorter the chain
 * (bench/notes/round2.md#comment-figures). */
#define SCAN_BATCH 32

/* running_sum_T: the inclusive running sum of n entries of type T, entry i read at
 * in[i * in_step] and its sum written to out[i * out_step]; in may be out (in place). The
 * loads of SCAN_BATCH entries are issued before their sums are needed (the running sum is
 * the only dependency). running_from8_T is the same from a given start, 8 loads at a time
 * (split_scan_T's runs, each a line's share). */
#define RUNNING_FROM(T, NAME, BATCH)                                                        \
    __attribute__((always_inline)) inline void NAME(__global const T *in, size_t in_step,   \
                                                    __global T *out, size_t out_step,       \
                                                    uint n, T run)                          \
    {                                                                                       \
        uint i = 0;                                                                         \
        for (; i + BATCH <= n; i += BATCH) {                                                \
            T v[BATCH];                                                                     \
            for (uint k = 0; k < BATCH; k++)                                                \
                v[k] = in[(i + k) * in_step];                                               \
            for (uint k = 0; k < BATCH; k++) {                                              \
                run += v[k];                                                                \
                out[(i + k) * out_step] = run;                                              \
            }                                                                               \
        }                                                                                   \
        for (; i < n; i++) {                                                                \
            run += in[i * in_step];                                                         \
            out[i * out_step] = run;                                                        \
        }                                                                                   \
    }
#define RUNNING_SUM(T)                                                                      \
    RUNNING_FROM(T, running_from_##T, SCAN_BATCH)                                           \
    __attribute__((always_inline)) inline void running_sum_##T(                             \
        __global const T *in, size_t in_step, __global T *out, size_t out_step, uint n)     \
    {                                                                                       \
        running_from_##T(in, in_step, out, out_step, n, 0);                                 \
    }
RUNNING_SUM(uint)
RUNNING_SUM(ulong)
RUNNING_SUM(uint4)
RUNNING_SUM(ulong4)
RUNNING_FROM(uint, running_from8_uint, 8)
RUNNING_FROM(ulong, running_from8_ulong, 8)

/* A vector store to an address aligned to the vector's size: non-temporal where the host
 * asks for STREAMING_STORES (CPUs, where an ordinary store first reads the line it
 * overwrites, a third more memory traffic for write-once images). */
#ifdef STREAMING_STORES
#define STORE_ALIGNED(v, p) __builtin_nontemporal_store((v), (p))
#else
#define STORE_ALIGNED(v, p) (*(p) = (v))
#endif

/* Inclusive prefix sums of 16 lanes in four log-step shifts (lanes shifted in are zero).
 * The shifts are swizzles known at compile time rather than shuffle2: POCL builds
 * shuffle2 of 16-bit lanes as a call that shuffles through memory, lane by lane. */
#define PREFIX16(T)                                                                         \
    inline T##16 prefix16_##T(T##16 v)                                                      \
    {                                                                                       \
        v += (T##16)((T)0, v.s0123, v.s4567, v.s89ab, v.scde);                              \
        v += (T##16)((T##2)0, v.s0123, v.s4567, v.s89ab, v.scd);                            \
        v += (T##16)((T##4)0, v.s0123, v.s4567, v.s89ab);                                   \
        v += (T##16)((T##8)0, v.s01234567);                                                 \
        return v;                                                                           \
    }
PREFIX16(uchar)
PREFIX16(ushort)
PREFIX16(uint)

/* The first n < 16 bytes from p, zeros after them (a row's last, partial tile: a whole
 * vector would read past the row, and past the buffer on the last row). */
inline uchar16 load_partial16(__global const uchar *p, uint n)
{
    uchar a[TILE];
    for (uint i = 0; i < TILE; i++)
        a[i] = i < n ? p[i] : 0;
    return vload16(0, a);
}

/* The sum of a vector's 16 lanes. */
inline uint sum16(uint16 v)
{
    uint8 a = v.lo + v.hi;
    uint4 b = a.lo + a.hi;
    uint2 c = b.lo + b.hi;
    return c.x + c.y;
}

/*
 * integral_tile_bands (CPUs): local, left and top as defined above.
 * Work size: 1-D, `items` work-items of one (work-group size 1); work-item k takes the bands
 * bands * k / items up to bands * (k + 1) / items, bands = ceil(height / 16), and walks each
 * band tile by tile: for each of the tile's rows, one uchar16 of luma and of the magnitude
 * (a partial tile's through a zero-padded copy), the row's 16-lane prefix added to the
 * tile's running prefix (ushort16 sum, uint16 squared sum, uchar16 counts: registers), one
 * aligned vector store per part (non-temporal with -DSTREAMING_STORES), and the tile's last
 * lane added to the band's running left sums, which a whole tile then stores. A whole
 * band's last row, widened, is its row of top, which integral_tops then sums down the
 * bands. No local memory, no barriers: each work-item streams through its own bands.
 */
/* A tile's prefix over its rows so far (integral_tile): the sum, the squared sum and the
 * edge and foreground counts, per column. The counts run in bytes: only the tile's last
 * pixel can reach 256 and wrap, and it is never read; its exact column of counts (the
 * tile's rows, whole) is kept in ce and cf instead. */
typedef struct {
    ushort16 s;
    uint16 q;
    uchar16 e, f;
    uint ce, cf;
} TilePrefix;

/* Row r of tile t of the band from row y0 (`rows` rows): adds the row's 16-lane prefixes
 * to a, stores local's row where keep_local is 1, and for a whole tile its entry of left
 * for the row: the tile's row total added to ls, lq, le and lf (one per row of the band:
 * the sums over the band's tiles before it, integral_tile_bands), or where those are null
 * the total alone (integral_tiles, whose left integral_left_rows then sums along the
 * rows; no private array is kept, which a GPU would keep in slow memory). Always inlined,
 * as integral_tile is. */
__attribute__((always_inline)) inline void
tile_row(uint r, uint t, uint y0, uint rows, uint cols, uchar16 inside, TilePrefix *a,
         __global const uchar *luma, uint width, uint height,
         __global const uchar *magnitude, uchar16 et, uchar16 threshold, uint keep_local,
         __global ushort *sum, __global uint *sqsum, __global uchar *edges,
         __global uchar *foreground, __global uint *left, __global ulong *left_sq, uint *ls,
         ulong *lq, uint *le, uint *lf)
{
    uint x0 = TILE * t;
    size_t in = (size_t)(y0 + r) * width + x0;
    uchar16 l, m;
    if (cols == TILE) {
        l = vload16(0, luma + in);
        m = vload16(0, magnitude + in);
    } else {
        l = load_partial16(luma + in, cols);
        m = load_partial16(magnitude + in, cols);
    }
    ushort16 v = convert_ushort16(l);
    /* A vector comparison gives all ones where true. */
    uchar16 e = prefix16_uchar(as_uchar16(m >= et) & inside & (uchar16)1);
    uchar16 f = prefix16_uchar(as_uchar16(l > threshold) & (uchar16)1);
    a->s += prefix16_ushort(v);
    a->q += prefix16_uint(convert_uint16(v * v)); /* 255^2 fits ushort */
    a->e += e;
    a->f += f;
    a->ce += e.sf;
    a->cf += f.sf;
    if (keep_local) {
        size_t padded = (size_t)TILE * ((width + TILE - 1) / TILE);
        size_t i = (size_t)y0 * padded + (size_t)TILE * (rows * t + r);
        STORE_ALIGNED(a->s, (__global ushort16 *)(sum + i));
        STORE_ALIGNED(a->q, (__global uint16 *)(sqsum + i));
        STORE_ALIGNED(a->e, (__global uchar16 *)(edges + i));
        STORE_ALIGNED(a->f, (__global uchar16 *)(foreground + i));
    }
    uint whole_tiles = width / TILE;
    if (t < whole_tiles) {
        uint s1 = a->s.sf, se = a->ce, sf = a->cf;
        ulong s2 = a->q.sf;
        if (ls) {
            s1 = ls[r] += s1;
            s2 = lq[r] += s2;
            se = le[r] += se;
            sf = lf[r] += sf;
        }
        size_t left_plane = (size_t)whole_tiles * height, li = (size_t)t * height + y0 + r;
        left[li] = s1;
        left[left_plane + li] = se;
        left[2 * left_plane + li] = sf;
        left_sq[li] = s2;
    }
}

/* Tile t of band b (rows of it, from row 16 b): its local prefixes and left for each of
 * its rows (tile_row), and its top row where the band is whole. */
/* Always inlined: POCL otherwise calls it, with the private arrays and vectors in
 * memory, which slows the CPU pass down (bench/notes/round2.md#comment-figures). */
__attribute__((always_inline)) inline void
integral_tile(uint t, uint b, uint rows, __global const uchar *luma, uint width, uint height,
              __global const uchar *magnitude, uchar16 et, uchar16 threshold, uint keep_local,
              __global ushort *sum, __global uint *sqsum, __global uchar *edges,
              __global uchar *foreground, __global uint *left, __global ulong *left_sq,
              __global uint *top, __global ulong *top_sq, uint *ls, ulong *lq, uint *le,
              uint *lf)
{
    const uchar16 lanes = (uchar16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    uint y0 = TILE * b, cols = min((uint)TILE, width - TILE * t);
    /* Past the width a lane counts 0: its magnitude reads 0, which an edge threshold of 0
     * would count. */
    uchar16 inside = as_uchar16(lanes < (uchar16)(uchar)cols);
    /* Set member by member: Rusticl copies an initializer of the struct from constant
     * memory, whose address is a hidden kernel argument, read here inside the caller's
     * loops (see the top of the file). */
    TilePrefix a;
    a.s = 0;
    a.q = 0;
    a.e = 0;
    a.f = 0;
    a.ce = 0;
    a.cf = 0;
    /* ROWS_PER_STEP rows a step: 4 iterations a tile, not 16. */
    for (uint r = 0; r < rows; r += ROWS_PER_STEP) {
#define ROW(k)                                                                              \
    if (r + (k) < rows)                                                                     \
        tile_row(r + (k), t, y0, rows, cols, inside, &a, luma, width, height, magnitude,    \
                 et, threshold, keep_local, sum, sqsum, edges, foreground, left, left_sq,   \
                 ls, lq, le, lf)
        ROW(0);
        ROW(1);
        ROW(2);
        ROW(3);
#undef ROW
    }
    uint whole_bands = height / TILE;
    if (b < whole_bands) {
        size_t padded = (size_t)TILE * ((width + TILE - 1) / TILE);
        size_t top_plane = (size_t)whole_bands * padded, i = (size_t)b * padded + TILE * t;
        uint16 te = convert_uint16(a.e), tf = convert_uint16(a.f);
        te.sf = a.ce;
        tf.sf = a.cf;
        vstore16(convert_uint16(a.s), 0, top + i);
        vstore16(te, 0, top + top_plane + i);
        vstore16(tf, 0, top + 2 * top_plane + i);
        vstore16(convert_ulong16(a.q), 0, top_sq + i);
    }
}

__kernel void integral_tile_bands(__global const uchar *luma, uint src_stride, uint width,
                                  uint height, __global const uchar *magnitude,
                                  uint edge_threshold, __global const uint *results,
                                  uint items, uint keep_local, __global ushort *sum,
                                  __global uint *sqsum,
                                  __global uchar *edges, __global uchar *foreground,
                                  __global uint *left, __global ulong *left_sq,
                                  __global uint *top, __global ulong *top_sq)
{
    uint k = get_global_id(0);
    if (k >= items)
        return;
    uint tiles = (width + TILE - 1) / TILE, bands = (height + TILE - 1) / TILE;
    uchar16 threshold = (uchar16)(uchar)results[256];
    uchar16 et = (uchar16)(uchar)edge_threshold;
    uint b1 = (uint)((ulong)bands * (k + 1) / items);
    for (uint b = (uint)((ulong)bands * k / items); b < b1; b++) {
        uint rows = min((uint)TILE, height - TILE * b);
        /* Each row's sums over the band's whole tiles so far, up to that row. */
        uint ls[TILE], le[TILE], lf[TILE];
        ulong lq[TILE];
        for (uint r = 0; r < TILE; r++) {
            ls[r] = 0;
            le[r] = 0;
            lf[r] = 0;
            lq[r] = 0;
        }
        for (uint t = 0; t < tiles; t++)
            integral_tile(t, b, rows, luma, width, height, magnitude, et, threshold,
                          keep_local, sum, sqsum, edges, foreground, left, left_sq, top, top_sq,
                          ls, lq, le, lf);
    }
}

/* GPUs: a work-item per tile (x = tile, y = band), registers only (no local memory, no
 * barriers: Mali's guide); neighbouring work-items load neighbouring 16-byte runs of a row.
 * left holds each tile's row totals until integral_left_rows sums them along the rows. */
__kernel void integral_tiles(__global const uchar *luma, uint src_stride, uint width,
                             uint height, __global const uchar *magnitude,
                             uint edge_threshold, __global const uint *results,
                             uint keep_local, __global ushort *sum, __global uint *sqsum,
                             __global uchar *edges,
                             __global uchar *foreground, __global uint *left,
                             __global ulong *left_sq, __global uint *top,
                             __global ulong *top_sq)
{
    uint t = get_global_id(0), b = get_global_id(1);
    if (t >= (width + TILE - 1) / TILE || b >= (height + TILE - 1) / TILE)
        return;
    uint rows = min((uint)TILE, height - TILE * b);
    integral_tile(t, b, rows, luma, width, height, magnitude, (uchar16)(uchar)edge_threshold,
                  (uchar16)(uchar)results[256], keep_local, sum, sqsum, edges, foreground, left,
                  left_sq, top, top_sq, 0, 0, 0, 0);
}

/*
 * integral_tile_parts (Bifrost and Valhall Malis): local, the tiles' row sums (left before
 * integral_left_rows) and top, as integral_tiles writes them, within the 32 registers a
 * thread may hold on those GPUs before Mesa's Panfrost compiler halves the threads a core
 * runs (integral_tiles' 16-lane accumulators spill hundreds of registers there:
 * bench/notes/mali-compiler.md#mali-decisions).
 * Work size: 2-D, x = work-groups of 4 x `per` work-items, y = a band; a group takes `per`
 * neighbouring tiles of a band, once for each part (the sum, the squared sum, the edges,
 * the foreground: work-items part * per .. part * per + per - 1, so that a warp's
 * work-items take one part, side by side along the band). A work-item walks its tile's
 * rows four times, four columns at a time (Mesa's compiler gave each lane of a vector a
 * register of its own in our trials, bytes too: 16 lanes of anything took 16 registers):
 * one aligned uchar4 a row
 * where the width is a multiple of 4, the running column sums of its four columns, and
 * each row's running total added into left, read back for the columns after the first
 * four. The column sums' prefix, plus the columns before them, is top (and local, each
 * row). Built with -DNO_LOCAL (the daemon, which never keeps the full images) it has no
 * store of local at all, which is what keeps it within 32 registers.
 */
#define PART_QUARTERS 4

/* The quarter of a tile row at p with n of its 4 columns inside the frame (zeros after
 * them); 4-byte aligned where `aligned`. */
inline uchar4 quarter_row(__global const uchar *p, uint n, bool aligned)
{
    if (n >= 4)
        return aligned ? *(__global const uchar4 *)p : vload4(0, p);
    uchar4 v = 0;
    if (n > 0)
        v.s0 = p[0];
    if (n > 1)
        v.s1 = p[1];
    if (n > 2)
        v.s2 = p[2];
    return v;
}

#define QUARTER_SUMS(T)                                                                     \
    inline T##4 prefix4_##T(T##4 v)                                                         \
    {                                                                                       \
        v += (T##4)((T)0, v.s012);                                                          \
        v += (T##4)((T##2)0, v.s01);                                                        \
        return v;                                                                           \
    }                                                                                       \
    inline uint sum4_##T(T##4 v)                                                            \
    {                                                                                       \
        T##2 a = v.lo + v.hi;                                                               \
        return (uint)a.x + a.y;                                                             \
    }
QUARTER_SUMS(uchar)
QUARTER_SUMS(ushort)
QUARTER_SUMS(uint)

/* tile_part_NAME: one part of tile t of band b, its lanes' quantity VALUE (of l, luma, and
 * m, the magnitude, which is loaded only where MAGNITUDE is 1, and the scalars et and th),
 * counted in T (local's type), left's entries L, top's W. The part's left and top are at
 * plane `plane` of their buffers. Partial quarters: a lane past the width loads 0, and
 * `inside` (a word of bytes, 1 for a lane inside the frame) takes the edges' away (a
 * magnitude of 0 is an edge at an edge threshold of 0). Always inlined: every pointer and
 * index is worked out inside the part's branch, so that none is held across the other
 * parts'. Indices are 32-bit, which every offset into a frame of at most 16843009 pixels
 * fits (FrameLayout::validate): 64-bit ones took Valhall's compiler past 32 registers. */
#define TILE_PART(NAME, T, L, W, VALUE, LUMA, MAGNITUDE)                                    \
    __attribute__((always_inline)) inline void tile_part_##NAME(                            \
        uint t, uint b, __global const uchar *luma, __global const uchar *magnitude,        \
        uint width, uint height, uchar et, uchar th, uint keep_local, __global T *local_,   \
        __global L *left, uint plane, __global W *top)                                      \
    {                                                                                       \
        uint tiles = (width + TILE - 1) / TILE, whole_tiles = width / TILE;                 \
        uint whole_bands = height / TILE, x0 = TILE * t, y0 = TILE * b;                     \
        uint rows = min((uint)TILE, height - y0), cols = min((uint)TILE, width - x0);       \
        bool aligned = width % 4 == 0;                                                      \
        bool left_too = t < whole_tiles, top_too = b < whole_bands;                         \
        uint padded = TILE * tiles;                                                         \
        uint local_at = y0 * padded + TILE * rows * t;                                      \
        left += plane * whole_tiles * height + t * height + y0;                             \
        top += plane * whole_bands * padded + b * padded + x0;                              \
        W before = 0;                                                                       \
        for (uint h = 0; h < PART_QUARTERS; h++) {                                          \
            uint n = cols > 4 * h ? min(cols - 4 * h, 4u) : 0;                              \
            uint inside = (n >= 4 ? 0xffffffffu : (1u << (8 * n)) - 1) & 0x01010101u;       \
            T##4 columns = 0;                                                               \
            uint run = 0;                                                                   \
            uint at = y0 * width + x0 + 4 * h;                                              \
            for (uint r = 0; r < rows; r++, at += width) {                                  \
                uchar4 l = LUMA ? quarter_row(luma + at, n, aligned) : (uchar4)0;           \
                uchar4 m = MAGNITUDE ? quarter_row(magnitude + at, n, aligned) : (uchar4)0; \
                T##4 v = VALUE;                                                             \
                columns += v;                                                               \
                run += sum4_##T(v);                                                         \
                if (keep_local) {                                                           \
                    __global T *row = local_ + local_at + TILE * r;                         \
                    T##4 p = prefix4_##T(columns);                                          \
                    if (h > 0)                                                              \
                        p += (T##4)row[4 * h - 1];                                          \
                    vstore4(p, h, row);                                                     \
                }                                                                           \
                if (left_too) {                                                             \
                    if (h > 0)                                                              \
                        left[r] += run;                                                     \
                    else                                                                    \
                        left[r] = run;                                                      \
                }                                                                           \
            }                                                                               \
            if (top_too) {                                                                  \
                W##4 w = convert_##W##4(prefix4_##T(columns)) + before;                     \
                vstore4(w, h, top);                                                         \
                before = w.s3;                                                              \
            }                                                                               \
        }                                                                                   \
    }
/* A count's local may wrap only at the tile's last pixel (see the top of the file); its
 * top is worked out in uint, exact. */
TILE_PART(sum, ushort, uint, uint, convert_ushort4(l), 1, 0)
TILE_PART(squares, uint, ulong, ulong, convert_uint4(l) * convert_uint4(l), 1, 0)
TILE_PART(edges, uchar, uint, uint,
          as_uchar4(as_uint(as_uchar4(m >= (uchar4)et)) & inside), 0, 1)
TILE_PART(foreground, uchar, uint, uint, as_uchar4(l > (uchar4)th) & (uchar4)1, 1, 0)

__kernel void integral_tile_parts(__global const uchar *luma, uint src_stride, uint width,
                                  uint height, __global const uchar *magnitude,
                                  uint edge_threshold, __global const uint *results,
                                  uint keep_local, __global ushort *sum, __global uint *sqsum,
                                  __global uchar *edges, __global uchar *foreground,
                                  __global uint *left, __global ulong *left_sq,
                                  __global uint *top, __global ulong *top_sq)
{
#ifdef NO_LOCAL
    keep_local = 0;
#endif
    uint per = get_local_size(0) / 4, lid = get_local_id(0);
    uint part = lid / per, t = get_group_id(0) * per + lid % per, b = get_global_id(1);
    if (t >= (width + TILE - 1) / TILE || b >= (height + TILE - 1) / TILE)
        return;
    uchar et = (uchar)edge_threshold, th = (uchar)results[256];
    if (part == 0)
        tile_part_sum(t, b, luma, magnitude, width, height, et, th, keep_local, sum, left, 0,
                      top);
    else if (part == 1)
        tile_part_squares(t, b, luma, magnitude, width, height, et, th, keep_local, sqsum,
                          left_sq, 0, top_sq);
    else if (part == 2)
        tile_part_edges(t, b, luma, magnitude, width, height, et, th, keep_local, edges, left,
                        1, top);
    else
        tile_part_foreground(t, b, luma, magnitude, width, height, et, th, keep_local,
                             foreground, left, 2, top);
}

/*
 * integral_group_tiles (GPUs): local, the tiles' row sums (left before integral_left_rows)
 * and top as defined above.
 * Work size: 2-D, x = a work-item per padded column (P rounded up to the work-group size,
 * a multiple of 16 of at most GROUP_TILES x 16), y = a band (ceil(height / 16)),
 * work-groups of (group, 1): a group takes group / 16 neighbouring tiles of a band, and a
 * group past the frame's last tile has nothing to do. Two phases around one barrier:
 *   rows     work-item (r, t), lid = r * group_tiles + t, loads row r of tile t (16 bytes
 *            of luma and of the magnitude: a warp's loads are whole runs of a row) and
 *            puts its 16 inclusive prefixes along the row in local memory;
 *   columns  work-item (t, c), lid = 16 t + c, walks column c of tile t down the band,
 *            adding up those row prefixes, and stores each pixel of every part (16
 *            neighbouring work-items on 16 neighbouring elements); it also adds up column
 *            15's, the tile's row sums, and stores row c's at left[t * height + y]
 *            (integral_left_tops adds up the tiles to the left later); in a whole band it
 *            stores its row of top.
 * Left's entries are stored after the loop, 16 neighbouring work-items on 16 neighbouring
 * entries: stored row by row as column 15 went down, those scattered 4-byte stores among
 * local's, not the barriers, were what the pass waited on
 * (bench/notes/integral-tile-pass.md#tile-pass-one-barrier).
 */

/* Tiles a work-group takes at most: 128 work-items, and 16 KiB of local memory (a uint2 a
 * pixel). Groups of 16 tiles are no faster at 4K and slower at 1080p, where 120 tiles a
 * band leave the last of 8 groups half idle
 * (bench/notes/integral-tile-pass.md#tile-pass-one-barrier). */
#define GROUP_TILES 8

/* Where local memory holds pixel (c, r) of the group's tile t: tile after tile, row after
 * row, the column XORed with a mix of the tile and the row. A half-warp's 16 work-items
 * then reach 16 different pairs of banks: in the rows phase, storing column k of two rows
 * of 8 tiles (of one row of 16 tiles, of four of 4), which without the XOR fall 2 KiB
 * apart, into one or two banks; in the columns phase, loading one row of a tile. */
#define GROUP_AT(t, r, c, group_tiles)                                                     \
    (TILE * TILE * (t) + TILE * (r) + ((c) ^ (((t) ^ (r) * (group_tiles)) & (TILE - 1))))

/* A row's prefix packs its luma sum (at most 16 x 255 = 4080) in bits 0..11, its edges
 * (at most 16) in bits 12..16 and its foreground in bits 17..21: one running sum for
 * three parts, no field can carry into the next. */
#define PACK_EDGES 12
#define PACK_FOREGROUND 17

/* Inclusive prefix of 16 lanes, one add a lane in order: 15 adds where prefix16_uint's
 * log steps take 49, which pay off only where a vector add is one instruction. */
inline uint16 running16(uint16 v)
{
    v.s1 += v.s0;
    v.s2 += v.s1;
    v.s3 += v.s2;
    v.s4 += v.s3;
    v.s5 += v.s4;
    v.s6 += v.s5;
    v.s7 += v.s6;
    v.s8 += v.s7;
    v.s9 += v.s8;
    v.sa += v.s9;
    v.sb += v.sa;
    v.sc += v.sb;
    v.sd += v.sc;
    v.se += v.sd;
    v.sf += v.se;
    return v;
}

/* A row prefix's four parts, unpacked: (luma, luma^2, edges, foreground). regions.cl
 * counts a corner's rows with this and packed_row too. */
inline uint4 unpacked(uint2 p)
{
    return (uint4)(p.x & ((1u << PACK_EDGES) - 1), p.y,
                   (p.x >> PACK_EDGES) & ((1u << (PACK_FOREGROUND - PACK_EDGES)) - 1),
                   p.x >> PACK_FOREGROUND);
}

/* A row of n <= 16 pixels (l luma, m magnitude: lanes past n are zero) packed as above,
 * lane by lane: luma, 1 for an edge, 1 for foreground. Past n a lane counts 0: its
 * magnitude reads 0, which an edge threshold of 0 would count. A vector comparison gives
 * all ones where true. */
inline uint16 packed_row(uchar16 l, uchar16 m, uint n, uint edge_threshold, uchar threshold)
{
    const uchar16 lanes = (uchar16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    uchar16 e = as_uchar16(m >= (uchar16)(uchar)edge_threshold) &
                as_uchar16(lanes < (uchar16)(uchar)n) & (uchar16)1;
    uchar16 f = as_uchar16(l > (uchar16)threshold) & (uchar16)1;
    return convert_uint16(l) | convert_uint16(e) << PACK_EDGES |
           convert_uint16(f) << PACK_FOREGROUND;
}

__kernel void integral_group_tiles(__global const uchar *luma, uint src_stride, uint width,
                                   uint height, __global const uchar *magnitude,
                                   uint edge_threshold, __global const uint *results,
                                   uint keep_local, __global ushort *sum, __global uint *sqsum,
                                   __global uchar *edges, __global uchar *foreground,
                                   __global uint *left, __global ulong *left_sq,
                                   __global uint *top, __global ulong *top_sq)
{
    /* Per pixel, its row's prefix in its tile: x packed as above, y the squared sum. */
    __local uint2 prefix[GROUP_TILES * TILE * TILE];
    uint lid = get_local_id(0), group_tiles = get_local_size(0) / TILE;
    uint first = get_group_id(0) * group_tiles, b = get_global_id(1);
    uint tiles = (width + TILE - 1) / TILE;
    uint whole_tiles = width / TILE, whole_bands = height / TILE;
    size_t padded = (size_t)TILE * tiles;
    size_t left_plane = (size_t)whole_tiles * height, top_plane = (size_t)whole_bands * padded;
    uint y0 = TILE * b, rows = min((uint)TILE, height - y0);

    uint r = lid / group_tiles, t = lid % group_tiles, x0 = TILE * (first + t);
    if (r < rows && x0 < width) {
        uint cols = min((uint)TILE, width - x0);
        __global const uchar *pl = luma + (size_t)(y0 + r) * width + x0;
        __global const uchar *pm = magnitude + (size_t)(y0 + r) * width + x0;
        uchar16 l, m;
        if (cols == TILE && width % TILE == 0) {
            /* Every row starts 16-byte aligned (buffers are aligned): one 128-bit load
             * each, where vload16's address of any alignment may be split into bytes. */
            l = *(__global const uchar16 *)pl;
            m = *(__global const uchar16 *)pm;
        } else if (cols == TILE) {
            l = vload16(0, pl);
            m = vload16(0, pm);
        } else {
            l = load_partial16(pl, cols);
            m = load_partial16(pm, cols);
        }
        uint16 v = convert_uint16(l);
        uint16 s = running16(packed_row(l, m, cols, edge_threshold, (uchar)results[256]));
        uint16 q = running16(v * v);
#define PUT(k) prefix[GROUP_AT(t, r, 0x##k, group_tiles)] = (uint2)(s.s##k, q.s##k)
        PUT(0);
        PUT(1);
        PUT(2);
        PUT(3);
        PUT(4);
        PUT(5);
        PUT(6);
        PUT(7);
        PUT(8);
        PUT(9);
        PUT(a);
        PUT(b);
        PUT(c);
        PUT(d);
        PUT(e);
        PUT(f);
#undef PUT
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    t = lid / TILE;
    uint c = lid % TILE, tile = first + t;
    if (tile >= tiles)
        return;
    /* This column's sums down the band so far, those of the tile's last column (the
     * tile's rows so far), and the latter at row c: the tile's entry of left for row c,
     * which the work-item stores after the loop, so that 16 neighbouring work-items store
     * 16 neighbouring entries. As (luma, luma^2, edges, foreground). */
    uint4 column = 0, tile_rows = 0, left_row = 0;
    size_t o = (size_t)y0 * padded + (size_t)TILE * rows * tile + c;
    for (r = 0; r < rows; r++) {
        column += unpacked(prefix[GROUP_AT(t, r, c, group_tiles)]);
        tile_rows += unpacked(prefix[GROUP_AT(t, r, TILE - 1, group_tiles)]);
        if (r == c)
            left_row = tile_rows;
        if (keep_local) {
            size_t i = o + TILE * r;
            sum[i] = (ushort)column.s0;
            sqsum[i] = column.s1;
            /* Modulo 256: only a tile's last pixel can reach 256, and it is never read. */
            edges[i] = (uchar)column.s2;
            foreground[i] = (uchar)column.s3;
        }
    }
    if (c < rows && tile < whole_tiles) {
        size_t i = (size_t)tile * height + y0 + c;
        left[i] = left_row.s0;
        left[left_plane + i] = left_row.s2;
        left[2 * left_plane + i] = left_row.s3;
        left_sq[i] = left_row.s1;
    }
    if (b < whole_bands) {
        size_t i = (size_t)b * padded + TILE * tile + c;
        top[i] = column.s0;
        top[top_plane + i] = column.s2;
        top[2 * top_plane + i] = column.s3;
        top_sq[i] = column.s1;
    }
}

/*
 * integral_left_rows (Mali, after integral_tiles): turns each row's tile sums in left into
 * sums over the tiles up to each:
 * left[t * height + y] += left[(t - 1) * height + y] along t, for the three uint planes and
 * the ulong one.
 * Work size: 2-D, x = a row (height rounded up to the work-group size), y = the part: 0..2
 * the uint planes (sum, edges, foreground), 3 the squared sums. Neighbouring work-items
 * walk neighbouring rows (running_sum_*).
 */
__kernel void integral_left_rows(uint width, uint height, __global uint *left,
                                 __global ulong *left_sq)
{
    uint y = get_global_id(0), part = get_global_id(1);
    uint whole_tiles = width / TILE;
    if (y >= height || part > 3)
        return;
    size_t step = height;
    if (part < 3) {
        __global uint *p = left + part * (size_t)whole_tiles * height + y;
        running_sum_uint(p, step, p, step, whole_tiles);
    } else {
        running_sum_ulong(left_sq + y, step, left_sq + y, step, whole_tiles);
    }
}

/*
 * The same scans on GPUs (integral_group_tiles' layout), split: a work-group takes up to
 * SPLIT_LINES neighbouring lines (rows of left, columns of top, tile columns of corner) of
 * one part, and SPLIT_CHUNKS work-items along each, each a run of the line's entries. A
 * line's chain of dependent loads is then its run, not the whole line: a GPU has only a
 * few thousand lines to give work-items (960 to 8640 at 4K), each walking 135 to 240
 * entries, and 8 runs a line did best
 * (bench/notes/integral-small-passes.md#small-passes-split).
 */
#define SPLIT_LINES 32
#define SPLIT_CHUNKS 8

/* split_scan_T: the inclusive running sum of a line's n entries as running_sum_T writes it,
 * by work-item (line, k) of a work-group of (lines, chunks): a sum over its run of entries
 * (loads only), the runs before it added up through local memory, then its run's running
 * sums from there (reading the run again). Every work-item of the group must call it, with
 * the same totals: one barrier. Where live is false the work-item reads and writes
 * nothing. */
#define SPLIT_SCAN(T)                                                                       \
    __attribute__((always_inline)) inline void split_scan_##T(                              \
        __global const T *in, size_t in_step, __global T *out, size_t out_step, uint n,     \
        bool live, __local T *totals)                                                       \
    {                                                                                       \
        uint line = get_local_id(0), k = get_local_id(1);                                   \
        uint lines = get_local_size(0), chunks = get_local_size(1);                         \
        uint i0 = (uint)((ulong)n * k / chunks);                                           \
        uint i1 = live ? (uint)((ulong)n * (k + 1) / chunks) : i0;                          \
        T total = 0;                                                                        \
        uint i = i0;                                                                        \
        for (; i + 8 <= i1; i += 8) {                                                       \
            T v[8];                                                                         \
            for (uint j = 0; j < 8; j++)                                                    \
                v[j] = in[(i + j) * in_step];                                               \
            for (uint j = 0; j < 8; j++)                                                    \
                total += v[j];                                                              \
        }                                                                                   \
        for (; i < i1; i++)                                                                 \
            total += in[i * in_step];                                                       \
        totals[k * lines + line] = total;                                                   \
        barrier(CLK_LOCAL_MEM_FENCE);                                                       \
        T run = 0;                                                                          \
        for (uint j = 0; j < k; j++)                                                        \
            run += totals[j * lines + line];                                                \
        running_from8_##T(in + i0 * in_step, in_step, out + i0 * out_step, out_step,        \
                          i1 - i0, run);                                                    \
    }
SPLIT_SCAN(uint)
SPLIT_SCAN(ulong)

/*
 * integral_left_tops (GPUs, after integral_group_tiles): integral_left_rows' and
 * integral_tops' sums in one launch (they are independent, and each launch costs the host
 * time in NVIDIA's driver: bench/notes/round3.md#host-cpu), by split scans.
 * Work size: 2-D, local (lines, chunks), lines <= SPLIT_LINES, chunks <= SPLIT_CHUNKS;
 * x = lines times the work-groups: first 4 x ceil(height / lines) of left (the parts in
 * turn, as in integral_left_rows: a group per `lines` rows of one part), then
 * 4 x ceil(P / lines) of top (a group per `lines` padded columns of one part); y = chunks.
 * A work-group wholly past those has nothing to do.
 */
__kernel void integral_left_tops(uint width, uint height, __global uint *left,
                                 __global ulong *left_sq, __global uint *top,
                                 __global ulong *top_sq)
{
    __local ulong totals[SPLIT_LINES * SPLIT_CHUNKS];
    uint lines = get_local_size(0), g = get_group_id(0);
    uint whole_tiles = width / TILE, whole_bands = height / TILE;
    size_t padded = (size_t)TILE * ((width + TILE - 1) / TILE);
    uint row_groups = (height + lines - 1) / lines;
    uint column_groups = (uint)((padded + lines - 1) / lines);
    /* Uniform over the work-group, as split_scan's barrier needs. */
    uint part, line;
    size_t step, count, plane, n;
    __global uint *p;
    __global ulong *q;
    if (g < 4 * row_groups) {
        part = g / row_groups;
        line = g % row_groups * lines;
        step = height;
        count = height;
        n = whole_tiles;
        plane = (size_t)whole_tiles * height;
        p = left;
        q = left_sq;
    } else if (g < 4 * (row_groups + column_groups)) {
        g -= 4 * row_groups;
        part = g / column_groups;
        line = g % column_groups * lines;
        step = padded;
        count = padded;
        n = whole_bands;
        plane = (size_t)whole_bands * padded;
        p = top;
        q = top_sq;
    } else {
        return;
    }
    line += get_local_id(0);
    bool live = line < count;
    if (part < 3) {
        __global uint *s = p + part * plane + line;
        split_scan_uint(s, step, s, step, (uint)n, live, (__local uint *)totals);
    } else {
        split_scan_ulong(q + line, step, q + line, step, (uint)n, live, totals);
    }
}

/*
 * integral_corners_split (GPUs, after integral_left_tops): integral_corners' sums by split
 * scans, and motion.cl's motion_tiles where motion is 1. Work size: 2-D, local (lines,
 * chunks) as in integral_left_tops; x = lines times 4 x ceil(max(W16, 1) / lines)
 * work-groups (a group per `lines` tile columns of one part), and with motion
 * motion_groups more, y = chunks: the motion groups' work-items, lines x chunks a group,
 * a whole tile each (the last ones none).
 */
__kernel void integral_corners_split(uint width, uint height, __global const uint *left,
                                     __global const ulong *left_sq, __global uint *corner,
                                     __global ulong *corner_sq, MOTION_PARAMS)
{
    __local ulong totals[SPLIT_LINES * SPLIT_CHUNKS];
    __local uint motion_words[MOTION_LOCAL];
    uint lines = get_local_size(0), g = get_group_id(0);
    uint whole_tiles = width / TILE, whole_bands = height / TILE;
    uint column_groups = (max(whole_tiles, 1u) + lines - 1) / lines;
    if (motion && g >= 4 * column_groups) {
        uint lsize = lines * get_local_size(1);
        uint lid = get_local_id(1) * lines + get_local_id(0);
        uint groups = get_num_groups(0) - 4 * column_groups;
        motion_tiles((g - 4 * column_groups) * lsize + lid, groups * lsize, lid, lsize, width,
                     height, left, mask, background, light, moved, parity, rate, still_rate,
                     threshold, acc, motion_words);
        return;
    }
    if (g >= 4 * column_groups)
        return;
    uint part = g / column_groups, t = g % column_groups * lines + get_local_id(0);
    bool live = t < whole_tiles;
    size_t in = (size_t)t * height + TILE - 1, out = t;
    if (part < 3) {
        __global const uint *l = left + part * (size_t)whole_tiles * height + in;
        __global uint *c = corner + part * (size_t)whole_tiles * whole_bands + out;
        split_scan_uint(l, TILE, c, whole_tiles, whole_bands, live, (__local uint *)totals);
    } else {
        split_scan_ulong(left_sq + in, TILE, corner_sq + out, whole_tiles, whole_bands, live,
                         totals);
    }
}

/*
 * integral_tops (CPUs and Mali, after local and top): top held each whole band's own sums
 * (its last row of local, widened); this adds up the bands, in place:
 * top[b * P + c] += top[(b - 1) * P + c] down b, for the three uint planes and the ulong one.
 * Work size: 2-D, x = 4 neighbouring columns per work-item (P / 4, rounded up to the
 * work-group size), y = the part as in integral_left_rows. 128-bit loads and stores
 * (running_sum_*).
 */
__kernel void integral_tops(uint width, uint height, __global uint *top, __global ulong *top_sq)
{
    uint q = get_global_id(0), part = get_global_id(1);
    uint tiles = (width + TILE - 1) / TILE, whole_bands = height / TILE;
    size_t padded = (size_t)TILE * tiles;
    if (4 * (size_t)q >= padded || part > 3)
        return;
    size_t step = padded / 4;
    if (part < 3) {
        __global uint4 *p = (__global uint4 *)(top + part * (size_t)whole_bands * padded) + q;
        running_sum_uint4(p, step, p, step, whole_bands);
    } else {
        __global ulong4 *p = (__global ulong4 *)top_sq + q;
        running_sum_ulong4(p, step, p, step, whole_bands);
    }
}

/*
 * integral_corners (CPUs and Mali, after left is complete): corner[b * W16 + t] = the sum of
 * left[t * height + 16 b' + 15] over the whole bands b' <= b (left in a band's last row
 * holds the band's tiles 0..t whole); and motion.cl's motion_tiles where motion is 1.
 * Work size: 2-D, x = a whole tile column (W16 rounded up to the work-group size), y = the
 * part as in integral_left_rows, and with motion a fifth: its work-items (x of them) take
 * the whole tiles x, x + the work size, ... Pixels / 256 values.
 */
__kernel void integral_corners(uint width, uint height, __global const uint *left,
                               __global const ulong *left_sq, __global uint *corner,
                               __global ulong *corner_sq, MOTION_PARAMS)
{
    __local uint motion_words[MOTION_LOCAL];
    uint t = get_global_id(0), part = get_global_id(1);
    uint whole_tiles = width / TILE, whole_bands = height / TILE;
    if (motion && part == 4) {
        motion_tiles(t, get_global_size(0), get_local_id(0), get_local_size(0), width, height,
                     left, mask, background, light, moved, parity, rate, still_rate, threshold,
                     acc, motion_words);
        return;
    }
    if (t >= whole_tiles || part > 3)
        return;
    size_t in = (size_t)t * height + TILE - 1, out = t;
    if (part < 3) {
        __global const uint *l = left + part * (size_t)whole_tiles * height + in;
        __global uint *c = corner + part * (size_t)whole_tiles * whole_bands + out;
        running_sum_uint(l, TILE, c, whole_tiles, whole_bands);
    } else {
        running_sum_ulong(left_sq + in, TILE, corner_sq + out, whole_tiles, whole_bands);
    }
}
