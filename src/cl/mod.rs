//! OpenCL plumbing on `opencl3`: choosing a device, building the embedded kernel sources,
//! frame slots and profiling. Host calls stay within OpenCL 1.2, which every Mali driver
//! offers; the library is loaded at run time (`OPENCL_DYLIB_PATH` overrides where from), so
//! the binary links no OpenCL and cross-builds anywhere.
//!
//! Knows nothing of images or stages: the pipeline asks it for programs and buffers.

// One unsafe operation per block, so each SAFETY comment covers exactly one.
#![deny(clippy::multiple_unsafe_ops_per_block)]

mod device;
mod launch;
mod raw;
mod slot;

pub use device::{list_devices, ClDeviceInfo, DeviceSpec, PlatformDevices};
pub use launch::{launch, ArgKind, KernelArg, KernelParams, ParamVisitor};
pub use raw::Record;
pub(crate) use raw::{enqueue_fill, ImportMemoryArm};
pub use slot::FrameSlot;

use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::context::Context;
use opencl3::device::Device;
pub(crate) use opencl3::error_codes::ClError as RawClError;
use opencl3::event::Event;
use opencl3::memory::{Buffer, CL_MEM_COPY_HOST_PTR, CL_MEM_USE_HOST_PTR};
use opencl3::program::Program;
use opencl3::types::{cl_mem_flags, CL_BLOCKING};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// Errors from OpenCL, each naming the call or file that failed.
#[derive(Debug, thiserror::Error)]
pub enum ClError {
    #[error("OpenCL library not found or incomplete ({0}); install an OpenCL driver (e.g. Debian's pocl-opencl-icd) or point OPENCL_DYLIB_PATH at one")]
    NoLibrary(RawClError),
    #[error("no OpenCL platform found: is an OpenCL driver (ICD) installed?")]
    NoPlatform,
    #[error("no OpenCL device matches '{spec}'; available: {available}")]
    NoDevice { spec: String, available: String },
    #[error("building kernels/{file} for {device} failed:\n{log}")]
    Build {
        file: String,
        device: String,
        log: String,
    },
    #[error("{call} failed: {code}")]
    Call {
        call: &'static str,
        code: RawClError,
    },
}

/// Attaches the failing call's name to a raw OpenCL error.
pub(crate) trait CallContext<T> {
    fn call(self, call: &'static str) -> Result<T, ClError>;
}

impl<T> CallContext<T> for Result<T, RawClError> {
    fn call(self, call: &'static str) -> Result<T, ClError> {
        self.map_err(|code| ClError::Call { call, code })
    }
}

/// One kernel source, embedded into the binary at build time: a file of `kernels/`, or
/// files built as one program, one after another (their names joined by " + ").
#[derive(Clone, Copy, Debug)]
pub struct KernelSource {
    pub file: &'static str,
    pub text: &'static str,
}

macro_rules! kernel_source {
    ($file:literal $(, $more:literal)*) => {
        KernelSource {
            file: concat!($file $(, " + ", $more)*),
            text: concat!(
                include_str!(concat!("../../kernels/", $file))
                $(, include_str!(concat!("../../kernels/", $more)))*
            ),
        }
    };
}

pub(crate) const LUMA_CL: KernelSource = kernel_source!("luma.cl");
pub(crate) const RAW_CL: KernelSource = kernel_source!("raw.cl");
pub(crate) const SOBEL_CL: KernelSource = kernel_source!("sobel.cl");
pub(crate) const HISTOGRAM_CL: KernelSource = kernel_source!("histogram.cl");
pub const OTSU_CL: KernelSource = kernel_source!("otsu.cl");
/// Motion's tiles, the integral passes (whose last launch runs them) and the region sums
/// that read both, one program: integral.cl calls motion.cl's motion_tiles, regions.cl
/// counts with both files' helpers, and each program costs a build and the memory POCL
/// keeps with it.
pub(crate) const INTEGRAL_MOTION_REGIONS_CL: KernelSource =
    kernel_source!("motion.cl", "integral.cl", "regions.cl");
/// Sobel's kernels with Otsu's threshold in their launch (`-DOTSU_BESIDE`), whose
/// `otsu_group` comes first.
pub(crate) const OTSU_SOBEL_CL: KernelSource = kernel_source!("otsu.cl", "sobel.cl");

/// Options every program is built with: the OpenCL C version Mali drivers accept, and the
/// descriptions of the kernels' parameters, against which debug builds check every
/// launch's parameter struct (`launch`); they cost the device nothing when it runs.
pub(crate) const BUILD_OPTIONS: &str = "-cl-std=CL1.2 -cl-kernel-arg-info";

/// A built program's file name, source text and `-D` defines.
type ProgramKey = (&'static str, &'static str, String);

/// A device with its context and its in-order, profiling command queue. One queue: a
/// second one beside it, for the histogram and Otsu while Sobel runs, took less off an
/// NVIDIA H100's span than its synchronisation cost the host a frame (BENCHMARKS.md,
/// "4. The NVIDIA H100 against its floor"); GPUs now run Otsu inside Sobel's launch
/// instead, which needs no synchronisation at all.
///
/// Every `Gpu` of one device in the process shares one context and the programs built in
/// it (see [`Gpu::open`]); its queue is its own, as are the kernels and buffers made
/// through it.
pub struct Gpu {
    pub device: Device,
    pub queue: CommandQueue,
    pub info: ClDeviceInfo,
    /// How [`Gpu::wait_for`] waits for a frame's commands.
    pub completion: Completion,
    shared: Arc<Shared>,
}

/// What the `Gpu`s of one device share: its context, and the programs built in it so far,
/// by file and defines, so that a pipeline built again (new size, new options, a reload,
/// another camera) reuses them instead of calling the compiler again. POCL keeps with each
/// program its preprocessed source and its LLVM module, which each camera held again
/// before they were shared (BENCHMARKS.md, "3. Memory").
/// OpenCL's calls on a context and on programs are thread-safe (clSetKernelArg is the
/// exception, and kernels are never shared).
struct Shared {
    context: Context,
    programs: Mutex<HashMap<ProgramKey, Arc<Program>>>,
}

/// The devices open in this process (by `cl_device_id`) and what their `Gpu`s share, for
/// as long as one of them is alive.
static OPEN: Mutex<Vec<(usize, Weak<Shared>)>> = Mutex::new(Vec::new());

impl Shared {
    /// What the `Gpu`s of `device` share: that of one alive, or a new context.
    fn for_device(device: &Device) -> Result<Arc<Shared>, ClError> {
        let id = device.id() as usize;
        let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|(_, shared)| shared.strong_count() > 0);
        if let Some(shared) = open
            .iter()
            .find(|(device, _)| *device == id)
            .and_then(|(_, shared)| shared.upgrade())
        {
            return Ok(shared);
        }
        let shared = Arc::new(Shared {
            context: Context::from_device(device).call("clCreateContext")?,
            programs: Mutex::new(HashMap::new()),
        });
        open.push((id, Arc::downgrade(&shared)));
        Ok(shared)
    }
}

/// How the host waits for the commands of a frame to complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// `clFinish`: the driver blocks the thread until the queue is empty (POCL and, as
    /// far as known, Mali's driver sleep in it).
    Finish,
    /// Flush, then sleep in steps of [`POLL_STEP`] until the frame's last command reports
    /// complete, then `clFinish` (which then returns at once, with any error). NVIDIA's
    /// `clFinish` spins on a core until the device is done, which costs the host several
    /// times the CPU of a polled wait (BENCHMARKS.md, "2. Host CPU per frame").
    Poll,
}

/// The sleep between two looks at a command's status under [`Completion::Poll`]: short
/// against a 30 fps frame's 33 ms, long enough that the looks cost little.
pub const POLL_STEP: std::time::Duration = std::time::Duration::from_micros(20);

impl Completion {
    /// What suits a device: polling where its driver is known to spin.
    pub fn for_device(info: &ClDeviceInfo) -> Completion {
        let says_nvidia = |s: &str| s.to_ascii_lowercase().contains("nvidia");
        if says_nvidia(&info.vendor) || says_nvidia(&info.platform) {
            Completion::Poll
        } else {
            Completion::Finish
        }
    }
}

impl Gpu {
    /// Opens the device `spec` selects (see [`DeviceSpec`]), with a queue of its own. A
    /// device another `Gpu` of this process has open shares that one's context and built
    /// programs (until [`Gpu::stop_sharing`]).
    pub fn open(spec: &DeviceSpec) -> Result<Gpu, ClError> {
        let (device, info) = device::select(spec)?;
        let shared = Shared::for_device(&device)?;
        let queue = new_queue(&shared.context, &device)?;
        Ok(Gpu {
            device,
            queue,
            completion: Completion::for_device(&info),
            info,
            shared,
        })
    }

    /// The device's context, which every `Gpu` of the device shares.
    pub fn context(&self) -> &Context {
        &self.shared.context
    }

    /// Whether `self` and `other` share one context (and so their built programs).
    pub fn shares_context_with(&self, other: &Gpu) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// The next [`Gpu::open`] of this device gets a context of its own, not this one:
    /// for a camera that failed in an OpenCL call, which may have left the context
    /// unusable. The `Gpu`s that share it keep it.
    pub fn stop_sharing(&self) {
        let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|(_, shared)| !std::ptr::eq(shared.as_ptr(), Arc::as_ptr(&self.shared)));
    }

    /// Builds one kernel file (once per context, see [`Gpu::build_with`]); a failure carries
    /// the compiler's log and the file name.
    pub fn build(&self, source: KernelSource) -> Result<Arc<Program>, ClError> {
        self.build_with(source, "")
    }

    /// Builds one kernel file with extra options (`-D` defines) after [`BUILD_OPTIONS`]. The
    /// program is kept: a later call with the same file and defines on the device (another
    /// pipeline, a new frame size, a reload, another camera) gets it back without a
    /// compiler call; one that comes while the program is being built waits for it. Even
    /// on a cache hit POCL preprocesses the source with all its OpenCL headers, which costs
    /// each build a noticeable time natively and far more under emulation (BENCHMARKS.md).
    pub fn build_with(&self, source: KernelSource, defines: &str) -> Result<Arc<Program>, ClError> {
        let key = (source.file, source.text, defines.to_string());
        let mut programs = self
            .shared
            .programs
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(program) = programs.get(&key) {
            return Ok(Arc::clone(program));
        }
        let mut program = Program::create_from_source(self.context(), source.text)
            .call("clCreateProgramWithSource")?;
        let options = format!("{BUILD_OPTIONS} {defines}");
        if program.build(&[self.device.id()], &options).is_err() {
            let log = program
                .get_build_log(self.device.id())
                .unwrap_or_else(|e| format!("(no build log: {e})"));
            return Err(ClError::Build {
                file: source.file.to_string(),
                device: self.info.name.clone(),
                log,
            });
        }
        let program = Arc::new(program);
        programs.insert(key, Arc::clone(&program));
        Ok(program)
    }

    /// Waits until every command on the device's queue has completed.
    pub fn finish(&self) -> Result<(), ClError> {
        self.queue.finish().call("clFinish")
    }

    /// Waits until every command enqueued so far has completed, as [`Gpu::completion`]
    /// says. `last` is the last of them: while polling, the one watched, and once it has
    /// completed (the queue is in order) nothing is left to finish.
    pub(crate) fn wait_for(&self, last: Option<&Event>) -> Result<(), ClError> {
        if let (Completion::Poll, Some(last)) = (self.completion, last) {
            self.queue.flush().call("clFlush")?;
            loop {
                match last.command_execution_status().call("clGetEventInfo")?.0 {
                    opencl3::event::CL_COMPLETE => return Ok(()),
                    // The command failed: the queue is still finished before the error
                    // goes back.
                    status if status < 0 => {
                        self.finish()?;
                        return Err(ClError::Call {
                            call: "a frame's last command (its execution status)",
                            code: RawClError(status),
                        });
                    }
                    _ => std::thread::sleep(POLL_STEP),
                }
            }
        }
        self.finish()
    }
}

/// The device unit tests run on: `EDGESIGHT_TEST_DEVICE` (a [`DeviceSpec`]), the default
/// device without it.
#[cfg(test)]
pub(crate) fn test_gpu() -> Gpu {
    let spec: DeviceSpec = std::env::var("EDGESIGHT_TEST_DEVICE")
        .unwrap_or_default()
        .parse()
        .expect("device spec");
    Gpu::open(&spec).expect("an OpenCL device (install pocl-opencl-icd)")
}

/// Tests that look at which `Gpu`s share a context take turns with those that stop one
/// sharing, which would otherwise split another's pair.
#[cfg(test)]
pub(crate) static SHARING_TESTS: Mutex<()> = Mutex::new(());

/// An in-order queue with profiling on `device`.
fn new_queue(context: &Context, device: &Device) -> Result<CommandQueue, ClError> {
    // clCreateCommandQueue (1.2) rather than the 2.0 call with properties.
    #[allow(deprecated)]
    // SAFETY: `context` and `device` are live handles, the device one of the context's,
    // and the properties are a plain bit field; the call writes only its error code.
    unsafe {
        CommandQueue::create(context, device.id(), CL_QUEUE_PROFILING_ENABLE)
            .call("clCreateCommandQueue")
    }
}

/// An element type a buffer can be copied to and from the host as.
///
/// # Safety
/// Every bit pattern of the type's size is a valid value (the device may write any), and
/// it has no padding (its bytes are copied to the device as they are): plain integers.
pub(crate) unsafe trait Plain: Copy + Default {}

// SAFETY: integers, for which every bit pattern is a value and which have no padding.
unsafe impl Plain for u8 {}
// SAFETY: as above.
unsafe impl Plain for u16 {}
// SAFETY: as above.
unsafe impl Plain for i16 {}
// SAFETY: as above.
unsafe impl Plain for u32 {}
// SAFETY: as above.
unsafe impl Plain for u64 {}

/// Copies `data` into `buffer` from element `offset` on, and returns once the copy is done.
pub(crate) fn write_blocking<T: Plain>(
    gpu: &Gpu,
    buffer: &mut Buffer<T>,
    offset: usize,
    data: &[T],
) -> Result<(), ClError> {
    // SAFETY: a blocking write has finished reading `data` when it returns, so the slice
    // borrowed for the call is all the host memory it touches; a range past the buffer's
    // end is refused (CL_INVALID_VALUE), not written.
    unsafe {
        gpu.queue.enqueue_write_buffer(
            buffer,
            CL_BLOCKING,
            offset * std::mem::size_of::<T>(),
            data,
            &[],
        )
    }
    .call("clEnqueueWriteBuffer")?;
    Ok(())
}

/// Fills `out` from `buffer` from element `offset` on, and returns once the copy is done.
pub(crate) fn read_blocking<T: Plain>(
    gpu: &Gpu,
    buffer: &Buffer<T>,
    offset: usize,
    out: &mut [T],
) -> Result<(), ClError> {
    // SAFETY: a blocking read has finished writing `out` when it returns, so the device
    // writes only into the slice borrowed for the call, and only plain integers, valid
    // for any bytes; a range past the buffer's end is refused (CL_INVALID_VALUE).
    unsafe {
        gpu.queue.enqueue_read_buffer(
            buffer,
            CL_BLOCKING,
            offset * std::mem::size_of::<T>(),
            out,
            &[],
        )
    }
    .call("clEnqueueReadBuffer")?;
    Ok(())
}

/// A buffer of `len` elements (at least one: OpenCL refuses empty buffers) that the
/// driver allocates, with the access `flags` (`CL_MEM_READ_WRITE`, `CL_MEM_ALLOC_HOST_PTR |
/// CL_MEM_READ_ONLY`, ...); flags that would hand it host memory are dropped.
pub(crate) fn new_buffer<T>(
    gpu: &Gpu,
    flags: cl_mem_flags,
    len: usize,
) -> Result<Buffer<T>, RawClError> {
    let flags = flags & !(CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR);
    // SAFETY: a null host pointer with neither CL_MEM_USE_HOST_PTR nor
    // CL_MEM_COPY_HOST_PTR (dropped above): the driver allocates the memory itself and
    // reads none of ours.
    unsafe { Buffer::<T>::create(gpu.context(), flags, len.max(1), std::ptr::null_mut()) }
}

/// Start and end of a finished command on the device clock, in nanoseconds, from its
/// profiling event.
pub(crate) fn event_interval(event: &Event) -> Result<(u64, u64), ClError> {
    let start = match event.profiling_command_start() {
        // The driver has not marked the command complete yet, though a later command on
        // its in-order queue has completed: NVIDIA's, when several queues share one
        // context, updates their events on one thread of its own, and may lag: wait.
        Err(e) if e.0 == opencl3::error_codes::CL_PROFILING_INFO_NOT_AVAILABLE => {
            event.wait().call("clWaitForEvents")?;
            event.profiling_command_start()
        }
        other => other,
    }
    .call("clGetEventProfilingInfo")?;
    let end = event
        .profiling_command_end()
        .call("clGetEventProfilingInfo")?;
    Ok((start, end))
}

/// Device time of a finished command, in nanoseconds, from its profiling event.
pub(crate) fn event_nanos(event: &Event) -> Result<u64, ClError> {
    let (start, end) = event_interval(event)?;
    Ok(end.saturating_sub(start))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(platform: &str, vendor: &str) -> ClDeviceInfo {
        ClDeviceInfo {
            platform: platform.into(),
            platform_version: String::new(),
            name: "a device".into(),
            vendor: vendor.into(),
            kind: "GPU",
            version: String::new(),
            driver_version: String::new(),
            opencl_c_version: String::new(),
            compute_units: 1,
            local_mem_bytes: 0,
            global_mem_bytes: 0,
            max_work_group_size: 1,
            unified_memory: None,
            fp64: false,
        }
    }

    /// Two `Gpu`s of one device (two cameras) share its context and the programs built
    /// in it, each with its own queue; once one stops sharing (its camera failed in an
    /// OpenCL call), the next one opened gets a new context while the two keep theirs.
    #[test]
    fn gpus_of_one_device_share_its_context_and_programs_until_one_stops_sharing() {
        let _turn = SHARING_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        let a = test_gpu();
        let b = test_gpu();
        assert!(a.shares_context_with(&b));
        assert_eq!(a.context().get(), b.context().get());
        assert_ne!(a.queue.get(), b.queue.get());
        let built = a.build(OTSU_CL).expect("build");
        assert!(Arc::ptr_eq(&built, &b.build(OTSU_CL).expect("build")));
        b.stop_sharing();
        let c = test_gpu();
        assert!(!c.shares_context_with(&a));
        assert_ne!(c.context().get(), a.context().get());
        assert!(a.shares_context_with(&b));
        assert!(test_gpu().shares_context_with(&c));
        // Programs are per context: the new one builds its own.
        assert!(!Arc::ptr_eq(&built, &c.build(OTSU_CL).expect("build")));
    }

    #[test]
    fn only_nvidia_devices_are_polled() {
        let poll = |p, v| Completion::for_device(&device(p, v));
        assert_eq!(poll("NVIDIA CUDA", "NVIDIA Corporation"), Completion::Poll);
        assert_eq!(poll("NVIDIA CUDA", ""), Completion::Poll);
        assert_eq!(
            poll("Portable Computing Language", "GenuineIntel"),
            Completion::Finish
        );
        assert_eq!(poll("ARM Platform", "ARM"), Completion::Finish);
    }
}
