//! `edgesight selftest`: the board checks its OpenCL driver against the plain-Rust
//! reference (the checking is the library's `selftest` module); a table per stage, exit 1
//! on any mismatch. With `--json`, also the board's report ([`report`]), written whether
//! the checks pass or not.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Result};

use edgesight::board::Board;
use edgesight::cl::Gpu;
use edgesight::pipeline::{PipelineError, Tuning, TuningChoice};
use edgesight::selftest::{self, coherency, Findings, STAGES};

use super::{write_json, BadOutDir};
use crate::cli::{SelftestArgs, SelftestTunings};

mod report;

use report::{BoardReport, Checks, Kernels, OpenCl, StageTimes, Userptr};

/// A mismatch: the device computes something else than the reference.
#[derive(Debug, thiserror::Error)]
#[error(
    "selftest: {0} of the device's results differ from the reference (first differences above)"
)]
pub(crate) struct Mismatches(usize);

pub(crate) fn selftest(args: &SelftestArgs) -> Result<()> {
    if let Some(path) = &args.json {
        check_json_dir(path)?;
    }
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
    });
    let _ = writeln!(err, "\r{:40}", "");
    let checked = Checked {
        tunings,
        frames: cases.len(),
        seconds: start.elapsed().as_secs_f64(),
    };
    conclude(&gpu, args, &checked, findings)
}

/// Refuses a `--json` file whose directory is not there, or that would not be written
/// (a link, a FIFO), before the checks run, not after.
fn check_json_dir(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(BadOutDir {
            path: dir.to_path_buf(),
            reason: format!("not a directory (for --json {})", path.display()),
        }
        .into());
    }
    edgesight::files::check_replaceable(path)?;
    Ok(())
}

/// What the checks ran.
struct Checked {
    tunings: Vec<Tuning>,
    frames: usize,
    seconds: f64,
}

/// The table of what the checks found and, with `--json`, the report (written also when
/// the checks found mismatches or failed); a [`Mismatches`] error where any result
/// differed, the checks' own where they failed.
fn conclude(
    gpu: &Gpu,
    args: &SelftestArgs,
    checked: &Checked,
    findings: Result<Findings, PipelineError>,
) -> Result<()> {
    let mut failed = match &findings {
        Ok(findings) => print_table(findings, checked.seconds),
        Err(_) => 0,
    };
    if let Some(path) = &args.json {
        // The device's own tuning, as the daemon runs, unless one was asked for.
        let tuning = match args.tuning {
            SelftestTunings::One(choice) => choice,
            SelftestTunings::All => TuningChoice::Auto,
        };
        let checks = findings
            .as_ref()
            .map(|f| Checks::of(f, &checked.tunings, checked.frames, checked.seconds));
        failed += board_report(gpu, args, tuning, checks, path)?;
    }
    findings?;
    if failed > 0 {
        bail!(Mismatches(failed));
    }
    println!("selftest: every stage matches the reference on this device");
    Ok(())
}

/// Prints the stages' table and the time the checks took; returns the mismatches.
fn print_table(findings: &Findings, seconds: f64) -> usize {
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
    println!("{seconds:.1} s");
    failed
}

/// Measures what the report adds to the checks, writes it to `path` and says what it
/// found; returns the coherency run's mismatches.
fn board_report(
    gpu: &Gpu,
    args: &SelftestArgs,
    tuning: TuningChoice,
    checks: Result<Checks, &PipelineError>,
    path: &Path,
) -> Result<usize> {
    let resolved = tuning.resolve(gpu);
    let start = Instant::now();
    let coherency = coherency::run(gpu, resolved, coherency::FRAMES);
    match &coherency {
        Ok(c) if c.passed() => println!(
            "coherency: {} frames of {}x{} through {} slots in turn, each matches the \
             reference ({:.1} s)",
            c.frames,
            c.width,
            c.height,
            c.slots,
            start.elapsed().as_secs_f64()
        ),
        Ok(c) => println!(
            "coherency: FAIL: {} of {} frames differ from the reference; the first: {}",
            c.frames_mismatched,
            c.frames,
            c.first_mismatch.as_deref().unwrap_or_default()
        ),
        Err(e) => println!("coherency: could not run: {e}"),
    }
    let mismatches = coherency.as_ref().map_or(0, |c| c.mismatches);
    let kernels = Kernels::build(gpu, resolved);
    let stage_times = StageTimes::measure(gpu, &args.device, tuning);
    println!("{}", stage_times.summary());
    let checks_passed = checks
        .as_ref()
        .is_ok_and(|c| c.stages.values().all(|s| s.mismatches == 0));
    let report = BoardReport {
        edgesight: edgesight::VERSION,
        passed: checks_passed && coherency.as_ref().is_ok_and(|c| c.passed()),
        board: Board::probe(),
        opencl: OpenCl::of(gpu),
        userptr: Userptr::check(gpu, args.camera.as_deref()),
        kernels: kernels.into(),
        checks: checks.map_err(|e| e.to_string()).into(),
        coherency: coherency.into(),
        stage_times,
    };
    write_json(path, &report)?;
    Ok(mismatches)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use edgesight::cl::DeviceSpec;
    use edgesight::selftest::StageResult;

    use super::*;
    use crate::cli::{Cli, Command};
    use edgesight::pipeline::Stage;

    /// The device the tests run on: `EDGESIGHT_TEST_DEVICE`, the default without it.
    pub(super) fn gpu() -> Gpu {
        let spec: DeviceSpec = std::env::var("EDGESIGHT_TEST_DEVICE")
            .unwrap_or_default()
            .parse()
            .expect("device spec");
        Gpu::open(&spec).expect("an OpenCL device (install pocl-opencl-icd)")
    }

    fn args(json: &Path) -> SelftestArgs {
        let json = json.display().to_string();
        let device = std::env::var("EDGESIGHT_TEST_DEVICE").unwrap_or_default();
        let argv = [
            "edgesight",
            "selftest",
            "--tuning",
            "auto",
            "--device",
            &device,
            "--json",
            &json,
        ];
        match Cli::try_parse_from(argv).expect("arguments").command {
            Command::Selftest(args) => args,
            _ => unreachable!("parsed as selftest"),
        }
    }

    fn report(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("edgesight-selftest-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir.join("report.json")
    }

    fn read(path: &Path) -> serde_json::Value {
        let text = std::fs::read_to_string(path).expect("the report");
        let _ = std::fs::remove_dir_all(path.parent().expect("its directory"));
        serde_json::from_str(&text).expect("JSON")
    }

    /// A device whose luma differs from the reference in one of its checks (what the
    /// library's tests find under a scribbling device): the report is written with the
    /// mismatch in its place, `passed` false, and the command ends in [`Mismatches`],
    /// exit status 1, not a panic.
    #[test]
    fn a_mismatch_is_in_the_report_and_exits_1() {
        let gpu = gpu();
        let path = report("mismatch");
        let first = "luma, case 3: first difference at (x 1, y 0): device 7, reference 9";
        let mut findings = Findings::default();
        findings.stages.insert(
            "luma",
            StageResult {
                checks: 5,
                first_mismatch: Some(first.into()),
                mismatches: 2,
            },
        );
        let checked = Checked {
            tunings: vec![TuningChoice::Auto.resolve(&gpu)],
            frames: 5,
            seconds: 0.25,
        };
        let err = conclude(&gpu, &args(&path), &checked, Ok(findings)).expect_err("a mismatch");
        assert_eq!(
            err.downcast_ref::<Mismatches>().map(|m| m.0),
            Some(2),
            "{err:#}"
        );
        assert_eq!(crate::exit_code(&err), 1);
        let json = read(&path);
        assert_eq!(json["passed"], false);
        let luma = &json["checks"]["stages"]["luma"];
        assert_eq!(
            luma,
            &serde_json::json!({"checks": 5, "mismatches": 2, "first_mismatch": first})
        );
        assert_eq!(
            json["checks"]["stages"]["sobel"],
            serde_json::json!({"checks": 0, "mismatches": 0, "first_mismatch": null})
        );
        assert_eq!(json["checks"]["frames"], 5);
        // The rest is measured all the same.
        assert_eq!(json["coherency"]["frames"], coherency::FRAMES);
        assert_eq!(json["coherency"]["mismatches"], 0);
        assert_eq!(
            json["stage_times"]["device"]["sizes"]
                .as_array()
                .map(Vec::len),
            Some(3)
        );
    }

    /// Checks that could not run at all (a driver failing a call) leave their error in
    /// the report, which is still written, and end the command in that error.
    #[test]
    fn checks_that_failed_are_an_error_in_the_report() {
        let gpu = gpu();
        let path = report("failed");
        let failure = PipelineError::Implausible {
            stage: Stage::Otsu,
            what: "a threshold of 300".into(),
        };
        let checked = Checked {
            tunings: vec![],
            frames: 0,
            seconds: 0.0,
        };
        let err = conclude(&gpu, &args(&path), &checked, Err(failure)).expect_err("failed");
        assert_eq!(
            err.to_string(),
            "otsu stage: the device's results are impossible: a threshold of 300"
        );
        assert_eq!(crate::exit_code(&err), 1);
        let json = read(&path);
        assert_eq!(json["passed"], false);
        assert_eq!(
            json["checks"],
            serde_json::json!({
                "error": "otsu stage: the device's results are impossible: a threshold of 300"
            })
        );
        assert_eq!(json["coherency"]["mismatches"], 0);
    }
}
