//! For the tests: a frame's OpenCV-layout integrals from the reference, and every part of
//! its blocked form straight from its definition in integral.cl.

use super::{HostIntegrals, Tiles};
use crate::pipeline::{FullImages, PipelineOptions};
use crate::reference;

/// The frame sizes the tests take: one pixel, partial and whole tiles and bands, frames
/// narrower than a tile and shorter than a band.
pub(super) const SIZES: [(usize, usize); 9] = [
    (1, 1),
    (15, 15),
    (16, 16),
    (17, 33),
    (40, 2),
    (2, 40),
    (47, 35),
    (64, 48),
    (100, 17),
];

/// A grey frame's luma (the frame itself) and the reference's OpenCV-layout integrals
/// of its sum, squared sum, edges and foreground, with the edge threshold given.
pub(super) struct Frame {
    pub width: usize,
    pub height: usize,
    pub luma: Vec<u8>,
    pub integrals: (Vec<u32>, Vec<u64>, Vec<u32>, Vec<u32>),
}

impl Frame {
    pub fn new(width: usize, height: usize, seed: u64, edge_threshold: u8) -> Frame {
        let mut state = seed.max(1);
        let luma: Vec<u8> = (0..width * height)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        let options = PipelineOptions::default();
        let (dx, dy) = reference::sobel(&luma, width, height, options.border);
        let magnitude = reference::magnitude(&dx, &dy, options.magnitude);
        let edges = reference::edge_mask(&magnitude, edge_threshold);
        let threshold = reference::otsu_threshold(&reference::histogram(&luma));
        let mask = reference::binarize(&luma, threshold);
        let (sum, sqsum) = reference::integral(&luma, width, height);
        let integrals = (
            sum,
            sqsum,
            reference::integral_count(&edges, width, height),
            reference::integral_count(&mask, width, height),
        );
        Frame {
            width,
            height,
            luma,
            integrals,
        }
    }

    /// The sums over columns x0..x1 and rows y0..y1, clipped to the frame (pixels
    /// past its right edge count 0).
    fn rect(&self, x0: usize, y0: usize, x1: usize, y1: usize) -> [u64; 4] {
        let (x1, stride) = (x1.min(self.width), self.width + 1);
        let (s, q, e, f) = &self.integrals;
        let corners = |at: &dyn Fn(usize) -> u64| {
            at(y1 * stride + x1) + at(y0 * stride + x0)
                - at(y0 * stride + x1)
                - at(y1 * stride + x0)
        };
        [
            corners(&|i| u64::from(s[i])),
            corners(&|i| q[i]),
            corners(&|i| u64::from(e[i])),
            corners(&|i| u64::from(f[i])),
        ]
    }

    /// Every part of the blocked form straight from its definition in integral.cl, as
    /// a sum over a rectangle; local's counts modulo 256 as stored.
    pub fn blocked(&self) -> HostIntegrals {
        const S: usize = Tiles::SIZE;
        let g = Tiles {
            width: self.width,
            height: self.height,
        };
        let (w16, h16, p) = (g.whole_across(), g.whole_bands(), g.padded());
        let mut out = HostIntegrals {
            tiles: g,
            sum: vec![0; g.local_len(FullImages::Kept)],
            sqsum: vec![0; g.local_len(FullImages::Kept)],
            edges: vec![0; g.local_len(FullImages::Kept)],
            foreground: vec![0; g.local_len(FullImages::Kept)],
            left: vec![0; 3 * g.left_len()],
            left_sq: vec![0; g.left_len()],
            top: vec![0; 3 * g.top_len()],
            top_sq: vec![0; g.top_len()],
            corner: vec![0; 3 * g.corner_len()],
            corner_sq: vec![0; g.corner_len()],
        };
        let narrow = |v: u64| u32::try_from(v).unwrap();
        for y in 0..self.height {
            let b = y / S;
            for x in 0..p {
                let [s, q, e, f] = self.rect(x / S * S, b * S, x + 1, y + 1);
                let i = g.local_index(x, y);
                out.sum[i] = u16::try_from(s).unwrap();
                out.sqsum[i] = narrow(q);
                out.edges[i] = e as u8;
                out.foreground[i] = f as u8;
            }
            for t in 0..w16 {
                let [s, q, e, f] = self.rect(0, b * S, S * (t + 1), y + 1);
                let (i, plane) = (t * self.height + y, g.left_len());
                (out.left[i], out.left_sq[i]) = (narrow(s), q);
                (out.left[plane + i], out.left[2 * plane + i]) = (narrow(e), narrow(f));
            }
        }
        for b in 0..h16 {
            for c in 0..p {
                let [s, q, e, f] = self.rect(c / S * S, 0, c + 1, S * (b + 1));
                let (i, plane) = (b * p + c, g.top_len());
                (out.top[i], out.top_sq[i]) = (narrow(s), q);
                (out.top[plane + i], out.top[2 * plane + i]) = (narrow(e), narrow(f));
            }
            for t in 0..w16 {
                let [s, q, e, f] = self.rect(0, 0, S * (t + 1), S * (b + 1));
                let (i, plane) = (b * w16 + t, g.corner_len());
                (out.corner[i], out.corner_sq[i]) = (narrow(s), q);
                (out.corner[plane + i], out.corner[2 * plane + i]) = (narrow(e), narrow(f));
            }
        }
        out
    }
}
