//! `selftest --json`: what a board user pastes into an issue. The board and its kernel
//! driver ([`Board`]), the OpenCL driver and its versions, the USERPTR check on a camera,
//! every kernel as the driver built it (`kernels`' own [`build_every_program`]), the
//! checks' table, the coherency run, and every stage's device time at three sizes
//! (`bench`'s own [`bench::bench_size`]) on the device and on POCL's CPU device beside it.
//!
//! A part that fails says why in its place (`{"error": ...}`) and the others are still
//! measured: a failing board's report is the most useful one. Nothing is filled in that
//! was not read or measured: what is absent is `null` or says why it is.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use serde_json::{json, Value};

use crate::bench::{self, JsonSize};
use edgesight::board::versions::DriverVersions;
use edgesight::board::Board;
use edgesight::capture::pattern::PatternFrame;
use edgesight::capture::{self, IoMode, Next, SourceSpec};
use edgesight::cl::{list_devices, offers_profiling, ClDeviceInfo, DeviceSpec, Gpu, Profiling};
use edgesight::frame::{CaptureFormat, PixelFormat, Size};
use edgesight::pipeline::programs::{build_every_program, ProgramInfo};
use edgesight::pipeline::{Tuning, TuningChoice};
use edgesight::selftest::coherency::Coherency;
use edgesight::selftest::{Findings, StageResult};

/// The sizes every stage is timed at: 720p, 1080p and 4K.
pub(crate) const SIZES: [Size; 3] = [
    Size {
        width: 1280,
        height: 720,
    },
    Size {
        width: 1920,
        height: 1080,
    },
    Size {
        width: 3840,
        height: 2160,
    },
];
/// Timed runs a size, after the warm-up ones: a few, as selftest must stay quick (`bench`
/// measures at length).
pub(crate) const RUNS: usize = 5;
pub(crate) const WARMUP: usize = 2;
/// How long the USERPTR check waits for the camera's first frame.
const CAMERA_WAIT: Duration = Duration::from_secs(5);

/// A part of the report, or why it is missing.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum ReportPart<T> {
    Done(T),
    Failed { error: String },
}

impl<T, E: std::fmt::Display> From<Result<T, E>> for ReportPart<T> {
    fn from(result: Result<T, E>) -> ReportPart<T> {
        match result {
            Ok(value) => ReportPart::Done(value),
            Err(e) => ReportPart::Failed {
                error: format!("{e:#}"),
            },
        }
    }
}

/// The whole report.
#[derive(Serialize)]
pub(crate) struct BoardReport {
    pub(crate) edgesight: &'static str,
    /// Every check (the stages' table and the coherency run) matched the reference.
    pub(crate) passed: bool,
    pub(crate) board: Board,
    pub(crate) opencl: OpenCl,
    pub(crate) userptr: Userptr,
    pub(crate) kernels: ReportPart<Kernels>,
    pub(crate) checks: ReportPart<Checks>,
    pub(crate) coherency: ReportPart<Coherency>,
    pub(crate) stage_times: StageTimes,
}

/// The chosen device as its driver describes it.
#[derive(Serialize)]
pub(crate) struct OpenCl {
    #[serde(flatten)]
    pub(crate) info: ClDeviceInfo,
    #[serde(flatten)]
    pub(crate) versions: DriverVersions,
    /// Whether the driver gives a queue profiling events (only trying tells).
    pub(crate) profiling: ReportPart<bool>,
    /// Where selftest's own stage times came from.
    pub(crate) timing: &'static str,
    /// The tuning `auto` gives the device (the daemon's).
    pub(crate) tuning_auto: &'static str,
    /// `None` where the driver did not answer the extensions' query.
    pub(crate) cl_arm_import_memory: Option<bool>,
    pub(crate) cl_arm_import_memory_dma_buf: Option<bool>,
    pub(crate) extensions: ReportPart<Vec<String>>,
}

impl OpenCl {
    pub(crate) fn of(gpu: &Gpu) -> OpenCl {
        let info = gpu.info.clone();
        let versions = DriverVersions::parse(
            &info.platform,
            &[&info.platform_version, &info.version, &info.driver_version],
        );
        let extensions: Result<Vec<String>, _> = gpu
            .device
            .extensions()
            .map(|all| all.split_whitespace().map(str::to_string).collect());
        let has = |name: &str| {
            extensions
                .as_ref()
                .ok()
                .map(|all: &Vec<String>| all.iter().any(|e| e == name))
        };
        OpenCl {
            versions,
            profiling: offers_profiling(&gpu.device).into(),
            timing: gpu.timing.name(),
            tuning_auto: Tuning::for_info(&info).name(),
            cl_arm_import_memory: has("cl_arm_import_memory"),
            cl_arm_import_memory_dma_buf: has("cl_arm_import_memory_dma_buf"),
            extensions: extensions.into(),
            info,
        }
    }
}

/// Whether a camera's driver takes a mapped frame slot as V4L2 USERPTR memory.
#[derive(Serialize)]
pub(crate) struct Userptr {
    pub(crate) camera: Option<String>,
    pub(crate) tried: bool,
    /// A frame arrived in a mapped slot; `None` where not tried.
    pub(crate) taken: Option<bool>,
    pub(crate) detail: String,
}

impl Userptr {
    /// Opens `camera` with USERPTR slots only and waits for one frame.
    pub(crate) fn check(gpu: &Gpu, camera: Option<&Path>) -> Userptr {
        let Some(camera) = camera else {
            return Userptr {
                camera: None,
                tried: false,
                taken: None,
                detail: "not tried: it needs a V4L2 camera (selftest --camera /dev/videoN)".into(),
            };
        };
        if !camera.exists() {
            return Userptr {
                camera: Some(camera.display().to_string()),
                tried: false,
                taken: None,
                detail: format!("not tried: {}: no such device", camera.display()),
            };
        }
        let spec = SourceSpec::V4l2 {
            device: camera.to_path_buf(),
            format: None,
            size: None,
            fps: None,
            io: Some(IoMode::Userptr),
            scale: Default::default(),
        };
        let (taken, detail) = match first_frame(gpu, &spec) {
            Ok(detail) => (true, detail),
            Err(why) => (false, format!("{why:#}")),
        };
        Userptr {
            camera: Some(camera.display().to_string()),
            tried: true,
            taken: Some(taken),
            detail,
        }
    }
}

/// Waits for `spec`'s first frame: what the source is, or why none came.
fn first_frame(gpu: &Gpu, spec: &SourceSpec) -> anyhow::Result<String> {
    let mut source = capture::open(spec, gpu)?;
    let give_up = Instant::now() + CAMERA_WAIT;
    while Instant::now() < give_up {
        match source.next_frame(gpu, Duration::from_millis(200)) {
            Ok(Next::Frame(_)) => return Ok(format!("a frame arrived: {}", source.describe())),
            Ok(Next::Idle) => {}
            Err(e) => return Err(e.into()),
        }
    }
    anyhow::bail!(
        "no frame within {} s ({}, {})",
        CAMERA_WAIT.as_secs(),
        source.describe(),
        if source.is_up() { "up" } else { "down" }
    )
}

/// Every program of the tuning, each built cold.
#[derive(Serialize)]
pub(crate) struct Kernels {
    pub(crate) tuning: &'static str,
    /// The programs' build times together: a cold start's compile.
    pub(crate) build_seconds: f64,
    pub(crate) programs: Vec<ProgramInfo>,
}

impl Kernels {
    pub(crate) fn build(gpu: &Gpu, tuning: Tuning) -> anyhow::Result<Kernels> {
        let programs = build_every_program(gpu, tuning)?;
        Ok(Kernels {
            tuning: tuning.name(),
            build_seconds: programs.iter().map(|p| p.build_seconds).sum(),
            programs,
        })
    }
}

/// The checks' table: every stage's checks, mismatches and first difference.
#[derive(Serialize)]
pub(crate) struct Checks {
    pub(crate) tunings: Vec<&'static str>,
    /// Synthetic frames a tuning checks (motion's scenes beside them).
    pub(crate) frames: usize,
    pub(crate) motion_scenes: usize,
    pub(crate) seconds: f64,
    pub(crate) stages: std::collections::BTreeMap<&'static str, StageResult>,
}

impl Checks {
    pub(crate) fn of(
        findings: &Findings,
        tunings: &[Tuning],
        frames: usize,
        seconds: f64,
    ) -> Checks {
        Checks {
            tunings: tunings.iter().map(Tuning::name).collect(),
            frames,
            motion_scenes: edgesight::selftest::MOTION_SCENES,
            seconds,
            stages: findings.every_stage(),
        }
    }
}

/// Every stage's device time at [`SIZES`], on the device and on POCL's CPU device.
#[derive(Serialize)]
pub(crate) struct StageTimes {
    pub(crate) runs: usize,
    pub(crate) warmup: usize,
    pub(crate) format: &'static str,
    pub(crate) device: ReportPart<Timed>,
    /// POCL's CPU device beside the chosen one: timed, or why not.
    pub(crate) pocl_cpu: PoclTimes,
}

/// POCL's CPU device's times, or why there are none.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum PoclTimes {
    Timed(Timed),
    NotTimed { not_timed: &'static str },
    Failed { error: String },
}

/// One device's times, each size as `bench --json` writes it (or why it failed).
#[derive(Serialize)]
pub(crate) struct Timed {
    pub(crate) device: String,
    pub(crate) tuning: &'static str,
    pub(crate) sizes: Vec<Value>,
}

impl StageTimes {
    /// Times `gpu`'s device (`spec` opens it again with a profiling queue) with `tuning`,
    /// and POCL's CPU device with its own where the machine has one besides.
    pub(crate) fn measure(gpu: &Gpu, spec: &DeviceSpec, tuning: TuningChoice) -> Self {
        let device = Gpu::open_with(spec, Profiling::On)
            .context("no profiling queue on the device, so no device times")
            .map(|g| timed(&g, tuning.resolve(&g)));
        StageTimes {
            runs: RUNS,
            warmup: WARMUP,
            format: PixelFormat::Grey.name(),
            device: device.into(),
            pocl_cpu: match pocl_beside(gpu) {
                Ok(Pocl::Beside(spec)) => match Gpu::open_with(&spec, Profiling::On) {
                    Ok(pocl) => PoclTimes::Timed(timed(&pocl, TuningChoice::Auto.resolve(&pocl))),
                    Err(e) => PoclTimes::Failed {
                        error: e.to_string(),
                    },
                },
                Ok(Pocl::IsTheDevice) => PoclTimes::NotTimed {
                    not_timed: "the chosen device is POCL's CPU device: its times are the device's",
                },
                Ok(Pocl::Absent) => PoclTimes::NotTimed {
                    not_timed: "no POCL CPU device on this machine (pocl-opencl-icd)",
                },
                Err(e) => PoclTimes::Failed {
                    error: format!("{e:#}"),
                },
            },
        }
    }
}

impl StageTimes {
    /// One line: the pipeline's device time at each size, on the device and on POCL's.
    pub(crate) fn summary(&self) -> String {
        let sizes = |t: &Timed| -> String {
            let each: Vec<String> = t
                .sizes
                .iter()
                .map(|s| match s["pipeline_device_ms"].as_f64() {
                    Some(ms) => format!("{}x{} {ms:.2} ms", s["width"], s["height"]),
                    None => format!("{}x{} failed", s["width"], s["height"]),
                })
                .collect();
            each.join(", ")
        };
        let device = match &self.device {
            ReportPart::Done(t) => sizes(t),
            ReportPart::Failed { error } => error.clone(),
        };
        let pocl = match &self.pocl_cpu {
            PoclTimes::Timed(t) => sizes(t),
            PoclTimes::NotTimed { not_timed } => not_timed.to_string(),
            PoclTimes::Failed { error } => error.clone(),
        };
        format!(
            "stage times ({} runs a size), the pipeline's device time: {device}; POCL's CPU \
             device: {pocl}",
            self.runs
        )
    }
}

/// `bench` at every size of [`SIZES`] on `gpu`.
fn timed(gpu: &Gpu, tuning: Tuning) -> Timed {
    let sizes = SIZES
        .iter()
        .map(|&size| {
            let measured = PatternFrame::new(CaptureFormat::Pixels(PixelFormat::Grey), size, false)
                .map_err(bench::BenchError::from)
                .and_then(|frame| {
                    bench::bench_size(gpu, tuning, &frame, WARMUP, RUNS, &mut |_, _, _, _| {})
                });
            match measured {
                Ok(figures) => serde_json::to_value(JsonSize::new(&figures)).unwrap_or_else(
                    |e| json!({"width": size.width, "height": size.height, "error": e.to_string()}),
                ),
                Err(e) => {
                    json!({"width": size.width, "height": size.height, "error": e.to_string()})
                }
            }
        })
        .collect();
    Timed {
        device: gpu.info.to_string(),
        tuning: tuning.name(),
        sizes,
    }
}

/// POCL's CPU device beside the chosen one.
enum Pocl {
    Beside(DeviceSpec),
    IsTheDevice,
    Absent,
}

/// POCL's CPU device where the machine has one, as an index in `devices`' order.
fn pocl_beside(gpu: &Gpu) -> anyhow::Result<Pocl> {
    let platforms = list_devices()?;
    let devices = platforms.iter().flat_map(|p| {
        let name = p.name.to_ascii_lowercase();
        let pocl = name.contains("portable computing language") || name.contains("pocl");
        p.devices
            .iter()
            .map(move |(device, info)| (pocl, device, info))
    });
    for (index, (pocl, device, info)) in devices.enumerate() {
        if pocl && info.kind == "CPU" {
            return Ok(if device.id() == gpu.device.id() {
                Pocl::IsTheDevice
            } else {
                Pocl::Beside(DeviceSpec::Index(index))
            });
        }
    }
    Ok(Pocl::Absent)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part is its value, or its error in the value's place.
    #[test]
    fn a_part_is_its_value_or_its_error() {
        let done: ReportPart<u32> = Ok::<u32, String>(3).into();
        let failed: ReportPart<u32> = Err::<u32, String>("no profiling".into()).into();
        assert_eq!(serde_json::to_value(done).expect("json"), json!(3));
        assert_eq!(
            serde_json::to_value(failed).expect("json"),
            json!({"error": "no profiling"})
        );
    }

    /// Without a camera, or with a path that does not exist, the USERPTR check is not tried
    /// and says why; with a device that is no camera it is tried, not taken, and the
    /// reason names the device.
    #[test]
    fn userptr_without_a_camera_is_not_tried() {
        let gpu = super::super::tests::gpu();
        let none = serde_json::to_value(Userptr::check(&gpu, None)).expect("json");
        assert_eq!(
            none,
            json!({
                "camera": null, "tried": false, "taken": null,
                "detail": "not tried: it needs a V4L2 camera (selftest --camera /dev/videoN)",
            })
        );
        let missing = serde_json::to_value(Userptr::check(
            &gpu,
            Some(Path::new("/dev/edgesight-no-such-camera")),
        ))
        .expect("json");
        assert_eq!(
            missing,
            json!({
                "camera": "/dev/edgesight-no-such-camera", "tried": false, "taken": null,
                "detail": "not tried: /dev/edgesight-no-such-camera: no such device",
            })
        );
        let not_a_camera = Userptr::check(&gpu, Some(Path::new("/dev/null")));
        assert_eq!(
            (
                not_a_camera.camera.as_deref(),
                not_a_camera.tried,
                not_a_camera.taken
            ),
            (Some("/dev/null"), true, Some(false))
        );
        assert_eq!(
            not_a_camera.detail,
            "/dev/null: not a V4L2 device (VIDIOC_QUERYCAP refused)"
        );
    }
}
