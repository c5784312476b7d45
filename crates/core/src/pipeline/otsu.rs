//! Otsu stage: `otsu_threshold` (one work-group; the threshold never leaves the device),
//! unless Sobel's launch runs that group ([`OtsuLaunch::BesideSobel`]) or the host works
//! it out from the counts read back while Sobel runs ([`OtsuArithmetic::Host`]), and, in a pipeline
//! that keeps its full images ([`FullImages`]), `binarize` (16 bytes per work-item over the
//! dense image as one flat run) into the foreground mask the stage then owns, from
//! `kernels/otsu.cl`. Without it nothing writes the mask: the integral stage counts the
//! foreground from luma and the threshold itself.

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::Buffer;
use opencl3::types::CL_NON_BLOCKING;

use super::buffers::DeviceImage;
use super::{FullImages, Launch, OtsuArithmetic, OtsuLaunch, Tuning};
use crate::cl::{launch, CallContext, ClError, Gpu, Record, OTSU_CL};
use crate::kernel_params;
use edgesight_frame::frame::FrameLayout;

/// Pixels one binarize work-item writes.
pub(crate) const PIXELS_PER_ITEM: usize = 16;

kernel_params! {
    /// The parameters of otsu.cl's `otsu_threshold`, which sobel.cl's kernels add when
    /// they run it (`-DOTSU_BESIDE`): the 256 counts it reads and clears, the frame's
    /// pixels, and the 257 words it writes (the counts, then the threshold).
    pub struct ThresholdParams<'a> {
        /// The 256 counts of the frame's luma levels, read and then zeroed for the next frame.
        pub hist: &'a Buffer<u32>,
        /// The frame's pixels (width × height), the sum of the counts.
        pub total: u32,
        /// The 257 words written: the counts of levels 0 to 255, then the threshold.
        pub results: &'a Buffer<u32>,
    }
}

kernel_params! {
    /// The parameters of otsu.cl's `binarize`.
    struct BinarizeParams<'a> {
        src: &'a Buffer<u8>,
        src_stride: u32,
        width: u32,
        height: u32,
        results: &'a Buffer<u32>,
        dst: &'a Buffer<u8>,
    }
}

/// The `binarize` kernel and the mask it writes, in a pipeline that keeps them.
struct Binarize {
    kernel: Kernel,
    launch: Launch,
    mask: DeviceImage<u8>,
}

/// Who works the threshold out.
enum Threshold {
    /// `otsu_threshold` and its one group.
    Kernel(Kernel, Launch),
    /// Sobel's launch ([`OtsuLaunch::BesideSobel`]).
    InSobel,
    /// The host ([`OtsuArithmetic::Host`]).
    Host(OnHost),
}

/// The host's side of [`OtsuArithmetic::Host`]: where the counts are read to, and the 257
/// words `otsu_threshold` would have written (the counts, then the threshold), written
/// from here. Heap memory that stays put while the device reads or writes it: the
/// pipeline finishes its queue before it returns from a frame, whatever happens.
struct OnHost {
    counts: Vec<u32>,
    words: Vec<u32>,
    /// The read of this frame's counts.
    read: Option<Event>,
}

pub(super) struct OtsuStage {
    threshold: Threshold,
    binarize: Option<Binarize>,
}

/// Most work-items of the threshold's one work-group: one per histogram bin.
pub(super) const THRESHOLD_GROUP_MAX: usize = 256;

/// The `-D` option that chooses how otsu.cl computes in binary64 on `gpu`: every program
/// holding `otsu_group` is built with it (stores are each program's own choice).
pub(super) fn arithmetic_define(gpu: &Gpu, tuning: &Tuning) -> &'static str {
    let native = tuning.otsu_arithmetic == OtsuArithmetic::NativeWhereAvailable && gpu.info.fp64;
    if native {
        "-DOTSU_FP64"
    } else {
        ""
    }
}

impl OtsuStage {
    /// The stage for frames of `pixels` pixels; with [`FullImages::Kept`] it allocates the
    /// foreground mask and writes it on every frame.
    pub(super) fn new(
        gpu: &Gpu,
        tuning: &Tuning,
        images: FullImages,
        pixels: usize,
    ) -> Result<OtsuStage, ClError> {
        // Built only where one of its kernels is launched (the device keeps one build).
        let defines = format!(
            "{} {}",
            arithmetic_define(gpu, tuning),
            tuning.stores.define()
        );
        let program = || gpu.build_with(OTSU_CL, &defines);
        let threshold = match (tuning.otsu_arithmetic, tuning.otsu_launch) {
            (OtsuArithmetic::Host, _) => Threshold::Host(OnHost {
                counts: vec![0; 256],
                words: vec![0; 257],
                read: None,
            }),
            (_, OtsuLaunch::Own) => {
                let kernel = gpu.kernel(&*program()?, "otsu_threshold")?;
                // Fewer work-items score more thresholds each: the tuning's group size, as
                // its barriers are cheaper in a small group (Mali: Arm's OpenCL guide).
                let launch = Launch::one_d(
                    gpu,
                    &kernel,
                    tuning.group_size.clamp(1, THRESHOLD_GROUP_MAX),
                )?;
                Threshold::Kernel(kernel, launch)
            }
            (_, OtsuLaunch::BesideSobel) => Threshold::InSobel,
        };
        let binarize = match images {
            FullImages::Kept => {
                let kernel = gpu.kernel(&*program()?, "binarize")?;
                let launch = Launch::one_d(gpu, &kernel, tuning.group_size)?;
                let mask = DeviceImage::new(gpu, pixels)?;
                Some(Binarize {
                    kernel,
                    launch,
                    mask,
                })
            }
            FullImages::Discarded => None,
        };
        Ok(OtsuStage {
            threshold,
            binarize,
        })
    }

    /// The foreground mask, when this stage keeps it.
    pub(super) fn mask(&self) -> Option<&DeviceImage<u8>> {
        self.binarize.as_ref().map(|b| &b.mask)
    }

    /// Enqueues the threshold of the counts in `hist`, where this stage launches it
    /// (`None` otherwise: Sobel's launch does, and nothing is enqueued), or, where the host
    /// works it out, the read of the counts ([`OtsuStage::enqueue_from_host`] follows).
    pub(super) fn enqueue_threshold(
        &mut self,
        gpu: &Gpu,
        hist: &Buffer<u32>,
        layout: &FrameLayout,
        results: &Buffer<u32>,
        record: Record,
    ) -> Result<Option<Event>, ClError> {
        let (kernel, threshold_launch) = match &mut self.threshold {
            Threshold::Kernel(kernel, launch) => (kernel, launch),
            Threshold::InSobel => return Ok(None),
            Threshold::Host(host) => {
                host.read = None;
                // SAFETY: 256 words into the 256 of `counts`, heap memory the stage
                // owns and neither reads nor resizes until the read has completed
                // (`enqueue_from_host` waits for it); the pipeline, the only caller,
                // finishes the queue before it returns from the frame, so the memory
                // outlives the read whatever happens.
                let read = unsafe {
                    gpu.queue
                        .enqueue_read_buffer(hist, CL_NON_BLOCKING, 0, &mut host.counts, &[])
                }
                .call("clEnqueueReadBuffer(histogram, for Otsu on the host)")?;
                host.read = Some(read);
                return Ok(None);
            }
        };
        let params = ThresholdParams {
            hist,
            total: layout.width * layout.height,
            results,
        };
        let local = threshold_launch.local[0];
        // SAFETY: `ThresholdParams` is the kernel's parameter list. Its one work-group
        // reads and clears the 256 counts of `hist` and writes them and the threshold to
        // the 257 words of `results`, whatever `total` is. The pipeline, the only caller,
        // passes its buffers of 256 and 257 words.
        unsafe {
            launch(
                gpu,
                kernel,
                &params,
                &[local],
                &[local],
                "clEnqueueNDRangeKernel(otsu_threshold)",
                record,
            )
        }
    }

    /// Whether a frame's threshold leaves the counts zeroed for the next, as the kernel
    /// does; where the host works it out, the next frame clears them first.
    pub(super) fn clears_histogram(&self) -> bool {
        !matches!(self.threshold, Threshold::Host(_))
    }

    /// Where the host works the threshold out: waits for the counts
    /// [`OtsuStage::enqueue_threshold`] read (the kernels enqueued since run meanwhile),
    /// works the threshold out as OpenCV does, and enqueues the writing of the 257 words
    /// `otsu_threshold` would have written to `results`. Nothing elsewhere.
    pub(super) fn enqueue_from_host(
        &mut self,
        gpu: &Gpu,
        results: &Buffer<u32>,
        record: Record,
    ) -> Result<Option<Event>, ClError> {
        let Threshold::Host(host) = &mut self.threshold else {
            return Ok(None);
        };
        let Some(read) = host.read.take() else {
            return Ok(None);
        };
        read.wait()
            .call("clWaitForEvents(the counts, for Otsu on the host)")?;
        let mut counts = [0u32; 256];
        counts.copy_from_slice(&host.counts);
        host.words[..256].copy_from_slice(&counts);
        host.words[256] = u32::from(otsu_threshold(&counts));
        // SAFETY: `words` is heap memory the stage owns and does not touch again before
        // the next frame, and the pipeline finishes the queue before it returns from this
        // one; no host mapping of `results` exists (the pipeline maps only frame slots).
        let wrote = unsafe {
            crate::cl::enqueue_write(
                &gpu.queue,
                results,
                &host.words,
                record,
                "clEnqueueWriteBuffer(Otsu's threshold from the host)",
            )
        }?;
        Ok(wrote)
    }

    /// Writes the foreground mask of `luma` where the stage keeps it (`None` otherwise:
    /// nothing is enqueued).
    pub(super) fn enqueue_binarize(
        &self,
        gpu: &Gpu,
        luma: &Buffer<u8>,
        layout: &FrameLayout,
        results: &Buffer<u32>,
        record: Record,
    ) -> Result<Option<Event>, ClError> {
        let Some(b) = &self.binarize else {
            return Ok(None);
        };
        let (width, height) = (layout.width, layout.height);
        let params = BinarizeParams {
            src: luma,
            // The kernel reads luma as one flat run: the pipeline's luma is dense (a slot
            // is read in place only at stride = width).
            src_stride: width,
            width,
            height,
            results,
            dst: &b.mask.buf,
        };
        let global = b
            .launch
            .global_1d(layout.pixels().div_ceil(PIXELS_PER_ITEM));
        // SAFETY: `BinarizeParams` is the kernel's parameter list. A work-item returns
        // unless its first pixel is below `count` = width * height = `pixels()`, reads and
        // writes at most 16 bytes from there but never past `count` (the tail goes byte by
        // byte), and reads the threshold at word 256 of `results`. The mask holds the
        // `pixels` bytes the stage was built for; the pipeline, the only caller, passes
        // luma of `pixels()` bytes (or a grey slot of at least that) and its 257-word
        // results, made for the one layout it (and this stage with it) was built for and
        // always passes.
        unsafe {
            launch(
                gpu,
                &b.kernel,
                &params,
                &[global],
                &[b.launch.local[0]],
                "clEnqueueNDRangeKernel(binarize)",
                record,
            )
        }
    }
}

/// Otsu's threshold exactly as OpenCV's own `getThreshVal_Otsu_8u` computes it (the code
/// `cv2.threshold(..., THRESH_OTSU)` runs without IPP): same doubles, same order of
/// operations, the first maximum kept.
pub fn otsu_threshold(hist: &[u32; 256]) -> u8 {
    let total: u64 = hist.iter().map(|&c| u64::from(c)).sum();
    let scale = 1.0 / total as f64;
    let mut mu = 0.0f64;
    for (i, &c) in hist.iter().enumerate() {
        mu += i as f64 * f64::from(c);
    }
    mu *= scale;
    let eps = f64::from(f32::EPSILON);
    let (mut mu1, mut q1) = (0.0f64, 0.0f64);
    let (mut max_sigma, mut max_val) = (0.0f64, 0u8);
    for (i, &c) in hist.iter().enumerate() {
        let p_i = f64::from(c) * scale;
        mu1 *= q1;
        q1 += p_i;
        let q2 = 1.0 - q1;
        if q1.min(q2) < eps || q1.max(q2) > 1.0 - eps {
            continue;
        }
        mu1 = (mu1 + i as f64 * p_i) / q1;
        let mu2 = (mu - q1 * mu1) / q2;
        let sigma = q1 * q2 * (mu1 - mu2) * (mu1 - mu2);
        if sigma > max_sigma {
            max_sigma = sigma;
            max_val = i as u8;
        }
    }
    max_val
}
