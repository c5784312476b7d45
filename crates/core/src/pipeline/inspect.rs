//! What a pipeline tells about itself beside each frame's results: the device memory it
//! holds and the bytes a frame moves (`bench`, `process`), how long the last frame ran on
//! the device and when its read ended (`bench`), what the last frame's motion left on the
//! device and which frame that was (`selftest`, `verify_every`), and, for tests, which
//! guard bands a kernel overwrote and which of the last frame's commands are still
//! running.

use super::buffers::held_bytes;
use super::motion_tiles::{STATS_BACKGROUND_SUM, STATS_FRAME_SUM, STATS_GAIN, STATS_MOVING};
use super::{DeviceMotion, FrameMotion, Pipeline, Traffic};
use crate::cl::{event_interval, ClError, Gpu, RawClError};

impl Pipeline {
    /// The bytes this pipeline holds on the device: every buffer it allocated (images with
    /// their guard bands, the integral passes' scratch, the small results), as the driver
    /// reports their sizes. The frame slots are not counted: they belong to the source
    /// ([`Pipeline::new_slot`] makes one of `frame_bytes()`).
    pub fn device_bytes(&self) -> Result<u64, ClError> {
        let sobel = match self.sobel.kept() {
            Some(k) => held_bytes(&k.dx.buf)? + held_bytes(&k.dy.buf)? + held_bytes(&k.edges.buf)?,
            None => 0,
        };
        let mask = match self.otsu.mask() {
            Some(mask) => held_bytes(&mask.buf)?,
            None => 0,
        };
        Ok(self.bufs.held_bytes()?
            + sobel
            + mask
            + self.histogram.held_bytes()?
            + self.integral.held_bytes()?
            + self.regions.held_bytes()?
            + self.motion.held_bytes()?)
    }

    /// The bytes a frame moves through this pipeline, per stage and in all, inputs read
    /// once and outputs written once ([`Traffic`]), with the regions it measures now.
    pub fn traffic(&self) -> Traffic {
        Traffic::of(
            &self.layout,
            self.full_images(),
            self.regions.region_count(),
        )
    }

    /// Device time from the first kernel's start to the last one's end for the last frame
    /// processed, in nanoseconds: the stages' times plus the gaps between kernels.
    pub fn last_device_span_nanos(&self) -> u64 {
        self.last_span
    }

    /// How many commands the last frame enqueued with an event: its kernels and the fills
    /// that clear a histogram if it was timed, none if not.
    pub fn last_command_count(&self) -> usize {
        self.events.len()
    }

    /// When the last frame's read of its results ended, on the device clock in
    /// nanoseconds: the end of every frame, timed or not.
    pub fn last_read_end_nanos(&self) -> Result<u64, ClError> {
        match &self.read_back.event {
            Some(read) => Ok(event_interval(read)?.1),
            None => Err(ClError::Call {
                call: "clGetEventProfilingInfo(the frame's read)",
                code: RawClError(opencl3::error_codes::CL_INVALID_EVENT),
            }),
        }
    }

    /// What the last frame's motion left on the device ([`DeviceMotion`]). Meaningful
    /// after a frame that ran motion ([`Pipeline::last_motion`]).
    pub fn read_motion(&self, gpu: &Gpu) -> Result<DeviceMotion, ClError> {
        let mut out = DeviceMotion::default();
        self.read_motion_into(gpu, &mut out)?;
        Ok(out)
    }

    /// [`Pipeline::read_motion`] into `out`, in the memory it has once it is large
    /// enough (the camera's thread reads it for `verify_every`).
    pub fn read_motion_into(&self, gpu: &Gpu, out: &mut DeviceMotion) -> Result<(), ClError> {
        let read = &self.read_back;
        let t = &mut out.tiles;
        self.motion
            .read_state_into(gpu, &mut out.background, &mut t.mask)?;
        t.diff_histogram = read.motion_histogram();
        t.moving = read.motion_count(STATS_MOVING);
        t.frame_sum = read.motion_count(STATS_FRAME_SUM);
        t.background_sum = read.motion_count(STATS_BACKGROUND_SUM);
        t.gain = read.motion_count(STATS_GAIN);
        Ok(())
    }

    /// What the last frame's motion kernels were told, `None` where it ran none (motion
    /// off, or a frame smaller than a tile).
    pub fn last_motion(&self) -> Option<FrameMotion> {
        self.last_motion
    }

    /// Which pipeline this is (unique in the process) and how many frames it has begun:
    /// two frames are one after the other on the device only if their pipeline is the
    /// same and their numbers follow.
    pub fn frame_number(&self) -> (u64, u64) {
        (self.id, self.frames)
    }

    /// Names of the per-pixel buffers whose guard band a kernel overwrote (none, if every
    /// kernel kept within its image), of those the pipeline has (luma only where not read
    /// from the slot, the full images only when kept). For tests.
    pub fn broken_guards(&self, gpu: &Gpu) -> Result<Vec<&'static str>, ClError> {
        let b = &self.bufs;
        let mut images = vec![("magnitude", b.magnitude.guard_intact(gpu)?)];
        if let Some(luma) = &b.luma {
            images.push(("luma", luma.guard_intact(gpu)?));
        }
        if let Some(k) = self.sobel.kept() {
            images.push(("dx", k.dx.guard_intact(gpu)?));
            images.push(("dy", k.dy.guard_intact(gpu)?));
            images.push(("edges", k.edges.guard_intact(gpu)?));
        }
        if let Some(mask) = self.otsu.mask() {
            images.push(("mask", mask.guard_intact(gpu)?));
        }
        Ok(images
            .into_iter()
            .chain(self.integral.guard_checks(gpu)?)
            .chain(self.motion.guard_checks(gpu)?)
            .filter(|&(_, intact)| !intact)
            .map(|(name, _)| name)
            .collect())
    }

    /// How many of the last frame's commands (kernels and reads) the device has not
    /// completed yet.
    #[cfg(test)]
    pub(super) fn unfinished_commands(&self) -> usize {
        let complete = |e: &opencl3::event::Event| {
            e.command_execution_status().map(|s| s.0) == Ok(opencl3::event::CL_COMPLETE)
        };
        let kernels = self.events.iter().map(|(_, e)| e);
        let reads = self.read_back.event.iter();
        kernels.chain(reads).filter(|e| !complete(e)).count()
    }
}
