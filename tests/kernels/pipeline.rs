//! A pipeline across frames and at its build: slots and regions reused from frame to
//! frame, a refused set of regions, and a kernel that fails to build.

use crate::common::{assert_image_eq, gpu, Rng};
use edgesight::frame::{FrameLayout, PixelFormat};
use edgesight::pipeline::{Pipeline, PipelineOptions, Tuning};
use edgesight::reference;
use edgesight::region::Region;

#[test]
fn slots_are_reused_frame_after_frame() {
    let gpu = gpu();
    let mut rng = Rng::new(7);
    let layout = FrameLayout::packed(PixelFormat::Yuyv, 47, 13);
    // Also proves the histogram starts from zero on every frame: the Otsu kernel clears it
    // for the next one (and with sub-histograms, each frame zeroes its own).
    for (_, tuning) in Tuning::ALL {
        let mut pipeline =
            Pipeline::with_tuning(&gpu, layout, PipelineOptions::default(), &[], tuning).unwrap();
        let mut slot = pipeline.new_slot(&gpu).unwrap();
        for _ in 0..3 {
            let frame = rng.bytes(layout.frame_bytes());
            slot.write_bytes(&gpu, &frame).unwrap();
            let result = pipeline.process(&gpu, &slot).unwrap();
            let luma = reference::luma(&layout, &frame);
            assert_eq!(result.histogram, reference::histogram(&luma));
            assert_image_eq(
                "luma",
                "reused slot",
                47,
                &result.read_pictures(&gpu).unwrap().luma,
                &luma,
            );
        }
    }
}

#[test]
fn a_kernel_that_fails_to_build_names_its_file_and_shows_the_log() {
    let gpu = gpu();
    let broken = edgesight::cl::KernelSource {
        file: "broken.cl",
        text: "__kernel void f(__global int *p) { p[0] = undeclared_name; }",
    };
    let err = gpu.build(broken).expect_err("the build must fail");
    let message = err.to_string();
    assert!(message.contains("kernels/broken.cl"), "{message}");
    assert!(
        message.contains("undeclared_name"),
        "no compiler log in: {message}"
    );
}

#[test]
fn regions_can_be_replaced_between_frames() {
    let gpu = gpu();
    let mut rng = Rng::new(21);
    let layout = FrameLayout::packed(PixelFormat::Grey, 40, 30);
    let frame = rng.bytes(layout.frame_bytes());
    let mut pipeline = Pipeline::new(&gpu, layout, PipelineOptions::default(), &[]).unwrap();
    let mut slot = pipeline.new_slot(&gpu).unwrap();
    slot.write_bytes(&gpu, &frame).unwrap();
    assert!(pipeline.process(&gpu, &slot).unwrap().regions.is_empty());

    let corner: Region = "corner:30,20,10,10".parse().unwrap();
    pipeline
        .set_regions(&gpu, std::slice::from_ref(&corner))
        .unwrap();
    let result = pipeline.process(&gpu, &slot).unwrap();
    let want: u64 = (20..30)
        .flat_map(|y| frame[y * 40 + 30..y * 40 + 40].iter())
        .map(|&v| u64::from(v))
        .sum();
    assert_eq!(result.regions.len(), 1);
    assert_eq!(result.regions[0].0, corner);
    assert_eq!(result.regions[0].1.sum, want);

    let outside: Region = "outside:31,20,10,10".parse().unwrap();
    let err = pipeline.set_regions(&gpu, &[outside]).unwrap_err();
    assert!(err.to_string().contains("'outside'"), "{err}");
    // A refused set leaves the previous regions in place.
    assert_eq!(pipeline.process(&gpu, &slot).unwrap().regions[0].0, corner);
}
