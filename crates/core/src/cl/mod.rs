//! OpenCL plumbing on `opencl3`: choosing a device, building the embedded kernel sources,
//! frame slots and profiling. Host calls stay within OpenCL 1.2, which every Mali driver
//! offers; the library is loaded at run time (`OPENCL_DYLIB_PATH` overrides where from), so
//! the binary links no OpenCL and cross-builds anywhere.
//!
//! Knows nothing of images or stages: the pipeline asks it for programs and buffers.

// One unsafe operation per block, so each SAFETY comment covers exactly one.
#![deny(clippy::multiple_unsafe_ops_per_block)]

mod cache;
mod device;
mod launch;
mod raw;
mod slot;

pub use cache::ProgramCache;
pub use device::{list_devices, ClDeviceInfo, DeviceSpec, PlatformDevices, Selector};
pub use launch::{
    launch, ArgKind, KernelArg, KernelParams, LaunchRecord, LaunchRecorder, ParamVisitor,
};
pub use raw::Record;
pub(crate) use raw::{enqueue_fill, enqueue_write};
pub use raw::{ImportMemoryArm, NoImportFunction};
pub use slot::FrameSlot;

use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::context::Context;
use opencl3::device::Device;
pub(crate) use opencl3::error_codes::ClError as RawClError;
use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, CL_MEM_COPY_HOST_PTR, CL_MEM_USE_HOST_PTR};
use opencl3::program::Program;
use opencl3::types::{cl_mem_flags, CL_BLOCKING};
use std::sync::{Arc, Mutex, Weak};

/// Errors from OpenCL, each naming the call or file that failed.
#[derive(Debug, thiserror::Error)]
pub enum ClError {
    /// The OpenCL library (ICD loader) could not be loaded, or lacks a function it needs.
    #[error("OpenCL library not found or incomplete ({0}); install an OpenCL driver (e.g. Debian's pocl-opencl-icd) or point OPENCL_DYLIB_PATH at one")]
    NoLibrary(RawClError),
    /// The loader reports no OpenCL platform: no driver (ICD) is installed.
    #[error("no OpenCL platform found: is an OpenCL driver (ICD) installed?")]
    NoPlatform,
    /// No device matches the device spec given.
    #[error("no OpenCL device matches '{spec}'; available: {available}")]
    NoDevice {
        /// The device spec as given (see [`DeviceSpec`]).
        spec: String,
        /// Every device there is, as `P:D name (platform)` joined by ", ", or "none".
        available: String,
    },
    /// The driver's compiler rejected a kernel source.
    #[error("building kernels/{file} for {device} failed:\n{log}")]
    Build {
        /// The kernel file (or files, joined by " + ") under `kernels/`.
        file: String,
        /// The name of the device it was built for.
        device: String,
        /// The compiler's build log, or why the driver gave none.
        log: String,
    },
    /// The queue was asked for profiling events (`[opencl] profiling = "on"`) and the driver
    /// refused them; holds the refusal.
    #[error(
        "the driver refuses a queue with profiling events ({0}): it has no GPU timestamps \
         (on a Mali with Mesa: a panfrost kernel driver before DRM 1.3, or panthor before its \
         timestamp query); [opencl] profiling = \"auto\" or \"off\" times stages on the host"
    )]
    NoProfiling(Box<ClError>),
    /// Any other OpenCL call failed.
    #[error("{call} failed: {code}")]
    Call {
        /// The OpenCL call that failed (or what it was doing, where several could).
        call: &'static str,
        /// The OpenCL error code the call returned.
        code: RawClError,
    },
}

/// Attaches the failing call's name to a raw OpenCL error.
pub trait CallContext<T> {
    /// Maps the raw error to [`ClError::Call`], naming `call` (the OpenCL function called).
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
    /// The file under `kernels/`, or several joined by " + ": what names the program in logs
    /// and errors.
    pub file: &'static str,
    /// The whole source text, the files concatenated in order.
    pub text: &'static str,
}

macro_rules! kernel_source {
    ($file:literal $(, $more:literal)*) => {
        KernelSource {
            file: concat!($file $(, " + ", $more)*),
            text: concat!(
                include_str!(concat!("../../../../kernels/", $file))
                $(, include_str!(concat!("../../../../kernels/", $more)))*
            ),
        }
    };
}

pub(crate) const LUMA_CL: KernelSource = kernel_source!("luma.cl");
pub(crate) const RAW_CL: KernelSource = kernel_source!("raw.cl");
pub(crate) const SOBEL_CL: KernelSource = kernel_source!("sobel.cl");
pub(crate) const HISTOGRAM_CL: KernelSource = kernel_source!("histogram.cl");
/// otsu.cl alone: `otsu_threshold` and `binarize`, where Sobel's launch does not run Otsu.
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

/// A device with its context and its in-order, profiling command queue. One queue: a
/// second one beside it, for the histogram and Otsu while Sobel runs, took less off an
/// NVIDIA H100's span than its synchronisation cost the host a frame
/// (bench/notes/round3.md#h100-floor); GPUs now run Otsu inside Sobel's launch
/// instead, which needs no synchronisation at all.
///
/// Every `Gpu` of one device in the process shares one context and the programs built in
/// it (see [`Gpu::open`]); its queue is its own, as are the kernels and buffers made
/// through it.
pub struct Gpu {
    /// The OpenCL device this `Gpu` runs on.
    pub device: Device,
    /// This `Gpu`'s own in-order command queue (with profiling events under [`Timing::Device`]).
    pub queue: CommandQueue,
    /// What the driver says of the device: its names, versions and limits.
    pub info: ClDeviceInfo,
    /// How [`Gpu::wait_for`] waits for a frame's commands.
    pub completion: Completion,
    /// Where stage times come from: the queue's profiling events, or the host's clock.
    pub timing: Timing,
    shared: Arc<Shared>,
}

/// Whether a device's queue is asked for profiling events (`[opencl] profiling`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Profiling {
    /// Asked for, and where the driver refuses them, a plain queue. Mesa's Rusticl refuses
    /// them on a Mali whose kernel driver gives no GPU timestamp (panfrost before DRM 1.3,
    /// panthor before its timestamp query), though its device info says it profiles.
    #[default]
    Auto,
    /// Asked for; a driver that refuses them cannot be used.
    On,
    /// Never asked for (profiling costs some drivers time on every command).
    Off,
}

impl Profiling {
    /// Every setting, in the order `auto`, `on`, `off`.
    pub const ALL: [Profiling; 3] = [Profiling::Auto, Profiling::On, Profiling::Off];

    /// The setting as `[opencl] profiling` spells it: "auto", "on" or "off".
    pub fn name(self) -> &'static str {
        match self {
            Profiling::Auto => "auto",
            Profiling::On => "on",
            Profiling::Off => "off",
        }
    }
}

impl std::fmt::Display for Profiling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Profiling {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        Profiling::ALL
            .into_iter()
            .find(|p| p.name() == wanted)
            .ok_or_else(|| format!("unknown profiling '{s}' (expected auto, on or off)"))
    }
}

/// Where a [`Gpu`]'s stage times come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Timing {
    /// The device's own clock, from each command's profiling event.
    Device,
    /// The host's clock: on a timed frame each stage is waited for before the next is
    /// enqueued, and its time runs from the end of the one before (so it includes the
    /// launch and the wait, and the frame loses the overlap of its stages).
    Host,
}

impl Timing {
    /// The source's name as reports give it: "device" or "host".
    pub fn name(self) -> &'static str {
        match self {
            Timing::Device => "device",
            Timing::Host => "host",
        }
    }
}

/// What the `Gpu`s of one device share: its context, and the programs built in it so far,
/// by file and defines, so that a pipeline built again (new size, new options, a reload,
/// another camera) reuses them instead of calling the compiler again. POCL keeps with each
/// program its preprocessed source and its LLVM module, which each camera held again
/// before they were shared (bench/notes/round3.md#memory).
/// OpenCL's calls on a context and on programs are thread-safe (clSetKernelArg is the
/// exception, and kernels are never shared).
struct Shared {
    context: Context,
    /// In the order they were built.
    programs: Mutex<Vec<BuiltProgram>>,
    /// Where programs are kept between starts.
    cache: Mutex<Option<ProgramCache>>,
}

/// A program built in a context, and how long the driver took to build it.
#[derive(Clone)]
pub struct BuiltProgram {
    /// The kernel file (or files, joined by " + ") it was built from.
    pub file: &'static str,
    /// Its `-D` options (beside [`BUILD_OPTIONS`]).
    pub defines: String,
    /// The built program, shared by every `Gpu` of the context.
    pub program: Arc<Program>,
    /// How long the build took on the host's clock, whether from source or from a kept binary.
    pub build_time: std::time::Duration,
    /// Whether it was made of a binary kept from an earlier build ([`ProgramCache`]).
    pub from_cache: bool,
    /// The kernels made of it with [`Gpu::kernel`], in the order they were first made.
    pub kernels_made: Vec<&'static str>,
    text: &'static str,
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
        let shared = Shared::new(device, ProgramCache::from_env())?;
        open.push((id, Arc::downgrade(&shared)));
        Ok(shared)
    }

    /// A context of `device`'s own, with nothing built in it yet.
    fn new(device: &Device, cache: Option<ProgramCache>) -> Result<Arc<Shared>, ClError> {
        Ok(Arc::new(Shared {
            context: Context::from_device(device).call("clCreateContext")?,
            programs: Mutex::new(Vec::new()),
            cache: Mutex::new(cache),
        }))
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
    /// times the CPU of a polled wait (bench/notes/round3.md#host-cpu).
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
        Gpu::open_with(spec, Profiling::Auto)
    }

    /// As [`Gpu::open`], its queue asked for profiling events as `profiling` says.
    pub fn open_with(spec: &DeviceSpec, profiling: Profiling) -> Result<Gpu, ClError> {
        let (device, info) = device::select(spec)?;
        let shared = Shared::for_device(&device)?;
        let (queue, timing) = new_queue(&shared.context, &device, profiling)?;
        Ok(Gpu {
            device,
            queue,
            completion: Completion::for_device(&info),
            timing,
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
    /// each build a noticeable time natively and far more under emulation
    /// (BENCHMARKS.md#kernel-builds).
    pub fn build_with(&self, source: KernelSource, defines: &str) -> Result<Arc<Program>, ClError> {
        let mut programs = self.programs();
        if let Some(built) = programs
            .iter()
            .find(|b| b.file == source.file && b.text == source.text && b.defines == defines)
        {
            return Ok(Arc::clone(&built.program));
        }
        let options = format!("{BUILD_OPTIONS} {defines}");
        let _building = Building::start();
        let started = std::time::Instant::now();
        let cache = self
            .program_cache()
            .filter(|_| keeps_binaries_worth_keeping(&self.info));
        let key = ProgramCache::key(&self.info, &options, source.text);
        let cached = cache
            .as_ref()
            .and_then(|c| c.load(&key))
            .and_then(|binary| match self.build_binary(&binary, &options) {
                Ok(program) => Some(program),
                Err(e) => {
                    tracing::warn!(
                        file = source.file,
                        "the driver refused the kept binary ({e}); building from source"
                    );
                    None
                }
            });
        let from_cache = cached.is_some();
        let program = match cached {
            Some(program) => program,
            None => {
                let mut program = Program::create_from_source(self.context(), source.text)
                    .call("clCreateProgramWithSource")?;
                // Where the driver's compiler prints what it makes of each kernel (Mesa's
                // BIFROST_MESA_DEBUG=shaderdb), this line tells whose kernels follow.
                tracing::debug!(file = source.file, defines, device = %self.info.name, "building kernels");
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
                if let Some(cache) = &cache {
                    keep_binary(cache, &key, &program, source.file);
                }
                program
            }
        };
        let build_time = started.elapsed();
        // A build that takes long is a board's first start: said, with where it is kept.
        let seconds = build_time.as_secs_f64();
        if !from_cache && seconds >= 1.0 {
            tracing::info!(file = source.file, defines, seconds, device = %self.info.name, "built kernels");
        } else {
            tracing::debug!(
                file = source.file,
                defines,
                seconds,
                from_cache,
                "built kernels"
            );
        }
        let program = Arc::new(program);
        programs.push(BuiltProgram {
            file: source.file,
            defines: defines.to_string(),
            program: Arc::clone(&program),
            build_time,
            from_cache,
            kernels_made: Vec::new(),
            text: source.text,
        });
        Ok(program)
    }

    /// A program made from a binary this device's driver made, built with `options`.
    fn build_binary(&self, binary: &[u8], options: &str) -> Result<Program, ClError> {
        // SAFETY: the device is the context's (the context was made of it alone).
        let mut program =
            unsafe { Program::create_from_binary(self.context(), &[self.device.id()], &[binary]) }
                .call("clCreateProgramWithBinary")?;
        program
            .build(&[self.device.id()], options)
            .call("clBuildProgram (a kept binary)")?;
        Ok(program)
    }

    /// Where this `Gpu`'s programs are kept between starts, if anywhere.
    pub fn program_cache(&self) -> Option<ProgramCache> {
        self.shared
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Keeps the programs built from now on in `cache` (none: nowhere), and takes them
    /// from there.
    pub fn set_program_cache(&self, cache: Option<ProgramCache>) {
        *self.shared.cache.lock().unwrap_or_else(|e| e.into_inner()) = cache;
    }

    /// The kernel `name` of `program` (built on this `Gpu`), noted as made: what a
    /// pipeline launches, among all the kernels its programs hold
    /// ([`BuiltProgram::kernels_made`]).
    pub fn kernel(&self, program: &Program, name: &'static str) -> Result<Kernel, ClError> {
        let kernel = Kernel::create(program, name).call("clCreateKernel")?;
        let mut programs = self.programs();
        if let Some(built) = programs
            .iter_mut()
            .find(|b| std::ptr::eq(Arc::as_ptr(&b.program), program))
        {
            if !built.kernels_made.contains(&name) {
                built.kernels_made.push(name);
            }
        }
        Ok(kernel)
    }

    /// The programs built in this `Gpu`'s context so far, in the order they were built.
    pub fn built_programs(&self) -> Vec<BuiltProgram> {
        self.programs().clone()
    }

    /// The programs built in this `Gpu`'s context, held until the guard is dropped.
    fn programs(&self) -> std::sync::MutexGuard<'_, Vec<BuiltProgram>> {
        self.shared
            .programs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Another `Gpu` of this device with a context of its own, which no other `Gpu`
    /// shares, in which nothing is built yet and which keeps no program between starts
    /// (what a cold start builds, and how long that takes, is then its own), and a queue
    /// timed as this one's.
    pub fn alone(&self) -> Result<Gpu, ClError> {
        let shared = Shared::new(&self.device, None)?;
        let profiling = match self.timing {
            Timing::Device => Profiling::On,
            Timing::Host => Profiling::Off,
        };
        let (queue, timing) = new_queue(&shared.context, &self.device, profiling)?;
        Ok(Gpu {
            device: Device::new(self.device.id()),
            queue,
            completion: self.completion,
            timing,
            info: self.info.clone(),
            shared,
        })
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

/// Builds under way in this process: while one is, a camera loop that has not turned is
/// compiling, not hung (the daemon's watchdog and systemd's start timeout wait for it).
static BUILDS: Mutex<Vec<std::time::Instant>> = Mutex::new(Vec::new());

/// One build under way, from its start until this is dropped.
struct Building(std::time::Instant);

impl Building {
    fn start() -> Building {
        let now = std::time::Instant::now();
        BUILDS.lock().unwrap_or_else(|e| e.into_inner()).push(now);
        Building(now)
    }
}

impl Drop for Building {
    fn drop(&mut self) {
        let mut builds = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = builds.iter().position(|&t| t == self.0) {
            builds.swap_remove(i);
        }
    }
}

/// How long the oldest program build under way in this process has run, if one is.
pub fn build_under_way() -> Option<std::time::Duration> {
    let builds = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    builds.iter().min().map(|t| t.elapsed())
}

/// Whether a program's binary saves `info`'s driver a build at the next start. Mesa's
/// Rusticl hands out SPIR-V and compiles it again in full when given it back: on its
/// Panfrost driver the integral's program took 206 s that way against 106 s from source,
/// while Mesa's own shader cache (`MESA_SHADER_CACHE_DIR`, which the unit points into its
/// cache directory) brought the next start's build down to 0.09 s
/// (BENCHMARKS.md#kernel-builds).
fn keeps_binaries_worth_keeping(info: &ClDeviceInfo) -> bool {
    !info.platform.to_ascii_lowercase().contains("rusticl")
}

/// Keeps `program`'s binary in `cache` under `key`; a failure is logged and costs only
/// the next start's build.
fn keep_binary(cache: &ProgramCache, key: &str, program: &Program, file: &str) {
    let kept = match program.get_binaries() {
        Ok(binaries) => match binaries.as_slice() {
            [binary] if !binary.is_empty() => cache.store(key, binary).map_err(|e| e.to_string()),
            _ => Err("the driver gave no binary".to_string()),
        },
        Err(e) => Err(e.to_string()),
    };
    match kept {
        Ok(path) => tracing::debug!(file, path = %path.display(), "kept the program's binary"),
        Err(e) => tracing::warn!(
            file,
            dir = %cache.dir().display(),
            "could not keep the program's binary for the next start: {e}"
        ),
    }
}

/// The device unit tests run on: `EDGESIGHT_TEST_DEVICE` (a [`DeviceSpec`]), the default
/// device without it.
#[cfg(any(test, feature = "test-support"))]
pub fn test_gpu() -> Gpu {
    test_gpu_with(Profiling::Auto)
}

/// [`test_gpu`], its queue asked for profiling events as `profiling` says.
#[cfg(any(test, feature = "test-support"))]
pub fn test_gpu_with(profiling: Profiling) -> Gpu {
    let spec: DeviceSpec = std::env::var("EDGESIGHT_TEST_DEVICE")
        .unwrap_or_default()
        .parse()
        .expect("device spec");
    Gpu::open_with(&spec, profiling).expect("an OpenCL device (install pocl-opencl-icd)")
}

/// Tests that look at which `Gpu`s share a context take turns with those that stop one
/// sharing, which would otherwise split another's pair.
#[cfg(any(test, feature = "test-support"))]
pub static SHARING_TESTS: Mutex<()> = Mutex::new(());

/// An in-order queue on `device`, with profiling events as `profiling` asks and the
/// driver allows, and where its stage times will come from.
fn new_queue(
    context: &Context,
    device: &Device,
    profiling: Profiling,
) -> Result<(CommandQueue, Timing), ClError> {
    let create = |properties| {
        // clCreateCommandQueue (1.2) rather than the 2.0 call with properties.
        #[allow(deprecated)]
        // SAFETY: `context` and `device` are live handles, the device one of the
        // context's, and the properties are a plain bit field; the call writes only its
        // error code.
        unsafe {
            CommandQueue::create(context, device.id(), properties).call("clCreateCommandQueue")
        }
    };
    match profiling {
        Profiling::Off => Ok((create(0)?, Timing::Host)),
        Profiling::On => match create(CL_QUEUE_PROFILING_ENABLE) {
            Ok(queue) => Ok((queue, Timing::Device)),
            Err(e) => Err(ClError::NoProfiling(Box::new(e))),
        },
        Profiling::Auto => match create(CL_QUEUE_PROFILING_ENABLE) {
            Ok(queue) => Ok((queue, Timing::Device)),
            Err(_) => Ok((create(0)?, Timing::Host)),
        },
    }
}

/// Whether `device`'s driver gives a queue profiling events, as `edgesight devices` says:
/// only trying tells (Rusticl's device info offers them where its queues refuse them).
pub fn offers_profiling(device: &Device) -> Result<bool, ClError> {
    let context = Context::from_device(device).call("clCreateContext")?;
    Ok(new_queue(&context, device, Profiling::Auto)?.1 == Timing::Device)
}

/// An element type a buffer can be copied to and from the host as.
///
/// # Safety
/// Every bit pattern of the type's size is a valid value (the device may write any), and
/// it has no padding (its bytes are copied to the device as they are): plain integers.
pub(crate) unsafe trait Plain: Copy + Default {
    /// The value of the low bits of `bits` (what a broken device might have written).
    #[cfg(any(test, feature = "test-support"))]
    fn from_bits(bits: u64) -> Self;
}

macro_rules! plain {
    ($($t:ty),*) => {$(
        // SAFETY: an integer, for which every bit pattern is a value and which has no
        // padding.
        unsafe impl Plain for $t {
            #[cfg(any(test, feature = "test-support"))]
            fn from_bits(bits: u64) -> Self {
                bits as $t
            }
        }
    )*};
}

plain!(u8, u16, i16, u32, u64);

/// A device that writes garbage, for tests: while [`scribble`] is on in a thread, what
/// that thread reads from a device is replaced by random values, as a broken driver might
/// hand back anything.
#[cfg(any(test, feature = "test-support"))]
pub mod scribble {
    use std::cell::Cell;

    /// Which of the device's reads are replaced.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Reads {
        /// Every read.
        All,
        /// A frame's small results (histograms, threshold, sums, motion's counts), read
        /// behind its kernels in one go.
        Results,
        /// Everything else: images, integrals, motion's state, guard bands.
        Images,
    }

    thread_local! {
        static STATE: Cell<Option<(u64, Reads)>> = const { Cell::new(None) };
    }

    /// Replaces the device reads `what` says of this thread with random values from
    /// `seed` on, until [`off`].
    pub fn on(seed: u64, what: Reads) {
        STATE.with(|s| s.set(Some((seed | 1, what))));
    }

    /// Stops replacing this thread's reads.
    pub fn off() {
        STATE.with(|s| s.set(None));
    }

    /// `out`, a read of the kind `kind`, overwritten with random values where scribbling
    /// is on for it.
    pub(crate) fn over<T: super::Plain>(kind: Reads, out: &mut [T]) {
        STATE.with(|s| {
            let Some((mut x, what)) = s.get() else {
                return;
            };
            if what != Reads::All && what != kind {
                return;
            }
            for v in out {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *v = T::from_bits(x);
            }
            s.set(Some((x, what)));
        });
    }
}

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
    #[cfg(any(test, feature = "test-support"))]
    scribble::over(scribble::Reads::Images, out);
    Ok(())
}

/// A buffer of `len` elements (at least one: OpenCL refuses empty buffers) that the
/// driver allocates, with the access `flags` (`CL_MEM_READ_WRITE`, `CL_MEM_ALLOC_HOST_PTR |
/// CL_MEM_READ_ONLY`, ...); flags that would hand it host memory are dropped.
pub fn new_buffer<T>(gpu: &Gpu, flags: cl_mem_flags, len: usize) -> Result<Buffer<T>, RawClError> {
    let flags = flags & !(CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR);
    // SAFETY: a null host pointer with neither CL_MEM_USE_HOST_PTR nor
    // CL_MEM_COPY_HOST_PTR (dropped above): the driver allocates the memory itself and
    // reads none of ours.
    unsafe { Buffer::<T>::create(gpu.context(), flags, len.max(1), std::ptr::null_mut()) }
}

/// Start and end of a finished command on the device clock, in nanoseconds, from its
/// profiling event.
pub fn event_interval(event: &Event) -> Result<(u64, u64), ClError> {
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
pub fn event_nanos(event: &Event) -> Result<u64, ClError> {
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

    /// A program built with a cache is kept there, and a context of its own built later
    /// takes it from there, its kernels the same; a kept binary the driver refuses (here:
    /// garbage under the right key) is rebuilt from source and replaced.
    #[test]
    fn programs_are_kept_between_starts_and_a_refused_binary_is_rebuilt() {
        let dir =
            std::env::temp_dir().join(format!("edgesight-program-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = ProgramCache::at(&dir);
        let first = test_gpu().alone().expect("context");
        first.set_program_cache(Some(cache.clone()));
        first.build(OTSU_CL).expect("build");
        let built = first.built_programs();
        assert!(!built[0].from_cache);
        let files = || std::fs::read_dir(&dir).map_or(0, |d| d.count());
        assert_eq!(files(), 1);

        let second = test_gpu().alone().expect("context");
        second.set_program_cache(Some(cache.clone()));
        let program = second.build(OTSU_CL).expect("build");
        assert!(second.built_programs()[0].from_cache);
        assert_eq!(
            program.get_kernel_names().expect("names"),
            built[0].program.get_kernel_names().expect("names")
        );
        second
            .kernel(&program, "binarize")
            .expect("a kernel of the kept binary");

        let key = ProgramCache::key(&second.info, &format!("{BUILD_OPTIONS} "), OTSU_CL.text);
        cache.store(&key, b"not a binary at all").expect("store");
        let third = test_gpu().alone().expect("context");
        third.set_program_cache(Some(cache.clone()));
        third.build(OTSU_CL).expect("rebuilt from source");
        assert!(!third.built_programs()[0].from_cache);
        assert_ne!(
            cache.load(&key).as_deref(),
            Some(&b"not a binary at all"[..])
        );
        assert_eq!(files(), 1);
        let _ = std::fs::remove_dir_all(&dir);
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
