//! `edgesight selftest`: the board checks its OpenCL driver against the plain-Rust
//! reference (the checking is the library's `selftest` module); a table per stage, exit 1
//! on any mismatch.

use std::io::Write;
use std::time::Instant;

use anyhow::{bail, Result};

use edgesight::cl::Gpu;
use edgesight::pipeline::Tuning;
use edgesight::selftest::{self, STAGES};

use crate::cli::{SelftestArgs, SelftestTunings};

/// A mismatch: the device computes something else than the reference.
#[derive(Debug, thiserror::Error)]
#[error(
    "selftest: {0} of the device's results differ from the reference (first differences above)"
)]
pub(crate) struct Mismatches(usize);

pub(crate) fn selftest(args: &SelftestArgs) -> Result<()> {
    let gpu = Gpu::open_with(&args.device, args.profiling)?;
    let tunings: Vec<Tuning> = match args.tuning {
        SelftestTunings::All => Tuning::ALL.iter().map(|(_, t)| *t).collect(),
        SelftestTunings::One(choice) => vec![choice.resolve(&gpu)],
    };
    let names: Vec<&str> = tunings.iter().map(Tuning::name).collect();
    let cases = selftest::cases();
    println!(
        "edgesight selftest on {} (stage times from the {}'s clock): {} frames (every input \
         format, awkward sizes, wider strides, every border) and motion's {} scenes with the \
         {} tuning{}",
        gpu.info,
        gpu.timing.name(),
        cases.len(),
        selftest::MOTION_SCENES,
        names.join(", "),
        if names.len() > 1 { "s" } else { "" }
    );
    let start = Instant::now();
    let mut err = std::io::stderr();
    let findings = selftest::run(&gpu, &cases, &tunings, |tuning, i, n| {
        let _ = write!(err, "\r  {} tuning: frame {}/{n} ", tuning.name(), i + 1);
    })?;
    let _ = writeln!(err, "\r{:40}", "");
    println!("{:<10} {:>7}  result", "stage", "checks");
    let mut failed = 0;
    for stage in STAGES {
        let s = findings.stages.get(stage).cloned().unwrap_or_default();
        let result = match &s.first_mismatch {
            None if s.checks > 0 => "pass".to_string(),
            None => "not run".to_string(),
            Some(first) => {
                failed += s.mismatches;
                format!("FAIL: {} mismatches; the first: {first}", s.mismatches)
            }
        };
        println!("{stage:<10} {:>7}  {result}", s.checks);
    }
    println!("{:.1} s", start.elapsed().as_secs_f64());
    if failed > 0 {
        bail!(Mismatches(failed));
    }
    println!("selftest: every stage matches the reference on this device");
    Ok(())
}
