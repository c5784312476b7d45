//! The blocked form's geometry, as `kernels/integral.cl` defines it: every buffer size and
//! every element the host finds comes from here.

use crate::pipeline::FullImages;
use edgesight_frame::frame::FrameLayout;

/// Tiles of [`Tiles::SIZE`] pixels square in bands of as many rows, the last band and each
/// band's last tile possibly partial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::pipeline) struct Tiles {
    pub(super) width: usize,
    pub(super) height: usize,
}

impl Tiles {
    pub(super) const SIZE: usize = 16;

    pub(in crate::pipeline) fn new(layout: &FrameLayout) -> Tiles {
        Tiles {
            width: layout.width as usize,
            height: layout.height as usize,
        }
    }

    /// Whole tiles a band (W16 in integral.cl).
    pub(super) fn whole_across(&self) -> usize {
        self.width / Tiles::SIZE
    }

    /// Whole bands (H16).
    pub(super) fn whole_bands(&self) -> usize {
        self.height / Tiles::SIZE
    }

    /// Bands, the last one possibly partial.
    pub(super) fn bands(&self) -> usize {
        self.height.div_ceil(Tiles::SIZE)
    }

    /// A row padded to whole tiles (P).
    pub(super) fn padded(&self) -> usize {
        self.width.next_multiple_of(Tiles::SIZE)
    }

    /// Local's elements a part, 0 where local is not kept.
    pub(super) fn local_len(&self, images: FullImages) -> usize {
        match images {
            FullImages::Kept => self.padded() * self.height,
            FullImages::Discarded => 0,
        }
    }

    pub(super) fn left_len(&self) -> usize {
        self.whole_across() * self.height
    }

    pub(super) fn top_len(&self) -> usize {
        self.whole_bands() * self.padded()
    }

    pub(super) fn corner_len(&self) -> usize {
        self.whole_across() * self.whole_bands()
    }

    /// Bytes the blocked integrals hold, guard bands aside: 20 an entry of left, top and
    /// corner, and with the full images 8 a pixel of the padded rows for local.
    pub(in crate::pipeline) fn bytes(&self, images: FullImages) -> u64 {
        let entries = self.left_len() + self.top_len() + self.corner_len();
        8 * self.local_len(images) as u64 + 20 * entries as u64
    }

    /// Where local holds pixel (x, y): its band's tiles one after another, each its rows.
    pub(super) fn local_index(&self, x: usize, y: usize) -> usize {
        let (b, r) = (y / Tiles::SIZE, y % Tiles::SIZE);
        let rows = Tiles::SIZE.min(self.height - Tiles::SIZE * b);
        Tiles::SIZE * b * self.padded()
            + Tiles::SIZE * rows * (x / Tiles::SIZE)
            + Tiles::SIZE * r
            + x % Tiles::SIZE
    }
}
