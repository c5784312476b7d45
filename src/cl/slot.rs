//! Frame slots: host-mapped buffers a frame is written into and the kernels read from.
//!
//! Created with `CL_MEM_ALLOC_HOST_PTR`, so on a unified-memory GPU (Mali) the driver's own
//! pages are what the host writes through `clEnqueueMapBuffer`: no copy between capture and
//! kernels. A slot is allocated once and reused for every frame.

use std::ptr::{self, NonNull};

use opencl3::memory::{
    Buffer, ClMem, CL_MAP_WRITE_INVALIDATE_REGION, CL_MEM_ALLOC_HOST_PTR, CL_MEM_READ_ONLY,
};
use opencl3::types::{cl_mem, CL_BLOCKING};

use super::{new_buffer, read_blocking, CallContext, ClError, Gpu};

pub struct FrameSlot {
    buffer: Buffer<u8>,
    len: usize,
    /// The host pointer while the slot is left mapped ([`FrameSlot::map`]).
    mapped: Option<HostPtr>,
}

/// A mapped slot's host address.
#[derive(Clone, Copy, Debug)]
struct HostPtr(NonNull<u8>);

// SAFETY: the pointer is only an address handed to a driver (V4L2 USERPTR) or back to
// clEnqueueUnmapMemObject; the slot never dereferences it, so moving it to another thread
// with the slot is as safe as moving the buffer itself.
unsafe impl Send for HostPtr {}

impl FrameSlot {
    /// A slot of `len` bytes (at least one).
    pub fn new(gpu: &Gpu, len: usize) -> Result<FrameSlot, ClError> {
        let buffer = new_buffer(gpu, CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_ONLY, len)
            .call("clCreateBuffer(CL_MEM_ALLOC_HOST_PTR)")?;
        Ok(FrameSlot {
            buffer,
            len,
            mapped: None,
        })
    }

    /// A slot around a buffer made elsewhere (an imported dma-buf), of `len` bytes.
    pub(crate) fn from_buffer(buffer: Buffer<u8>, len: usize) -> FrameSlot {
        FrameSlot {
            buffer,
            len,
            mapped: None,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn buffer(&self) -> &Buffer<u8> {
        &self.buffer
    }

    /// Maps the slot for writing (its old contents are discarded), lets `fill` write the
    /// frame, and unmaps it, so the next kernel on `gpu`'s queue sees the new frame.
    pub fn write<R>(&mut self, gpu: &Gpu, fill: impl FnOnce(&mut [u8]) -> R) -> Result<R, ClError> {
        let ptr = self.enqueue_map(gpu)?;
        // SAFETY: the blocking map returns, once every earlier command on the in-order
        // queue (kernels reading the slot) is done, a pointer to `len` bytes mapped for
        // writing that no command touches until the unmap below; `&mut self` keeps every
        // other user of the slot out meanwhile.
        let bytes = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), self.len) };
        let result = fill(bytes);
        self.enqueue_unmap(gpu, ptr)?;
        Ok(result)
    }

    /// A blocking map of the whole slot for writing, old contents discarded. (Mapping
    /// without blocking and polling the map, as a frame is waited for on NVIDIA's
    /// driver, measured the same there: BENCHMARKS.md.)
    fn enqueue_map(&self, gpu: &Gpu) -> Result<NonNull<u8>, ClError> {
        let mut mem: cl_mem = ptr::null_mut();
        // SAFETY: the call writes only `mem`, a live local, and maps bytes 0..len of the
        // slot's buffer, which holds at least `len` (it was made that size, or the driver
        // refuses the range with CL_INVALID_VALUE); blocking, so the mapping is ready when
        // it returns. Who may use the mapped bytes until the unmap is up to the callers
        // (`write` and `map`).
        unsafe {
            gpu.queue
                .enqueue_map_buffer(
                    &self.buffer,
                    CL_BLOCKING,
                    CL_MAP_WRITE_INVALIDATE_REGION,
                    0,
                    self.len,
                    &mut mem,
                    &[],
                )
                .call("clEnqueueMapBuffer")?;
        }
        NonNull::new(mem as *mut u8).ok_or(ClError::Call {
            call: "clEnqueueMapBuffer",
            code: opencl3::error_codes::ClError(opencl3::error_codes::CL_MAP_FAILURE),
        })
    }

    fn enqueue_unmap(&self, gpu: &Gpu, ptr: NonNull<u8>) -> Result<(), ClError> {
        // SAFETY: `ptr` is what `enqueue_map` returned for this buffer (`write` passes its
        // own map's address, `unmap` the one `map` kept, taken so it is unmapped once);
        // the host writes nothing there after this call.
        unsafe {
            gpu.queue
                .enqueue_unmap_mem_object(self.buffer.get(), ptr.as_ptr().cast(), &[])
                .call("clEnqueueUnmapMemObject")?;
        }
        Ok(())
    }

    /// Copies `frame` into the slot; `frame` must be exactly as long as the slot.
    pub fn write_bytes(&mut self, gpu: &Gpu, frame: &[u8]) -> Result<(), ClError> {
        assert_eq!(
            frame.len(),
            self.len,
            "frame length must equal the slot length"
        );
        self.write(gpu, |bytes| bytes.copy_from_slice(frame))
    }

    /// Maps the whole slot for writing (old contents discarded) and leaves it mapped: the
    /// returned address is where a device outside OpenCL (a camera's USERPTR buffer) may
    /// write the next frame. Kernels must not read the slot until [`FrameSlot::unmap`].
    /// Mapping a slot that is already mapped returns the same address.
    pub fn map(&mut self, gpu: &Gpu) -> Result<NonNull<u8>, ClError> {
        if let Some(HostPtr(ptr)) = self.mapped {
            return Ok(ptr);
        }
        let ptr = self.enqueue_map(gpu)?;
        self.mapped = Some(HostPtr(ptr));
        Ok(ptr)
    }

    /// Unmaps a slot left mapped by [`FrameSlot::map`], so kernels enqueued after this on
    /// `gpu`'s queue see what was written there. Does nothing if the slot is not mapped.
    pub fn unmap(&mut self, gpu: &Gpu) -> Result<(), ClError> {
        match self.mapped.take() {
            Some(HostPtr(ptr)) => self.enqueue_unmap(gpu, ptr),
            None => Ok(()),
        }
    }

    /// Reads the slot's bytes back (blocking): what the kernels see.
    pub fn read(&self, gpu: &Gpu) -> Result<Vec<u8>, ClError> {
        let mut out = vec![0u8; self.len];
        read_blocking(gpu, &self.buffer, 0, &mut out)?;
        Ok(out)
    }
}
