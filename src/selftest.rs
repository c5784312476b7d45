//! `edgesight selftest`: every stage on the chosen device, with each tuning, on synthetic
//! frames of every input format at awkward sizes and wider strides, every border mode and
//! both magnitudes, against the plain-Rust reference ([`crate::reference`]).
//!
//! A board's OpenCL driver is the part edgesight cannot test before it ships: each vendor
//! image has its own libmali. This is the check a board user runs once after installing,
//! and what `[opencl] verify_every` runs on live frames ([`compare_frame`]).

use std::collections::BTreeMap;
use std::fmt;

use crate::cl::Gpu;
use crate::frame::{FrameLayout, PixelFormat};
use crate::health;
use crate::pipeline::{
    Border, FrameResult, FullImages, Magnitude, Pictures, Pipeline, PipelineError, PipelineOptions,
    Setup, Tuning,
};
use crate::reference;
use crate::region::{self, Region, RegionStats};

/// The stages, in the order the table shows them.
pub const STAGES: [&str; 6] = ["luma", "sobel", "histogram", "otsu", "integral", "regions"];

/// What one stage's checks found: how many outputs were compared, and the first that
/// differed (where, and both values).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageResult {
    pub checks: usize,
    pub first_mismatch: Option<String>,
    pub mismatches: usize,
}

/// Every stage's result, by stage name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    pub stages: BTreeMap<&'static str, StageResult>,
}

impl Findings {
    pub fn passed(&self) -> bool {
        self.stages.values().all(|s| s.mismatches == 0)
    }

    fn stage(&mut self, stage: &'static str) -> &mut StageResult {
        self.stages.entry(stage).or_default()
    }

    /// Compares an image of `width` columns; notes the first differing pixel.
    fn image<T: PartialEq + fmt::Display>(
        &mut self,
        stage: &'static str,
        what: &str,
        case: &dyn fmt::Display,
        width: usize,
        got: &[T],
        want: &[T],
    ) {
        let s = self.stage(stage);
        s.checks += 1;
        let first = got.iter().zip(want).position(|(g, w)| g != w);
        if first.is_none() && got.len() == want.len() {
            return;
        }
        s.mismatches += 1;
        if s.first_mismatch.is_some() {
            return;
        }
        s.first_mismatch = Some(match first {
            Some(i) => format!(
                "{what}, {case}: first difference at (x {}, y {}): device {}, reference {} \
                 ({} of {} values differ)",
                i % width.max(1),
                i / width.max(1),
                got[i],
                want[i],
                got.iter().zip(want).filter(|(g, w)| g != w).count(),
                want.len()
            ),
            None => format!(
                "{what}, {case}: {} values from the device, {} from the reference",
                got.len(),
                want.len()
            ),
        });
    }

    /// Compares two histograms; notes the first differing bin.
    fn bins(
        &mut self,
        stage: &'static str,
        what: &str,
        case: &dyn fmt::Display,
        got: &[u32],
        want: &[u32],
    ) {
        let s = self.stage(stage);
        s.checks += 1;
        let Some(bin) = got.iter().zip(want).position(|(g, w)| g != w) else {
            return;
        };
        s.mismatches += 1;
        if s.first_mismatch.is_none() {
            s.first_mismatch = Some(format!(
                "{what}, {case}: first difference in bin {bin}: device {}, reference {}",
                got[bin], want[bin]
            ));
        }
    }

    /// Compares one value (a threshold, a region's sums).
    fn value<T: PartialEq + fmt::Debug>(
        &mut self,
        stage: &'static str,
        what: &str,
        case: &dyn fmt::Display,
        got: T,
        want: T,
    ) {
        let s = self.stage(stage);
        s.checks += 1;
        if got == want {
            return;
        }
        s.mismatches += 1;
        if s.first_mismatch.is_none() {
            s.first_mismatch = Some(format!(
                "{what}, {case}: device {got:?}, reference {want:?}"
            ));
        }
    }
}

/// One synthetic frame: its layout, options and regions.
pub struct Case {
    pub layout: FrameLayout,
    pub options: PipelineOptions,
    pub regions: Vec<Region>,
    pub frame: Vec<u8>,
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.layout;
        write!(
            f,
            "{} {}x{} stride {}, border {}, {:?}, edge threshold {}",
            l.format,
            l.width,
            l.height,
            l.stride,
            self.options.border.name(),
            self.options.magnitude,
            self.options.edge_threshold
        )
    }
}

/// xorshift64*: the frames are the same on every machine and every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Sizes no work-group size divides, the smallest there are, and one of a camera's order.
const SIZES: [(u32, u32); 5] = [(37, 19), (17, 3), (1, 1), (33, 2), (15, 7)];
/// Bytes of padding after each row: strides wider than the width.
const PADDING: [u32; 4] = [0, 16, 3, 1];

/// The frames: every format at one awkward size of [`SIZES`] with one [`PADDING`], border
/// modes and magnitudes in turn, random bytes (high bits above a raw format's depth
/// included) with structure in their top rows so that Otsu and the edges have something
/// to find, three random regions each; then grey and YUYV at 641x479 with wide strides.
pub fn cases() -> Vec<Case> {
    let mut rng = Rng(0x5e1f_7e57);
    let mut layouts: Vec<FrameLayout> = PixelFormat::ALL
        .iter()
        .enumerate()
        .map(|(i, &format)| {
            let (w, h) = SIZES[i % SIZES.len()];
            FrameLayout {
                stride: format.row_bytes(w) as u32 + PADDING[i % PADDING.len()],
                ..FrameLayout::packed(format, w, h)
            }
        })
        .collect();
    for format in [PixelFormat::Grey, PixelFormat::Yuyv] {
        layouts.push(FrameLayout {
            stride: format.row_bytes(641) as u32 + 64,
            ..FrameLayout::packed(format, 641, 479)
        });
    }
    layouts
        .into_iter()
        .enumerate()
        .map(|(i, layout)| {
            let mut frame: Vec<u8> = (0..layout.frame_bytes())
                .map(|_| rng.next() as u8)
                .collect();
            let smooth = frame.len() / 3;
            for (j, b) in frame[..smooth].iter_mut().enumerate() {
                *b = (j / 7 % 256) as u8;
            }
            let options = PipelineOptions {
                border: Border::ALL[i % Border::ALL.len()],
                magnitude: [Magnitude::L1, Magnitude::L2][i / 3 % 2],
                edge_threshold: 1 + rng.below(255) as u8,
            };
            let regions = (0..3)
                .map(|r| {
                    let x = rng.below(u64::from(layout.width)) as u32;
                    let y = rng.below(u64::from(layout.height)) as u32;
                    Region {
                        name: format!("r{r}"),
                        x,
                        y,
                        width: 1 + rng.below(u64::from(layout.width - x)) as u32,
                        height: 1 + rng.below(u64::from(layout.height - y)) as u32,
                    }
                })
                .collect();
            Case {
                layout,
                options,
                regions,
                frame,
            }
        })
        .collect()
}

/// Runs every case through the pipeline on `gpu` with each of `tunings`, the full images
/// discarded (as the daemon runs) and, for every third case, kept (as `process --raw`
/// does: other kernels), and compares every output with the reference.
pub fn run(
    gpu: &Gpu,
    tunings: &[Tuning],
    mut progress: impl FnMut(&Tuning, usize, usize),
) -> Result<Findings, PipelineError> {
    let cases = cases();
    let mut findings = Findings::default();
    for tuning in tunings {
        for (i, case) in cases.iter().enumerate() {
            progress(tuning, i, cases.len());
            for images in [FullImages::Discarded, FullImages::Kept] {
                if images == FullImages::Kept && i % 3 != 0 {
                    continue;
                }
                let setup = Setup {
                    tuning: *tuning,
                    images,
                };
                check_case(gpu, case, setup, &mut findings)?;
            }
        }
    }
    Ok(findings)
}

/// A case's label with its setup.
struct Labelled<'a>(&'a Case, Setup);

impl fmt::Display for Labelled<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let images = match self.1.images {
            FullImages::Kept => "full images kept",
            FullImages::Discarded => "full images discarded",
        };
        write!(f, "{}, {} tuning, {images}", self.0, self.1.tuning.name())
    }
}

fn check_case(
    gpu: &Gpu,
    case: &Case,
    setup: Setup,
    findings: &mut Findings,
) -> Result<(), PipelineError> {
    let mut pipeline = Pipeline::with_setup(gpu, case.layout, case.options, &case.regions, setup)?;
    pipeline.set_health_grid(gpu, Some(health::GRID))?;
    let mut slot = pipeline.new_slot(gpu)?;
    slot.write_bytes(gpu, &case.frame)?;
    let result = pipeline.process(gpu, &slot)?;
    let pictures = result.read_pictures(gpu)?;
    let label = Labelled(case, setup);
    compare_frame(
        findings,
        &label,
        &case.layout,
        case.options,
        &case.frame,
        &result,
        &pictures,
        &case.regions,
    );
    if setup.images == FullImages::Kept {
        let images = result.read_images(gpu)?;
        let (w, h) = (case.layout.width as usize, case.layout.height as usize);
        let luma = reference::luma(&case.layout, &case.frame);
        let (dx, dy) = reference::sobel(&luma, w, h, case.options.border);
        let magnitude = reference::magnitude(&dx, &dy, case.options.magnitude);
        let edges = reference::edge_mask(&magnitude, case.options.edge_threshold);
        let mask = reference::binarize(
            &luma,
            reference::otsu_threshold(&reference::histogram(&luma)),
        );
        findings.image("sobel", "dx", &label, w, &images.dx, &dx);
        findings.image("sobel", "dy", &label, w, &images.dy, &dy);
        findings.image("sobel", "edge mask", &label, w, &images.edges, &edges);
        findings.image("otsu", "kept mask", &label, w, &images.pictures.mask, &mask);
        let (sum, sqsum) = reference::integral(&luma, w, h);
        findings.image("integral", "sum", &label, w + 1, &images.integral_sum, &sum);
        findings.image(
            "integral",
            "squares",
            &label,
            w + 1,
            &images.integral_sqsum,
            &sqsum,
        );
        let counts = [
            ("edge counts", &images.integral_edges, &edges),
            ("foreground counts", &images.integral_foreground, &mask),
        ];
        for (what, got, of) in counts {
            let want = reference::integral_count(of, w, h);
            findings.image("integral", what, &label, w + 1, got, &want);
        }
    }
    let broken = pipeline.broken_guards(gpu)?;
    findings.value(
        "integral",
        "guard bands after the outputs",
        &label,
        broken,
        vec![],
    );
    Ok(())
}

/// Compares one processed frame with the reference: luma, magnitude, the histograms, Otsu's
/// threshold and mask, the frame's, the regions' and the health cells' sums. What the
/// daemon reads back of every frame, so also what `verify_every` checks.
#[allow(clippy::too_many_arguments)]
pub fn compare_frame(
    findings: &mut Findings,
    case: &dyn fmt::Display,
    layout: &FrameLayout,
    options: PipelineOptions,
    frame: &[u8],
    result: &FrameResult,
    pictures: &Pictures,
    regions: &[Region],
) {
    let (w, h) = (layout.width as usize, layout.height as usize);
    let luma = reference::luma(layout, frame);
    findings.image("luma", "luma", case, w, &pictures.luma, &luma);
    let (dx, dy) = reference::sobel(&luma, w, h, options.border);
    let magnitude = reference::magnitude(&dx, &dy, options.magnitude);
    findings.image(
        "sobel",
        "magnitude",
        case,
        w,
        &pictures.magnitude,
        &magnitude,
    );
    let hist = reference::histogram(&luma);
    findings.bins(
        "histogram",
        "luma histogram",
        case,
        &result.histogram,
        &hist,
    );
    if result.gradient_sampled {
        let gradient = reference::histogram(&magnitude);
        let got = &result.gradient_histogram;
        findings.bins("histogram", "gradient histogram", case, got, &gradient);
    }
    let threshold = reference::otsu_threshold(&hist);
    findings.value("otsu", "threshold", case, result.otsu_threshold, threshold);
    let mask = reference::binarize(&luma, threshold);
    findings.image("otsu", "mask", case, w, &pictures.mask, &mask);

    let edges = reference::edge_mask(&magnitude, options.edge_threshold);
    let planes = reference::Planes {
        luma: &luma,
        edges: &edges,
        foreground: &mask,
        width: w,
    };
    let whole = Region {
        name: "(whole frame)".into(),
        x: 0,
        y: 0,
        width: layout.width,
        height: layout.height,
    };
    let mut measured = vec![(&whole, &result.frame)];
    measured.extend(regions.iter().zip(result.regions.iter().map(|(_, s)| s)));
    let cells = if result.cells.is_empty() {
        Vec::new()
    } else {
        region::grid(layout.width, layout.height, health::GRID.0, health::GRID.1)
    };
    measured.extend(cells.iter().zip(&result.cells));
    findings.value(
        "regions",
        "regions measured",
        case,
        result.regions.len() + result.cells.len(),
        regions.len() + cells.len(),
    );
    for (region, stats) in measured {
        let want: RegionStats = reference::region_sums(&planes, region);
        let what = format!("region '{}' sums", region.name);
        findings.value("regions", &what, case, *stats, want);
    }
}
