//! `edgesight process`: the pipeline on images or raw frames, each one's results written
//! into a directory.
//!
//! Several inputs share one device, and every program built for one serves the next of
//! the same format: on a board, where opening OpenCL and loading the kernels take longer
//! than the frame, a folder of stills costs one start, not one each.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use edgesight::cl::Gpu;
use edgesight::input;
use edgesight::pipeline::{Pipeline, StageTimings};

use super::{
    check_roi_names, create_out_dir, print_summary, setup, write_results, BadOutDir, Outputs,
};
use crate::cli::ProcessArgs;

pub(crate) fn process(args: &ProcessArgs) -> Result<()> {
    check_roi_names(&args.pipeline.rois)?;
    if let [input] = args.inputs.as_slice() {
        // One input: its results straight into OUT, and nothing opened before it loads.
        let frame = load(args, input)?;
        create_out_dir(&args.out)?;
        let gpu = Gpu::open_with(&args.pipeline.device, args.pipeline.profiling)?;
        return process_one(args, &gpu, input, frame, &args.out);
    }
    let outs = out_dirs(&args.out, &args.inputs)?;
    let gpu = Gpu::open_with(&args.pipeline.device, args.pipeline.profiling)?;
    let mut failed = InputsFailed {
        failed: 0,
        total: args.inputs.len(),
        all_bad_input: true,
    };
    for (input, out) in args.inputs.iter().zip(&outs) {
        let done = load(args, input).and_then(|frame| {
            create_out_dir(out)?;
            process_one(args, &gpu, input, frame, out)
        });
        if let Err(e) = done {
            // The other inputs go on: their results are good whatever this one had. Each
            // message names its input (an input's own errors begin with it).
            let (message, input) = (format!("{e:#}"), input.display().to_string());
            if message.starts_with(&input) {
                eprintln!("edgesight: error: {message}");
            } else {
                eprintln!("edgesight: error: {input}: {message}");
            }
            failed.failed += 1;
            failed.all_bad_input &= crate::is_bad_input(&e);
        }
    }
    if failed.failed > 0 {
        return Err(failed.into());
    }
    Ok(())
}

/// Some of several inputs failed, each said as it failed: exit code 2 where all of them
/// were bad input, else 1.
#[derive(Debug, thiserror::Error)]
#[error("{failed} of {total} inputs failed (each named above)")]
pub(crate) struct InputsFailed {
    failed: usize,
    total: usize,
    pub(crate) all_bad_input: bool,
}

/// Each input's own directory in `out`: its file name, which no two inputs may share.
fn out_dirs(out: &Path, inputs: &[PathBuf]) -> Result<Vec<PathBuf>, BadOutDir> {
    let mut seen: HashMap<&OsStr, &Path> = HashMap::new();
    inputs
        .iter()
        .map(|input| {
            let Some(name) = input.file_name() else {
                return Err(BadOutDir {
                    path: out.to_path_buf(),
                    reason: format!(
                        "input {} names no file to name its results",
                        input.display()
                    ),
                });
            };
            if let Some(first) = seen.insert(name, input) {
                return Err(BadOutDir {
                    path: out.join(name),
                    reason: format!(
                        "inputs {} and {} have one file name, so their results would share it; \
                         rename or copy one",
                        first.display(),
                        input.display()
                    ),
                });
            }
            Ok(out.join(name))
        })
        .collect()
}

/// `input` as a frame, checked against the regions.
fn load(args: &ProcessArgs, input: &Path) -> Result<input::LoadedFrame> {
    let raw = args.format.zip(args.size);
    let frame = match args.scale {
        Some(scale) => input::load_image(input, scale)?,
        None => input::load(input, raw)?,
    };
    for roi in &args.pipeline.rois {
        roi.validate(&frame.layout)?;
    }
    Ok(frame)
}

/// Runs `frame` through a pipeline on `gpu` as often as `--repeat` asks and writes its
/// results into `out`, which exists.
fn process_one(
    args: &ProcessArgs,
    gpu: &Gpu,
    input: &Path,
    frame: input::LoadedFrame,
    out: &Path,
) -> Result<()> {
    let options = args.pipeline.options();
    let setup = setup(gpu, args.pipeline.tuning, args.raw);
    let mut pipeline = Pipeline::with_setup(gpu, frame.layout, options, &args.pipeline.rois, setup)
        .context("setting up the pipeline")?;
    let mut slot = pipeline.new_slot(gpu)?;
    let mut runs = Vec::with_capacity(args.repeat as usize);
    let mut outputs = None;
    for run in 1..=args.repeat {
        slot.write_bytes(gpu, &frame.bytes)?;
        let processed = pipeline.process(gpu, &slot)?;
        if run == args.repeat {
            outputs = Some(Outputs::read(&processed, gpu, args.raw)?);
        }
        runs.push(processed.into_result());
    }
    let timings = StageTimings::median(runs.iter().map(|r| &r.timings));
    let mut result = runs.pop().expect("at least one run");
    result.timings = timings;
    let outputs = outputs.expect("at least one run");
    let (report, written) = write_results(out, gpu, &pipeline, &result, &outputs)?;
    print_summary(input, &report, &pipeline, &written)?;
    Ok(())
}
