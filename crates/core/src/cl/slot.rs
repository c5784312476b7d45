//! Frame slots: host-mapped buffers a frame is written into and the kernels read from.
//!
//! Created with `CL_MEM_ALLOC_HOST_PTR`, so on a unified-memory GPU (Mali) the driver's own
//! pages are what the host writes through `clEnqueueMapBuffer`: no copy between capture and
//! kernels. A slot is allocated once and reused for every frame.

use std::ptr::NonNull;

use opencl3::memory::{Buffer, CL_MEM_ALLOC_HOST_PTR, CL_MEM_READ_ONLY};

use super::{new_buffer, raw, read_blocking, CallContext, ClError, Gpu};

/// A device buffer that each frame is written into (through a host mapping, or by the
/// camera into an imported dma-buf) and the kernels read; made once, reused every frame.
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
    pub fn from_buffer(buffer: Buffer<u8>, len: usize) -> FrameSlot {
        FrameSlot {
            buffer,
            len,
            mapped: None,
        }
    }

    /// The slot's size in bytes, as asked for (the buffer itself holds at least one).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the slot was asked for zero bytes (its buffer still holds one).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device buffer the kernels read the frame from.
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

    /// A blocking map of the whole slot for writing, old contents discarded. No event is
    /// asked for, here or in the unmap: nothing waits on them, and each event is work for
    /// the driver (NVIDIA's tracks them on a thread of its own). (Mapping without blocking
    /// and polling the map, as a frame is waited for on NVIDIA's driver, measured the same
    /// there: bench/notes/round3.md#host-cpu.)
    fn enqueue_map(&self, gpu: &Gpu) -> Result<NonNull<u8>, ClError> {
        // SAFETY: who may use the mapped bytes until the unmap, and that no command on the
        // slot is enqueued meanwhile, is up to the callers (`write` and `map`).
        unsafe { raw::enqueue_map_for_write(&gpu.queue, &self.buffer, self.len) }
    }

    fn enqueue_unmap(&self, gpu: &Gpu, ptr: NonNull<u8>) -> Result<(), ClError> {
        // SAFETY: `ptr` is what `enqueue_map` returned for this buffer (`write` passes its
        // own map's address, `unmap` the one `map` kept, taken so it is unmapped once) and
        // the host writes nothing there after this call.
        unsafe { raw::enqueue_unmap(&gpu.queue, &self.buffer, ptr) }
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
        let mut out = Vec::new();
        self.read_into(gpu, &mut out)?;
        Ok(out)
    }

    /// [`FrameSlot::read`] into `out`, which allocates only where it is shorter.
    pub fn read_into(&self, gpu: &Gpu, out: &mut Vec<u8>) -> Result<(), ClError> {
        out.resize(self.len, 0);
        read_blocking(gpu, &self.buffer, 0, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways of filling a slot (a closure, and an address left mapped as a camera's
    /// USERPTR buffer is): what the device sees (read back) is each frame just written,
    /// frame after frame, never the one before; mapping twice gives one address, and
    /// unmapping an unmapped slot does nothing.
    #[test]
    fn every_frame_written_is_what_the_device_sees() {
        let gpu = crate::cl::test_gpu();
        let len = 3 * 4099;
        let frame =
            |n: usize| -> Vec<u8> { (0..len).map(|i| ((i * 31 + n * 7) % 253) as u8).collect() };
        let mut slot = FrameSlot::new(&gpu, len).expect("slot");
        for n in 0..4 {
            if n % 2 == 0 {
                slot.write_bytes(&gpu, &frame(n)).expect("write");
            } else {
                let ptr = slot.map(&gpu).expect("map");
                assert_eq!(slot.map(&gpu).expect("map again"), ptr, "frame {n}");
                // SAFETY: a mapped slot's `len` bytes are the host's until the unmap.
                let bytes = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), len) };
                bytes.copy_from_slice(&frame(n));
                slot.unmap(&gpu).expect("unmap");
                slot.unmap(&gpu).expect("a second unmap does nothing");
            }
            assert!(slot.read(&gpu).expect("read") == frame(n), "frame {n}");
        }
    }
}
