//! Our own V4L2 streaming queue (not the `v4l` crate's streams, whose `Drop` panics on
//! some errors and which allocate their own USERPTR memory): requests the buffers, queues
//! and dequeues them, and hands out the [`FrameSlot`] each frame lies in.
//!
//! Three ways a frame reaches a slot, one per [`IoMode`]:
//! - dmabuf: V4L2's buffers exported (VIDIOC_EXPBUF) and imported into OpenCL; the slot
//!   *is* the camera buffer.
//! - userptr: the slots are mapped and their host addresses queued as V4L2 USERPTR
//!   buffers; a slot is unmapped when its frame is handed out (so kernels see it) and
//!   mapped and queued again when the caller asks for the next frame.
//! - mmap: V4L2's buffers mapped with `memmap2`, each frame copied once into one of two
//!   slots and the buffer queued again at once.
//!
//! Nothing here panics: indices are checked, every failure is an error value.
//!
//! This file starts and stops a stream (requesting, mapping or exporting the buffers and
//! queueing them all; STREAMOFF and freeing them); `frames.rs` dequeues and requeues
//! the frames of a running one.

use std::io;
use std::mem;
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Instant;

use memmap2::{Mmap, MmapOptions};
use v4l::v4l2::vidioc;
use v4l::v4l_sys::*;

use super::device::{BufType, Device};
use super::dmabuf::DmabufImporter;
use crate::capture::{DropReason, IoMode};
use crate::jpeg::{LumaDecoder, Scale};
use edgesight_core::cl::{ClError, FrameSlot, Gpu};
use edgesight_frame::frame::{FrameLayout, Size};

mod frames;

/// Buffers asked of the driver: one being filled, one with the caller, two spare.
const BUFFERS: u32 = 4;
/// Buffers accepted from a driver that gives more than asked.
const MAX_BUFFERS: u32 = 32;

/// Why a stream could not start.
#[derive(Debug)]
pub(super) enum StartError {
    /// The driver (or the OpenCL platform) does not do this I/O mode: try the next one.
    Refused(String),
    /// A failure that a later attempt may not meet (device gone or busy, an error the
    /// driver injected).
    Failed(String),
    /// VIDIOC_STREAMON refused: the caller tells a bus out of bandwidth from the rest by
    /// the driver and the error.
    Streamon(io::Error),
    /// OpenCL failed; the source cannot go on.
    Cl(ClError),
}

/// Why a running stream stopped.
#[derive(Debug)]
pub(super) enum StreamError {
    /// The device is gone or broken (ENODEV, EIO, ...): tear down and reconnect.
    Lost(String),
    Cl(ClError),
}

/// What one wait on the queue found.
#[derive(Debug)]
pub(super) enum QueueEvent {
    /// A good frame, in the slot [`Stream::slot`] returns for `index`; `decoded` is the
    /// host time its JPEG took to decode into the slot.
    Frame {
        index: usize,
        sequence: u32,
        captured: Instant,
        decoded: Option<std::time::Duration>,
    },
    /// A buffer that must not be processed; it has been queued again.
    Dropped { reason: DropReason, sequence: u32 },
    /// Nothing before the deadline.
    Timeout,
}

enum Buffers {
    None,
    Userptr(Vec<FrameSlot>),
    Mmap {
        maps: Vec<Mmap>,
        slots: Vec<FrameSlot>,
        next: usize,
    },
    Dmabuf {
        slots: Vec<FrameSlot>,
        // Kept open until the buffers are released: the import holds its own reference,
        // the fds are what ties each slot to its V4L2 buffer for a reader of /proc.
        _fds: Vec<OwnedFd>,
    },
}

/// How a stream of JPEG frames (an MJPEG camera) becomes luma: each buffer's bytes are
/// decoded into a slot in place of the copy.
pub(super) struct JpegFrames {
    pub decoder: LumaDecoder,
    /// The camera's frame size (the JPEG images').
    pub size: Size,
    pub scale: Scale,
    /// The luma's row stride in the slot.
    pub pitch: usize,
    /// Whether a corrupt frame was logged on this stream (the first one is, with why).
    pub logged: bool,
    /// Whether each frame's JPEG is copied out of its buffer before the buffer goes back
    /// to the driver, and the last one copied (empty when none was).
    pub keep: bool,
    pub kept: Vec<u8>,
}

/// A V4L2 buffer queue in one I/O mode, streaming.
pub(super) struct Stream {
    buf_type: BufType,
    mode: IoMode,
    memory: u32,
    /// Bytes a frame in a slot takes: a raw buffer with fewer is short.
    need: usize,
    /// JPEG frames, decoded rather than copied (mmap only).
    jpeg: Option<JpegFrames>,
    count: u32,
    buffers: Buffers,
    /// The buffer whose slot the caller holds (userptr, dmabuf).
    lent: Option<usize>,
    requested: bool,
    streaming: bool,
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

/// A zeroed `v4l2_buffer` of `buf_type`, with room for one plane where multi-planar.
struct RawBuffer {
    buf: v4l2_buffer,
    plane: Box<v4l2_plane>,
}

impl RawBuffer {
    fn new(buf_type: BufType, memory: u32, index: u32) -> RawBuffer {
        let mut raw = RawBuffer {
            // SAFETY: a plain C struct of integers, a union of integers and pointers, and
            // a timeval: all zero (null pointers) is a valid value of each.
            buf: unsafe { mem::zeroed() },
            // SAFETY: as above, for a plane.
            plane: Box::new(unsafe { mem::zeroed() }),
        };
        raw.buf.type_ = buf_type.raw();
        raw.buf.memory = memory;
        raw.buf.index = index;
        if buf_type == BufType::CaptureMplane {
            raw.buf.m.planes = &mut *raw.plane;
            raw.buf.length = 1;
        }
        raw
    }

    fn bytesused(&self, buf_type: BufType) -> u32 {
        match buf_type {
            BufType::Capture => self.buf.bytesused,
            BufType::CaptureMplane => self.plane.bytesused,
        }
    }
}

impl Stream {
    /// Requests buffers in `mode`, queues them all and starts streaming; `layout` is the
    /// frames' in the slots (for JPEG frames, `jpeg`, the decoded luma's). On any error the
    /// queue is released again before returning.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start(
        gpu: &Gpu,
        dev: &Device,
        buf_type: BufType,
        mode: IoMode,
        layout: FrameLayout,
        sizeimage: usize,
        importer: Option<&DmabufImporter>,
        jpeg: Option<JpegFrames>,
    ) -> Result<Stream, StartError> {
        if jpeg.is_some() && mode != IoMode::Mmap {
            return Err(StartError::Refused(
                "JPEG frames are decoded from V4L2's own buffers (mmap)".into(),
            ));
        }
        let memory = match mode {
            IoMode::Userptr => v4l2_memory_V4L2_MEMORY_USERPTR,
            IoMode::Mmap | IoMode::Dmabuf => v4l2_memory_V4L2_MEMORY_MMAP,
            IoMode::Generated => return Err(StartError::Refused("not a camera mode".into())),
        };
        let mut stream = Stream {
            buf_type,
            mode,
            memory,
            need: layout.frame_bytes(),
            jpeg,
            count: 0,
            buffers: Buffers::None,
            lent: None,
            requested: false,
            streaming: false,
        };
        match stream.setup(gpu, dev, sizeimage.max(layout.frame_bytes()), importer) {
            Ok(()) => Ok(stream),
            Err(e) => {
                // Not streaming, so the driver writes nowhere: the slots can go before
                // the fd is closed.
                stream.stop(dev);
                stream.release(Some(gpu));
                Err(e)
            }
        }
    }

    fn setup(
        &mut self,
        gpu: &Gpu,
        dev: &Device,
        buffer_len: usize,
        importer: Option<&DmabufImporter>,
    ) -> Result<(), StartError> {
        let mode = self.mode;
        let importer = match (mode, importer) {
            (IoMode::Dmabuf, None) => {
                return Err(StartError::Refused("no dma-buf import in OpenCL".into()))
            }
            (_, importer) => importer,
        };
        // SAFETY: a plain C struct, all zero is valid.
        let mut req: v4l2_requestbuffers = unsafe { mem::zeroed() };
        req.count = BUFFERS;
        req.type_ = self.buf_type.raw();
        req.memory = self.memory;
        let memory_name = if mode == IoMode::Userptr {
            "USERPTR"
        } else {
            "MMAP"
        };
        // SAFETY: VIDIOC_REQBUFS takes a struct v4l2_requestbuffers, which holds no
        // pointers.
        if let Err(e) = unsafe { dev.ioctl(vidioc::VIDIOC_REQBUFS, &mut req) } {
            let message = format!("VIDIOC_REQBUFS({memory_name}): {e}");
            return Err(match errno(&e) {
                libc::EINVAL | libc::ENOTTY | libc::EOPNOTSUPP => StartError::Refused(message),
                _ => StartError::Failed(message),
            });
        }
        self.requested = true;
        if req.count == 0 {
            return Err(StartError::Refused(format!(
                "VIDIOC_REQBUFS({memory_name}) gave no buffers"
            )));
        }
        self.count = req.count.min(MAX_BUFFERS);
        let cl = StartError::Cl;
        let failed = |what: &str, e: io::Error| StartError::Failed(format!("{what}: {e}"));
        // Each buffer is recorded in `self.buffers` before it is queued, so a failure
        // halfway is torn down completely.
        match mode {
            IoMode::Userptr => {
                self.buffers = Buffers::Userptr(Vec::new());
                for index in 0..self.count {
                    let mut slot = FrameSlot::new(gpu, buffer_len).map_err(cl)?;
                    let ptr = slot.map(gpu).map_err(cl)?;
                    if let Buffers::Userptr(slots) = &mut self.buffers {
                        slots.push(slot);
                    }
                    self.qbuf(dev, index, Some((ptr, buffer_len)))
                        .map_err(|e| failed("VIDIOC_QBUF(USERPTR)", e))?;
                }
            }
            IoMode::Mmap => {
                let slots = (0..2)
                    .map(|_| FrameSlot::new(gpu, self.need))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(cl)?;
                self.buffers = Buffers::Mmap {
                    maps: Vec::new(),
                    slots,
                    next: 0,
                };
                for index in 0..self.count {
                    let (offset, length) = self
                        .query(dev, index)
                        .map_err(|e| failed("VIDIOC_QUERYBUF", e))?;
                    // SAFETY: the driver's buffer, mapped shared and read-only; it is
                    // unmapped before the buffers are released (see `teardown`).
                    let map = unsafe {
                        MmapOptions::new()
                            .offset(u64::from(offset))
                            .len(length as usize)
                            .map(dev.raw_fd())
                    }
                    .map_err(|e| failed("mmap of a V4L2 buffer", e))?;
                    if let Buffers::Mmap { maps, .. } = &mut self.buffers {
                        maps.push(map);
                    }
                    self.qbuf(dev, index, None)
                        .map_err(|e| failed("VIDIOC_QBUF(MMAP)", e))?;
                }
            }
            IoMode::Dmabuf => {
                let importer = importer.ok_or_else(|| StartError::Refused("no importer".into()))?;
                self.buffers = Buffers::Dmabuf {
                    slots: Vec::new(),
                    _fds: Vec::new(),
                };
                for index in 0..self.count {
                    let (_, length) = self
                        .query(dev, index)
                        .map_err(|e| failed("VIDIOC_QUERYBUF", e))?;
                    // SAFETY: a plain C struct, all zero is valid.
                    let mut exp: v4l2_exportbuffer = unsafe { mem::zeroed() };
                    exp.type_ = self.buf_type.raw();
                    exp.index = index;
                    exp.flags = (libc::O_RDONLY | libc::O_CLOEXEC) as u32;
                    // SAFETY: VIDIOC_EXPBUF takes a struct v4l2_exportbuffer, which holds
                    // no pointers; the driver writes the new fd into it.
                    if let Err(e) = unsafe { dev.ioctl(vidioc::VIDIOC_EXPBUF, &mut exp) } {
                        return Err(match errno(&e) {
                            libc::EINVAL | libc::ENOTTY => {
                                StartError::Refused(format!("VIDIOC_EXPBUF: {e}"))
                            }
                            _ => StartError::Failed(format!("VIDIOC_EXPBUF: {e}")),
                        });
                    }
                    // SAFETY: the driver just created this fd for us.
                    let fd = unsafe { OwnedFd::from_raw_fd(exp.fd) };
                    // SAFETY: `exp.fd` is the dma-buf the driver just exported for buffer
                    // `index`, whose length VIDIOC_QUERYBUF gave; `fd` keeps it open.
                    let buffer = unsafe { importer.import(gpu, exp.fd, length as usize) }
                        .map_err(|e| StartError::Refused(e.to_string()))?;
                    if let Buffers::Dmabuf { slots, _fds } = &mut self.buffers {
                        slots.push(FrameSlot::from_buffer(buffer, length as usize));
                        _fds.push(fd);
                    }
                    self.qbuf(dev, index, None)
                        .map_err(|e| failed("VIDIOC_QBUF(MMAP)", e))?;
                }
            }
            IoMode::Generated => {}
        }
        let mut kind = self.buf_type.raw() as i32;
        // SAFETY: VIDIOC_STREAMON takes an int, the buffer type.
        unsafe { dev.ioctl(vidioc::VIDIOC_STREAMON, &mut kind) }.map_err(StartError::Streamon)?;
        self.streaming = true;
        Ok(())
    }
}

impl Stream {
    /// Buffers the driver gave.
    pub(super) fn buffer_count(&self) -> u32 {
        self.count
    }

    /// The mmap offset and length of buffer `index` (VIDIOC_QUERYBUF).
    fn query(&self, dev: &Device, index: u32) -> io::Result<(u32, u32)> {
        let mut raw = RawBuffer::new(self.buf_type, self.memory, index);
        // SAFETY: VIDIOC_QUERYBUF takes a struct v4l2_buffer; for a multi-planar type its
        // `m.planes` points to `raw.plane`, boxed and alive for the call, and `length` is
        // 1 (`RawBuffer::new`), so the driver writes one plane there and nothing else.
        unsafe { dev.ioctl(vidioc::VIDIOC_QUERYBUF, &mut raw.buf)? };
        // SAFETY: reads of plain integers (valid for any bytes) of the union members the
        // driver filled for MMAP buffers: the offset and, multi-planar, the plane's.
        Ok(unsafe {
            match self.buf_type {
                BufType::Capture => (raw.buf.m.offset, raw.buf.length),
                BufType::CaptureMplane => (raw.plane.m.mem_offset, raw.plane.length),
            }
        })
    }

    /// Stops the driver using the buffers: STREAMOFF, unmap V4L2's buffers (V4L2 refuses
    /// to free mapped buffers, and a later VIDIOC_S_FMT would fail with EBUSY), then
    /// VIDIOC_REQBUFS(0). Errors are ignored: a vanished device fails every call.
    ///
    /// The frame slots are *not* released here: when STREAMOFF failed (the device is gone)
    /// the driver may still be writing into USERPTR memory until its fd is closed, so the
    /// caller closes the fd first and then calls [`Stream::release`]. Safe to call twice.
    pub(super) fn stop(&mut self, dev: &Device) {
        if self.streaming {
            let mut kind = self.buf_type.raw() as i32;
            // SAFETY: VIDIOC_STREAMOFF takes an int, the buffer type.
            let _ = unsafe { dev.ioctl(vidioc::VIDIOC_STREAMOFF, &mut kind) };
            self.streaming = false;
        }
        self.lent = None;
        if let Buffers::Mmap { maps, .. } = &mut self.buffers {
            maps.clear();
        }
        if self.requested {
            // SAFETY: a plain C struct, all zero is valid.
            let mut req: v4l2_requestbuffers = unsafe { mem::zeroed() };
            req.count = 0;
            req.type_ = self.buf_type.raw();
            req.memory = self.memory;
            // SAFETY: VIDIOC_REQBUFS takes a struct v4l2_requestbuffers: no pointers.
            let _ = unsafe { dev.ioctl(vidioc::VIDIOC_REQBUFS, &mut req) };
            self.requested = false;
        }
    }

    /// Releases the frame slots (unmapping USERPTR slots from OpenCL where `gpu` is
    /// given). Only after [`Stream::stop`] and after the device's fd is closed.
    pub(super) fn release(&mut self, gpu: Option<&Gpu>) {
        if let Some(gpu) = gpu {
            if let Buffers::Userptr(slots) = &mut self.buffers {
                for slot in slots.iter_mut() {
                    let _ = slot.unmap(gpu);
                }
            }
            // Kernels still reading a slot finish before it goes.
            let _ = gpu.finish();
        }
        self.buffers = Buffers::None;
    }
}
