//! `edgesight bench`: the pipeline's cost per frame size, printed and optionally saved as
//! JSON (the measuring is the binary's `bench` module).

use std::io::Write;

use anyhow::{Context, Result};

use crate::bench::{self, JsonReport, JsonSize, SizeFigures};
use edgesight::capture::pattern::PatternFrame;
use edgesight::cl::{Gpu, Profiling};
use edgesight::frame::PixelFormat;
use edgesight::measure::Spread;
use edgesight::pipeline::TuningChoice;

use super::{write_json, BadOutDir};
use crate::cli::{BenchArgs, Scene};

pub(crate) fn bench(args: &BenchArgs) -> Result<()> {
    for size in &args.sizes {
        edgesight::frame::FrameLayout::packed(PixelFormat::Grey, size.width, size.height)
            .validate()?;
    }
    if let Some(path) = &args.json {
        // Before the runs, which take a while, as the file is written after them.
        edgesight::files::check_replaceable(path)?;
    }
    if let Some(dir) = &args.save_frames {
        std::fs::create_dir_all(dir).map_err(|e| BadOutDir {
            path: dir.clone(),
            reason: e.to_string(),
        })?;
    }
    // bench reads the device's clock: every stage, the copy floor, the gaps between them.
    let gpu = Gpu::open_with(&args.device, Profiling::On)?;
    let device = gpu.info.to_string();
    let tuning = args.tuning.resolve(&gpu);
    let how = match args.tuning {
        TuningChoice::Auto => "the device's own",
        TuningChoice::Named(_) => "as asked",
    };
    println!(
        "edgesight bench on {device}, {} tuning ({how})",
        tuning.name()
    );
    let what = match args.format {
        edgesight::frame::CaptureFormat::Mjpeg => {
            "mjpeg frames (4:2:2 JPEG of quality 85, decoded into the slot on the host)".to_string()
        }
        other => format!("{other} frames"),
    };
    let scene = match args.scene {
        Scene::Pattern => what,
        Scene::Black => format!("black {what}"),
    };
    println!(
        "{scene}, {} warm-up then {} timed runs per size; medians [10th-90th percentile]",
        args.warmup, args.runs
    );
    let mut figures = Vec::with_capacity(args.sizes.len());
    for size in &args.sizes {
        let frame = PatternFrame::new(args.format, *size, args.scene == Scene::Black)?;
        if let Some(dir) = &args.save_frames {
            let extension = match args.format {
                edgesight::frame::CaptureFormat::Mjpeg => "jpg",
                edgesight::frame::CaptureFormat::Pixels(PixelFormat::Grey) => "gray",
                edgesight::frame::CaptureFormat::Pixels(other) => other.name(),
            };
            let path = dir.join(format!("frame-{}x{}.{extension}", size.width, size.height));
            edgesight::files::write_file(&path, &frame.bytes)?;
        }
        let mut progress = |w: u32, h: u32, done: usize, total: usize| {
            eprint!("\r  {w}x{h}: run {done}/{total}   ");
            let _ = std::io::stderr().flush();
        };
        let f = bench::bench_size(
            &gpu,
            tuning,
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
            tuning: tuning.name(),
            format: args.format.name(),
            runs: args.runs as usize,
            warmup: args.warmup as usize,
            results: figures.iter().map(JsonSize::new).collect(),
        };
        write_json(path, &report)?;
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
    let row = |name: &str, s: &Spread, bytes: u64, floor: f64| {
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
        "  health stage: on one frame in {}, {:.2} % of the pipeline's device time per frame",
        edgesight::pipeline::GRADIENT_SAMPLE_FRAMES,
        100.0 * f.health_share()
    );
    println!(
        "  motion: {:.2} % of the pipeline's device time per frame (the pipeline but the health \
         stage {:.4} ms with it, {:.4} ms without it, frames taken in turns)",
        100.0 * f.motion_share(),
        f.pipeline_device_motion_on.median,
        f.pipeline_device_motion_off.median
    );
    let by_stage: Vec<String> = f
        .motion_by_stage
        .iter()
        .filter(|(_, ms)| *ms != 0.0)
        .map(|(stage, ms)| format!("{} {:+.4} ms", stage.name(), ms))
        .collect();
    println!(
        "  motion by stage (median with it less without): {}",
        by_stage.join(", ")
    );
    println!(
        "  bytes per pixel: {:.2} moved per frame, {:.2} held on the device by the pipeline \
         ({:.1} MB; the frame slot adds 1)",
        f.pipeline_bytes as f64 / px,
        f.held_bytes as f64 / px,
        f.held_bytes as f64 / 1e6
    );
    println!(
        "  device span (first kernel start to last end) {:.3} ms [{:.3}-{:.3}]",
        f.pipeline_span.median, f.pipeline_span.p10, f.pipeline_span.p90
    );
    println!(
        "  launch floor: {} empty kernels back to back span {:.3} ms (an event each)",
        f.kernels_per_frame, f.launch_floor_ms
    );
    println!(
        "  untimed frames (no kernel events, as the daemon runs most frames): span {:.3} ms \
         [{:.3}-{:.3}] (a marker before the first kernel to the read's end; {} empty kernels: \
         {:.3} ms), host CPU {:.3} ms for the pipeline",
        f.untimed_span.median,
        f.untimed_span.p10,
        f.untimed_span.p90,
        f.kernels_per_frame,
        f.launch_floor_untimed_ms,
        f.untimed_host_cpu_pipeline.median
    );
    println!(
        "  host wall per frame (map, write, unmap, kernels, results) {:.3} ms [{:.3}-{:.3}], {:.2}x device time",
        f.pipeline_wall.median,
        f.pipeline_wall.p10,
        f.pipeline_wall.p90,
        f.pipeline_wall.median / f.pipeline_device.median.max(1e-9)
    );
    println!(
        "  host CPU per frame, all threads: {:.3} ms [{:.3}-{:.3}] for the pipeline, \
         {:.3} ms [{:.3}-{:.3}] writing (or decoding) the frame into its slot",
        f.host_cpu_pipeline.median,
        f.host_cpu_pipeline.p10,
        f.host_cpu_pipeline.p90,
        f.host_cpu_write.median,
        f.host_cpu_write.p10,
        f.host_cpu_write.p90
    );
}
