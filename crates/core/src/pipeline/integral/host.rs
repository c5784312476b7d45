//! Host un-blocking: OpenCV's `(H+1)x(W+1)` integral images (20 bytes a pixel) assembled
//! on the host from the blocked integrals read back, for `process --raw`, so that no
//! device ever holds them.

use super::Tiles;

/// The blocked integrals read back to the host, laid out as `kernels/integral.cl` defines
/// them (local empty unless the full images were kept).
pub(in crate::pipeline) struct HostIntegrals {
    pub(super) tiles: Tiles,
    pub(super) sum: Vec<u16>,
    pub(super) sqsum: Vec<u32>,
    pub(super) edges: Vec<u8>,
    pub(super) foreground: Vec<u8>,
    pub(super) left: Vec<u32>,
    pub(super) left_sq: Vec<u64>,
    pub(super) top: Vec<u32>,
    pub(super) top_sq: Vec<u64>,
    pub(super) corner: Vec<u32>,
    pub(super) corner_sq: Vec<u64>,
}

impl HostIntegrals {
    /// OpenCV's exclusive integrals at (x, y), 0 <= x <= width, 0 <= y <= height: luma's
    /// sum, its squared sum, the edge and the foreground counts of the pixels above and
    /// left, from the four parts as integral.cl adds them (each taken only where its
    /// condition holds). Every part and the total of a right device fit u64 without
    /// wrapping; a broken device's parts wrap, and the comparison with the reference
    /// finds them.
    fn at(&self, x: usize, y: usize) -> [u64; 4] {
        let g = &self.tiles;
        const S: usize = Tiles::SIZE;
        let (t, l, b, r) = (x / S, x % S, y / S, y % S);
        let mut v = [0u64; 4];
        let mut add = |words: &[u32], squares: &[u64], i: usize, plane: usize| {
            v[0] = v[0].wrapping_add(u64::from(words[i]));
            v[1] = v[1].wrapping_add(squares[i]);
            v[2] = v[2].wrapping_add(u64::from(words[plane + i]));
            v[3] = v[3].wrapping_add(u64::from(words[2 * plane + i]));
        };
        if t > 0 && b > 0 {
            let i = (b - 1) * g.whole_across() + t - 1;
            add(&self.corner, &self.corner_sq, i, g.corner_len());
        }
        if t > 0 && r > 0 {
            let i = (t - 1) * g.height + y - 1;
            add(&self.left, &self.left_sq, i, g.left_len());
        }
        if b > 0 && l > 0 {
            let i = (b - 1) * g.padded() + x - 1;
            add(&self.top, &self.top_sq, i, g.top_len());
        }
        if l > 0 && r > 0 {
            let i = g.local_index(x - 1, y - 1);
            v[0] = v[0].wrapping_add(u64::from(self.sum[i]));
            v[1] = v[1].wrapping_add(u64::from(self.sqsum[i]));
            v[2] = v[2].wrapping_add(u64::from(self.edges[i]));
            v[3] = v[3].wrapping_add(u64::from(self.foreground[i]));
        }
        v
    }

    /// OpenCV's four `(height + 1) x (width + 1)` images: luma's sum (u32: it fits, for
    /// any frame `FrameLayout::validate` accepts), its squared sum, the edge and the
    /// foreground counts. A broken device's sums that do not fit are cut to their low 32
    /// bits: they are wrong either way, and the reference says so.
    #[allow(clippy::type_complexity)]
    pub(in crate::pipeline) fn opencv_images(&self) -> (Vec<u32>, Vec<u64>, Vec<u32>, Vec<u32>) {
        let (w, h) = (self.tiles.width, self.tiles.height);
        let len = (w + 1) * (h + 1);
        let (mut sum, mut sqsum) = (Vec::with_capacity(len), Vec::with_capacity(len));
        let (mut edges, mut foreground) = (Vec::with_capacity(len), Vec::with_capacity(len));
        let narrow = |v: u64| v as u32;
        for y in 0..=h {
            for x in 0..=w {
                let [s, q, e, f] = self.at(x, y);
                sum.push(narrow(s));
                sqsum.push(q);
                edges.push(narrow(e));
                foreground.push(narrow(f));
            }
        }
        (sum, sqsum, edges, foreground)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{Frame, SIZES};

    /// integral.cl's formula for I(x, y), as the host assembles OpenCV's layout with it,
    /// gives the reference's images from parts that hold exactly their definitions.
    #[test]
    fn the_formula_adds_the_parts_up_to_opencvs_images() {
        for (k, (w, h)) in SIZES.into_iter().enumerate() {
            for edge_threshold in [0, 64, 255] {
                let frame = Frame::new(w, h, 7 + k as u64, edge_threshold);
                let images = frame.blocked().opencv_images();
                assert!(images == frame.integrals, "{w}x{h}, {edge_threshold}");
            }
        }
    }
}
