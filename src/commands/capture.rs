//! `edgesight capture`: N frames from a camera (or any source) through the pipeline, the
//! last one's results written as `process` writes them, plus capture.json.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use edgesight::capture::{self, IoMode, Next, SourceKind, SourceParts, SourceSpec};
use edgesight::cl::Gpu;
use edgesight::measure::process_cpu_time;
use edgesight::pipeline::Pipeline;

use super::{check_roi_names, create_out_dir, print_summary, setup, write_results, Outputs};
use crate::cli::CaptureArgs;

/// A capture source argument that is neither a source spec nor an existing device.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct BadSource(String);

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
            scale: Default::default(),
        }
    };
    match spec {
        SourceSpec::V4l2 { device, .. } => SourceParts {
            device: Some(device),
            format: args.format,
            size: args.size,
            fps: args.fps,
            io: args.io,
            scale: args.scale,
            ..SourceParts::default()
        }
        .build(SourceKind::V4l2)
        // The flags are named as the parts: only --size and --scale can fail here, against
        // --format.
        .map_err(|e| match e.part {
            Some(part) => BadSource(format!("--{}: {}", part.key(), e.message)),
            None => BadSource(e.message),
        }),
        SourceSpec::Replay {
            path,
            raw: None,
            fps,
            ..
        } if args.scale.is_some() && args.format.is_none() && args.size.is_none() && args.fps.is_none() && args.io.is_none() => {
            Ok(SourceSpec::Replay {
                path,
                raw: None,
                fps,
                scale: args.scale.unwrap_or_default(),
            })
        }
        other if args.format.is_some() || args.size.is_some() || args.fps.is_some() || args.io.is_some() || args.scale.is_some() => {
            Err(BadSource(format!(
                "{other}: --format, --size, --fps and --io apply to V4L2 devices (--scale also to replayed JPEG images); give them in the spec instead"
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
    /// What the source delivered (mjpeg, or the pixel format).
    source_format: String,
    /// The frames the pipeline processed (JPEG frames' luma is grey).
    format: String,
    width: u32,
    height: u32,
    bytesperline: u32,
    fps_requested: Option<f64>,
    fps_measured: f64,
    /// Process CPU time (user + system) per frame over the run, pipeline included.
    cpu_ms_per_frame: f64,
}

pub(crate) fn capture(args: &CaptureArgs) -> Result<()> {
    edgesight::daemon::init_logging("info", Default::default());
    check_roi_names(&args.pipeline.rois)?;
    let spec = capture_source(args)?;
    create_out_dir(&args.out)?;
    let gpu = Gpu::open_with(&args.pipeline.device, args.pipeline.profiling)?;
    let mut source = capture::open(&spec, &gpu)?;
    let layout = source.layout();
    for roi in &args.pipeline.rois {
        roi.validate(&layout)?;
    }
    let options = args.pipeline.options();
    let setup = setup(&gpu, args.pipeline.tuning, args.raw);
    // The kernels are built, and compiled for their work sizes, before the frames' time
    // starts: a cold build under a slow driver must not eat the --timeout.
    let built = Instant::now();
    let mut pipeline = Pipeline::with_setup(&gpu, layout, options, &args.pipeline.rois, setup)
        .context("setting up the pipeline")?;
    pipeline
        .warm_up(&gpu)
        .context("a warm-up frame through the pipeline")?;
    println!("{}", source.describe());
    println!(
        "  kernels built and run once in {:.1} s, before the {} s for the frames",
        built.elapsed().as_secs_f64(),
        args.timeout
    );

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
                    let outputs = Outputs::read(&processed, &gpu, args.raw)?;
                    last_frame = Some((processed.into_result(), outputs));
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
    let Some((result, outputs)) = last_frame else {
        anyhow::bail!("{}: no frame captured", source_name(&spec));
    };
    let (report, mut written) = write_results(&args.out, &gpu, &pipeline, &result, &outputs)?;

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
        source_format: source.capture_format().name().to_string(),
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
    edgesight::files::write_file(&path, &json)?;
    written.push(path);
    println!(
        "  {} frames, {} dropped, {:.2} fps measured, io {}",
        summary.frames, summary.dropped, summary.fps_measured, summary.io_mode
    );
    print_summary(Path::new(&args.source), &report, &pipeline, &written)?;
    Ok(())
}

fn source_name(spec: &SourceSpec) -> String {
    spec.to_string()
}
