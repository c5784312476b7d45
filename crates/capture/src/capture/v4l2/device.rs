//! One open V4L2 device node and the ioctls edgesight issues on it, through the `v4l`
//! crate's bindings (`v4l::v4l2::ioctl`, `v4l::v4l_sys`): capabilities, format and frame-rate
//! negotiation, the formats, sizes and rates a node offers, controls. Owns only the file
//! descriptor; the buffer queue is in `queue.rs`, the fourcc table and the values the
//! ioctls' answers are read into in `formats.rs`.

use std::ffi::CString;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use v4l::v4l2::{self as api, vidioc};
use v4l::v4l_sys::*;

use super::formats::{period_fraction, DriverFormat, RateRange, SizeRange};
use edgesight_frame::frame::Size;

/// Single-planar or multi-planar capture (most ARM ISPs are multi-planar).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufType {
    /// Single-planar capture (`V4L2_BUF_TYPE_VIDEO_CAPTURE`).
    Capture,
    /// Multi-planar capture (`V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE`).
    CaptureMplane,
}

impl BufType {
    pub(super) fn raw(self) -> u32 {
        match self {
            BufType::Capture => v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE,
            BufType::CaptureMplane => v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE,
        }
    }

    /// How listings and logs name it: "single-planar" or "multi-planar".
    pub fn name(self) -> &'static str {
        match self {
            BufType::Capture => "single-planar",
            BufType::CaptureMplane => "multi-planar",
        }
    }
}

/// What VIDIOC_QUERYCAP says.
#[derive(Clone, Debug)]
pub(super) struct Caps {
    pub driver: String,
    pub card: String,
    pub bus: String,
    /// The capabilities of this node (device_caps where the driver reports them).
    pub caps: u32,
}

impl Caps {
    /// The capture type to use, single-planar preferred; `None` if this node cannot capture.
    pub(super) fn capture_type(&self) -> Option<BufType> {
        if self.caps & V4L2_CAP_VIDEO_CAPTURE != 0 {
            Some(BufType::Capture)
        } else if self.caps & V4L2_CAP_VIDEO_CAPTURE_MPLANE != 0 {
            Some(BufType::CaptureMplane)
        } else {
            None
        }
    }

    pub(super) fn streaming(&self) -> bool {
        self.caps & V4L2_CAP_STREAMING != 0
    }
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(bytes.get(..end).unwrap_or_default()).into_owned()
}

/// A control found by name.
#[derive(Clone, Debug)]
pub struct ControlInfo {
    /// The control's V4L2 id (a `V4L2_CID_*` value), as [`Device::set_control`] takes it.
    pub id: u32,
    /// The control's name as the driver reports it, e.g. "Exposure Time, Absolute".
    pub name: String,
}

/// A control's name as v4l2-ctl spells it: lower case, runs of other characters as '_'.
pub(super) fn control_key(name: &str) -> String {
    let mut key = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            key.push(c.to_ascii_lowercase());
        } else if !key.ends_with('_') {
            key.push('_');
        }
    }
    key.trim_matches('_').to_string()
}

/// An open V4L2 device node (non-blocking: DQBUF never waits, `poll` does).
pub struct Device {
    fd: OwnedFd,
}

fn is_retry(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Interrupted
}

impl Device {
    /// Opens the node at `path` read-write and non-blocking; the error is the OS's.
    pub fn open(path: &Path) -> io::Result<Device> {
        let c_path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))?;
        // SAFETY: a valid C string; the fd is owned from here on.
        let fd = unsafe {
            libc::open(
                c_path.as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Device { fd })
    }

    pub(super) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// One ioctl with `arg` as its argument, retried when a signal interrupts it.
    ///
    /// # Safety
    /// `T` must be the argument type `request` is defined with.
    pub(super) unsafe fn ioctl<T>(
        &self,
        request: vidioc::_IOC_TYPE,
        arg: &mut T,
    ) -> io::Result<()> {
        loop {
            // SAFETY: the caller guarantees `T` matches `request`; `arg` is a valid pointer.
            match unsafe { api::ioctl(self.raw_fd(), request, (arg as *mut T).cast()) } {
                Err(e) if is_retry(&e) => continue,
                other => return other,
            }
        }
    }

    pub(super) fn query_caps(&self) -> io::Result<Caps> {
        // SAFETY: a plain C struct, all zero is valid.
        let mut cap: v4l2_capability = unsafe { mem::zeroed() };
        // SAFETY: VIDIOC_QUERYCAP takes a struct v4l2_capability, which holds no pointers:
        // the driver writes only into `cap`.
        unsafe { self.ioctl(vidioc::VIDIOC_QUERYCAP, &mut cap)? };
        let caps = if cap.capabilities & V4L2_CAP_DEVICE_CAPS != 0 {
            cap.device_caps
        } else {
            cap.capabilities
        };
        Ok(Caps {
            driver: c_string(&cap.driver),
            card: c_string(&cap.card),
            bus: c_string(&cap.bus_info),
            caps,
        })
    }

    pub(super) fn get_format(&self, buf_type: BufType) -> io::Result<DriverFormat> {
        // SAFETY: a plain C struct, all zero is valid.
        let mut f: v4l2_format = unsafe { mem::zeroed() };
        f.type_ = buf_type.raw();
        // SAFETY: VIDIOC_G_FMT takes a struct v4l2_format; for the capture types `type_`
        // is set to, its union holds no pointers the driver follows.
        unsafe { self.ioctl(vidioc::VIDIOC_G_FMT, &mut f)? };
        Ok(read_format(&f, buf_type))
    }

    /// VIDIOC_S_FMT with the fourcc and size asked for; returns what the driver chose.
    pub(super) fn set_format(
        &self,
        buf_type: BufType,
        code: u32,
        size: Size,
    ) -> io::Result<DriverFormat> {
        // Start from the current format so fields we do not set keep the driver's values.
        // SAFETY: a plain C struct, all zero is valid.
        let mut f: v4l2_format = unsafe { mem::zeroed() };
        f.type_ = buf_type.raw();
        // SAFETY: as in `get_format`.
        unsafe { self.ioctl(vidioc::VIDIOC_G_FMT, &mut f)? };
        // SAFETY: writes to plain integer fields of the union member `type_` names (a
        // union write never reads), and an all-zero plane format, valid for its integers.
        unsafe {
            match buf_type {
                BufType::Capture => {
                    let pix = &mut f.fmt.pix;
                    pix.pixelformat = code;
                    pix.width = size.width;
                    pix.height = size.height;
                    pix.field = v4l2_field_V4L2_FIELD_NONE;
                    // Let the driver choose the stride and the buffer size.
                    pix.bytesperline = 0;
                    pix.sizeimage = 0;
                }
                BufType::CaptureMplane => {
                    let pix = &mut f.fmt.pix_mp;
                    pix.pixelformat = code;
                    pix.width = size.width;
                    pix.height = size.height;
                    pix.field = v4l2_field_V4L2_FIELD_NONE;
                    pix.num_planes = 1;
                    pix.plane_fmt = mem::zeroed();
                }
            }
        }
        // SAFETY: VIDIOC_S_FMT takes the same struct v4l2_format as G_FMT, of a capture
        // type: no pointers the driver follows.
        unsafe { self.ioctl(vidioc::VIDIOC_S_FMT, &mut f)? };
        Ok(read_format(&f, buf_type))
    }

    /// Asks for `fps` with VIDIOC_S_PARM; returns the rate the driver set, or `None` where
    /// the driver cannot set a rate.
    pub(super) fn set_fps(&self, buf_type: BufType, fps: f64) -> io::Result<Option<f64>> {
        // SAFETY: a plain C struct, all zero is valid.
        let mut p: v4l2_streamparm = unsafe { mem::zeroed() };
        p.type_ = buf_type.raw();
        // SAFETY: VIDIOC_G_PARM takes a struct v4l2_streamparm, which holds no pointers.
        unsafe { self.ioctl(vidioc::VIDIOC_G_PARM, &mut p)? };
        // SAFETY: the capture member is the one a capture type uses; plain integers.
        let capability = unsafe { p.parm.capture.capability };
        if capability & V4L2_CAP_TIMEPERFRAME == 0 {
            return Ok(None);
        }
        let (numerator, denominator) = period_fraction(fps);
        p.parm.capture.timeperframe = v4l2_fract {
            numerator,
            denominator,
        };
        // SAFETY: VIDIOC_S_PARM takes the struct v4l2_streamparm G_PARM filled: no
        // pointers.
        unsafe { self.ioctl(vidioc::VIDIOC_S_PARM, &mut p)? };
        Ok(self.get_fps(buf_type))
    }

    /// The frame rate the driver runs at, where it says.
    pub(super) fn get_fps(&self, buf_type: BufType) -> Option<f64> {
        // SAFETY: a plain C struct, all zero is valid.
        let mut p: v4l2_streamparm = unsafe { mem::zeroed() };
        p.type_ = buf_type.raw();
        // SAFETY: VIDIOC_G_PARM takes a struct v4l2_streamparm, which holds no pointers.
        unsafe { self.ioctl(vidioc::VIDIOC_G_PARM, &mut p) }.ok()?;
        // SAFETY: the capture member is the one a capture type uses; plain integers.
        let t = unsafe { p.parm.capture.timeperframe };
        (t.numerator > 0 && t.denominator > 0)
            .then(|| f64::from(t.denominator) / f64::from(t.numerator))
    }

    /// Every control of the node (VIDIOC_QUERYCTRL with V4L2_CTRL_FLAG_NEXT_CTRL).
    pub(super) fn controls(&self) -> Vec<ControlInfo> {
        let mut out = Vec::new();
        let mut id = 0u32;
        for _ in 0..4096 {
            // SAFETY: a plain C struct, all zero is valid.
            let mut q: v4l2_queryctrl = unsafe { mem::zeroed() };
            q.id = id | V4L2_CTRL_FLAG_NEXT_CTRL;
            // SAFETY: VIDIOC_QUERYCTRL takes a struct v4l2_queryctrl: no pointers.
            if unsafe { self.ioctl(vidioc::VIDIOC_QUERYCTRL, &mut q) }.is_err() {
                break;
            }
            id = q.id;
            if q.flags & V4L2_CTRL_FLAG_DISABLED == 0 {
                out.push(ControlInfo {
                    id: q.id,
                    name: c_string(&q.name),
                });
            }
        }
        out
    }

    /// The control whose v4l2-ctl name (lower case, runs of other characters as `_`) is
    /// `key`.
    pub fn find_control(&self, key: &str) -> Option<ControlInfo> {
        self.controls()
            .into_iter()
            .find(|c| control_key(&c.name) == key)
    }

    /// Sets control `id` to `value` (VIDIOC_S_CTRL); the error is the driver's refusal.
    pub fn set_control(&self, id: u32, value: i32) -> io::Result<()> {
        let mut c = v4l2_control { id, value };
        // SAFETY: VIDIOC_S_CTRL takes a struct v4l2_control: two integers.
        unsafe { self.ioctl(vidioc::VIDIOC_S_CTRL, &mut c) }
    }

    /// The pixel formats the node offers, as (fourcc, description).
    pub(super) fn formats(&self, buf_type: BufType) -> Vec<(u32, String)> {
        let mut out = Vec::new();
        for index in 0..256 {
            // SAFETY: a plain C struct, all zero is valid.
            let mut desc: v4l2_fmtdesc = unsafe { mem::zeroed() };
            desc.index = index;
            desc.type_ = buf_type.raw();
            // SAFETY: VIDIOC_ENUM_FMT takes a struct v4l2_fmtdesc, which holds no pointers.
            if unsafe { self.ioctl(vidioc::VIDIOC_ENUM_FMT, &mut desc) }.is_err() {
                break;
            }
            out.push((desc.pixelformat, c_string(&desc.description)));
        }
        out
    }

    /// Frame sizes for a format: discrete sizes, or (min, max, step) ranges.
    pub(super) fn frame_sizes(&self, code: u32) -> Vec<SizeRange> {
        let mut out = Vec::new();
        for index in 0..256 {
            // SAFETY: a plain C struct, all zero is valid.
            let mut e: v4l2_frmsizeenum = unsafe { mem::zeroed() };
            e.index = index;
            e.pixel_format = code;
            // SAFETY: VIDIOC_ENUM_FRAMESIZES takes a struct v4l2_frmsizeenum, which holds
            // no pointers.
            if unsafe { self.ioctl(vidioc::VIDIOC_ENUM_FRAMESIZES, &mut e) }.is_err() {
                break;
            }
            // SAFETY: both union members are plain u32 fields, valid for any bytes; the
            // one read is the one `type_` says the driver filled.
            unsafe {
                if e.type_ == v4l2_frmsizetypes_V4L2_FRMSIZE_TYPE_DISCRETE {
                    let d = e.__bindgen_anon_1.discrete;
                    out.push(SizeRange::Discrete(Size {
                        width: d.width,
                        height: d.height,
                    }));
                } else {
                    let s = e.__bindgen_anon_1.stepwise;
                    out.push(SizeRange::Stepwise {
                        min: Size {
                            width: s.min_width,
                            height: s.min_height,
                        },
                        max: Size {
                            width: s.max_width,
                            height: s.max_height,
                        },
                        step: (s.step_width, s.step_height),
                    });
                    break;
                }
            }
        }
        out
    }

    /// Frame rates for a format and size: discrete rates, or a (min, max) range.
    pub(super) fn frame_rates(&self, code: u32, size: Size) -> Vec<RateRange> {
        let mut out = Vec::new();
        for index in 0..256 {
            // SAFETY: a plain C struct, all zero is valid.
            let mut e: v4l2_frmivalenum = unsafe { mem::zeroed() };
            e.index = index;
            e.pixel_format = code;
            e.width = size.width;
            e.height = size.height;
            // SAFETY: VIDIOC_ENUM_FRAMEINTERVALS takes a struct v4l2_frmivalenum, which
            // holds no pointers.
            if unsafe { self.ioctl(vidioc::VIDIOC_ENUM_FRAMEINTERVALS, &mut e) }.is_err() {
                break;
            }
            let fps = |f: v4l2_fract| {
                if f.numerator == 0 {
                    0.0
                } else {
                    f64::from(f.denominator) / f64::from(f.numerator)
                }
            };
            // SAFETY: both union members are plain u32 fractions, valid for any bytes; the
            // one read is the one `type_` says the driver filled.
            unsafe {
                if e.type_ == v4l2_frmivaltypes_V4L2_FRMIVAL_TYPE_DISCRETE {
                    out.push(RateRange::Discrete(fps(e.__bindgen_anon_1.discrete)));
                } else {
                    let s = e.__bindgen_anon_1.stepwise;
                    // The longest interval is the lowest rate.
                    out.push(RateRange::Range {
                        min: fps(s.max),
                        max: fps(s.min),
                    });
                    break;
                }
            }
        }
        out
    }
}

/// The format the driver filled in `f`, of the plane layout `buf_type` names.
fn read_format(f: &v4l2_format, buf_type: BufType) -> DriverFormat {
    // SAFETY: reads of plain integer fields (valid for any bytes) of the union member
    // `type_` names, the one the driver filled.
    unsafe {
        match buf_type {
            BufType::Capture => {
                let p = f.fmt.pix;
                DriverFormat {
                    fourcc: p.pixelformat,
                    width: p.width,
                    height: p.height,
                    bytesperline: p.bytesperline,
                    sizeimage: p.sizeimage,
                    planes: 1,
                }
            }
            BufType::CaptureMplane => {
                let p = f.fmt.pix_mp;
                let plane = p.plane_fmt[0];
                DriverFormat {
                    fourcc: p.pixelformat,
                    width: p.width,
                    height: p.height,
                    bytesperline: plane.bytesperline,
                    sizeimage: plane.sizeimage,
                    planes: p.num_planes,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_keys_are_v4l2_ctl_names() {
        assert_eq!(
            control_key("Percentage of Dropped Buffers"),
            "percentage_of_dropped_buffers"
        );
        assert_eq!(
            control_key("Inject VIDIOC_REQBUFS Error"),
            "inject_vidioc_reqbufs_error"
        );
        assert_eq!(
            control_key("Inject V4L2_BUF_FLAG_ERROR"),
            "inject_v4l2_buf_flag_error"
        );
    }
}
