//! The `edgesight` command line: `devices` lists what OpenCL offers, `process` runs the
//! pipeline on one image or raw frame and writes a report, pictures and raw outputs,
//! `run` is the daemon and `check-config` checks its config file.
//!
//! Exit codes: 0 success, 2 bad input or usage (the message names the file, flag or
//! device), 1 anything else (an OpenCL failure).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use edgesight::capture::{InvalidSource, SourceSpec};
use edgesight::cl::{self, ClError, DeviceSpec, Gpu};
use edgesight::config::{self, ConfigError, Overrides};
use edgesight::frame::{LayoutError, PixelFormat, Size};
use edgesight::input::{self, InputError};
use edgesight::pipeline::{
    Border, Magnitude, Pipeline, PipelineOptions, Region, RegionError, StageTimings,
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
    /// List every OpenCL platform and device.
    Devices,
    /// Run the pipeline on one image or raw frame and write the results into a directory.
    Process(ProcessArgs),
    /// Run the daemon: capture, process and export metrics over HTTP until SIGTERM.
    Run(RunArgs),
    /// Check a config file and print the effective configuration (defaults filled in).
    CheckConfig(CheckConfigArgs),
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
    /// Run the pipeline this many times on the frame and report each stage's median
    /// device time (the first run includes one-off driver work such as loading kernels).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    repeat: u32,
    /// OpenCL device: an index from `edgesight devices`, PLATFORM:DEVICE (indices or name
    /// substrings), or a name substring. Default: the first GPU, else the first device.
    #[arg(long, default_value = "default")]
    device: DeviceSpec,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Devices => devices(),
        Command::Process(args) => process(&args),
        Command::Run(args) => edgesight::daemon::run(
            args.config,
            Overrides {
                source: args.source,
                listen: args.listen,
            },
        ),
        Command::CheckConfig(args) => check_config(&args.file),
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
    for roi in &args.rois {
        roi.validate(&frame.layout)?;
    }
    std::fs::create_dir_all(&args.out).map_err(|e| BadOutDir {
        path: args.out.clone(),
        reason: e.to_string(),
    })?;

    let gpu = Gpu::open(&args.device)?;
    let options = PipelineOptions {
        border: args.border,
        magnitude: args.magnitude,
        edge_threshold: args.edge_threshold,
    };
    let mut pipeline = Pipeline::new(&gpu, frame.layout, options, &args.rois)
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
    let images = pipeline.read_images(&gpu)?;

    let report = Report::new(
        &result,
        frame.layout.format.name(),
        &gpu.info.to_string(),
        options,
    );
    let mut written = report::write_outputs(&args.out, &report, &images)?;
    if args.raw {
        written.extend(report::write_raw(&args.out, &images)?);
    }
    print_summary(&args.input, &report, &written);
    Ok(())
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
