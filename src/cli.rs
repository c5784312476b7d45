//! The command line's definitions: the commands, their flags and the help clap makes of
//! them (and edgesight(1) of that help). What each command does is in `commands`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use edgesight::capture::{self, IoMode, SourceSpec};
use edgesight::cl::{DeviceSpec, Profiling};
use edgesight::frame::{CaptureFormat, PixelFormat, Size};
use edgesight::jpeg::Scale;
use edgesight::pipeline::{Border, Magnitude, PipelineOptions, TuningChoice};
use edgesight::region::Region;

#[derive(Parser)]
#[command(
    name = "edgesight",
    version,
    about = "Vision telemetry: camera frames through OpenCL kernels into metrics"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
    /// Check the OpenCL device: every stage with each tuning, on synthetic frames of every
    /// input format at awkward sizes, against the plain-Rust reference; a table per stage,
    /// exit 1 on any mismatch. Run it once on a board after installing; with --json, the
    /// report a board's issue needs.
    Selftest(SelftestArgs),
    /// Build every OpenCL program a tuning uses, each as on a cold start, and show what the
    /// driver says of each kernel: largest work-group, private memory (spilled registers,
    /// on Arm's driver), local memory, and each program's build time.
    Kernels(KernelsArgs),
    /// Print the man page edgesight(1); with --dir, write it and one page per command.
    /// Hidden: scripts/package-deb.sh runs it to put the pages into the Debian package.
    #[command(hide = true)]
    Manpage(ManpageArgs),
}

#[derive(clap::Args)]
pub(crate) struct ManpageArgs {
    /// Write edgesight.1 and edgesight-COMMAND.1 for every command into DIR (created if
    /// missing) instead of printing edgesight.1.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// The date in the pages' footer, YYYY-MM-DD (the package takes its changelog's).
    #[arg(long)]
    pub(crate) date: Option<String>,
}

/// What `bench`'s frames show.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Scene {
    Pattern,
    Black,
}

#[derive(clap::Args)]
pub(crate) struct BenchArgs {
    /// Frame sizes, WIDTHxHEIGHT, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1280x720,1920x1080,3840x2160",
        value_parser = frame_size
    )]
    pub(crate) sizes: Vec<Size>,
    /// Timed runs per size (after the warm-up runs).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) runs: u32,
    /// Untimed runs per size first (kernel loading, caches, clocks).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub(crate) warmup: u32,
    /// Also write the medians and spreads as JSON to this file.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Write each size's synthetic frame to DIR/frame-WIDTHxHEIGHT.gray (raw 8-bit grey,
    /// rows packed; .FORMAT or .jpg with --format), so other programs can be measured on
    /// the same bytes.
    #[arg(long, value_name = "DIR")]
    pub(crate) save_frames: Option<PathBuf>,
    /// The frames' format, as a camera delivers them: any pixel format (the luma stage
    /// converts it) or mjpeg (4:2:2 JPEG at quality 85, decoded into the slot on the host,
    /// as an MJPEG camera's frames are).
    #[arg(long, default_value = "grey")]
    pub(crate) format: CaptureFormat,
    /// What the frames show: `pattern`, the test pattern (a scene with flat areas, edges
    /// and noise), or `black`, every pixel 0 (a camera at night or with its lens capped:
    /// the worst case for kernels that count pixels by value).
    #[arg(long, value_enum, default_value_t = Scene::Pattern)]
    pub(crate) scene: Scene,
    /// OpenCL device, as for `process`.
    #[arg(long, default_value = "default")]
    pub(crate) device: DeviceSpec,
    /// Work sizes, as for `process`: measures any tuning on any device.
    #[arg(long, default_value = "auto", value_name = "TUNING")]
    pub(crate) tuning: TuningChoice,
}

#[derive(clap::Args)]
pub(crate) struct SelftestArgs {
    /// OpenCL device, as for `process`.
    #[arg(long, default_value = "default")]
    pub(crate) device: DeviceSpec,
    /// The tunings to check: `all` (every tuning, whatever the device), `auto` (the
    /// device's own, as the daemon runs) or one by name.
    #[arg(long, default_value = "all", value_name = "TUNING")]
    pub(crate) tuning: SelftestTunings,
    /// Profiling events, as for `process`.
    #[arg(long, default_value = "auto")]
    pub(crate) profiling: Profiling,
    /// Also write what a board report needs as JSON to this file (also when a check
    /// fails): the board, the driver's versions, the kernel driver and GPU clock, every
    /// kernel's work-group size and memory, the cold build time, every stage's device time
    /// at 720p, 1080p and 4K (and on POCL's CPU device where there is one besides), and a
    /// coherency run of many changing frames through one pipeline.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// A V4L2 camera for the report's USERPTR check: whether its driver takes a mapped
    /// frame slot as USERPTR memory and fills it (without it, not tried).
    #[arg(long, value_name = "DEVICE", requires = "json")]
    pub(crate) camera: Option<PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct KernelsArgs {
    /// OpenCL device, as for `process`.
    #[arg(long, default_value = "default")]
    pub(crate) device: DeviceSpec,
    /// The tunings whose programs to build: `all`, `auto` (the device's own) or one by name.
    #[arg(long, default_value = "auto", value_name = "TUNING")]
    pub(crate) tuning: SelftestTunings,
    /// Profiling events, as for `process`.
    #[arg(long, default_value = "auto")]
    pub(crate) profiling: Profiling,
    /// Also write the table as JSON to this file.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Log level on stderr: with debug, each program's build is announced before the
    /// driver compiles it (to read a compiler's own statistics beside).
    #[arg(long = "log.level", default_value = "warn", value_name = "LEVEL")]
    pub(crate) log_level: String,
    /// Also run two frames of the daemon's pipeline at each of these sizes, WIDTHxHEIGHT,
    /// comma-separated (grey frames, the health grid, motion), and list every kernel each
    /// launched with its work sizes, and the bytes a frame moves. The frames' results are
    /// not looked at: a driver that runs nothing has them refused, and the list is the same.
    #[arg(long, value_delimiter = ',', value_parser = frame_size, value_name = "SIZES")]
    pub(crate) launches: Vec<Size>,
}

/// `selftest --tuning` and `kernels --tuning`: every tuning, or one.
#[derive(Clone, Copy, Debug)]
pub(crate) enum SelftestTunings {
    All,
    One(TuningChoice),
}

impl std::str::FromStr for SelftestTunings {
    type Err = <TuningChoice as std::str::FromStr>::Err;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("all") {
            return Ok(SelftestTunings::All);
        }
        s.parse().map(SelftestTunings::One)
    }
}

#[derive(clap::Args)]
pub(crate) struct CaptureArgs {
    /// A V4L2 device (/dev/video0), or any source: v4l2:DEVICE, pattern:WxH[:FORMAT]@FPS,
    /// replay:FILE:WxH:FORMAT@FPS, replay:DIR@FPS, replay:FILE.mjpeg@FPS.
    pub(crate) source: String,
    /// Frames to capture and process.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) frames: u64,
    /// Directory for report.json, the pictures and capture.json (created if missing).
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Also write the exact outputs of the last frame as raw files.
    #[arg(long)]
    pub(crate) raw: bool,
    /// Format to ask the camera for: mjpeg or a pixel format (default: the camera's
    /// current one, or by the guide's rule when --size or --fps asks for what it lacks).
    #[arg(long)]
    pub(crate) format: Option<CaptureFormat>,
    /// Frame size to ask the camera for, WIDTHxHEIGHT (default: the camera's current one).
    #[arg(long, value_parser = frame_size)]
    pub(crate) size: Option<Size>,
    /// Frame rate to ask the camera for (default: the camera's current one).
    #[arg(long, value_parser = capture::parse_fps)]
    pub(crate) fps: Option<f64>,
    /// I/O mode: dmabuf, userptr or mmap (default: the first of those that works; mmap for
    /// mjpeg).
    #[arg(long)]
    pub(crate) io: Option<IoMode>,
    /// Decode JPEG frames at 1/2, 1/4 or 1/8 of their size (default: 1, whole).
    #[arg(long)]
    pub(crate) scale: Option<Scale>,
    /// Give up when the frames have not all arrived after this many seconds.
    #[arg(long, default_value_t = 60)]
    pub(crate) timeout: u64,
    #[command(flatten)]
    pub(crate) pipeline: PipelineArgs,
}

#[derive(clap::Args)]
pub(crate) struct PipelineArgs {
    /// Sobel border mode: reflect101 (OpenCV's default), replicate or constant (zero).
    #[arg(long, default_value = "reflect101")]
    pub(crate) border: Border,
    /// Gradient magnitude: l1 (|dx|+|dy|) or l2 (sqrt(dx²+dy²)), saturated to 255.
    #[arg(long, default_value = "l1")]
    pub(crate) magnitude: Magnitude,
    /// A pixel is an edge where its magnitude is at least this (1-255).
    #[arg(long, default_value_t = PipelineOptions::default().edge_threshold,
          value_parser = clap::value_parser!(u8).range(1..))]
    pub(crate) edge_threshold: u8,
    /// A region to measure, NAME:X,Y,W,H (repeatable).
    #[arg(long = "roi", value_name = "NAME:X,Y,W,H")]
    pub(crate) rois: Vec<Region>,
    /// OpenCL device: an index from `edgesight devices`, PLATFORM:DEVICE (indices or name
    /// substrings), or a name substring. Default: the first GPU, else the first device.
    #[arg(long, default_value = "default")]
    pub(crate) device: DeviceSpec,
    /// Work sizes: auto (the device's own, as `devices` shows: cpu for CPUs, midgard for a
    /// Mali-T, mali for other Arm Mali GPUs, gpu for others), gpu, cpu, mali or midgard.
    /// Results are the same with each.
    #[arg(long, default_value = "auto", value_name = "TUNING")]
    pub(crate) tuning: TuningChoice,
    /// Stage times from the queue's profiling events: auto (where the driver gives them,
    /// else from the host's clock), on (a driver that refuses them is an error) or off.
    #[arg(long, default_value = "auto")]
    pub(crate) profiling: Profiling,
}

#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// The TOML config file (the package installs /etc/edgesight/edgesight.toml, every key
    /// explained in it); built-in defaults without it.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Frame source, replacing the config's (which must have at most one camera):
    /// a V4L2 device (/dev/video0, or v4l2:/dev/video0), pattern:1280x720@30,
    /// pattern:WxH:FORMAT@FPS, replay:FILE:WxH:FORMAT@FPS or replay:DIR@FPS.
    #[arg(long, value_name = "SPEC")]
    pub(crate) source: Option<SourceSpec>,
    /// Address to serve HTTP on, replacing [web] listen_address: IP:PORT, [IPv6]:PORT,
    /// :PORT (every address) or HOST:PORT (each address the name resolves to); give it
    /// again for more addresses.
    #[arg(
        long = "web.listen-address",
        visible_alias = "listen",
        value_name = "ADDRESS"
    )]
    pub(crate) listen: Vec<String>,
    /// An exporter web config file (Prometheus' exporter-toolkit YAML, as node_exporter
    /// takes it): TLS, client certificates, basic auth users and headers, instead of
    /// [web]'s TLS and users.
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub(crate) web_config_file: Option<PathBuf>,
    /// Log level, replacing [log] level: error, warn, info, debug or trace.
    #[arg(long = "log.level", value_name = "LEVEL")]
    pub(crate) log_level: Option<String>,
    /// Log line format, replacing [log] format: text (for people), logfmt (as
    /// node_exporter's, for Loki's `| logfmt`) or json.
    #[arg(long = "log.format", value_name = "FORMAT")]
    pub(crate) log_format: Option<String>,
}

#[derive(clap::Args)]
pub(crate) struct CheckConfigArgs {
    /// The TOML config file.
    pub(crate) file: PathBuf,
    /// The exporter web config file `run` is given, checked with the config as `run`
    /// checks them (its files loaded, [web]'s TLS or users beside it refused).
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub(crate) web_config_file: Option<PathBuf>,
}

impl PipelineArgs {
    pub(crate) fn options(&self) -> PipelineOptions {
        PipelineOptions {
            border: self.border,
            magnitude: self.magnitude,
            edge_threshold: self.edge_threshold,
        }
    }
}

#[derive(clap::Args)]
pub(crate) struct ProcessArgs {
    /// PNG, JPEG or PGM/PPM images, or raw frames with --format and --size: one or more,
    /// each through the pipeline with the same options.
    #[arg(required = true, value_name = "INPUT")]
    pub(crate) inputs: Vec<PathBuf>,
    /// Directory for report.json and the pictures (created if missing); with several
    /// inputs, one directory in it for each, named as the input's file.
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Also write the exact outputs as little-endian raw files (luma.u8, sobel_dx.s16, ...).
    #[arg(long)]
    pub(crate) raw: bool,
    /// Pixel format of a raw INPUT (grey, yuyv, nv12, rggb10p, ...: `edgesight run --help`
    /// or the guide lists them).
    #[arg(long, requires = "size")]
    pub(crate) format: Option<PixelFormat>,
    /// Size of a raw INPUT, WIDTHxHEIGHT.
    #[arg(long, requires = "format", value_parser = frame_size)]
    pub(crate) size: Option<Size>,
    /// Decode a JPEG INPUT's luma at 1/2, 1/4 or 1/8 of its size (as an MJPEG camera's
    /// frames with `scale`).
    #[arg(long, conflicts_with = "format")]
    pub(crate) scale: Option<Scale>,
    /// Run the pipeline this many times on the frame and report each stage's median
    /// device time (the first run includes one-off driver work such as loading kernels).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(crate) repeat: u32,
    #[command(flatten)]
    pub(crate) pipeline: PipelineArgs,
}

/// A frame size on the command line: `WxH` within [`capture::MAX_FRAME_SIDE`] and the
/// pipeline's limits, as in source specs and the config.
pub(crate) fn frame_size(s: &str) -> anyhow::Result<Size> {
    let size: Size = s.parse()?;
    capture::check_frame_size(size, None)?;
    Ok(size)
}
