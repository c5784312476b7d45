//! `edgesight process`: the pipeline on one image or raw frame, its results written into a
//! directory.

use anyhow::{Context, Result};

use edgesight::cl::Gpu;
use edgesight::input;
use edgesight::pipeline::{Pipeline, StageTimings};

use super::{check_roi_names, create_out_dir, print_summary, setup, write_results, Outputs};
use crate::cli::ProcessArgs;

pub(crate) fn process(args: &ProcessArgs) -> Result<()> {
    check_roi_names(&args.pipeline.rois)?;
    let raw = args.format.zip(args.size);
    let frame = match args.scale {
        Some(scale) => input::load_image(&args.input, scale)?,
        None => input::load(&args.input, raw)?,
    };
    for roi in &args.pipeline.rois {
        roi.validate(&frame.layout)?;
    }
    create_out_dir(&args.out)?;

    let gpu = Gpu::open(&args.pipeline.device)?;
    let options = args.pipeline.options();
    let setup = setup(&gpu, args.pipeline.tuning, args.raw);
    let mut pipeline =
        Pipeline::with_setup(&gpu, frame.layout, options, &args.pipeline.rois, setup)
            .context("setting up the pipeline")?;
    let mut slot = pipeline.new_slot(&gpu)?;
    let mut runs = Vec::with_capacity(args.repeat as usize);
    let mut outputs = None;
    for run in 1..=args.repeat {
        slot.write_bytes(&gpu, &frame.bytes)?;
        let processed = pipeline.process(&gpu, &slot)?;
        if run == args.repeat {
            outputs = Some(Outputs::read(&processed, &gpu, args.raw)?);
        }
        runs.push(processed.into_result());
    }
    let timings = StageTimings::median(runs.iter().map(|r| &r.timings));
    let mut result = runs.pop().expect("at least one run");
    result.timings = timings;
    let outputs = outputs.expect("at least one run");
    let (report, written) = write_results(&args.out, &gpu, &pipeline, &result, &outputs)?;
    print_summary(&args.input, &report, &pipeline, &written)?;
    Ok(())
}
