//! Verification of live frames: one in N checked, each wrong stage counted, motion checked
//! from the background the frame before left, and checks that never queue up.

use super::*;
use edgesight_core::pipeline::Pipeline;
use edgesight_frame::frame::PixelFormat;
use std::time::{Duration, Instant};

/// A YUYV frame of an awkward size with a wider stride, two regions and the health
/// grid, processed on the test device; `offer` is called with its images, and with
/// the result `doctor` makes of the true one.
fn offer_frame(verifier: &mut Verifier, sequence: u64, doctor: impl FnOnce(&mut FrameResult)) {
    let gpu = edgesight_core::cl::test_gpu();
    let layout = FrameLayout {
        stride: PixelFormat::Yuyv.row_bytes(45) as u32 + 6,
        ..FrameLayout::packed(PixelFormat::Yuyv, 45, 23)
    };
    let regions = [
        "a:0,0,10,10".parse().unwrap(),
        "b:3,4,41,19".parse().unwrap(),
    ];
    let options = PipelineOptions::default();
    let mut pipeline = Pipeline::new(&gpu, layout, options, &regions).expect("pipeline");
    pipeline
        .set_health_grid(&gpu, Some(edgesight_core::health::GRID))
        .expect("grid");
    let mut slot = pipeline.new_slot(&gpu).expect("slot");
    let frame: Vec<u8> = (0..layout.frame_bytes())
        .map(|i| (i * 37 % 251 + i / 97) as u8)
        .collect();
    slot.write_bytes(&gpu, &frame).expect("write");
    let mut result = FrameResult::empty();
    let images = pipeline
        .process_into(&gpu, &slot, &mut result)
        .expect("process");
    doctor(&mut result);
    verifier.offer(&gpu, &images, &result, options, sequence);
}

/// Waits for the verifier to have checked `n` frames of `m`.
fn wait_checked(m: &VerifyMetrics, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while m.verified() < n {
        assert!(
            Instant::now() < deadline,
            "{} of {n} frames checked",
            m.verified()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn families() -> VerifyFamilies {
    VerifyFamilies::new(&Metrics::new())
}

/// A right frame counts as checked with no mismatch; frames that are not due are not
/// checked; a frame whose results differ from the reference counts a mismatch in
/// each stage it differs in, and only there, and one mismatched frame.
#[test]
fn one_frame_in_n_is_checked_and_each_wrong_stage_counted() {
    let m = families().camera("c");
    let mut verifier = Verifier::new(3, Arc::clone(&m));
    // Due at once: a camera's first frame is checked.
    offer_frame(&mut verifier, 1, |_| {});
    wait_checked(&m, 1);
    for stage in CHECKED_STAGES {
        assert_eq!(m.mismatches(stage), 0, "{stage}");
    }
    assert_eq!(m.mismatched_frames(), 0);
    offer_frame(&mut verifier, 2, |r| r.otsu_threshold ^= 1);
    offer_frame(&mut verifier, 3, |r| r.otsu_threshold ^= 1);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(m.verified(), 1, "frames 2 and 3 are not due");
    offer_frame(&mut verifier, 4, |r| {
        r.otsu_threshold ^= 1;
        r.regions[1].1.sum += 1;
    });
    wait_checked(&m, 2);
    let counts = CHECKED_STAGES.map(|s| m.mismatches(s));
    assert_eq!(counts, [0, 0, 0, 1, 1, 0], "{CHECKED_STAGES:?}");
    assert_eq!(m.mismatched_frames(), 1, "one frame, however many stages");
    let logged = m.logged.each_ref().map(|l| l.load(Ordering::Relaxed));
    assert_eq!(
        logged,
        [false, false, false, true, true, false],
        "first of a stage logged"
    );
    offer_frame(&mut verifier, 5, |_| {});
    offer_frame(&mut verifier, 6, |_| {});
    offer_frame(&mut verifier, 7, |r| r.histogram[9] += 1);
    wait_checked(&m, 3);
    let counts = CHECKED_STAGES.map(|s| m.mismatches(s));
    assert_eq!(counts, [0, 0, 1, 1, 1, 0], "{CHECKED_STAGES:?}");
    assert_eq!(m.mismatched_frames(), 2);
}

/// A frame due while the camera's last check still runs is not checked, and the
/// camera's next frame is: a check is late, never queued behind another nor put off
/// for a whole period.
#[test]
fn a_due_frame_while_the_last_check_runs_passes_the_turn_on() {
    let m = families().camera("c");
    let mut verifier = Verifier::new(1000, Arc::clone(&m));
    // As while the verifier holds the job.
    let out = verifier.job.take();
    offer_frame(&mut verifier, 1, |_| {});
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(m.verified(), 0);
    assert_eq!(verifier.since, 1001, "still due");
    verifier.job = out;
    offer_frame(&mut verifier, 2, |_| {});
    assert_eq!(verifier.since, 0);
    wait_checked(&m, 1);
}

/// A grey camera with motion told on every frame, the same pipeline throughout.
struct MotionCamera {
    gpu: Gpu,
    pipeline: Pipeline,
    slot: edgesight_core::cl::FrameSlot,
}

impl MotionCamera {
    fn new() -> MotionCamera {
        let gpu = edgesight_core::cl::test_gpu();
        let layout = FrameLayout::packed(PixelFormat::Grey, 50, 37);
        let regions = ["a:0,0,20,20".parse().unwrap()];
        let options = PipelineOptions::default();
        let mut pipeline = Pipeline::new(&gpu, layout, options, &regions).expect("pipeline");
        pipeline.tell_motion(Some(FrameMotion {
            rate: 3000,
            still_rate: 3000,
            threshold: 256,
        }));
        let slot = pipeline.new_slot(&gpu).expect("slot");
        MotionCamera {
            gpu,
            pipeline,
            slot,
        }
    }

    /// Processes frame `sequence` (a pattern that shifts with it) and, if `offer`,
    /// offers it.
    fn frame(&mut self, verifier: &mut Verifier, sequence: u64, offer: bool) {
        let frame: Vec<u8> = (0..50 * 37)
            .map(|i| ((i as u64 * 7 + sequence * 29) % 200) as u8)
            .collect();
        self.slot.write_bytes(&self.gpu, &frame).expect("write");
        let mut result = FrameResult::empty();
        let images = self
            .pipeline
            .process_into(&self.gpu, &self.slot, &mut result)
            .expect("process");
        if offer {
            let options = PipelineOptions::default();
            verifier.offer(&self.gpu, &images, &result, options, sequence);
        }
    }
}

/// A due frame's motion is checked from the background the frame before left (read
/// when it was the next due), so a wrong background counts at `motion`; one whose
/// frame before was not read (not offered: a failed frame) is not checked.
#[test]
fn motion_is_checked_from_the_background_the_frame_before_left() {
    let m = families().camera("c");
    let mut verifier = Verifier::new(3, Arc::clone(&m));
    let mut camera = MotionCamera::new();
    // 1 is due (nothing before it read); 2 is not; after 3 the background is read.
    for sequence in 1..=3 {
        camera.frame(&mut verifier, sequence, true);
    }
    wait_checked(&m, 1);
    assert_eq!(verifier.before_of, Some(camera.pipeline.frame_number()));
    camera.frame(&mut verifier, 4, true);
    wait_checked(&m, 2);
    assert_eq!(m.mismatches("motion"), 0);

    // As if the device had kept another background: the check finds it.
    for sequence in 5..=6 {
        camera.frame(&mut verifier, sequence, true);
    }
    verifier.before.background[1] ^= 1 << 12;
    camera.frame(&mut verifier, 7, true);
    wait_checked(&m, 3);
    assert_eq!(m.mismatches("motion"), 1);
    let others = CHECKED_STAGES.map(|s| m.mismatches(s));
    assert_eq!(
        others.iter().sum::<u64>(),
        1,
        "{CHECKED_STAGES:?} {others:?}"
    );

    // A frame between that was never offered: the background read is not the one
    // the due frame began from, so its motion is not checked.
    for sequence in 8..=9 {
        camera.frame(&mut verifier, sequence, true);
    }
    verifier.before.background[1] ^= 1 << 12;
    camera.frame(&mut verifier, 10, false);
    camera.frame(&mut verifier, 11, true);
    wait_checked(&m, 4);
    assert_eq!(m.mismatches("motion"), 1);
}

/// 0 checks nothing; a reload to N makes the next frame due after at most N.
#[test]
fn zero_checks_nothing_until_a_reload_asks() {
    let m = families().camera("c");
    let mut verifier = Verifier::new(0, Arc::clone(&m));
    offer_frame(&mut verifier, 1, |_| {});
    assert!(verifier.job.is_some(), "nothing was sent");
    verifier.set_every(1);
    offer_frame(&mut verifier, 2, |_| {});
    wait_checked(&m, 1);
}

/// A driver whose results pass for possible but whose reads of images are garbage: the
/// frame the verifier reads back to run the reference on is garbage too, so every stage
/// it checks differs (motion is not measured on this camera), and nothing panics.
#[test]
fn a_device_writing_garbage_images_counts_a_mismatch_in_every_stage_checked() {
    use edgesight_core::cl::scribble::{self, Reads};
    let m = families().camera("c");
    let mut verifier = Verifier::new(1, Arc::clone(&m));
    scribble::on(0x0bad_d1e5, Reads::Images);
    offer_frame(&mut verifier, 1, |_| {});
    scribble::off();
    wait_checked(&m, 1);
    let counts = CHECKED_STAGES.map(|s| m.mismatches(s));
    assert_eq!(counts, [1, 1, 1, 1, 1, 0], "{CHECKED_STAGES:?}");
}
