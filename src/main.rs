//! The `edgesight` command line: `devices` lists what OpenCL and V4L2 offer, `process` runs
//! the pipeline on one image or raw frame and writes a report, pictures and raw outputs,
//! `capture` does the same for the last of N frames from a camera (or any frame source),
//! `bench` measures the pipeline per frame size beside a device copy of the same bytes;
//! `run` is the daemon and `check-config` checks its config file.
//!
//! Exit codes: 0 success, 2 bad input or usage (the message names the file, flag or
//! device), 1 anything else (an OpenCL failure).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use edgesight::bench::{self, JsonReport, JsonSize, SizeFigures};
use edgesight::capture::{self, v4l2, CaptureError, InvalidSource, IoMode, Next, SourceSpec};
use edgesight::cl::{self, ClError, DeviceSpec, Gpu};
use edgesight::config::{self, ConfigError, Overrides};
use edgesight::frame::{LayoutError, PixelFormat, Size};
use edgesight::input::{self, InputError};
use edgesight::pipeline::{
    Border, FrameResult, Images, Magnitude, Pipeline, PipelineOptions, Region, RegionError,
    StageTimings,
};
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
}

#[derive(clap::Args)]
struct BenchArgs {
    /// Frame sizes, WIDTHxHEIGHT, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1280x720,1920x1080,3840x2160"
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
    #[arg(long)]
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
    #[arg(long, requires = "format")]
    size: Option<Size>,
    /// Run the pipeline this many times on the frame and report each stage's median
    /// device time (the first run includes one-off driver work such as loading kernels).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    repeat: u32,
    #[command(flatten)]
    pipeline: PipelineArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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

fn check_config(file: &Path) -> Result<()> {
    let (_, settings) = config::load(Some(file), &Overrides::default())?;
    print!("{}", settings.to_toml());
    eprintln!("{}: ok", file.display());
    Ok(())
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
    for _ in 0..args.repeat {
        slot.write_bytes(&gpu, &frame.bytes)?;
        runs.push(pipeline.process(&gpu, &slot)?);
    }
    let timings = StageTimings::median(runs.iter().map(|r| &r.timings));
    let mut result = runs.pop().expect("at least one run");
    result.timings = timings;
    let images = pipeline.read_images(&gpu, Some(&slot))?;
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
    // SAFETY: a valid rusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn capture(args: &CaptureArgs) -> Result<()> {
    edgesight::daemon::init_logging("info");
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
                let result = pipeline.process(&gpu, frame.slot)?;
                frames += 1;
                last = Instant::now();
                first.get_or_insert(last);
                if frames == args.frames {
                    cpu_end = process_cpu_time();
                    // Now, while the frame's slot is held: the next `next_frame` may
                    // requeue it, and luma may be read from it.
                    last_frame = Some((result, pipeline.read_images(&gpu, Some(frame.slot))?));
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
