//! `edgesight kernels`: builds every program a tuning's pipelines build, each in a cold
//! context, and prints what the driver says of every kernel: its largest work-group, the
//! preferred multiple, private memory (spills, on Arm's driver) and local memory, with each
//! program's build time. With `--log.level debug` each build is announced on stderr first,
//! so that a compiler printing its own statistics (Mesa's `BIFROST_MESA_DEBUG=shaderdb`)
//! can be read kernel by kernel (`make mali-report`). With `--launches`, the daemon's
//! pipeline then runs two frames at each size asked in the same context (no second build)
//! and every kernel they launched is listed with its work sizes, beside the bytes a frame
//! moves: the launch geometry Mali's compiler report models a frame's device time from.

use anyhow::{Context, Result};
use serde::Serialize;

use edgesight::cl::Gpu;
use edgesight::frame::{FrameLayout, PixelFormat};
use edgesight::pipeline::programs::{
    build_every_program_in, frame_launches, FrameLaunches, ProgramInfo,
};
use edgesight::pipeline::Tuning;

use super::write_json;
use crate::cli::{KernelsArgs, SelftestTunings};

#[derive(Serialize)]
struct JsonTuning {
    tuning: &'static str,
    programs: Vec<ProgramInfo>,
    /// One entry per `--launches` size, in the order asked.
    launches: Vec<FrameLaunches>,
}

#[derive(Serialize)]
struct JsonReport {
    device: String,
    driver_version: String,
    timing: &'static str,
    tunings: Vec<JsonTuning>,
}

pub(crate) fn kernels(args: &KernelsArgs) -> Result<()> {
    edgesight::daemon::init_logging(&args.log_level, Default::default());
    if let Some(path) = &args.json {
        // Before the builds, which take a while, as the file is written after them.
        edgesight::files::check_replaceable(path)?;
    }
    let gpu = Gpu::open_with(&args.device, args.profiling)?;
    let tunings: Vec<Tuning> = match args.tuning {
        SelftestTunings::All => Tuning::ALL.iter().map(|(_, t)| *t).collect(),
        SelftestTunings::One(choice) => vec![choice.resolve(&gpu)],
    };
    println!(
        "edgesight kernels on {} (driver {})",
        gpu.info, gpu.info.driver_version
    );
    let mut report = JsonReport {
        device: gpu.info.to_string(),
        driver_version: gpu.info.driver_version.clone(),
        timing: gpu.timing.name(),
        tunings: Vec::new(),
    };
    for size in &args.launches {
        FrameLayout::packed(PixelFormat::Grey, size.width, size.height).validate()?;
    }
    for tuning in tunings {
        // Each tuning's programs in a context of their own, kept for its launches.
        let alone = gpu.alone()?;
        let programs = build_every_program_in(&alone, tuning)?;
        let seconds: f64 = programs.iter().map(|p| p.build_seconds).sum();
        println!();
        println!(
            "tuning {}: {} programs, built in {seconds:.1} s",
            tuning.name(),
            programs.len()
        );
        println!(
            "  {:<28} {:>8} {:>6} {:>8} {:>9} {:>9}",
            "kernel", "launched", "wg", "multiple", "private B", "local B"
        );
        for p in &programs {
            let defines = if p.defines.is_empty() {
                "-"
            } else {
                &p.defines
            };
            println!("kernels/{} [{defines}] {:.2} s", p.file, p.build_seconds);
            for k in &p.kernels {
                println!(
                    "  {:<28} {:>8} {:>6} {:>8} {:>9} {:>9}",
                    k.name,
                    if k.launched { "yes" } else { "-" },
                    k.work_group_size,
                    k.preferred_multiple,
                    k.private_bytes,
                    k.local_bytes,
                );
            }
        }
        let mut launches = Vec::with_capacity(args.launches.len());
        for size in &args.launches {
            let layout = FrameLayout::packed(PixelFormat::Grey, size.width, size.height);
            let frame = frame_launches(&alone, tuning, layout, Some(edgesight::health::GRID))
                .with_context(|| format!("the launches of a {size} frame"))?;
            print_launches(&frame);
            launches.push(frame);
        }
        report.tunings.push(JsonTuning {
            tuning: tuning.name(),
            programs,
            launches,
        });
    }
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    Ok(())
}

/// The kernels each frame launched, with their work sizes.
fn print_launches(f: &FrameLaunches) {
    println!();
    println!(
        "launches at {}x{} ({} frames, the health grid, motion): {} bytes moved a frame",
        f.width, f.height, f.format, f.bytes_moved
    );
    for (i, frame) in f.frames.iter().enumerate() {
        let health = if frame.gradient_sampled {
            "with the health stage"
        } else {
            "without the health stage"
        };
        let refused = match &frame.refused {
            Some(why) => format!("; its results refused: {why}"),
            None => String::new(),
        };
        println!("  frame {} ({health}){refused}", i + 1);
        println!(
            "    {:<24} {:>14} {:>8} {:>11}",
            "kernel", "global", "local", "work-items"
        );
        for l in &frame.launches {
            let dims = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join("x");
            println!(
                "    {:<24} {:>14} {:>8} {:>11}",
                l.kernel,
                dims(&l.global),
                dims(&l.local),
                l.work_items()
            );
        }
    }
}
