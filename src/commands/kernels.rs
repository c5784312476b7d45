//! `edgesight kernels`: builds every program a tuning's pipelines build, each in a cold
//! context, and prints what the driver says of every kernel: its largest work-group, the
//! preferred multiple, private memory (spills, on Arm's driver) and local memory, with each
//! program's build time. With `--log.level debug` each build is announced on stderr first,
//! so that a compiler printing its own statistics (Mesa's `BIFROST_MESA_DEBUG=shaderdb`)
//! can be read kernel by kernel (`make mali-report`).

use anyhow::Result;
use serde::Serialize;

use edgesight::cl::Gpu;
use edgesight::pipeline::programs::{build_every_program, ProgramInfo};
use edgesight::pipeline::Tuning;

use super::write_json;
use crate::cli::{KernelsArgs, SelftestTunings};

#[derive(Serialize)]
struct JsonTuning {
    tuning: &'static str,
    programs: Vec<ProgramInfo>,
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
    for tuning in tunings {
        let programs = build_every_program(&gpu, tuning)?;
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
        report.tunings.push(JsonTuning {
            tuning: tuning.name(),
            programs,
        });
    }
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    Ok(())
}
