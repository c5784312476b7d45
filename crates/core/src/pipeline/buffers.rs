//! The pipeline's memory: device images with guard bands, the small buffers, and the host
//! memory the small results are read back into, with the queue drain that keeps the
//! device from writing into it once it may be freed.

use opencl3::event::Event;
use opencl3::memory::{Buffer, ClMem, CL_BUFFER_CREATE_TYPE_REGION, CL_MEM_READ_WRITE};
use opencl3::types::{cl_buffer_region, cl_mem, CL_NON_BLOCKING};

use crate::cl::{new_buffer, read_blocking, write_blocking, CallContext, ClError, Gpu, Plain};

/// A device buffer of `len` elements (at least one: OpenCL refuses empty buffers).
pub(super) fn device_buffer<T>(gpu: &Gpu, len: usize) -> Result<Buffer<T>, ClError> {
    new_buffer(gpu, CL_MEM_READ_WRITE, len).call("clCreateBuffer")
}

/// The bytes `buffer` holds on the device (its `CL_MEM_SIZE`, guard bands included).
pub(super) fn held_bytes<T>(buffer: &Buffer<T>) -> Result<u64, ClError> {
    let size = buffer.size().call("clGetMemObjectInfo(CL_MEM_SIZE)")?;
    Ok(size as u64)
}

/// Elements a guard band holds past the end of every per-pixel buffer. The band is filled
/// with a sentinel when the buffer is made, so tests can prove that no kernel's tail writes
/// beyond the image ([`Pipeline::broken_guards`]).
pub(super) const GUARD_ELEMENTS: usize = 64;

/// An element type with a recognisable guard value.
pub(crate) trait Sentinel: Plain + PartialEq {
    const SENTINEL: Self;
}
impl Sentinel for u8 {
    const SENTINEL: u8 = 0xA5;
}
impl Sentinel for u16 {
    const SENTINEL: u16 = 0xA55A;
}
impl Sentinel for i16 {
    const SENTINEL: i16 = 0x5A5A;
}
impl Sentinel for u32 {
    const SENTINEL: u32 = 0xA5A5_5A5A;
}
impl Sentinel for u64 {
    const SENTINEL: u64 = 0xA5A5_5A5A_A5A5_5A5A;
}

/// A device buffer of `len` elements followed by a guard band.
pub(crate) struct DeviceImage<T> {
    pub buf: Buffer<T>,
    pub len: usize,
}

impl<T: Sentinel> DeviceImage<T> {
    pub(super) fn new(gpu: &Gpu, len: usize) -> Result<DeviceImage<T>, ClError> {
        let mut buf = device_buffer::<T>(gpu, len + GUARD_ELEMENTS)?;
        write_blocking(gpu, &mut buf, len, &[T::SENTINEL; GUARD_ELEMENTS])?;
        Ok(DeviceImage { buf, len })
    }

    pub(super) fn read(&self, gpu: &Gpu) -> Result<Vec<T>, ClError> {
        read_buffer(gpu, &self.buf, self.len)
    }

    /// [`DeviceImage::read`] into `out`, in the memory it has once it is large enough.
    pub(super) fn read_into(&self, gpu: &Gpu, out: &mut Vec<T>) -> Result<(), ClError> {
        read_buffer_into(gpu, &self.buf, self.len, out)
    }

    pub(super) fn guard_intact(&self, gpu: &Gpu) -> Result<bool, ClError> {
        let mut guard = [T::default(); GUARD_ELEMENTS];
        read_blocking(gpu, &self.buf, self.len, &mut guard)?;
        Ok(guard.iter().all(|&g| g == T::SENTINEL))
    }
}

/// Reads a whole device buffer (blocking).
pub(super) fn read_buffer<T: Plain>(
    gpu: &Gpu,
    buffer: &Buffer<T>,
    len: usize,
) -> Result<Vec<T>, ClError> {
    let mut out = Vec::new();
    read_buffer_into(gpu, buffer, len, &mut out)?;
    Ok(out)
}

/// [`read_buffer`] into `out`, which allocates only where it is shorter than `len`.
pub(super) fn read_buffer_into<T: Plain>(
    gpu: &Gpu,
    buffer: &Buffer<T>,
    len: usize,
    out: &mut Vec<T>,
) -> Result<(), ClError> {
    out.resize(len, T::default());
    read_blocking(gpu, buffer, 0, out)
}

/// Where the small results sit in the one device buffer they are read back from, in u64
/// words: the histogram counts and the threshold (257 u32) first, then the gradient
/// histogram (256 u32), then the region sums, then the motion counts (68 u32) and each
/// region's moving pixels (a u64 each), each at an offset the device takes as a
/// sub-buffer's origin (`CL_DEVICE_MEM_BASE_ADDR_ALIGN`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ReadoutLayout {
    gradient_at: usize,
    sums_at: usize,
    sums: usize,
    motion_at: usize,
    regions: usize,
}

/// u32 words of the counts and the threshold.
const RESULTS_WORDS: usize = 257;
/// u32 words of the gradient histogram.
const GRADIENT_WORDS: usize = 256;
/// u32 words of the motion counts before the regions' moving pixels.
const MOTION_STATS_WORDS: usize = super::motion_tiles::STATS_WORDS;

impl ReadoutLayout {
    /// For `regions` regions (four sums each) on a device whose sub-buffers start at
    /// multiples of `align_bits` bits.
    pub(super) fn new(regions: usize, align_bits: u32) -> ReadoutLayout {
        let align = (align_bits as usize / 64).max(1);
        let gradient_at = RESULTS_WORDS.div_ceil(2).next_multiple_of(align);
        let sums_at = (gradient_at + GRADIENT_WORDS / 2).next_multiple_of(align);
        let sums = 4 * regions;
        let motion_at = (sums_at + sums.max(1)).next_multiple_of(align);
        ReadoutLayout {
            gradient_at,
            sums_at,
            sums,
            motion_at,
            regions,
        }
    }

    /// u64 words of the motion part: its counts, then a moving-pixel count a region.
    fn motion_len(&self) -> usize {
        MOTION_STATS_WORDS / 2 + self.regions
    }

    /// The buffer's length in u64 words.
    pub(super) fn len(&self) -> usize {
        self.motion_at + self.motion_len()
    }
}

/// The one device buffer a frame's small results are written to, through a sub-buffer for
/// each kernel that writes them, so that the host reads them all with one command.
pub(super) struct Readout {
    whole: Buffer<u64>,
    /// The counts and, at index 256, the threshold (the Otsu kernel's output).
    pub(super) results: Buffer<u32>,
    /// The gradient magnitude's counts, cleared before each frame that counts them.
    pub(super) gradient: Buffer<u32>,
    /// Four sums per region, the whole frame first.
    pub(super) sums: Buffer<u64>,
    /// The motion counts, then each region's moving pixels (as u64), the whole frame
    /// first.
    pub(super) motion: Buffer<u32>,
    pub(super) layout: ReadoutLayout,
}

impl Readout {
    pub(super) fn new(gpu: &Gpu, regions: usize) -> Result<Readout, ClError> {
        let align = gpu
            .device
            .mem_base_addr_align()
            .call("clGetDeviceInfo(CL_DEVICE_MEM_BASE_ADDR_ALIGN)")?;
        let layout = ReadoutLayout::new(regions, align);
        let whole: Buffer<u64> = device_buffer(gpu, layout.len())?;
        let part = |at: usize, bytes: usize| sub_buffer(&whole, 8 * at, bytes);
        Ok(Readout {
            results: Buffer::new(part(0, 4 * RESULTS_WORDS)?),
            gradient: Buffer::new(part(layout.gradient_at, 4 * GRADIENT_WORDS)?),
            sums: Buffer::new(part(layout.sums_at, 8 * layout.sums.max(1))?),
            motion: Buffer::new(part(layout.motion_at, 8 * layout.motion_len())?),
            whole,
            layout,
        })
    }

    /// The bytes the buffer holds (its sub-buffers hold none of their own).
    pub(super) fn held_bytes(&self) -> Result<u64, ClError> {
        held_bytes(&self.whole)
    }
}

/// A sub-buffer of `bytes` bytes at byte `origin` of `whole`, as a raw handle for the
/// caller to wrap with its element type.
fn sub_buffer(whole: &Buffer<u64>, origin: usize, bytes: usize) -> Result<cl_mem, ClError> {
    let region = cl_buffer_region {
        origin,
        size: bytes,
    };
    // SAFETY: `region` is a live local of the type CL_BUFFER_CREATE_TYPE_REGION takes; the
    // driver refuses a region outside the buffer or misaligned (CL_INVALID_VALUE,
    // CL_MISALIGNED_SUB_BUFFER_OFFSET) instead of making it.
    unsafe {
        opencl3::memory::create_sub_buffer(
            whole.get(),
            CL_MEM_READ_WRITE,
            CL_BUFFER_CREATE_TYPE_REGION,
            (&region as *const cl_buffer_region).cast(),
        )
    }
    .map_err(opencl3::error_codes::ClError)
    .call("clCreateSubBuffer")
}

/// Host memory a frame's small results are read back into without blocking, owned by the
/// pipeline: on the heap, so moving the pipeline does not move it, and never resized or
/// freed while a read into it may be pending, because `process_into` finishes the queue
/// on every way out ([`QueueDrain`]) before anything else can touch it.
pub(super) struct ReadBack {
    /// A copy of the device's [`Readout`] buffer.
    words: Vec<u64>,
    layout: ReadoutLayout,
    /// The last frame's read.
    pub(super) event: Option<Event>,
    /// A failure injected after the read was enqueued, to test what a failed frame leaves.
    #[cfg(test)]
    pub(super) fail_after_read: bool,
}

impl ReadBack {
    pub(super) fn new(layout: ReadoutLayout) -> ReadBack {
        ReadBack {
            words: vec![0; layout.len()],
            layout,
            event: None,
            #[cfg(test)]
            fail_after_read: false,
        }
    }

    /// Room for a new [`Readout`]'s results (outside `process_into`, so no read is
    /// pending).
    pub(super) fn resize(&mut self, layout: ReadoutLayout) {
        self.words.resize(layout.len(), 0);
        self.layout = layout;
    }

    /// What the device wrote, to be overwritten (a broken device, in tests).
    #[cfg(any(test, feature = "test-support"))]
    pub(super) fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }

    /// u32 word `i` of the buffer, as the device wrote it (host and device share their
    /// byte order: OpenCL devices of a host are of its endianness).
    fn word(&self, i: usize) -> u32 {
        let bytes = self.words[i / 2].to_ne_bytes();
        let half: [u8; 4] = if i.is_multiple_of(2) {
            [bytes[0], bytes[1], bytes[2], bytes[3]]
        } else {
            [bytes[4], bytes[5], bytes[6], bytes[7]]
        };
        u32::from_ne_bytes(half)
    }

    /// Count `i` of the histogram (0..256), or at 256 the threshold.
    pub(super) fn result(&self, i: usize) -> u32 {
        debug_assert!(i < RESULTS_WORDS);
        self.word(i)
    }

    /// Count `i` of the gradient histogram, on the frames that count it.
    pub(super) fn gradient(&self, i: usize) -> u32 {
        debug_assert!(i < GRADIENT_WORDS);
        self.word(2 * self.layout.gradient_at + i)
    }

    /// The region sums.
    pub(super) fn sums(&self) -> &[u64] {
        &self.words[self.layout.sums_at..self.layout.sums_at + self.layout.sums]
    }
    /// Word `i` of the motion counts (0..68).
    pub(super) fn motion_count(&self, i: usize) -> u32 {
        debug_assert!(i < MOTION_STATS_WORDS);
        self.word(2 * self.layout.motion_at + i)
    }
    /// The motion counts' histogram of the tiles' differences (their first words).
    pub(super) fn motion_histogram(&self) -> [u32; super::motion_tiles::DIFF_BINS] {
        std::array::from_fn(|i| self.motion_count(i))
    }
    /// Each region's moving pixels, the whole frame first.
    pub(super) fn moving_pixels(&self) -> &[u64] {
        let at = self.layout.motion_at + MOTION_STATS_WORDS / 2;
        &self.words[at..at + self.layout.regions]
    }

    /// Enqueues a non-blocking read of all of `readout` behind the frame's kernels.
    ///
    /// # Safety
    /// The queue must be finished before this memory is read, resized or freed: the
    /// device writes into it until the read completes.
    pub(super) unsafe fn enqueue(&mut self, gpu: &Gpu, readout: &Readout) -> Result<(), ClError> {
        self.event = None;
        debug_assert_eq!(self.layout, readout.layout);
        // SAFETY: the whole buffer into as many words of heap memory the pipeline owns
        // (both sized from the same layout, in `new` or `resize`, and a longer read would
        // be refused); the caller keeps it alive, unresized and unread until the queue is
        // finished.
        let read = unsafe {
            gpu.queue
                .enqueue_read_buffer(&readout.whole, CL_NON_BLOCKING, 0, &mut self.words, &[])
        }
        .call("clEnqueueReadBuffer(results)")?;
        self.event = Some(read);
        #[cfg(test)]
        if self.fail_after_read {
            return Err(ClError::Call {
                call: "a step after clEnqueueReadBuffer(results), failing as a test asked",
                code: opencl3::error_codes::ClError(opencl3::error_codes::CL_OUT_OF_RESOURCES),
            });
        }
        Ok(())
    }

    /// Leaks the memory a queue whose finish failed may still write into, and takes
    /// fresh memory in its place: a few kilobytes lost for a device that is failing,
    /// rather than a write into freed memory.
    pub(super) fn abandon(&mut self) {
        let len = self.words.len();
        std::mem::replace(&mut self.words, vec![0; len]).leak();
    }
}

/// Finishes `gpu`'s queue when dropped, so that however `process_into` ends (an error
/// after the reads were enqueued, a panic), the device has stopped writing into the
/// pipeline's read-back memory before the caller may free or move anything.
pub(super) struct QueueDrain<'a> {
    gpu: &'a Gpu,
    finished: bool,
}

impl<'a> QueueDrain<'a> {
    pub(super) fn new(gpu: &'a Gpu) -> QueueDrain<'a> {
        QueueDrain {
            gpu,
            finished: false,
        }
    }

    /// Waits for the queue, watching `last`, the last command enqueued
    /// ([`Gpu::wait_for`]), and says whether that worked.
    pub(super) fn finish(mut self, last: Option<&Event>) -> Result<(), ClError> {
        self.finished = true;
        self.gpu.wait_for(last)
    }
}

impl Drop for QueueDrain<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // Unwinding: nothing to report the error to.
            let _ = self.gpu.finish();
        }
    }
}

/// The intermediate images every pipeline keeps on the device (those only a pipeline with
/// its full images has belong to their stages: dx, dy and the edge mask to Sobel, the mask
/// to Otsu's binarize), and the small counts.
pub(super) struct DeviceImages {
    /// Luma, unless the stages read it from the slot itself (grey or NV12 packed at stride
    /// = width): then no luma buffer exists.
    pub(super) luma: Option<DeviceImage<u8>>,
    pub(super) magnitude: DeviceImage<u8>,
    /// The counts, zero between frames (the Otsu kernel clears them after reading).
    pub(super) hist: Buffer<u32>,
    /// Everything the host reads of a frame.
    pub(super) readout: Readout,
}

impl DeviceImages {
    /// The bytes these buffers hold on the device.
    pub(super) fn held_bytes(&self) -> Result<u64, ClError> {
        let images = self
            .luma
            .iter()
            .chain([&self.magnitude])
            .map(|i| held_bytes(&i.buf));
        let small = [held_bytes(&self.hist), self.readout.held_bytes()];
        images.chain(small).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::ReadoutLayout;

    /// The results' parts start where the device lets a sub-buffer start, in u64 words.
    #[test]
    fn the_readout_parts_start_at_the_devices_alignment() {
        // NVIDIA's 4096 bits (64 words), POCL's 1024 (16), a byte's 8 (a word, at least).
        for (align, gradient_at, sums_at, motion_at) in [
            (4096, 192, 320, 384),
            (1024, 144, 272, 288),
            (8, 129, 257, 269),
        ] {
            let layout = ReadoutLayout::new(3, align);
            let want = ReadoutLayout {
                gradient_at,
                sums_at,
                sums: 12,
                motion_at,
                regions: 3,
            };
            assert_eq!(layout, want, "{align} bits");
            // The motion counts' 68 u32, then a u64 a region.
            assert_eq!(layout.len(), motion_at + 34 + 3);
        }
    }
}
