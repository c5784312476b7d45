//! The pipeline's own tests: whole frames through every stage on the test device, timed
//! and untimed, two cameras sharing a context, and a frame failing after its reads.

use super::*;
use crate::reference;
use edgesight_frame::frame::PixelFormat;

fn gpu() -> Gpu {
    crate::cl::test_gpu()
}

/// Both ways of waiting (NVIDIA's: the frame's last read polled, no clFinish once it
/// completed), and a queue without profiling events (stage times on the host's clock),
/// run on the test device, timing one frame in 3 as the daemon times a few: every
/// command of a frame has completed when it returns; the untimed frames keep no events
/// and carry the last timed frame's stage times; and the results, all come back with
/// one read, are exact (histogram, threshold, regions, the grid's cells, the gradient
/// histogram), for frames read in place and through the luma stage, for every tuning
/// (the Mali one's histogram scratch is shared by the two histograms).
#[test]
fn timed_and_untimed_frames_give_exact_results_with_every_command_complete() {
    use crate::cl::{Completion, Profiling, Timing};
    for (completion, profiling) in [
        (Completion::Finish, Profiling::Auto),
        (Completion::Poll, Profiling::Auto),
        (Completion::Finish, Profiling::Off),
    ] {
        let mut gpu = crate::cl::test_gpu_with(profiling);
        gpu.completion = completion;
        let timing = gpu.timing;
        assert_eq!(timing == Timing::Host, profiling == Profiling::Off);
        let formats = [PixelFormat::Grey, PixelFormat::Yuyv];
        for ((name, tuning), format) in Tuning::ALL.into_iter().zip(formats.iter().cycle()) {
            let what = format!("{completion:?}, {timing:?} timing, {name}, {format}");
            let layout = FrameLayout::packed(*format, 641, 479);
            let regions = ["door:10,20,300,200".parse().expect("region")];
            let options = PipelineOptions::default();
            let mut pipeline =
                Pipeline::with_tuning(&gpu, layout, options, &regions, tuning).expect("pipeline");
            pipeline
                .set_health_grid(&gpu, Some(crate::health::GRID))
                .expect("health grid");
            pipeline.time_every(3);
            let mut slot = pipeline.new_slot(&gpu).expect("slot");
            let mut last_timed = StageTimings::default();
            for n in 0..5usize {
                let what = format!("{what}, frame {n}");
                let frame: Vec<u8> = (0..layout.frame_bytes())
                    .map(|i| ((i * (7 + n)) % 251) as u8)
                    .collect();
                slot.write_bytes(&gpu, &frame).expect("write the frame");
                let result = pipeline
                    .process(&gpu, &slot)
                    .expect("a frame")
                    .into_result();
                assert_eq!(pipeline.unfinished_commands(), 0, "{what}");
                assert_eq!(result.timed, n % 3 == 0, "{what}");
                assert_eq!(result.timing, timing, "{what}");
                if result.timed {
                    for stage in [
                        Stage::Sobel,
                        Stage::Histogram,
                        Stage::Integral,
                        Stage::Regions,
                    ] {
                        assert!(result.timings.get(stage) > 0, "{what}: {}", stage.name());
                    }
                    if timing == Timing::Host {
                        // Each command's time runs from the end of the one before.
                        assert_eq!(
                            pipeline.last_device_span_nanos(),
                            result.timings.total(),
                            "{what}"
                        );
                    }
                    last_timed = result.timings;
                } else {
                    assert_eq!(result.timings, last_timed, "{what}");
                    assert!(pipeline.events.is_empty(), "{what}");
                }
                let luma = reference::luma(&layout, &frame);
                let hist = reference::histogram(&luma);
                assert_eq!(result.histogram, hist, "{what}");
                assert_eq!(result.otsu_threshold, reference::otsu_threshold(&hist));
                let (sum, sqsum) = reference::integral(&luma, 641, 479);
                let at = |x: usize, y: usize| u64::from(sum[y * 642 + x]);
                let door = at(310, 220) + at(10, 20) - at(310, 20) - at(10, 220);
                assert_eq!(result.regions[0].1.sum, door, "{what}");
                assert_eq!(result.frame.sum, at(641, 479), "{what}");
                assert_eq!(result.frame.sqsum, sqsum[479 * 642 + 641], "{what}");
                let cells: u64 = result.cells.iter().map(|c| c.sum).sum();
                assert_eq!(cells, at(641, 479), "{what}");
                let foreground = luma.iter().filter(|&&v| v > result.otsu_threshold).count() as u64;
                assert_eq!(result.frame.foreground, foreground, "{what}");
                assert_eq!(result.gradient_sampled, n % 4 == 0, "{what}");
                if result.gradient_sampled {
                    let (dx, dy) = reference::sobel(&luma, 641, 479, options.border);
                    let magnitude = reference::magnitude(&dx, &dy, options.magnitude);
                    let gradients = reference::histogram(&magnitude);
                    assert_eq!(result.gradient_histogram, gradients, "{what}");
                }
            }
        }
    }
}

/// Two cameras on one device share its context and built programs: their pipelines,
/// each with its own queue, kernels (and so kernel arguments) and buffers, run at
/// once on two threads, one on grey frames read in place, one on YUYV through the luma
/// stage, of other sizes and regions, and every frame of each is exact.
#[test]
fn two_cameras_sharing_a_context_run_at_once_with_exact_results() {
    let _turn = crate::cl::SHARING_TESTS
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let cameras = [
        (PixelFormat::Grey, 641, 479, "door:10,20,300,200"),
        (PixelFormat::Yuyv, 333, 250, "door:3,5,100,90"),
    ];
    let gpus = [gpu(), gpu()];
    assert!(gpus[0].shares_context_with(&gpus[1]));
    std::thread::scope(|scope| {
        for (n, (gpu, (format, w, h, region))) in gpus.iter().zip(cameras).enumerate() {
            scope.spawn(move || {
                let layout = FrameLayout::packed(format, w, h);
                let regions = [region.parse::<Region>().expect("region")];
                let r = &regions[0];
                let (x, y, rw, rh) = (r.x, r.y, r.width, r.height);
                let mut pipeline = Pipeline::new(gpu, layout, PipelineOptions::default(), &regions)
                    .expect("pipeline");
                let mut slot = pipeline.new_slot(gpu).expect("slot");
                for f in 0..20usize {
                    let what = format!("camera {n}, frame {f}");
                    let frame: Vec<u8> = (0..layout.frame_bytes())
                        .map(|i| ((i * (3 + f + 5 * n)) % 253) as u8)
                        .collect();
                    slot.write_bytes(gpu, &frame).expect("write the frame");
                    let result = pipeline.process(gpu, &slot).expect("a frame").into_result();
                    let luma = reference::luma(&layout, &frame);
                    let hist = reference::histogram(&luma);
                    assert_eq!(result.histogram, hist, "{what}");
                    assert_eq!(result.otsu_threshold, reference::otsu_threshold(&hist));
                    let (sum, _) = reference::integral(&luma, w as usize, h as usize);
                    let at = |x: u32, y: u32| u64::from(sum[(y * (w + 1) + x) as usize]);
                    let door = at(x + rw, y + rh) + at(x, y) - at(x + rw, y) - at(x, y + rh);
                    assert_eq!(result.regions[0].1.sum, door, "{what}");
                    assert_eq!(result.frame.sum, at(w, h), "{what}");
                }
            });
        }
    });
}

/// Issue 4: a frame that fails after a non-blocking read was enqueued returned while
/// the device could still write into a stack array. Here the failure comes right
/// after the read, the last point before the wait; a 1080p frame keeps the device busy
/// for milliseconds, so a return without waiting finds its commands still running.
/// What this proves: every command the frame enqueued has completed when
/// `process_into` returns its error, so no write is pending into host memory. It
/// cannot see a write into freed memory itself, only that none can still come.
#[test]
fn r4_a_frame_failing_after_its_reads_returns_with_every_command_complete() {
    let gpu = gpu();
    let layout = FrameLayout::packed(PixelFormat::Yuyv, 1920, 1080);
    let regions = ["door:10,20,640,480".parse().expect("region")];
    let mut pipeline =
        Pipeline::new(&gpu, layout, PipelineOptions::default(), &regions).expect("pipeline");
    let mut slot = pipeline.new_slot(&gpu).expect("slot");
    let frame: Vec<u8> = (0..layout.frame_bytes())
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    slot.write_bytes(&gpu, &frame).expect("write the frame");
    for attempt in 0..3 {
        pipeline.read_back.fail_after_read = true;
        let err = pipeline
            .process(&gpu, &slot)
            .expect_err("the injected failure");
        let chain = format!(
            "{err}: {}",
            std::error::Error::source(&err).expect("a cause")
        );
        assert_eq!(
            chain,
            "regions stage: a step after clEnqueueReadBuffer(results), failing as a test \
             asked failed: CL_OUT_OF_RESOURCES",
            "attempt {attempt}"
        );
        assert!(pipeline.read_back.event.is_some(), "the read was enqueued");
        assert_eq!(pipeline.unfinished_commands(), 0, "attempt {attempt}");
    }
    // The failed frames left nothing behind: the next one is exact.
    pipeline.read_back.fail_after_read = false;
    let result = pipeline.process(&gpu, &slot).expect("a frame");
    let luma = reference::luma(&layout, &frame);
    let hist = reference::histogram(&luma);
    assert_eq!(result.histogram, hist);
    assert_eq!(result.otsu_threshold, reference::otsu_threshold(&hist));
    assert_eq!(result.regions[0].1.area, 640 * 480);
    assert_eq!(pipeline.unfinished_commands(), 0);
}
