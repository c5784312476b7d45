//! A running stream's frames: waits for the next buffer, drops (and requeues) one the
//! driver flagged or filled short, or a JPEG frame that does not decode whole, hands out
//! the slot the frame lies in (copied there first in mmap mode, or its JPEG's luma decoded
//! there), and gives the buffer back to the driver when the caller asks for the next one.

use std::io;
use std::mem;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use v4l::v4l2::vidioc;
use v4l::v4l_sys::*;

use super::{Buffers, QueueEvent, RawBuffer, Stream, StreamError};
use crate::capture::v4l2::device::{BufType, Device};
use crate::capture::DropReason;
use edgesight_core::cl::{FrameSlot, Gpu};

impl Stream {
    /// The slot of a frame [`Stream::next`] returned.
    pub(crate) fn slot(&self, index: usize) -> Option<&FrameSlot> {
        match &self.buffers {
            Buffers::Userptr(slots)
            | Buffers::Mmap { slots, .. }
            | Buffers::Dmabuf { slots, .. } => slots.get(index),
            Buffers::None => None,
        }
    }

    /// Whether the frames of a JPEG stream keep their JPEG image from now on.
    pub(crate) fn keep_jpeg(&mut self, keep: bool) {
        if let Some(jpeg) = self.jpeg.as_mut() {
            jpeg.keep = keep;
        }
    }

    /// The JPEG image of the frame [`Stream::next`] returned, when it was kept.
    pub(crate) fn jpeg(&self) -> Option<&[u8]> {
        self.jpeg
            .as_ref()
            .map(|j| j.kept.as_slice())
            .filter(|kept| !kept.is_empty())
    }

    /// Queues buffer `index`; `userptr` is the host address and length for USERPTR.
    pub(super) fn qbuf(
        &self,
        dev: &Device,
        index: u32,
        userptr: Option<(NonNull<u8>, usize)>,
    ) -> io::Result<()> {
        let mut raw = RawBuffer::new(self.buf_type, self.memory, index);
        if let Some((ptr, len)) = userptr {
            let len = u32::try_from(len)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "buffer over 4 GiB"))?;
            let address = ptr.as_ptr() as libc::c_ulong;
            match self.buf_type {
                BufType::Capture => {
                    raw.buf.m.userptr = address;
                    raw.buf.length = len;
                }
                BufType::CaptureMplane => {
                    raw.plane.m.userptr = address;
                    raw.plane.length = len;
                }
            }
        }
        // SAFETY: VIDIOC_QBUF takes a struct v4l2_buffer; `m.planes` (multi-planar) points
        // to `raw.plane`, alive for the call, with `length` 1. For USERPTR the driver keeps
        // `address` and writes up to `len` bytes there until the buffer is dequeued or the
        // stream stopped: it is a mapped `FrameSlot` of at least `len` bytes held in
        // `self.buffers`, which stays mapped until DQBUF hands it back (`next`), and is
        // released only after STREAMOFF and the fd's close (`stop`, then `release`).
        unsafe { dev.ioctl(vidioc::VIDIOC_QBUF, &mut raw.buf) }
    }

    /// Gives buffer `index` back to the driver after the caller or a drop is done with it.
    fn requeue(&mut self, gpu: &Gpu, dev: &Device, index: usize) -> Result<(), StreamError> {
        let lost = |e: io::Error| StreamError::Lost(format!("VIDIOC_QBUF: {e}"));
        let userptr = match &mut self.buffers {
            Buffers::Userptr(slots) => {
                let slot = slots
                    .get_mut(index)
                    .ok_or_else(|| StreamError::Lost(format!("no buffer {index}")))?;
                // Mapping waits for the kernels still reading the previous frame.
                let ptr = slot.map(gpu).map_err(StreamError::Cl)?;
                Some((ptr, slot.len()))
            }
            Buffers::Dmabuf { .. } => {
                // The camera may write into the buffer as soon as it is queued.
                gpu.finish().map_err(StreamError::Cl)?;
                None
            }
            Buffers::Mmap { .. } | Buffers::None => None,
        };
        self.qbuf(dev, index as u32, userptr).map_err(lost)
    }

    /// Gives back the frame the caller held, then waits until `deadline` for the next one.
    pub(crate) fn next(
        &mut self,
        gpu: &Gpu,
        dev: &Device,
        deadline: Instant,
    ) -> Result<QueueEvent, StreamError> {
        if let Some(index) = self.lent.take() {
            self.requeue(gpu, dev, index)?;
        }
        let raw = loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let mut fds = libc::pollfd {
                fd: dev.raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = remaining.as_millis().min(i32::MAX as u128) as i32
                + i32::from(!remaining.subsec_micros().is_multiple_of(1000));
            // SAFETY: one valid pollfd.
            let ready = unsafe { libc::poll(&mut fds, 1, ms) };
            if ready < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(StreamError::Lost(format!("poll: {e}")));
            }
            if ready == 0 {
                return Ok(QueueEvent::Timeout);
            }
            let mut raw = RawBuffer::new(self.buf_type, self.memory, 0);
            // SAFETY: VIDIOC_DQBUF takes a struct v4l2_buffer; `m.planes` (multi-planar)
            // points to `raw.plane`, alive for the call, with `length` 1: the driver
            // writes that struct and one plane.
            match unsafe { dev.ioctl(vidioc::VIDIOC_DQBUF, &mut raw.buf) } {
                Ok(()) => break raw,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Ok(QueueEvent::Timeout);
                    }
                    // POLLIN without a buffer: do not spin on a driver that says so.
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => return Err(StreamError::Lost(format!("VIDIOC_DQBUF: {e}"))),
            }
        };
        let index = raw.buf.index as usize;
        if raw.buf.index >= self.count {
            return Err(StreamError::Lost(format!(
                "VIDIOC_DQBUF returned buffer {index} of {}",
                self.count
            )));
        }
        let sequence = raw.buf.sequence;
        let bytesused = raw.bytesused(self.buf_type) as usize;
        // A JPEG frame is as long as it is; an empty one is short.
        let least = if self.jpeg.is_some() { 1 } else { self.need };
        let reason = if raw.buf.flags & V4L2_BUF_FLAG_ERROR != 0 {
            Some(DropReason::BufferError)
        } else if bytesused < least {
            Some(DropReason::ShortFrame)
        } else {
            None
        };
        if let Some(reason) = reason {
            self.requeue(gpu, dev, index)?;
            return Ok(QueueEvent::Dropped { reason, sequence });
        }
        let captured = captured_at(&raw.buf);
        let need = self.need;
        let mut decoded = None;
        // Userptr and dmabuf lend the buffer's own slot; mmap copies (or decodes) into the
        // next of its two slots and gives the buffer back at once.
        let (slot_index, copied) = match &mut self.buffers {
            Buffers::Userptr(slots) => {
                let unmapped = match slots.get_mut(index) {
                    Some(slot) => slot.unmap(gpu).map_err(StreamError::Cl),
                    None => Err(StreamError::Lost(format!("no buffer {index}"))),
                };
                (index, unmapped.map(|()| false))
            }
            Buffers::Dmabuf { .. } => (index, Ok(false)),
            Buffers::Mmap { maps, slots, next } if self.jpeg.is_some() => {
                let copy_to = *next;
                let bytes = maps.get(index).and_then(|m| m.get(..bytesused));
                let (Some(bytes), Some(slot), Some(jpeg)) =
                    (bytes, slots.get_mut(copy_to), self.jpeg.as_mut())
                else {
                    return Err(StreamError::Lost(format!(
                        "buffer {index} is smaller than its {bytesused} bytes used"
                    )));
                };
                // Copied before the decode: a writer that reuses the buffer meanwhile is
                // caught below for both.
                jpeg.kept.clear();
                if jpeg.keep {
                    jpeg.kept.extend_from_slice(bytes);
                }
                let started = Instant::now();
                let outcome = slot
                    .write(gpu, |out| {
                        jpeg.decoder
                            .decode(bytes, jpeg.size, jpeg.scale, out, jpeg.pitch)
                    })
                    .map_err(StreamError::Cl)?;
                if let Err(why) = outcome {
                    if !jpeg.logged {
                        jpeg.logged = true;
                        crate::capture_log!(
                            "frame {sequence}: corrupt JPEG ({why}); dropped, and later ones \
                             counted as corrupt_frame without a log"
                        );
                    }
                    self.requeue(gpu, dev, index)?;
                    return Ok(QueueEvent::Dropped {
                        reason: DropReason::CorruptFrame,
                        sequence,
                    });
                }
                // Decoding takes milliseconds: a writer that does not wait for its readers
                // may have reused the buffer meanwhile, and the luma is then two frames.
                if self.rewritten(dev, raw.buf.index, &raw.buf) {
                    self.requeue(gpu, dev, index)?;
                    return Ok(QueueEvent::Dropped {
                        reason: DropReason::CorruptFrame,
                        sequence,
                    });
                }
                decoded = Some(started.elapsed());
                if let Buffers::Mmap { slots, next, .. } = &mut self.buffers {
                    *next = (copy_to + 1) % slots.len().max(1);
                }
                (copy_to, Ok(true))
            }
            Buffers::Mmap { maps, slots, next } => {
                let copy_to = *next;
                *next = (copy_to + 1) % slots.len().max(1);
                let bytes = maps.get(index).and_then(|m| m.get(..need));
                let copied = match (bytes, slots.get_mut(copy_to)) {
                    (Some(bytes), Some(slot)) => slot
                        .write(gpu, |out| {
                            if let Some(out) = out.get_mut(..need) {
                                out.copy_from_slice(bytes);
                            }
                        })
                        .map(|()| true)
                        .map_err(StreamError::Cl),
                    _ => Err(StreamError::Lost(format!(
                        "buffer {index} is smaller than a frame ({need} bytes)"
                    ))),
                };
                (copy_to, copied)
            }
            Buffers::None => return Err(StreamError::Lost("no buffers".into())),
        };
        match copied {
            Ok(true) => self.requeue(gpu, dev, index)?,
            Ok(false) => self.lent = Some(index),
            Err(e) => return Err(e),
        }
        Ok(QueueEvent::Frame {
            index: slot_index,
            sequence,
            captured,
            decoded,
        })
    }
}

impl Stream {
    /// Whether buffer `index`, dequeued as `dequeued`, has been written again since: its
    /// sequence number or time stamp moved on. A driver whose writer does not wait for
    /// its readers (v4l2loopback, which ffmpeg feeds with an RTSP camera's frames on many
    /// boards) reuses a buffer a slow reader is still decoding once it has written all the
    /// others; a camera's driver never touches a dequeued buffer, so its answer never
    /// moves on (and a driver that answers with zeros is taken at its word).
    fn rewritten(&self, dev: &Device, index: u32, dequeued: &v4l2_buffer) -> bool {
        let mut now = RawBuffer::new(self.buf_type, self.memory, index);
        // SAFETY: VIDIOC_QUERYBUF takes a struct v4l2_buffer; for a multi-planar type its
        // `m.planes` points to `now.plane`, boxed and alive for the call, with `length` 1.
        if unsafe { dev.ioctl(vidioc::VIDIOC_QUERYBUF, &mut now.buf) }.is_err() {
            return false;
        }
        let stamp = |b: &v4l2_buffer| (b.timestamp.tv_sec, b.timestamp.tv_usec);
        now.buf.sequence > dequeued.sequence || stamp(&now.buf) > stamp(dequeued)
    }
}

/// When the driver finished the buffer, on our monotonic clock: V4L2 stamps buffers with
/// CLOCK_MONOTONIC (the flag says so), and `Instant` is that clock, so the stamp's age is
/// taken from now. Other clocks (or a stamp from the future) give "now".
fn captured_at(buf: &v4l2_buffer) -> Instant {
    let now = Instant::now();
    if buf.flags & V4L2_BUF_FLAG_TIMESTAMP_MASK != V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC {
        return now;
    }
    // SAFETY: a timespec is two integers; all zero is valid.
    let mut ts: libc::timespec = unsafe { mem::zeroed() };
    // SAFETY: clock_gettime writes one timespec into `ts`, a live local.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        return now;
    }
    // time_t and the microseconds are 32 bits on armv7, 64 on aarch64 and x86-64.
    let to_nanos = |secs: i64, nanos: i64| i128::from(secs) * 1_000_000_000 + i128::from(nanos);
    #[allow(clippy::useless_conversion)]
    let (mono, stamp) = (
        to_nanos(i64::from(ts.tv_sec), i64::from(ts.tv_nsec)),
        to_nanos(
            i64::from(buf.timestamp.tv_sec),
            i64::from(buf.timestamp.tv_usec) * 1000,
        ),
    );
    match u64::try_from(mono - stamp) {
        Ok(age) => now.checked_sub(Duration::from_nanos(age)).unwrap_or(now),
        Err(_) => now,
    }
}
