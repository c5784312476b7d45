//! One module per command, each with its body; what several share (the output
//! directory, the `--roi` names, the results `process` and `capture` write) is here.

pub(crate) mod bench;
pub(crate) mod capture;
pub(crate) mod check_config;
pub(crate) mod devices;
pub(crate) mod kernels;
pub(crate) mod manpage;
pub(crate) mod process;
pub(crate) mod run;
pub(crate) mod selftest;

use std::path::{Path, PathBuf};

use anyhow::Result;

use edgesight::cl::Gpu;
use edgesight::config;
use edgesight::files;
use edgesight::pipeline::{
    FrameResult, FullImages, Images, Pictures, Pipeline, Processed, Setup, TuningChoice,
};
use edgesight::region::Region;
use edgesight::report::{self, Report};

/// A `--roi` name the config would refuse, or one given twice.
#[derive(Debug, thiserror::Error)]
#[error("--roi: {0}")]
pub(crate) struct BadRoiName(config::BadRegionName);

/// Checks the `--roi` names as the config checks a camera's (see
/// [`config::check_region_name`]).
pub(crate) fn check_roi_names(rois: &[Region]) -> Result<(), BadRoiName> {
    let mut seen = std::collections::HashSet::new();
    rois.iter()
        .try_for_each(|r| config::check_region_name(&r.name, &mut seen).map_err(BadRoiName))
}

/// An output directory that cannot be created.
#[derive(Debug, thiserror::Error)]
#[error("output directory {path}: {reason}")]
pub(crate) struct BadOutDir {
    pub(crate) path: PathBuf,
    pub(crate) reason: String,
}

/// Writes `value` as pretty JSON to `path` (a command's `--json`), and says so.
fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    files::write_file(path, (text + "\n").as_bytes()).map_err(|e| match e {
        files::WriteError::Io { path, source } => BadOutDir {
            path,
            reason: source.to_string(),
        }
        .into(),
        refused => anyhow::Error::from(refused),
    })?;
    println!("wrote {}", path.display());
    Ok(())
}

fn create_out_dir(out: &Path) -> Result<(), BadOutDir> {
    std::fs::create_dir_all(out).map_err(|e| BadOutDir {
        path: out.to_path_buf(),
        reason: e.to_string(),
    })
}

/// How `process` and `capture` build their pipeline: with the tuning `--tuning` chose,
/// keeping the full images only when `raw` asks for the raw outputs, which are the only
/// thing that reads them.
pub(crate) fn setup(gpu: &Gpu, tuning: TuningChoice, raw: bool) -> Setup {
    Setup {
        images: if raw {
            FullImages::Kept
        } else {
            FullImages::Discarded
        },
        ..Setup::with_tuning(tuning.resolve(gpu))
    }
}

/// What `process` and `capture` read back of their last frame.
pub(crate) enum Outputs {
    /// Luma, magnitude and mask, for the pictures.
    Pictures(Pictures),
    /// Every image, for the raw outputs too (a pipeline built with [`setup`] for `raw`).
    Images(Box<Images>),
}

impl Outputs {
    /// Reads what `raw` needs of `processed` while its slot is held.
    pub(crate) fn read(processed: &Processed<'_>, gpu: &Gpu, raw: bool) -> Result<Outputs> {
        Ok(if raw {
            Outputs::Images(Box::new(processed.read_images(gpu)?))
        } else {
            Outputs::Pictures(processed.read_pictures(gpu)?)
        })
    }

    fn pictures(&self) -> &Pictures {
        match self {
            Outputs::Pictures(p) => p,
            Outputs::Images(i) => &i.pictures,
        }
    }
}

/// Writes what `process` writes for the pipeline's last frame: report.json, the pictures,
/// and where `outputs` holds every image the exact outputs.
pub(crate) fn write_results(
    out: &Path,
    gpu: &Gpu,
    pipeline: &Pipeline,
    result: &FrameResult,
    outputs: &Outputs,
) -> Result<(Report, Vec<PathBuf>)> {
    let report = Report::new(
        result,
        pipeline.layout().format.name(),
        &gpu.info.to_string(),
        *pipeline.options(),
    );
    let mut written = report::write_outputs(out, &report, outputs.pictures())?;
    if let Outputs::Images(images) = outputs {
        written.extend(report::write_raw(out, images)?);
    }
    Ok((report, written))
}

/// Prints what the pipeline costs in memory, per pixel: the bytes a frame moves through
/// it (inputs read once, outputs written once) and the bytes it holds on the device, the
/// frame slot apart.
fn print_bytes(pipeline: &Pipeline) -> Result<()> {
    let layout = pipeline.layout();
    let pixels = layout.pixels() as f64;
    let held = pipeline.device_bytes()?;
    println!(
        "  bytes per pixel: {:.2} moved per frame, {:.2} held on the device ({:.1} MB; the \
         frame slot adds {:.2})",
        pipeline.traffic().pipeline as f64 / pixels,
        held as f64 / pixels,
        held as f64 / 1e6,
        layout.frame_bytes() as f64 / pixels
    );
    Ok(())
}

pub(crate) fn print_summary(
    input: &Path,
    report: &Report,
    pipeline: &Pipeline,
    written: &[PathBuf],
) -> Result<()> {
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
    print_bytes(pipeline)?;
    for path in written {
        println!("  wrote {}", path.display());
    }
    Ok(())
}
