//! The pipeline's memory: device images with guard bands, the small buffers, and the host
//! memory the small results are read back into, with the queue drain that keeps the
//! device from writing into it once it may be freed.

use opencl3::event::Event;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::types::CL_NON_BLOCKING;

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
    let mut out = vec![T::default(); len];
    read_blocking(gpu, buffer, 0, &mut out)?;
    Ok(out)
}

/// Host memory the small results of a frame are read back into without blocking, owned
/// by the pipeline: on the heap, so moving the pipeline does not move it, and never
/// resized or freed while a read into it may be pending, because `process_into` finishes
/// the queue on every way out ([`QueueDrain`]) before anything else can touch it.
pub(super) struct ReadBack {
    /// The histogram counts and, at index 256, the threshold.
    pub(super) results: Box<[u32; 257]>,
    /// Four sums per region, the whole frame first.
    pub(super) sums: Vec<u64>,
    /// The gradient histogram, on the frames that count it.
    pub(super) gradient: Box<[u32; 256]>,
    /// The last frame's read commands.
    pub(super) events: [Option<Event>; 3],
    /// A failure injected between the two reads, to test what a failed frame leaves.
    #[cfg(test)]
    pub(super) fail_between_reads: bool,
}

impl ReadBack {
    pub(super) fn new(sums: usize) -> ReadBack {
        ReadBack {
            results: Box::new([0; 257]),
            sums: vec![0; sums],
            gradient: Box::new([0; 256]),
            events: [None, None, None],
            #[cfg(test)]
            fail_between_reads: false,
        }
    }

    /// Room for `len` region sums (outside `process_into`, so no read is pending).
    pub(super) fn resize_sums(&mut self, len: usize) {
        self.sums.resize(len, 0);
    }

    /// Enqueues non-blocking reads of `results`, `sums` and, when given, the gradient
    /// histogram behind the frame's kernels.
    ///
    /// # Safety
    /// The queue must be finished before this memory is read, resized or freed: the
    /// device writes into it until the reads complete.
    pub(super) unsafe fn enqueue(
        &mut self,
        gpu: &Gpu,
        results: &Buffer<u32>,
        sums: &Buffer<u64>,
        gradient: Option<&Buffer<u32>>,
    ) -> Result<(), ClError> {
        self.events = [None, None, None];
        // SAFETY: 257 words into 257 words of heap memory the pipeline owns; the caller
        // keeps it alive, unresized and unread until the queue is finished.
        let read = unsafe {
            gpu.queue
                .enqueue_read_buffer(results, CL_NON_BLOCKING, 0, &mut self.results[..], &[])
        }
        .call("clEnqueueReadBuffer(results)")?;
        self.events[0] = Some(read);
        #[cfg(test)]
        if self.fail_between_reads {
            return Err(ClError::Call {
                call: "clEnqueueReadBuffer(sums), failing as a test asked",
                code: opencl3::error_codes::ClError(opencl3::error_codes::CL_OUT_OF_RESOURCES),
            });
        }
        // SAFETY: as above; `sums` holds as many elements as the device buffer (both
        // sized from the regions in `set_regions`), and a longer read would be refused.
        let read = unsafe {
            gpu.queue
                .enqueue_read_buffer(sums, CL_NON_BLOCKING, 0, &mut self.sums, &[])
        }
        .call("clEnqueueReadBuffer(sums)")?;
        self.events[1] = Some(read);
        if let Some(gradient) = gradient {
            // SAFETY: 256 words into 256 words of heap memory the pipeline owns; as above.
            let read = unsafe {
                gpu.queue.enqueue_read_buffer(
                    gradient,
                    CL_NON_BLOCKING,
                    0,
                    &mut self.gradient[..],
                    &[],
                )
            }
            .call("clEnqueueReadBuffer(gradient histogram)")?;
            self.events[2] = Some(read);
        }
        Ok(())
    }

    /// The last read enqueued for this frame.
    pub(super) fn last_event(&self) -> Option<&Event> {
        self.events.iter().rev().flatten().next()
    }

    /// Leaks the memory a queue whose finish failed may still write into, and takes
    /// fresh memory in its place: a few kilobytes lost for a device that is failing,
    /// rather than a write into freed memory.
    pub(super) fn abandon(&mut self) {
        Box::leak(std::mem::replace(&mut self.results, Box::new([0; 257])));
        Box::leak(std::mem::replace(&mut self.gradient, Box::new([0; 256])));
        let len = self.sums.len();
        std::mem::replace(&mut self.sums, vec![0; len]).leak();
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
    /// The counts and, at index 256, the threshold: what the host reads of both.
    pub(super) results: Buffer<u32>,
    /// The gradient magnitude's counts, cleared before each frame that counts them.
    pub(super) gradient_hist: Buffer<u32>,
}

impl DeviceImages {
    /// The bytes these buffers hold on the device.
    pub(super) fn held_bytes(&self) -> Result<u64, ClError> {
        let images = self
            .luma
            .iter()
            .chain([&self.magnitude])
            .map(|i| held_bytes(&i.buf));
        let counts = [&self.hist, &self.results, &self.gradient_hist]
            .into_iter()
            .map(held_bytes);
        images.chain(counts).sum()
    }
}
