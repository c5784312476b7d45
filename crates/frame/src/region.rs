//! Regions of interest: the named rectangles measured on every frame, their parsing
//! and validation against a frame size, and the sums their features come from. Config,
//! the pipeline, metrics and reports all speak of them.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::frame::FrameLayout;

/// A named rectangle of the frame whose features are measured on every frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Region {
    /// The name metrics and reports give the region (empty for a cell of [`grid`]).
    pub name: String,
    /// Column of the region's left edge, in pixels from the frame's left.
    pub x: u32,
    /// Row of the region's top edge, in pixels from the frame's top.
    pub y: u32,
    /// Width in pixels (`w` in JSON).
    #[serde(rename = "w")]
    pub width: u32,
    /// Height in pixels (`h` in JSON).
    #[serde(rename = "h")]
    pub height: u32,
}

/// Why a region was refused: its text is not a region, it is empty, or it does not lie
/// inside the frame.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegionError {
    /// The text (held here) is not `NAME:X,Y,W,H` with a non-empty name and four unsigned
    /// integers.
    #[error("invalid ROI '{0}' (expected NAME:X,Y,W,H, e.g. door:10,20,64,48)")]
    Syntax(String),
    /// The region's width or height is 0.
    #[error("ROI '{name}' is empty ({width}x{height})")]
    Empty {
        /// The region's name.
        name: String,
        /// Its width in pixels.
        width: u32,
        /// Its height in pixels.
        height: u32,
    },
    /// The region reaches past the frame's right or bottom edge.
    #[error("ROI '{name}' ({x},{y} {width}x{height}) lies outside the {frame_width}x{frame_height} frame")]
    Outside {
        /// The region's name.
        name: String,
        /// Column of its left edge, in pixels.
        x: u32,
        /// Row of its top edge, in pixels.
        y: u32,
        /// Its width in pixels.
        width: u32,
        /// Its height in pixels.
        height: u32,
        /// Width of the frame it was checked against, in pixels.
        frame_width: u32,
        /// Height of the frame it was checked against, in pixels.
        frame_height: u32,
    },
}

impl Region {
    /// Makes this region `other`, keeping the name's allocation where it is large
    /// enough: results refilled frame after frame allocate nothing (a derived
    /// `clone_from` would allocate the name again).
    pub fn assign(&mut self, other: &Region) {
        self.name.clone_from(&other.name);
        (self.x, self.y) = (other.x, other.y);
        (self.width, self.height) = (other.width, other.height);
    }

    /// Checks that the region is non-empty and inside a frame of `layout`.
    pub fn validate(&self, layout: &FrameLayout) -> Result<(), RegionError> {
        if self.width == 0 || self.height == 0 {
            return Err(RegionError::Empty {
                name: self.name.clone(),
                width: self.width,
                height: self.height,
            });
        }
        let right = u64::from(self.x) + u64::from(self.width);
        let bottom = u64::from(self.y) + u64::from(self.height);
        if right > u64::from(layout.width) || bottom > u64::from(layout.height) {
            return Err(RegionError::Outside {
                name: self.name.clone(),
                x: self.x,
                y: self.y,
                width: self.width,
                height: self.height,
                frame_width: layout.width,
                frame_height: layout.height,
            });
        }
        Ok(())
    }
}

/// The columns and rows [`grid`] makes of a `cols` x `rows` grid over a `width` x
/// `height` frame: at least one, at most one per pixel on each side.
pub fn grid_shape(width: u32, height: u32, cols: u32, rows: u32) -> (u32, u32) {
    (cols.clamp(1, width.max(1)), rows.clamp(1, height.max(1)))
}

/// The cells of a `cols` x `rows` grid over a `width` x `height` frame, row by row: cell
/// edges at `i * width / cols`, so the cells tile the frame exactly. At most one cell per
/// pixel on each side.
pub fn grid(width: u32, height: u32, cols: u32, rows: u32) -> Vec<Region> {
    let (cols, rows) = grid_shape(width, height, cols, rows);
    let edge = |i: u32, n: u32, side: u32| (u64::from(i) * u64::from(side) / u64::from(n)) as u32;
    let mut cells = Vec::with_capacity((cols * rows) as usize);
    for r in 0..rows {
        let (y0, y1) = (edge(r, rows, height), edge(r + 1, rows, height));
        for c in 0..cols {
            let (x0, x1) = (edge(c, cols, width), edge(c + 1, cols, width));
            cells.push(Region {
                name: String::new(),
                x: x0,
                y: y0,
                width: x1 - x0,
                height: y1 - y0,
            });
        }
    }
    cells
}

impl FromStr for Region {
    type Err = RegionError;
    /// `NAME:X,Y,W,H`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || RegionError::Syntax(s.to_string());
        let (name, rect) = s.rsplit_once(':').ok_or_else(bad)?;
        let nums: Vec<u32> = rect
            .split(',')
            .map(|v| v.trim().parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?;
        let [x, y, width, height] = nums[..] else {
            return Err(bad());
        };
        if name.trim().is_empty() {
            return Err(bad());
        }
        Ok(Region {
            name: name.trim().to_string(),
            x,
            y,
            width,
            height,
        })
    }
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{},{},{},{}",
            self.name, self.x, self.y, self.width, self.height
        )
    }
}

/// The sums a region's features come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionStats {
    /// Pixels summed over: the region's width times its height.
    pub area: u64,
    /// Sum of the pixels' 8-bit luma values.
    pub sum: u64,
    /// Sum of the squares of the pixels' luma values.
    pub sqsum: u64,
    /// Pixels whose gradient magnitude is at or above the edge threshold.
    pub edges: u64,
    /// Pixels whose luma is above the frame's Otsu threshold.
    pub foreground: u64,
    /// Pixels whose tile moved (0 unless motion is watched: see `MotionState`).
    pub motion: u64,
}

impl RegionStats {
    /// Mean luma of the region's pixels, 0 to 255 (NaN for an empty region).
    pub fn mean(&self) -> f64 {
        self.sum as f64 / self.area as f64
    }

    /// Population standard deviation of luma, from exact integer moments.
    pub fn stddev(&self) -> f64 {
        let (n, s, q) = (
            u128::from(self.area),
            u128::from(self.sum),
            u128::from(self.sqsum),
        );
        // n * q >= s² by Cauchy-Schwarz, so this never underflows.
        let scaled_variance = n * q - s * s;
        (scaled_variance as f64).sqrt() / self.area as f64
    }

    /// Share of the region's pixels that moved.
    pub fn motion_ratio(&self) -> f64 {
        self.motion as f64 / self.area as f64
    }

    /// Share of the region's pixels that are edges (magnitude >= the edge threshold).
    pub fn edge_ratio(&self) -> f64 {
        self.edges as f64 / self.area as f64
    }

    /// Share of the region's pixels above the Otsu threshold.
    pub fn foreground_ratio(&self) -> f64 {
        self.foreground as f64 / self.area as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::PixelFormat;

    #[test]
    fn regions_parse() {
        let r: Region = "door:10,20,64,48".parse().unwrap();
        assert_eq!(
            r,
            Region {
                name: "door".into(),
                x: 10,
                y: 20,
                width: 64,
                height: 48
            }
        );
        assert_eq!(r.to_string(), "door:10,20,64,48");
        for bad in [
            "door",
            "door:1,2,3",
            ":1,2,3,4",
            "d:1,2,3,4,5",
            "d:a,2,3,4",
            "d:-1,2,3,4",
        ] {
            assert_eq!(
                bad.parse::<Region>(),
                Err(RegionError::Syntax(bad.into())),
                "{bad}"
            );
        }
    }

    #[test]
    fn regions_must_lie_inside_the_frame() {
        let l = FrameLayout::packed(PixelFormat::Grey, 64, 48);
        let r = |s: &str| s.parse::<Region>().unwrap().validate(&l);
        assert!(r("all:0,0,64,48").is_ok());
        assert!(matches!(
            r("wide:1,0,64,48"),
            Err(RegionError::Outside { .. })
        ));
        assert!(matches!(
            r("low:0,40,1,9"),
            Err(RegionError::Outside { .. })
        ));
        assert!(matches!(
            r("far:4294967295,0,1,1"),
            Err(RegionError::Outside { .. })
        ));
        assert!(matches!(r("none:0,0,0,5"), Err(RegionError::Empty { .. })));
    }

    #[test]
    fn a_grid_tiles_the_frame_exactly() {
        for (w, h, cols, rows) in [
            (320, 240, 16, 12),
            (17, 3, 16, 12),
            (1, 1, 16, 12),
            (641, 479, 16, 12),
        ] {
            let cells = grid(w, h, cols, rows);
            let (c, r) = (cols.min(w), rows.min(h));
            assert_eq!(cells.len(), (c * r) as usize, "{w}x{h}");
            let mut covered = vec![0u8; (w * h) as usize];
            for cell in &cells {
                assert!(cell.width >= 1 && cell.height >= 1, "{w}x{h}: {cell:?}");
                for y in cell.y..cell.y + cell.height {
                    for x in cell.x..cell.x + cell.width {
                        covered[(y * w + x) as usize] += 1;
                    }
                }
            }
            assert!(
                covered.iter().all(|&n| n == 1),
                "{w}x{h}: every pixel in one cell"
            );
        }
        let cells = grid(320, 240, 16, 12);
        assert_eq!(
            (cells[17].x, cells[17].y, cells[17].width, cells[17].height),
            (20, 20, 20, 20)
        );
    }

    #[test]
    fn stats_from_sums() {
        // Pixels 1, 2, 3, 4: mean 2.5, population variance 1.25.
        let s = RegionStats {
            area: 4,
            sum: 10,
            sqsum: 30,
            edges: 1,
            foreground: 3,
            motion: 0,
        };
        assert_eq!(s.mean(), 2.5);
        assert!((s.stddev() - 1.25f64.sqrt()).abs() < 1e-12);
        assert_eq!(s.edge_ratio(), 0.25);
        assert_eq!(s.foreground_ratio(), 0.75);
    }
}
