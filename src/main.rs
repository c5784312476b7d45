//! The `edgesight` command line: `devices` lists what OpenCL and V4L2 offer, `process` runs
//! the pipeline on one image or raw frame and writes a report, pictures and raw outputs,
//! `capture` does the same for the last of N frames from a camera (or any frame source),
//! `bench` measures the pipeline per frame size beside a device copy of the same bytes;
//! `run` is the daemon and `check-config` checks its config file.
//!
//! Exit codes: 0 success, 2 bad input or usage (the message names the file, flag or
//! device), 1 anything else (an OpenCL failure).

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser, Subcommand};

use edgesight::bench::{self, JsonReport, JsonSize, SizeFigures};
use edgesight::capture::{self, v4l2, CaptureError, InvalidSource, IoMode, Next, SourceSpec};
use edgesight::cl::{self, ClError, DeviceSpec, Gpu};
use edgesight::config::{self, ConfigError, Overrides};
use edgesight::frame::{LayoutError, PixelFormat, Size};
use edgesight::input::{self, InputError};
use edgesight::pipeline::{
    Border, FrameResult, Images, Magnitude, Pipeline, PipelineOptions, StageTimings,
};
use edgesight::region::{Region, RegionError};
use edgesight::report::{self, Report};

#[derive(Parser)]
#[command(
    name = "edgesight",
    version,
    about = "Vision telemetry: camera frames through OpenCL kernels into metrics"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List every OpenCL platform and device, and the V4L2 capture devices.
    Devices,
    /// Run the pipeline on one image or raw frame and write the results into a directory.
    Process(ProcessArgs),
    /// Measure the pipeline on synthetic frames: per-stage and pipeline device time, host
    /// wall time per frame, bandwidth against a device copy of the same bytes, ns per pixel.
    Bench(BenchArgs),
    /// Run the daemon: capture, process and export metrics over HTTP until SIGTERM.
    Run(RunArgs),
    /// Check a config file and print the effective configuration (defaults filled in).
    CheckConfig(CheckConfigArgs),
    /// Capture N frames from a camera, run the pipeline on each, and write the last one's
    /// results (as `process` does) plus capture.json.
    Capture(CaptureArgs),
    /// Print the man page edgesight(1); with --dir, write it and one page per command.
    /// Hidden: scripts/package-deb.sh runs it to put the pages into the Debian package.
    #[command(hide = true)]
    Manpage(ManpageArgs),
}

#[derive(clap::Args)]
struct ManpageArgs {
    /// Write edgesight.1 and edgesight-COMMAND.1 for every command into DIR (created if
    /// missing) instead of printing edgesight.1.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The date in the pages' footer, YYYY-MM-DD (the package takes its changelog's).
    #[arg(long)]
    date: Option<String>,
}

#[derive(clap::Args)]
struct BenchArgs {
    /// Frame sizes, WIDTHxHEIGHT, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1280x720,1920x1080,3840x2160",
        value_parser = frame_size
    )]
    sizes: Vec<Size>,
    /// Timed runs per size (after the warm-up runs).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    runs: u32,
    /// Untimed runs per size first (kernel loading, caches, clocks).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    warmup: u32,
    /// Also write the medians and spreads as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write each size's synthetic frame to DIR/frame-WIDTHxHEIGHT.gray (raw 8-bit grey,
    /// rows packed), so other programs can be measured on the same bytes.
    #[arg(long, value_name = "DIR")]
    save_frames: Option<PathBuf>,
    /// OpenCL device, as for `process`.
    #[arg(long, default_value = "default")]
    device: DeviceSpec,
}

#[derive(clap::Args)]
struct CaptureArgs {
    /// A V4L2 device (/dev/video0), or any source: v4l2:DEVICE, pattern:WxH[:FORMAT]@FPS,
    /// replay:FILE:WxH:FORMAT@FPS, replay:DIR@FPS.
    source: String,
    /// Frames to capture and process.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    frames: u64,
    /// Directory for report.json, the pictures and capture.json (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Also write the exact outputs of the last frame as raw files.
    #[arg(long)]
    raw: bool,
    /// Pixel format to ask the camera for (default: the camera's current one).
    #[arg(long)]
    format: Option<PixelFormat>,
    /// Frame size to ask the camera for, WIDTHxHEIGHT (default: the camera's current one).
    #[arg(long, value_parser = frame_size)]
    size: Option<Size>,
    /// Frame rate to ask the camera for (default: the camera's current one).
    #[arg(long, value_parser = capture::parse_fps)]
    fps: Option<f64>,
    /// I/O mode: dmabuf, userptr or mmap (default: the first of those that works).
    #[arg(long)]
    io: Option<IoMode>,
    /// Give up when the frames have not all arrived after this many seconds.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    #[command(flatten)]
    pipeline: PipelineArgs,
}

#[derive(clap::Args)]
struct PipelineArgs {
    /// Sobel border mode: reflect101 (OpenCV's default), replicate or constant (zero).
    #[arg(long, default_value = "reflect101")]
    border: Border,
    /// Gradient magnitude: l1 (|dx|+|dy|) or l2 (sqrt(dx²+dy²)), saturated to 255.
    #[arg(long, default_value = "l1")]
    magnitude: Magnitude,
    /// A pixel is an edge where its magnitude is at least this (1-255).
    #[arg(long, default_value_t = PipelineOptions::default().edge_threshold,
          value_parser = clap::value_parser!(u8).range(1..))]
    edge_threshold: u8,
    /// A region to measure, NAME:X,Y,W,H (repeatable).
    #[arg(long = "roi", value_name = "NAME:X,Y,W,H")]
    rois: Vec<Region>,
    /// OpenCL device: an index from `edgesight devices`, PLATFORM:DEVICE (indices or name
    /// substrings), or a name substring. Default: the first GPU, else the first device.
    #[arg(long, default_value = "default")]
    device: DeviceSpec,
}

#[derive(clap::Args)]
struct RunArgs {
    /// The TOML config file (see deploy/edgesight.toml); built-in defaults without it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Frame source, replacing the config's (which must have at most one camera):
    /// pattern:1280x720@30, pattern:WxH:FORMAT@FPS, v4l2:/dev/video0,
    /// replay:FILE:WxH:FORMAT@FPS or replay:DIR@FPS.
    #[arg(long, value_name = "SPEC")]
    source: Option<SourceSpec>,
    /// Address to serve HTTP on, IP:PORT, replacing [web] listen_address.
    #[arg(long, alias = "web.listen-address", value_name = "IP:PORT")]
    listen: Option<String>,
}

#[derive(clap::Args)]
struct CheckConfigArgs {
    /// The TOML config file.
    file: PathBuf,
}

impl PipelineArgs {
    fn options(&self) -> PipelineOptions {
        PipelineOptions {
            border: self.border,
            magnitude: self.magnitude,
            edge_threshold: self.edge_threshold,
        }
    }
}

#[derive(clap::Args)]
struct ProcessArgs {
    /// A PNG, JPEG or PGM/PPM image, or a raw frame with --format and --size.
    input: PathBuf,
    /// Directory for report.json and the pictures (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Also write the exact outputs as little-endian raw files (luma.u8, sobel_dx.s16, ...).
    #[arg(long)]
    raw: bool,
    /// Pixel format of a raw INPUT: grey, yuyv, uyvy, nv12, rgb24, bgr24, rgbx, bgrx.
    #[arg(long, requires = "size")]
    format: Option<PixelFormat>,
    /// Size of a raw INPUT, WIDTHxHEIGHT.
    #[arg(long, requires = "format", value_parser = frame_size)]
    size: Option<Size>,
    /// Run the pipeline this many times on the frame and report each stage's median
    /// device time (the first run includes one-off driver work such as loading kernels).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    repeat: u32,
    #[command(flatten)]
    pipeline: PipelineArgs,
}

/// Blocks SIGTERM, SIGINT and SIGHUP before `main` runs, from the executable's
/// initialisers: `run` takes them with `sigwait`, and one that arrives while the program
/// is still starting (`systemctl reload` right after `start`) must wait for it rather than
/// end the process by its default action. `main` unblocks them for the other commands.
#[used]
#[link_section = ".init_array"]
static BLOCK_SIGNALS_FIRST: extern "C" fn() = block_signals_first;

extern "C" fn block_signals_first() {
    // Nothing can be reported this early; `run` blocks them again and reports a failure.
    let _ = edgesight::daemon::block_signals();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Run(_)) {
        if let Err(e) = edgesight::daemon::unblock_signals() {
            eprintln!("edgesight: error: unblocking signals: {e}");
            return ExitCode::FAILURE;
        }
    }
    let result = match cli.command {
        Command::Devices => devices(),
        Command::Process(args) => process(&args),
        Command::Bench(args) => bench(&args),
        Command::Run(args) => edgesight::daemon::run(
            args.config,
            Overrides {
                source: args.source,
                listen: args.listen,
            },
        ),
        Command::CheckConfig(args) => check_config(&args.file),
        Command::Capture(args) => capture(&args),
        Command::Manpage(args) => manpage(args.dir.as_deref(), args.date.as_deref()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("edgesight: error: {err:#}");
            ExitCode::from(exit_code(&err))
        }
    }
}

/// 2 when the error is the user's input (file, size, ROI, device choice), else 1.
fn exit_code(err: &anyhow::Error) -> u8 {
    let input = err.chain().any(|e| {
        e.is::<InputError>()
            || e.is::<RegionError>()
            || e.is::<LayoutError>()
            || e.is::<BadOutDir>()
            || e.is::<ConfigError>()
            || e.is::<InvalidSource>()
            || e.is::<BadSource>()
            || e.is::<BadRoiName>()
            || matches!(
                e.downcast_ref::<CaptureError>(),
                Some(CaptureError::Source { .. })
            )
            || matches!(e.downcast_ref::<ClError>(), Some(ClError::NoDevice { .. }))
    });
    if input {
        2
    } else {
        1
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// The checks `run` makes before it starts (see [`config::validate`]), and the effective
/// settings.
fn check_config(file: &Path) -> Result<()> {
    let checked = config::validate(Some(file), &Overrides::default())?;
    print!("{}", checked.settings.to_toml());
    for warning in &checked.warnings {
        eprintln!("{}: warning: {warning}", file.display());
    }
    eprintln!("{}: ok", file.display());
    Ok(())
}

/// A `--roi` name the config would refuse, or one given twice.
#[derive(Debug, thiserror::Error)]
#[error("--roi: {0}")]
struct BadRoiName(String);

/// Checks the `--roi` names as the config checks a camera's (see
/// [`config::check_region_name`]).
fn check_roi_names(rois: &[Region]) -> Result<(), BadRoiName> {
    let mut seen = std::collections::HashSet::new();
    rois.iter()
        .try_for_each(|r| config::check_region_name(&r.name, &mut seen).map_err(BadRoiName))
}

/// A frame size on the command line: `WxH` within [`capture::MAX_FRAME_SIDE`] and the
/// pipeline's limits, as in source specs and the config.
fn frame_size(s: &str) -> Result<Size, String> {
    let size: Size = s.parse().map_err(|e| format!("{e}"))?;
    capture::check_frame_size(size, None)?;
    Ok(size)
}

fn devices() -> Result<()> {
    let opencl = opencl_devices();
    v4l2_devices();
    opencl
}

fn v4l2_devices() {
    println!("V4L2 capture devices:");
    let mut any = false;
    for node in v4l2::list::nodes() {
        match v4l2::list::describe(&node) {
            Ok(info) => {
                any = true;
                for line in v4l2::list::lines(&info) {
                    println!("  {line}");
                }
            }
            Err(why) => println!("  {}: {why}", node.display()),
        }
    }
    if !any {
        println!("  (none)");
    }
}

fn opencl_devices() -> Result<()> {
    let platforms = cl::list_devices()?;
    let default = Gpu::open(&DeviceSpec::Default).ok().map(|g| g.info.name);
    for (pi, p) in platforms.iter().enumerate() {
        let version = p
            .devices
            .first()
            .map(|(_, i)| i.platform_version.as_str())
            .unwrap_or("");
        println!("platform {pi}: {} ({version})", p.name);
        if p.devices.is_empty() {
            println!("  (no devices)");
        }
        for (di, (_, d)) in p.devices.iter().enumerate() {
            let mark = if default.as_deref() == Some(d.name.as_str()) {
                "  [default]"
            } else {
                ""
            };
            println!("  {pi}:{di} {} — {} ({}){mark}", d.name, d.kind, d.vendor);
            println!(
                "      version:            {} (driver {})",
                d.version, d.driver_version
            );
            println!("      OpenCL C:           {}", d.opencl_c_version);
            println!("      compute units:      {}", d.compute_units);
            println!("      local memory:       {} KiB", d.local_mem_bytes / 1024);
            println!(
                "      global memory:      {} MiB",
                d.global_mem_bytes / (1024 * 1024)
            );
            println!("      max work-group:     {}", d.max_work_group_size);
            println!(
                "      unified memory:     {}",
                d.unified_memory.map(yes_no).unwrap_or("unknown")
            );
            println!("      fp64:               {}", yes_no(d.fp64));
        }
    }
    Ok(())
}

/// An output directory that cannot be created.
#[derive(Debug, thiserror::Error)]
#[error("output directory {path}: {reason}")]
struct BadOutDir {
    path: PathBuf,
    reason: String,
}

fn process(args: &ProcessArgs) -> Result<()> {
    check_roi_names(&args.pipeline.rois)?;
    let raw = args.format.zip(args.size);
    let frame = input::load(&args.input, raw)?;
    for roi in &args.pipeline.rois {
        roi.validate(&frame.layout)?;
    }
    create_out_dir(&args.out)?;

    let gpu = Gpu::open(&args.pipeline.device)?;
    let options = args.pipeline.options();
    let mut pipeline = Pipeline::new(&gpu, frame.layout, options, &args.pipeline.rois)
        .context("setting up the pipeline")?;
    let mut slot = pipeline.new_slot(&gpu)?;
    let mut runs = Vec::with_capacity(args.repeat as usize);
    let mut images = None;
    for run in 1..=args.repeat {
        slot.write_bytes(&gpu, &frame.bytes)?;
        let processed = pipeline.process(&gpu, &slot)?;
        if run == args.repeat {
            images = Some(processed.read_images(&gpu)?);
        }
        runs.push(processed.into_result());
    }
    let timings = StageTimings::median(runs.iter().map(|r| &r.timings));
    let mut result = runs.pop().expect("at least one run");
    result.timings = timings;
    let images = images.expect("at least one run");
    let (report, written) = write_results(&args.out, &gpu, &pipeline, &result, &images, args.raw)?;
    print_summary(&args.input, &report, &written);
    Ok(())
}

fn create_out_dir(out: &Path) -> Result<(), BadOutDir> {
    std::fs::create_dir_all(out).map_err(|e| BadOutDir {
        path: out.to_path_buf(),
        reason: e.to_string(),
    })
}

/// Writes what `process` writes for the pipeline's last frame: report.json, the pictures,
/// and with `raw` the exact outputs.
fn write_results(
    out: &Path,
    gpu: &Gpu,
    pipeline: &Pipeline,
    result: &FrameResult,
    images: &Images,
    raw: bool,
) -> Result<(Report, Vec<PathBuf>)> {
    let report = Report::new(
        result,
        pipeline.layout().format.name(),
        &gpu.info.to_string(),
        *pipeline.options(),
    );
    let mut written = report::write_outputs(out, &report, images)?;
    if raw {
        written.extend(report::write_raw(out, images)?);
    }
    Ok((report, written))
}

/// A capture source argument that is neither a source spec nor an existing device.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BadSource(String);

/// The source `capture` reads: a spec with a kind (`v4l2:`, `pattern:`, `replay:`), or a
/// device path; the camera flags apply to V4L2 sources.
fn capture_source(args: &CaptureArgs) -> Result<SourceSpec, BadSource> {
    let kinds = ["v4l2:", "pattern:", "replay:"];
    let spec = if kinds.iter().any(|k| args.source.starts_with(k)) {
        args.source
            .parse::<SourceSpec>()
            .map_err(|e| BadSource(e.to_string()))?
    } else {
        let device = PathBuf::from(&args.source);
        if !device.exists() {
            return Err(BadSource(format!(
                "{}: no such device (give a V4L2 device such as /dev/video0, or a source spec: pattern:WxH@FPS, replay:FILE:WxH:FORMAT@FPS, replay:DIR@FPS)",
                device.display()
            )));
        }
        SourceSpec::V4l2 {
            device,
            format: None,
            size: None,
            fps: None,
            io: None,
        }
    };
    match spec {
        SourceSpec::V4l2 { device, .. } => Ok(SourceSpec::V4l2 {
            device,
            format: args.format,
            size: args.size,
            fps: args.fps,
            io: args.io,
        }),
        other if args.format.is_some() || args.size.is_some() || args.fps.is_some() || args.io.is_some() => {
            Err(BadSource(format!(
                "{other}: --format, --size, --fps and --io apply to V4L2 devices; give them in the spec instead"
            )))
        }
        other => Ok(other),
    }
}

/// `capture.json`: what the source delivered.
#[derive(serde::Serialize)]
struct CaptureSummary {
    source: String,
    frames: u64,
    dropped: u64,
    dropped_by_reason: std::collections::BTreeMap<&'static str, u64>,
    reconnects: u64,
    io_mode: IoMode,
    format: String,
    width: u32,
    height: u32,
    bytesperline: u32,
    fps_requested: Option<f64>,
    fps_measured: f64,
    /// Process CPU time (user + system) per frame over the run, pipeline included.
    cpu_ms_per_frame: f64,
}

/// User plus system CPU time of the whole process so far.
fn process_cpu_time() -> Duration {
    // SAFETY: a rusage is integers and timevals; all zero is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage into `usage`, a live local.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn capture(args: &CaptureArgs) -> Result<()> {
    edgesight::daemon::init_logging("info");
    check_roi_names(&args.pipeline.rois)?;
    let spec = capture_source(args)?;
    create_out_dir(&args.out)?;
    let gpu = Gpu::open(&args.pipeline.device)?;
    let mut source = capture::open(&spec, &gpu)?;
    let layout = source.layout();
    for roi in &args.pipeline.rois {
        roi.validate(&layout)?;
    }
    let options = args.pipeline.options();
    let mut pipeline = Pipeline::new(&gpu, layout, options, &args.pipeline.rois)
        .context("setting up the pipeline")?;
    println!("{}", source.describe());

    let give_up = Instant::now() + Duration::from_secs(args.timeout);
    let cpu_start = process_cpu_time();
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    let mut last_frame = None;
    let mut cpu_end = cpu_start;
    let mut frames = 0u64;
    while frames < args.frames {
        match source.next_frame(&gpu, Duration::from_millis(200))? {
            Next::Frame(frame) => {
                if frame.layout != layout {
                    anyhow::bail!(
                        "{}: the frame layout changed from {layout:?} to {:?}",
                        source_name(&spec),
                        frame.layout
                    );
                }
                let processed = pipeline.process(&gpu, frame.slot)?;
                frames += 1;
                last = Instant::now();
                first.get_or_insert(last);
                if frames == args.frames {
                    cpu_end = process_cpu_time();
                    // Now, while the frame's slot is held: the next `next_frame` may
                    // requeue it, and luma may be read from it.
                    let images = processed.read_images(&gpu)?;
                    last_frame = Some((processed.into_result(), images));
                }
            }
            Next::Idle => {}
        }
        if frames < args.frames && Instant::now() > give_up {
            anyhow::bail!(
                "{}: only {frames} of {} frames within {} s (source {}, {:?})",
                source_name(&spec),
                args.frames,
                args.timeout,
                if source.is_up() { "up" } else { "down" },
                source.stats()
            );
        }
    }
    let cpu = cpu_end.saturating_sub(cpu_start);
    let Some((result, images)) = last_frame else {
        anyhow::bail!("{}: no frame captured", source_name(&spec));
    };
    let (report, mut written) =
        write_results(&args.out, &gpu, &pipeline, &result, &images, args.raw)?;

    let stats = source.stats();
    let span = first.map_or(0.0, |f| last.duration_since(f).as_secs_f64());
    let summary = CaptureSummary {
        source: source.describe(),
        frames: stats.frames,
        dropped: stats.dropped_total(),
        dropped_by_reason: capture::DropReason::ALL
            .iter()
            .map(|&r| (r.name(), stats.dropped(r)))
            .collect(),
        reconnects: stats.reconnects,
        io_mode: source.io_mode(),
        format: layout.format.name().to_string(),
        width: layout.width,
        height: layout.height,
        bytesperline: layout.stride,
        fps_requested: args.fps,
        fps_measured: if frames > 1 && span > 0.0 {
            (frames - 1) as f64 / span
        } else {
            0.0
        },
        cpu_ms_per_frame: cpu.as_secs_f64() * 1000.0 / frames.max(1) as f64,
    };
    let path = args.out.join("capture.json");
    let json = serde_json::to_vec_pretty(&summary)?;
    std::fs::write(&path, json).with_context(|| format!("writing {}", path.display()))?;
    written.push(path);
    println!(
        "  {} frames, {} dropped, {:.2} fps measured, io {}",
        summary.frames, summary.dropped, summary.fps_measured, summary.io_mode
    );
    print_summary(Path::new(&args.source), &report, &written);
    Ok(())
}

fn source_name(spec: &SourceSpec) -> String {
    spec.to_string()
}

fn print_summary(input: &Path, report: &Report, written: &[PathBuf]) {
    println!(
        "{}: {}x{} {} on {}",
        input.display(),
        report.width,
        report.height,
        report.format,
        report.device
    );
    println!(
        "  otsu threshold {}, mean luma {:.2}, foreground {:.1}%, edges {:.1}%",
        report.otsu_threshold,
        report.mean_luma,
        100.0 * report.foreground_ratio,
        100.0 * report.edge_ratio
    );
    for roi in &report.rois {
        println!(
            "  roi {}: mean {:.2}, stddev {:.2}, edges {:.1}%, foreground {:.1}%",
            roi.name,
            roi.mean,
            roi.stddev,
            100.0 * roi.edge_ratio,
            100.0 * roi.foreground_ratio
        );
    }
    let timings: Vec<String> = report
        .timings_ms
        .iter()
        .map(|(stage, ms)| format!("{stage} {ms:.3}"))
        .collect();
    println!("  device time (ms): {}", timings.join(", "));
    for path in written {
        println!("  wrote {}", path.display());
    }
}

fn bench(args: &BenchArgs) -> Result<()> {
    for size in &args.sizes {
        edgesight::frame::FrameLayout::packed(PixelFormat::Grey, size.width, size.height)
            .validate()?;
    }
    if let Some(dir) = &args.save_frames {
        std::fs::create_dir_all(dir).map_err(|e| BadOutDir {
            path: dir.clone(),
            reason: e.to_string(),
        })?;
    }
    let gpu = Gpu::open(&args.device)?;
    let device = gpu.info.to_string();
    println!("edgesight bench on {device}");
    println!(
        "grey frames, {} warm-up then {} timed runs per size; medians [10th-90th percentile]",
        args.warmup, args.runs
    );
    let mut figures = Vec::with_capacity(args.sizes.len());
    for size in &args.sizes {
        let frame = bench::synthetic_frame(size.width, size.height);
        if let Some(dir) = &args.save_frames {
            let path = dir.join(format!("frame-{}x{}.gray", size.width, size.height));
            std::fs::write(&path, &frame).with_context(|| format!("writing {}", path.display()))?;
        }
        let mut progress = |w: u32, h: u32, done: usize, total: usize| {
            eprint!("\r  {w}x{h}: run {done}/{total}   ");
            let _ = std::io::stderr().flush();
        };
        let f = bench::bench_size(
            &gpu,
            size.width,
            size.height,
            &frame,
            args.warmup as usize,
            args.runs as usize,
            &mut progress,
        )
        .with_context(|| format!("benchmarking {size}"))?;
        eprint!("\r{:40}\r", "");
        print_bench(&f);
        figures.push(f);
    }
    if figures.len() > 1 {
        let first = &figures[0];
        let last = &figures[figures.len() - 1];
        let per_px = |f: &SizeFigures| f.pipeline_device.median * 1e6 / f.pixels() as f64;
        println!(
            "ns per pixel, {}x{} / {}x{}: {:.2}",
            last.width,
            last.height,
            first.width,
            first.height,
            per_px(last) / per_px(first)
        );
    }
    if let Some(path) = &args.json {
        let report = JsonReport {
            device,
            format: "grey",
            runs: args.runs as usize,
            warmup: args.warmup as usize,
            results: figures.iter().map(JsonSize::new).collect(),
        };
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text + "\n").map_err(|e| BadOutDir {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn print_bench(f: &SizeFigures) {
    let px = f.pixels() as f64;
    println!();
    println!(
        "{}x{} ({} runs, Otsu threshold {})",
        f.width, f.height, f.runs, f.otsu_threshold
    );
    println!(
        "  {:<10} {:>26} {:>9} {:>10} {:>9} {:>9} {:>7}",
        "stage", "device ms [p10-p90]", "MB moved", "GB/s", "floor ms", "of floor", "ns/px"
    );
    let row = |name: &str, s: &bench::Spread, bytes: u64, floor: f64| {
        let gbs = bench::gb_per_s(bytes, s.median);
        let frac = if s.median > 0.0 {
            floor / s.median
        } else {
            0.0
        };
        println!(
            "  {:<10} {:>9.3} [{:>6.3}-{:>7.3}] {:>9.2} {:>10.1} {:>9.4} {:>8.0}% {:>7.3}",
            name,
            s.median,
            s.p10,
            s.p90,
            bytes as f64 / 1e6,
            gbs,
            floor,
            100.0 * frac,
            s.median * 1e6 / px
        );
    };
    for st in &f.stages {
        row(st.name, &st.device, st.bytes, st.floor_ms);
    }
    row(
        "pipeline",
        &f.pipeline_device,
        f.pipeline_bytes,
        f.pipeline_floor_ms,
    );
    println!(
        "  device span (first kernel start to last end) {:.3} ms [{:.3}-{:.3}]",
        f.pipeline_span.median, f.pipeline_span.p10, f.pipeline_span.p90
    );
    println!(
        "  host wall per frame (map, write, unmap, kernels, results) {:.3} ms [{:.3}-{:.3}], {:.2}x device time",
        f.pipeline_wall.median,
        f.pipeline_wall.p10,
        f.pipeline_wall.p90,
        f.pipeline_wall.median / f.pipeline_device.median.max(1e-9)
    );
}

/// What edgesight(1) says before the list of commands; `--help` keeps its one-line about.
const MAN_DESCRIPTION: &str = "\
edgesight reads camera frames into host-mapped OpenCL buffers, runs a chain of OpenCL \
kernels on every frame (luma extraction, Sobel 3x3, a 256-bin histogram, Otsu \
segmentation, integral images for region features) and reports the results and each \
stage's device time. It needs OpenCL 1.2 and no double precision on the device.

edgesight run is the daemon: one capture thread per camera (V4L2 cameras, recordings or \
the built-in test pattern), Prometheus metrics on /metrics, /healthz and a small HTTP API. \
The other commands run the pipeline on single images (process), on frames from a camera \
(capture), measure it (bench), list devices (devices) and check the daemon's config \
(check-config). Each command has its own page, named below.";

/// Writes edgesight(1) to stdout, or it and edgesight-COMMAND(1) for each visible command
/// into `dir`. The sections clap cannot know (exit status, environment, signals, files)
/// are added here, so the pages need no hand-kept roff beside the code.
fn manpage(dir: Option<&Path>, date: Option<&str>) -> Result<()> {
    use clap_mangen::roff::{bold, italic, roman, Roff};
    use clap_mangen::Man;

    fn item(roff: &mut Roff, term: &str, text: &str) {
        roff.control("TP", []);
        roff.text([bold(term)]);
        roff.text([roman(text)]);
    }
    // Every piece clap_mangen and roff render starts with the same two-line preamble
    // (apostrophe handling); a page needs it once.
    let preamble = Roff::new().render();
    let mut page = preamble.clone();
    let mut add = |render: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>| -> Result<()> {
        let mut buf = Vec::new();
        render(&mut buf)?;
        let text = String::from_utf8(buf)?;
        page.push_str(text.strip_prefix(&preamble).unwrap_or(&text));
        Ok(())
    };
    // .TH takes its arguments by position: a missing date must still be there, as "".
    let date = date.unwrap_or("\"\"");
    let source = format!("edgesight {}", env!("CARGO_PKG_VERSION"));
    let man = |cmd: clap::Command| {
        let title = cmd
            .get_display_name()
            .unwrap_or(cmd.get_name())
            .to_uppercase();
        Man::new(cmd)
            .title(title)
            .date(date)
            .source(&source)
            .manual("User Commands")
    };

    let mut cmd = Cli::command()
        .long_about(MAN_DESCRIPTION)
        .subcommand_help_heading("COMMANDS")
        .subcommand_value_name("COMMAND")
        .disable_help_subcommand(true);
    cmd.build();
    let main = man(cmd.clone());
    add(&|w| main.render_title(w))?;
    add(&|w| main.render_name_section(w))?;
    add(&|w| main.render_synopsis_section(w))?;
    add(&|w| main.render_description_section(w))?;
    add(&|w| main.render_options_section(w))?;
    add(&|w| main.render_subcommands_section(w))?;
    let mut extra = Roff::default();
    extra.control("SH", ["EXIT STATUS"]);
    item(&mut extra, "0", "Success.");
    item(
        &mut extra,
        "2",
        "Bad input: a missing or unreadable file, an unknown format, a size that does not \
         match the bytes, a ROI outside the frame, no such OpenCL device, a config file \
         that fails its checks. One line on standard error names it.",
    );
    item(&mut extra, "1", "Any other failure (an OpenCL error, say).");
    extra.control("SH", ["ENVIRONMENT"]);
    item(
        &mut extra,
        "OPENCL_DYLIB_PATH",
        "OpenCL libraries to load instead of libOpenCL.so.1 (the ICD loader), separated by \
         ';' and tried in order, e.g. /usr/lib/aarch64-linux-gnu/libmali.so to use a Mali \
         driver directly.",
    );
    item(
        &mut extra,
        "POCL_CACHE_DIR",
        "A writable directory for POCL's kernel cache. The systemd unit sets it to \
         /var/cache/edgesight.",
    );
    item(
        &mut extra,
        "RUST_LOG",
        "error, warn, info, debug or trace: the daemon's log level, overriding the config's \
         [log] level.",
    );
    extra.control("SH", ["SIGNALS"]);
    extra.text([roman("For "), bold("edgesight run"), roman(":")]);
    item(
        &mut extra,
        "SIGTERM, SIGINT",
        "Stop cleanly, within about 0.1 s, with exit status 0.",
    );
    item(
        &mut extra,
        "SIGHUP",
        "Read the config again and give each camera its new ROIs and pipeline options \
         without reopening it (systemctl reload edgesight). A config that fails the checks \
         is refused whole and the running one kept.",
    );
    extra.control("SH", ["FILES"]);
    item(
        &mut extra,
        "/etc/edgesight/edgesight.toml",
        "The daemon's config as the systemd unit runs it; it documents every key. Check an \
         edited copy with edgesight check-config FILE.",
    );
    item(
        &mut extra,
        "/lib/systemd/system/edgesight.service",
        "The hardened systemd unit (Type=notify, watchdog, DynamicUser).",
    );
    item(
        &mut extra,
        "/var/cache/edgesight",
        "The service's OpenCL kernel cache.",
    );
    item(
        &mut extra,
        "/usr/share/doc/edgesight/examples/",
        "Prometheus scrape config, alert rules and their tests, Grafana dashboard.",
    );
    extra.control("SH", ["SEE ALSO"]);
    extra.text([
        bold("systemctl"),
        roman("(1), "),
        bold("clinfo"),
        roman("(1), "),
        italic("/usr/share/doc/edgesight/README.md.gz"),
    ]);
    add(&|w| extra.to_writer(w))?;
    add(&|w| main.render_version_section(w))?;

    let Some(dir) = dir else {
        std::io::stdout().write_all(page.as_bytes())?;
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = |name: String, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    write(main.get_filename(), &page)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let sub = man(sub.clone());
        let mut page = Vec::new();
        sub.render(&mut page)?;
        let mut see_also = Roff::default();
        see_also.control("SH", ["SEE ALSO"]);
        see_also.text([bold("edgesight"), roman("(1)")]);
        page.extend(
            see_also
                .render()
                .strip_prefix(&preamble)
                .unwrap_or_default()
                .bytes(),
        );
        write(sub.get_filename(), &String::from_utf8(page)?)?;
    }
    Ok(())
}
