//! Frame slots: host-mapped buffers a frame is written into and the kernels read from.
//!
//! Created with `CL_MEM_ALLOC_HOST_PTR`, so on a unified-memory GPU (Mali) the driver's own
//! pages are what the host writes through `clEnqueueMapBuffer`: no copy between capture and
//! kernels. A slot is allocated once and reused for every frame.

use std::ptr;

use opencl3::memory::{
    Buffer, ClMem, CL_MAP_WRITE_INVALIDATE_REGION, CL_MEM_ALLOC_HOST_PTR, CL_MEM_READ_ONLY,
};
use opencl3::types::{cl_mem, CL_BLOCKING};

use super::{CallContext, ClError, Gpu};

pub struct FrameSlot {
    buffer: Buffer<u8>,
    len: usize,
}

impl FrameSlot {
    /// A slot of `len` bytes (at least one).
    pub fn new(gpu: &Gpu, len: usize) -> Result<FrameSlot, ClError> {
        let buffer = unsafe {
            Buffer::<u8>::create(
                &gpu.context,
                CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_ONLY,
                len.max(1),
                ptr::null_mut(),
            )
            .call("clCreateBuffer(CL_MEM_ALLOC_HOST_PTR)")?
        };
        Ok(FrameSlot { buffer, len })
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
        let mut mapped: cl_mem = ptr::null_mut();
        unsafe {
            gpu.queue
                .enqueue_map_buffer(
                    &self.buffer,
                    CL_BLOCKING,
                    CL_MAP_WRITE_INVALIDATE_REGION,
                    0,
                    self.len,
                    &mut mapped,
                    &[],
                )
                .call("clEnqueueMapBuffer")?;
        }
        // SAFETY: a blocking map returns a pointer to `len` bytes that stay valid and
        // unaliased by the device until the unmap below.
        let bytes = unsafe { std::slice::from_raw_parts_mut(mapped as *mut u8, self.len) };
        let result = fill(bytes);
        unsafe {
            gpu.queue
                .enqueue_unmap_mem_object(self.buffer.get(), mapped, &[])
                .call("clEnqueueUnmapMemObject")?;
        }
        Ok(result)
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
}
