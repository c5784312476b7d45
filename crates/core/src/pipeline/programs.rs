//! Every OpenCL program the pipelines of one tuning build, and what the driver says of each
//! kernel in them (`edgesight kernels`, `selftest --json`, and Mali's compiler report,
//! which reads the compiler's own statistics beside it). The programs are the pipelines'
//! own: a pipeline is built for each luma kernel's pixel format, with and without the full
//! images, so nothing here lists them a second time. Also the launches of a frame of the
//! daemon's pipeline at a given size, with the bytes it moves (`edgesight kernels
//! --launches`: the work sizes Mali's compiler report models a frame's device time from).

use opencl3::kernel::create_program_kernels;
use serde::Serialize;

use super::{
    FullImages, MotionSettings, Pipeline, PipelineError, PipelineOptions, Setup, Stage, Tuning,
};
use crate::cl::{CallContext, Gpu, LaunchRecord, LaunchRecorder};
use edgesight_frame::frame::{FrameLayout, PixelFormat};

/// One kernel as the driver describes it after the build.
#[derive(Clone, Debug, Serialize)]
pub struct KernelInfo {
    /// The kernel's function name, as its `.cl` file declares it.
    pub name: String,
    /// Whether the tuning's pipelines launch it (a program holds kernels of other
    /// tunings too).
    pub launched: bool,
    /// `CL_KERNEL_WORK_GROUP_SIZE`: the most work-items a group of it may have here.
    pub work_group_size: usize,
    /// `CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE`.
    pub preferred_multiple: usize,
    /// `CL_KERNEL_PRIVATE_MEM_SIZE`: on Arm's driver, bytes a work-item keeps in memory
    /// because its registers do not hold them (spills).
    pub private_bytes: u64,
    /// `CL_KERNEL_LOCAL_MEM_SIZE`.
    pub local_bytes: u64,
}

/// One program, built in a context of its own (a cold build, the driver's own caches
/// aside), and its kernels.
#[derive(Clone, Debug, Serialize)]
pub struct ProgramInfo {
    /// The kernel file it was built from under `kernels/`, or several joined by " + ".
    pub file: &'static str,
    /// Its `-D` options (beside the common build options); empty where it has none.
    pub defines: String,
    /// How long the driver took to build it, in seconds on the host's clock.
    pub build_seconds: f64,
    /// Every kernel the program holds, launched or not, sorted by name.
    pub kernels: Vec<KernelInfo>,
}

/// The pixel formats whose luma stage builds a program or kernel no other does: every
/// format is converted by one of these kernels.
fn luma_formats() -> Vec<PixelFormat> {
    let mut seen = Vec::new();
    let mut formats = Vec::new();
    for format in PixelFormat::ALL {
        let kernel = super::luma::kernel_for(format);
        let key = (kernel.0.file, kernel.1, kernel.2);
        if !seen.contains(&key) {
            seen.push(key);
            formats.push(format);
        }
    }
    formats
}

/// Builds every program pipelines of `tuning` build on `gpu`'s device, in a context of
/// their own ([`Gpu::alone`]), and describes each kernel of each.
pub fn build_every_program(gpu: &Gpu, tuning: Tuning) -> Result<Vec<ProgramInfo>, PipelineError> {
    build_every_program_in(&gpu.alone()?, tuning)
}

/// As [`build_every_program`], in `gpu`'s context, which the caller made with
/// [`Gpu::alone`] and keeps: pipelines it builds there afterwards ([`frame_launches`]) find
/// the programs built, and no compiler runs a second time. Every program of the context
/// is described, so nothing else should have been built in it.
pub fn build_every_program_in(
    gpu: &Gpu,
    tuning: Tuning,
) -> Result<Vec<ProgramInfo>, PipelineError> {
    for format in luma_formats() {
        for images in [FullImages::Discarded, FullImages::Kept] {
            let layout = FrameLayout::packed(format, 64, 32);
            let setup = Setup { tuning, images };
            Pipeline::with_setup(gpu, layout, PipelineOptions::default(), &[], setup)?;
        }
    }
    let id = gpu.device.id();
    let mut out = Vec::new();
    for built in gpu.built_programs() {
        let q = "clGetKernelWorkGroupInfo";
        let mut kernels = Vec::new();
        for kernel in create_program_kernels(&built.program).call("clCreateKernelsInProgram")? {
            let name = kernel.function_name().call("clGetKernelInfo")?;
            kernels.push(KernelInfo {
                launched: built.kernels_made.contains(&name.as_str()),
                name,
                work_group_size: kernel.get_work_group_size(id).call(q)?,
                preferred_multiple: kernel.get_work_group_size_multiple(id).call(q)?,
                private_bytes: kernel.get_private_mem_size(id).call(q)?,
                local_bytes: kernel.get_local_mem_size(id).call(q)?,
            });
        }
        kernels.sort_by(|a, b| a.name.cmp(&b.name));
        out.push(ProgramInfo {
            file: built.file,
            defines: built.defines,
            build_seconds: built.build_time.as_secs_f64(),
            kernels,
        });
    }
    Ok(out)
}

/// The kernels one frame launched, in order.
#[derive(Clone, Debug, Serialize)]
pub struct FrameLaunchList {
    /// Whether the frame counted the gradient histogram (the health stage, one frame in
    /// [`GRADIENT_SAMPLE_FRAMES`](super::GRADIENT_SAMPLE_FRAMES)).
    pub gradient_sampled: bool,
    /// Why the pipeline refused the frame's results, if it did: where nothing runs (a
    /// no-op driver) the results are impossible, and the launches are still these.
    pub refused: Option<String>,
    /// Every kernel the frame enqueued, in order, with its program and work sizes.
    pub launches: Vec<LaunchRecord>,
}

/// Bytes a stage moves ([`Traffic`](super::Traffic)).
#[derive(Clone, Debug, Serialize)]
pub struct StageBytes {
    /// The stage's name, as [`Stage::name`] gives it.
    pub stage: &'static str,
    /// Bytes the stage moves on one frame: its inputs read once, its outputs written once.
    pub bytes: u64,
}

/// The launches of the daemon's pipeline on frames of one size, and the bytes a frame
/// moves.
#[derive(Clone, Debug, Serialize)]
pub struct FrameLaunches {
    /// Frame width in pixels.
    pub width: u32,
    /// Frame height in pixels.
    pub height: u32,
    /// The frames' pixel format, by its name (e.g. "yuyv", "nv12").
    pub format: &'static str,
    /// The least a frame moves: its luma read once, every image the pipeline keeps
    /// written once ([`Traffic::pipeline`](super::Traffic::pipeline)).
    pub bytes_moved: u64,
    /// Each stage's inputs read once and outputs written once.
    pub stage_bytes: Vec<StageBytes>,
    /// The first frame (the health stage's) and the next (without it).
    pub frames: Vec<FrameLaunchList>,
}

/// Builds the daemon's pipeline of `tuning` for frames of `layout` on `gpu` (without the
/// full images, the health grid `grid`, motion on, no configured regions: what `bench`
/// measures), runs two blank frames through it and lists every kernel each launched. The
/// frames' results are not looked at: a driver that runs nothing (Panfrost's no-op DRM
/// shim) has them refused as impossible, which is no error here.
pub fn frame_launches(
    gpu: &Gpu,
    tuning: Tuning,
    layout: FrameLayout,
    grid: Option<(u32, u32)>,
) -> Result<FrameLaunches, PipelineError> {
    let mut pipeline = Pipeline::with_tuning(gpu, layout, PipelineOptions::default(), &[], tuning)?;
    pipeline.set_health_grid(gpu, grid)?;
    pipeline.set_motion(Some(MotionSettings::default()));
    let slot = pipeline.new_slot(gpu)?;
    let recorder = LaunchRecorder::start();
    let mut frames = Vec::new();
    for _ in 0..2 {
        let (gradient_sampled, refused) = match pipeline.process(gpu, &slot) {
            Ok(processed) => (processed.result.gradient_sampled, None),
            Err(e @ PipelineError::Implausible { .. }) => {
                // Frame 0 counts the gradient histogram wherever there is a grid.
                (grid.is_some() && frames.is_empty(), Some(e.to_string()))
            }
            Err(e) => return Err(e),
        };
        frames.push(FrameLaunchList {
            gradient_sampled,
            refused,
            launches: recorder.take(),
        });
    }
    let traffic = pipeline.traffic();
    Ok(FrameLaunches {
        width: layout.width,
        height: layout.height,
        format: layout.format.name(),
        bytes_moved: traffic.pipeline,
        stage_bytes: Stage::ALL
            .iter()
            .map(|&s| StageBytes {
                stage: s.name(),
                bytes: traffic.stages[s as usize],
            })
            .collect(),
        frames,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::IntegralLayout;

    /// Every luma kernel's format is built, and every kernel a pipeline of each tuning
    /// creates is among those described, with a work-group size the device allows.
    #[test]
    fn every_tuning_lists_every_program_its_pipelines_build() {
        let gpu = crate::cl::test_gpu();
        let formats = luma_formats();
        assert!(formats.contains(&PixelFormat::Grey) && formats.contains(&PixelFormat::Yuyv));
        assert!(formats.len() >= 10, "{formats:?}");
        for (name, tuning) in Tuning::ALL {
            let programs = build_every_program(&gpu, tuning).expect("programs");
            let kernels: Vec<&str> = programs
                .iter()
                .flat_map(|p| p.kernels.iter().map(|k| k.name.as_str()))
                .collect();
            for wanted in ["luma_yuyv", "luma_bayer", "histogram_count", "binarize"] {
                assert!(kernels.contains(&wanted), "{name}: {wanted} in {kernels:?}");
            }
            let launched = |kernel: &str| {
                programs
                    .iter()
                    .flat_map(|p| &p.kernels)
                    .any(|k| k.name == kernel && k.launched)
            };
            let (tiles, not_tiles) = match tuning.integral_layout {
                IntegralLayout::ItemTiles => ("integral_tiles", "integral_group_tiles"),
                IntegralLayout::TileParts => ("integral_tile_parts", "integral_tiles"),
                IntegralLayout::GroupBands => ("integral_group_tiles", "integral_tiles"),
                IntegralLayout::ItemBands => ("integral_tile_bands", "integral_tiles"),
            };
            assert!(launched(tiles) && !launched(not_tiles), "{name}");
            assert!(
                launched("luma_bayer") && launched("region_sums_items") != launched("region_sums")
            );
            let sobel = programs
                .iter()
                .filter(|p| p.file.contains("sobel.cl"))
                .count();
            assert_eq!(sobel, 2, "{name}: Sobel with and without the full images");
            for p in &programs {
                assert!(p.build_seconds > 0.0, "{name}: {}", p.file);
                for k in &p.kernels {
                    assert!(
                        (1..=gpu.info.max_work_group_size).contains(&k.work_group_size),
                        "{name}: {} {}",
                        p.file,
                        k.name
                    );
                }
            }
        }
    }
}
