//! What the pipeline computes (border, magnitude, edge threshold), the device-dependent
//! work-size choices ([`Tuning`]) that change how, never what, and how a pipeline is built
//! ([`Setup`]: the tuning and whether it keeps the full images, [`FullImages`]).
//!
//! One room, long as it is: the options and tunings every stage reads, each tuning's
//! choices beside the reason for it, and their unit tests.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::cl::{ClDeviceInfo, Gpu};

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
    /// Every border mode, OpenCV's default first.
    pub const ALL: [Border; 3] = [Border::Reflect101, Border::Replicate, Border::Constant];

    /// The mode's name as the config and reports spell it: "reflect101", "replicate" or
    /// "constant".
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

/// A border mode that is none of reflect101, replicate and constant: the text as given.
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
    /// How Sobel reads the pixels beyond the frame's edges.
    pub border: Border,
    /// How the 8-bit gradient magnitude is made of dx and dy (L1 or L2).
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
    /// The device-dependent work sizes and kernel variants.
    pub tuning: Tuning,
    /// Whether the pipeline keeps its full per-pixel images (`process --raw`) or never makes them.
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
    /// Which launch Otsu's one work-group is part of.
    pub otsu_launch: OtsuLaunch,
    /// How many pixels a Sobel work-item computes.
    pub sobel_layout: SobelLayout,
    /// How Sobel, binarize and the CPU integral write their images.
    pub stores: Stores,
    /// Work-items per group of the 1-D kernels (binarize, Otsu's one group, the histogram
    /// where a group shares its sub-histogram or counts in global memory), fewer where a
    /// kernel allows fewer; the 2-D kernels (luma, Sobel) take 16 x 4 with every tuning.
    pub group_size: usize,
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

/// The Sobel kernels of `kernels/sobel.cl` and how much of a row one work-item takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SobelLayout {
    /// 16 pixels per work-item with uchar16 vectors (128-bit loads and stores).
    Vector16,
    /// [`SOBEL_RUN_CHUNKS`] runs of 16 pixels along a row per work-item, uchar16 vectors
    /// (CPUs: the row's set-up, as many instructions as 16 pixels' arithmetic, is paid
    /// once per run; 1.9x faster on POCL: bench/notes/round3.md#cpu-opencv).
    Vector16Runs,
    /// Four pixels per work-item with aligned 4-byte loads and vector stores, in `rows`
    /// rows that share their source rows (`QUAD_ROWS` in sobel.cl); one pixel per item
    /// where the width is not a multiple of 4 (GPUs: neighbouring work-items read
    /// neighbouring words).
    FourPixelsPerItem {
        /// Rows of four pixels one work-item computes, one under another (sobel.cl's
        /// `QUAD_ROWS`): 2 under the GPU tuning, 1 under the Mali one.
        rows: usize,
    },
}

/// The 16-pixel runs one work-item of [`SobelLayout::Vector16Runs`] computes: 128 pixels,
/// so a 640-pixel row still gives 5 work-items to share among cores.
pub const SOBEL_RUN_CHUNKS: usize = 8;

/// Where and how Otsu's threshold does OpenCV's double arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtsuArithmetic {
    /// The integer emulation of binary64: any OpenCL 1.2 device (Mali Bifrost and Valhall
    /// have no fp64).
    Emulated,
    /// The device's own doubles where it offers `cl_khr_fp64` (correctly rounded add,
    /// subtract, multiply and divide, contraction off), else the emulation. A GPU runs the
    /// emulation's sequential part on one slow thread
    /// (bench/notes/round2.md#h100-what-changed).
    NativeWhereAvailable,
    /// The host's doubles: the counts read back as soon as the histogram is counted,
    /// while Sobel runs; the threshold worked out on the host (OpenCV's own loop, as the
    /// reference runs it) and written back before the stages that read it. No kernel: a
    /// GPU without fp64 (Bifrost, Valhall) would run the emulation's 256 sequential steps,
    /// each with software 64-bit divisions, on one thread, 23,000 instructions with
    /// spills on a Mali-G52 (bench/notes/mali-compiler.md#mali-decisions).
    Host,
}

/// Which launch runs Otsu's one work-group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtsuLaunch {
    /// Its own launch, after the histogram's and before Sobel's (CPUs, which gain nothing
    /// from one launch fewer, and Mali, whose Sobel would give every work-group Otsu's
    /// local memory).
    Own,
    /// The first work-group of Sobel's launch, which Sobel's start one row of groups later
    /// (GPUs): Sobel never reads the threshold, so the GPU runs Otsu's chain beside
    /// Sobel's groups, and the frame has one launch fewer. Its time is Sobel's then.
    BesideSobel,
}

/// The layouts of the integral passes in `kernels/integral.cl`; each reads luma and the
/// magnitude once and writes the blocked integrals once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntegralLayout {
    /// Mali: a work-item per 16 x 16 tile, registers only (no local memory, no barriers:
    /// Arm's guide), then a scan of the tiles along each row. On an NVIDIA H100 its tile
    /// pass is several times slower than [`IntegralLayout::GroupBands`]'
    /// (bench/notes/code-comment-figures.md#item-tiles),
    /// so [`Tuning::FOR_GPU`] keeps that one.
    ItemTiles,
    /// Bifrost and Valhall Malis: as [`IntegralLayout::ItemTiles`], but a work-item per
    /// part of a tile (its sum, squared sum, edges or foreground), four columns at a time,
    /// so that it fits the 32 registers those GPUs give a thread at full occupancy.
    TileParts,
    /// GPUs: a work-group per run of tiles of a band, one barrier between the prefixes
    /// along each tile row (a work-item per row, in registers) and those down each column
    /// (a work-item per column, through local memory), so that loads and stores are whole
    /// runs of neighbouring bytes; then the scans along each row and down each column in
    /// one launch, and the corners, each line's scan split among a group's work-items.
    /// The region sums take a work-group a region with it, a work-item a region with the
    /// other two layouts.
    GroupBands,
    /// CPUs: a few runs of bands per compute unit, a work-item each, tile after tile with
    /// 16-lane vector prefixes (one core streams through its bands).
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
    /// POCL: bench/notes/round2.md#comment-figures).
    OneItemPerGroup,
    /// Every work-item counts into its own sub-histogram in global memory (16-bit counts
    /// packed in pairs) with plain increments, and a second kernel adds the sub-histograms
    /// bin by bin: no atomics, no local memory, no barriers (Mali, where local memory is
    /// the same cached system memory as global memory and its atomics are no cheaper).
    ItemSubHistograms,
}

impl Tuning {
    /// The choices for GPUs.
    pub const FOR_GPU: Tuning = Tuning {
        integral_layout: IntegralLayout::GroupBands,
        histogram_counting: HistogramCounting::LocalAtomics,
        otsu_arithmetic: OtsuArithmetic::NativeWhereAvailable,
        otsu_launch: OtsuLaunch::BesideSobel,
        // Two rows a work-item: the shortest Sobel on an NVIDIA H100; 4 are no faster and 8
        // slower (bench/notes/sobel-two-rows.md#sobel-two-rows).
        sobel_layout: SobelLayout::FourPixelsPerItem { rows: 2 },
        stores: Stores::Cached,
        group_size: 256,
    };
    /// The choices for CPUs (POCL).
    pub const FOR_CPU: Tuning = Tuning {
        integral_layout: IntegralLayout::ItemBands,
        histogram_counting: HistogramCounting::OneItemPerGroup,
        otsu_arithmetic: OtsuArithmetic::Emulated,
        otsu_launch: OtsuLaunch::Own,
        sobel_layout: SobelLayout::Vector16Runs,
        stores: Stores::Streaming,
        group_size: 256,
    };

    /// The choices for Arm's Bifrost and Valhall GPUs (Mali-G: G31 to G78, G310 to G720),
    /// after Arm's Bifrost/Valhall OpenCL guide and what Mesa's Panfrost compiler makes of
    /// each kernel (`make mali-report`; BENCHMARKS.md#mali-compiler). Their compiler
    /// keeps 32 registers a thread at full occupancy (64 at half, more spilled to memory),
    /// splits a load it cannot prove aligned into byte loads, and their local memory is
    /// cached system memory whose atomics the core's load/store unit does:
    ///
    /// * Sobel four pixels a work-item from aligned 4-byte words, one row a work-item
    ///   ([`SobelLayout::FourPixelsPerItem`]): a 16-lane warp reads one 64-byte line, and
    ///   the kernel fits 32 registers with no spills (two rows, as on other GPUs, take it
    ///   past 32 and halve the threads), where Midgard's 16-pixel vectors take seven
    ///   thousand instructions and spill hundreds of registers.
    /// * The histogram counted in a work-group's local histogram with local atomics, each
    ///   bin added to the frame's once per group ([`HistogramCounting::LocalAtomics`], Arm
    ///   Compute Library's pattern): a work-item's own 512-byte global sub-histogram made a
    ///   warp's counts touch 8 to 16 cache lines and a core's share overflow its L1.
    /// * No fp64: Otsu's threshold is worked out on the host while Sobel runs
    ///   ([`OtsuArithmetic::Host`]), not by the emulation's chain on one GPU thread.
    /// * Ordinary stores ([`Stores::Cached`]), as [`Tuning::FOR_GPU`].
    /// * The integral's tile pass a work-item per part of a tile, four columns at a time
    ///   ([`IntegralLayout::TileParts`]): Midgard's work-item per tile holds 16-lane
    ///   accumulators of four parts and spills hundreds of registers.
    pub const FOR_MALI: Tuning = Tuning {
        integral_layout: IntegralLayout::TileParts,
        histogram_counting: HistogramCounting::LocalAtomics,
        otsu_arithmetic: OtsuArithmetic::Host,
        otsu_launch: OtsuLaunch::Own,
        sobel_layout: SobelLayout::FourPixelsPerItem { rows: 1 },
        stores: Stores::Cached,
        group_size: 64,
    };

    /// The choices for Arm's Midgard GPUs (Mali-T: T720 to T880), after Arm's Mali GPU Best
    /// Practices guide and Mali OpenCL developer guides: a vector architecture, 128-bit
    /// registers.
    ///
    /// * Local memory is system memory behind the same caches as global memory ("no
    ///   performance advantage"), and barriers or local memory keep the GPU from splitting
    ///   and merging work-groups as it schedules them: the histogram counts in global
    ///   memory without atomics, local memory or barriers
    ///   ([`HistogramCounting::ItemSubHistograms`]), and so does the integral.
    /// * Vector loads and stores of 128 bits, never wider ("use vload16() to load 16
    ///   bytes at a time"), neighbouring work-items on neighbouring bytes so that a quad's
    ///   loads merge: Sobel's uchar16 layout ([`SobelLayout::Vector16`]), which luma and
    ///   binarize have with every tuning.
    /// * Work-groups of 4 to 64 work-items, a multiple of 4, smaller where barriers remain
    ///   (Otsu's one group): 64 ([`Tuning::group_size`]; luma and Sobel take 16 x 4).
    /// * No fp64 on most: Otsu runs the integer emulation.
    /// * Ordinary stores ([`Stores::Cached`]): non-temporal stores spare a CPU the read of
    ///   a line it overwrites whole, which a GPU does not do (as [`Tuning::FOR_GPU`]), and
    ///   `__builtin_nontemporal_store` is a Clang builtin a vendor compiler need not take.
    /// * The integral: a work-item per tile, registers only ([`IntegralLayout::ItemTiles`]):
    ///   no local memory, no barriers, 64 work-items a group.
    pub const FOR_MIDGARD: Tuning = Tuning {
        integral_layout: IntegralLayout::ItemTiles,
        histogram_counting: HistogramCounting::ItemSubHistograms,
        otsu_arithmetic: OtsuArithmetic::Emulated,
        otsu_launch: OtsuLaunch::Own,
        sobel_layout: SobelLayout::Vector16,
        stores: Stores::Cached,
        group_size: 64,
    };

    /// Every tuning, by the name `[opencl] tuning` and `--tuning` give it: what tests and
    /// `bench` go through.
    pub const ALL: [(&'static str, Tuning); 4] = [
        ("gpu", Tuning::FOR_GPU),
        ("cpu", Tuning::FOR_CPU),
        ("mali", Tuning::FOR_MALI),
        ("midgard", Tuning::FOR_MIDGARD),
    ];

    /// Which launch runs Otsu's threshold: [`Tuning::otsu_launch`], or `None` where no
    /// kernel does ([`OtsuArithmetic::Host`]).
    pub(crate) fn otsu_kernel_launch(&self) -> Option<OtsuLaunch> {
        (self.otsu_arithmetic != OtsuArithmetic::Host).then_some(self.otsu_launch)
    }

    /// This tuning's name in [`Tuning::ALL`], or "custom" for one made otherwise.
    pub fn name(&self) -> &'static str {
        Tuning::ALL
            .iter()
            .find(|(_, t)| t == self)
            .map_or("custom", |(name, _)| name)
    }

    /// The choices for `gpu`'s kind of device.
    pub(crate) fn for_device(gpu: &Gpu) -> Tuning {
        Tuning::for_info(&gpu.info)
    }

    /// The choices for the device `info` describes: what `auto` picks and `edgesight
    /// devices` shows.
    pub fn for_info(info: &ClDeviceInfo) -> Tuning {
        Tuning::for_description(info.kind, &info.name, &info.vendor)
    }

    /// CPUs get [`Tuning::FOR_CPU`], whatever their vendor (POCL on an Arm board may name
    /// Arm); devices whose name or vendor says Mali get [`Tuning::FOR_MIDGARD`] where the
    /// name says a Mali-T and [`Tuning::FOR_MALI`] otherwise (Arm's driver names the GPU
    /// "Mali-G610 r0p0" or "Mali-T860", Mesa's "Mali-G52 (Panfrost)"); other devices
    /// [`Tuning::FOR_GPU`].
    fn for_description(kind: &str, name: &str, vendor: &str) -> Tuning {
        let says_mali = |s: &str| s.to_ascii_lowercase().contains("mali");
        if kind == "CPU" {
            Tuning::FOR_CPU
        } else if name.to_ascii_lowercase().contains("mali-t") {
            Tuning::FOR_MIDGARD
        } else if says_mali(name) || says_mali(vendor) {
            Tuning::FOR_MALI
        } else {
            Tuning::FOR_GPU
        }
    }
}

/// Which tuning a pipeline is built with: the device's own ([`Tuning::for_info`]) or one
/// named in the config (`[opencl] tuning`, a camera's `opencl_tuning`) or on the command
/// line (`--tuning`), to run any tuning on any device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TuningChoice {
    /// The device's own.
    #[default]
    Auto,
    /// A tuning of [`Tuning::ALL`], whatever the device.
    Named(Tuning),
}

impl TuningChoice {
    /// The tuning a pipeline on `gpu` gets.
    pub fn resolve(self, gpu: &Gpu) -> Tuning {
        match self {
            TuningChoice::Auto => Tuning::for_device(gpu),
            TuningChoice::Named(tuning) => tuning,
        }
    }
}

impl fmt::Display for TuningChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TuningChoice::Auto => f.write_str("auto"),
            TuningChoice::Named(tuning) => f.write_str(tuning.name()),
        }
    }
}

/// A tuning that is none of auto, gpu, cpu, mali and midgard: the text as given.
#[derive(Debug, thiserror::Error)]
#[error("unknown tuning '{0}' (expected auto, gpu, cpu, mali or midgard)")]
pub struct UnknownTuning(pub String);

impl FromStr for TuningChoice {
    type Err = UnknownTuning;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        if wanted == "auto" {
            return Ok(TuningChoice::Auto);
        }
        Tuning::ALL
            .iter()
            .find(|(name, _)| *name == wanted)
            .map(|&(_, tuning)| TuningChoice::Named(tuning))
            .ok_or_else(|| UnknownTuning(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picked(kind: &str, name: &str, vendor: &str) -> &'static str {
        Tuning::for_description(kind, name, vendor).name()
    }

    #[test]
    fn mali_is_picked_by_name_or_vendor_and_cpus_stay_cpus() {
        assert_eq!(picked("GPU", "Mali-G610 r0p0", "ARM"), "mali");
        assert_eq!(picked("GPU", "Mali-T860", "ARM"), "midgard");
        assert_eq!(picked("GPU", "Mali-T860 (Panfrost)", "Mesa"), "midgard");
        assert_eq!(picked("GPU", "Mali-G52 (Panfrost)", "Arm"), "mali");
        assert_eq!(picked("GPU", "MALI-G52 r1", "arm"), "mali");
        assert_eq!(picked("GPU", "Mali-G57 (Panfrost)", "Mesa"), "mali");
        assert_eq!(picked("GPU", "G610", "ARM Mali"), "mali");
        // Arm as a vendor alone says nothing of Mali: POCL on an Arm board's cores.
        assert_eq!(picked("CPU", "cpu-aarch64-cortex-a76", "ARM"), "cpu");
        assert_eq!(picked("CPU", "pthread-haswell", "AuthenticAMD"), "cpu");
        assert_eq!(
            picked("GPU", "NVIDIA H100 80GB HBM3", "NVIDIA Corporation"),
            "gpu"
        );
        assert_eq!(picked("accelerator", "Some DSP", "ARM"), "gpu");
    }

    #[test]
    fn every_tuning_has_its_own_name_and_reads_back() {
        for (name, tuning) in Tuning::ALL {
            assert_eq!(tuning.name(), name);
            let choice: TuningChoice = name.parse().expect("a tuning's name");
            assert_eq!(choice, TuningChoice::Named(tuning));
            assert_eq!(choice.to_string(), name);
        }
        assert_eq!(
            " Mali ".parse::<TuningChoice>().ok(),
            Some(TuningChoice::Named(Tuning::FOR_MALI))
        );
        assert_eq!(
            "AUTO".parse::<TuningChoice>().ok(),
            Some(TuningChoice::Auto)
        );
        assert_eq!(TuningChoice::Auto.to_string(), "auto");
        assert_eq!(
            "bifrost".parse::<TuningChoice>().unwrap_err().to_string(),
            "unknown tuning 'bifrost' (expected auto, gpu, cpu, mali or midgard)"
        );
        let custom = Tuning {
            group_size: 32,
            ..Tuning::FOR_MALI
        };
        assert_eq!(custom.name(), "custom");
    }

    /// Arm's guides: groups of 4 to 64 work-items, a multiple of 4; no fp64 on Bifrost and
    /// Valhall. Midgard: nothing that needs local memory or barriers where a global or
    /// register form exists, 16-byte vectors. Bifrost and Valhall: what their compiler
    /// keeps in 32 registers without spills (make mali-report).
    #[test]
    fn the_mali_tunings_keep_to_the_guides() {
        for mali in [Tuning::FOR_MALI, Tuning::FOR_MIDGARD] {
            assert!(mali.group_size <= 64 && mali.group_size.is_multiple_of(4));
            assert_eq!(mali.stores, Stores::Cached);
            assert_eq!(mali.otsu_launch, OtsuLaunch::Own);
        }
        let midgard = Tuning::FOR_MIDGARD;
        assert_eq!(
            midgard.histogram_counting,
            HistogramCounting::ItemSubHistograms
        );
        assert_eq!(midgard.sobel_layout, SobelLayout::Vector16);
        assert_eq!(midgard.otsu_arithmetic, OtsuArithmetic::Emulated);
        let mali = Tuning::FOR_MALI;
        assert_eq!(mali.otsu_arithmetic, OtsuArithmetic::Host);
        assert_eq!(mali.histogram_counting, HistogramCounting::LocalAtomics);
        assert_eq!(
            mali.sobel_layout,
            SobelLayout::FourPixelsPerItem { rows: 1 }
        );
    }
}
