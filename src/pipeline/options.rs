//! What the pipeline computes (border, magnitude, edge threshold), the device-dependent
//! work-size choices ([`Tuning`]) that change how, never what, and how a pipeline is built
//! ([`Setup`]: the tuning and whether it keeps the full images, [`FullImages`]).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::cl::Gpu;

/// How Sobel reads pixels outside the frame (OpenCV's border types).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Border {
    /// `gfedcb|abcdefgh|gfedcba`, OpenCV's default `BORDER_REFLECT_101`.
    #[default]
    Reflect101,
    /// `aaaaaa|abcdefgh|hhhhhhh`, `BORDER_REPLICATE`.
    Replicate,
    /// `000000|abcdefgh|0000000`, `BORDER_CONSTANT` with 0.
    Constant,
}

impl Border {
    pub const ALL: [Border; 3] = [Border::Reflect101, Border::Replicate, Border::Constant];

    pub fn name(self) -> &'static str {
        match self {
            Border::Reflect101 => "reflect101",
            Border::Replicate => "replicate",
            Border::Constant => "constant",
        }
    }

    /// The code sobel.cl's `border` argument takes.
    pub(super) fn kernel_code(self) -> i32 {
        match self {
            Border::Reflect101 => 0,
            Border::Replicate => 1,
            Border::Constant => 2,
        }
    }
}

impl fmt::Display for Border {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown border mode '{0}' (expected reflect101, replicate or constant)")]
pub struct UnknownBorder(pub String);

impl FromStr for Border {
    type Err = UnknownBorder;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().replace(['_', '-'], "").as_str() {
            "reflect101" | "default" => Ok(Border::Reflect101),
            "replicate" => Ok(Border::Replicate),
            "constant" => Ok(Border::Constant),
            _ => Err(UnknownBorder(s.to_string())),
        }
    }
}

/// How the 8-bit gradient magnitude is computed from dx and dy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Magnitude {
    /// `min(|dx| + |dy|, 255)`.
    #[default]
    L1,
    /// `min(round(sqrt(dx² + dy²)), 255)`.
    L2,
}

impl FromStr for Magnitude {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "l1" => Ok(Magnitude::L1),
            "l2" => Ok(Magnitude::L2),
            _ => Err(format!("unknown magnitude '{s}' (expected l1 or l2)")),
        }
    }
}

/// Options of the per-frame computation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PipelineOptions {
    pub border: Border,
    pub magnitude: Magnitude,
    /// A pixel is an edge where its magnitude is at least this.
    pub edge_threshold: u8,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            border: Border::Reflect101,
            magnitude: Magnitude::L1,
            edge_threshold: 64,
        }
    }
}

/// Whether a pipeline keeps the full per-pixel images that only `process --raw` and
/// `capture --raw` write out: Sobel's dx, dy and edge mask, the foreground mask, and the
/// integral images in OpenCV's layout. Fixed when the pipeline is built: it decides which
/// buffers exist and how the Sobel program is compiled, so it is part of [`Setup`], never
/// of [`PipelineOptions`] (which a reload changes and reports show). Either way every
/// result (histogram, threshold, region sums) and the luma and magnitude images are the
/// same: the integral stage counts edges and foreground from magnitude and luma itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FullImages {
    /// dx and dy are computed in registers for the magnitude and never stored, the edge
    /// mask and the foreground mask are never written (no `binarize` launch), and the
    /// integrals stay in their compact form: no buffers for any of them. What the daemon
    /// and `bench` run; [`FrameImages::read_pictures`](super::FrameImages::read_pictures)
    /// still gives luma, magnitude and the mask.
    #[default]
    Discarded,
    /// All of them are written (the OpenCV-layout integrals assembled when read) and read
    /// back by [`FrameImages::read_images`](super::FrameImages::read_images): for
    /// `process --raw` and `capture --raw`.
    Kept,
}

impl FullImages {
    /// The `-D` options sobel.cl takes for this choice.
    pub(super) fn sobel_defines(self) -> &'static str {
        match self {
            FullImages::Discarded => "-DNO_GRADIENTS -DNO_EDGE_MASK",
            FullImages::Kept => "",
        }
    }
}

/// How a pipeline is built, for its whole life (its kernels and buffers depend on it):
/// the work sizes and which images it keeps. Unlike [`PipelineOptions`], it is not
/// reloaded from the config nor written into reports; no choice here changes a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setup {
    pub tuning: Tuning,
    pub images: FullImages,
}

impl Setup {
    /// The work sizes suited to `gpu`, without the full images: what [`Pipeline::new`]
    /// builds.
    ///
    /// [`Pipeline::new`]: super::Pipeline::new
    pub fn for_device(gpu: &Gpu) -> Setup {
        Setup::with_tuning(Tuning::for_device(gpu))
    }

    /// `tuning`, without the full images.
    pub fn with_tuning(tuning: Tuning) -> Setup {
        Setup {
            tuning,
            images: FullImages::default(),
        }
    }
}

/// Work-size choices that depend on the device, not on what is computed: every choice
/// gives the same results, so tests run each one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// How the integral passes are laid out.
    pub integral_layout: IntegralLayout,
    /// How the histogram's work-groups count into their local sub-histogram.
    pub histogram_counting: HistogramCounting,
    /// How Otsu's threshold does OpenCV's double arithmetic.
    pub otsu_arithmetic: OtsuArithmetic,
    /// How many pixels a Sobel work-item computes.
    pub sobel_layout: SobelLayout,
    /// How Sobel, binarize and the CPU integral write their images.
    pub stores: Stores,
}

/// How the kernels that write whole images store them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stores {
    /// Ordinary stores (GPUs, which write whole lines without reading them first).
    Cached,
    /// Non-temporal stores for aligned vectors (CPUs: an ordinary store first reads the
    /// cache line it overwrites, a third more memory traffic for write-once images).
    Streaming,
}

impl Stores {
    /// The `-D` option the kernel files take for this choice.
    pub(super) fn define(self) -> &'static str {
        match self {
            Stores::Cached => "",
            Stores::Streaming => "-DSTREAMING_STORES",
        }
    }
}

/// The two Sobel kernels of `kernels/sobel.cl`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SobelLayout {
    /// 16 pixels per work-item with uchar16 vectors (CPUs: one SIMD register a row).
    Vector16,
    /// Four pixels per work-item with aligned 4-byte loads and vector stores, one pixel per
    /// item where the width is not a multiple of 4 (GPUs: neighbouring work-items read
    /// neighbouring words).
    FourPixelsPerItem,
}

/// The two ways `kernels/otsu.cl` computes in binary64.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtsuArithmetic {
    /// The integer emulation of binary64: any OpenCL 1.2 device (Mali Bifrost and Valhall
    /// have no fp64).
    Emulated,
    /// The device's own doubles where it offers `cl_khr_fp64` (correctly rounded add,
    /// subtract, multiply and divide, contraction off), else the emulation. A GPU runs the
    /// emulation's sequential part on one slow thread (BENCHMARKS.md, NVIDIA H100).
    NativeWhereAvailable,
}

/// The two layouts of the integral passes in `kernels/integral.cl`; both read the inputs
/// twice and write each image once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntegralLayout {
    /// GPUs: a work-group per band of rows, about one band per compute unit, scanning each
    /// row in chunks of four pixels per work-item (coalesced rows, many work-items).
    GroupBands,
    /// CPUs: a few bands of rows per compute unit, a work-item each, with 16-wide vector
    /// prefixes along the rows (one core streams through its band).
    ItemBands,
}

/// The two ways `kernels/histogram.cl` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistogramCounting {
    /// Many work-items per group share the sub-histogram through local atomics (GPUs,
    /// where local memory and its atomics are on chip).
    LocalAtomics,
    /// One work-item per group counts with plain increments: on a CPU local memory is
    /// ordinary memory and every atomic a locked instruction (several times faster on
    /// POCL: BENCHMARKS.md).
    OneItemPerGroup,
}

impl Tuning {
    /// The choices for GPUs.
    pub const FOR_GPU: Tuning = Tuning {
        integral_layout: IntegralLayout::GroupBands,
        histogram_counting: HistogramCounting::LocalAtomics,
        otsu_arithmetic: OtsuArithmetic::NativeWhereAvailable,
        sobel_layout: SobelLayout::FourPixelsPerItem,
        stores: Stores::Cached,
    };
    /// The choices for CPUs (POCL).
    pub const FOR_CPU: Tuning = Tuning {
        integral_layout: IntegralLayout::ItemBands,
        histogram_counting: HistogramCounting::OneItemPerGroup,
        otsu_arithmetic: OtsuArithmetic::Emulated,
        sobel_layout: SobelLayout::Vector16,
        stores: Stores::Streaming,
    };

    /// The choices for `gpu`'s kind of device.
    pub(crate) fn for_device(gpu: &Gpu) -> Tuning {
        if gpu.info.kind == "CPU" {
            Tuning::FOR_CPU
        } else {
            Tuning::FOR_GPU
        }
    }
}
