//! `bench`: a named tuning, black frames, raw and MJPEG frames, its JSON, and a bad size.

use edgesight::pipeline::Tuning;
use edgesight::reference;

use crate::{common, edgesight, out_dir};

/// `bench --tuning` measures a named tuning on any device and says which it ran.
#[test]
fn bench_runs_a_named_tuning_and_says_so() {
    let out = out_dir("cli-bench-tuning");
    std::fs::create_dir_all(&out).unwrap();
    let json = out.join("bench.json");
    for (tuning, said) in [
        ("mali", "mali tuning (as asked)".to_string()),
        (
            "auto",
            format!(
                "{} tuning (the device's own)",
                Tuning::for_info(&common::gpu().info).name()
            ),
        ),
    ] {
        let o = edgesight(&[
            "bench",
            "--sizes",
            "33x17",
            "--runs",
            "2",
            "--warmup",
            "1",
            "--tuning",
            tuning,
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(
            o.status.success(),
            "{tuning}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let stdout = String::from_utf8_lossy(&o.stdout);
        let header = stdout.lines().next().unwrap_or_default();
        assert!(header.ends_with(&said), "{tuning}: {stdout}");
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let name = said.split(' ').next().unwrap();
        assert_eq!(report["tuning"], name, "{tuning}");
    }
}

#[test]
fn bench_measures_black_frames_when_asked() {
    let out = out_dir("cli-bench-black");
    std::fs::create_dir_all(&out).unwrap();
    let frames = out.join("frames");
    let o = edgesight(&[
        "bench",
        "--sizes",
        "33x17",
        "--runs",
        "2",
        "--warmup",
        "0",
        "--scene",
        "black",
        "--save-frames",
        frames.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    // One value only: OpenCV's Otsu gives 0.
    assert!(stdout.contains("Otsu threshold 0)"), "{stdout}");
    assert!(stdout.contains("black grey frames"), "{stdout}");
    let frame = std::fs::read(frames.join("frame-33x17.gray")).unwrap();
    assert_eq!(frame, vec![0u8; 33 * 17]);
}

/// `bench --format` measures frames as a camera sends them: a Bayer mosaic goes through the
/// luma stage (8 kernels, the JSON names the format), an MJPEG frame is decoded on the
/// host (its saved frame is the JPEG, whose luma is the pattern's) and read in place.
#[test]
fn bench_measures_raw_and_mjpeg_frames() {
    let out = out_dir("cli-bench-formats");
    std::fs::create_dir_all(&out).unwrap();
    for (format, kernels, saved) in [
        // The kernels below, and the luma stage's for Bayer (motion, on by default, runs
        // inside the integral's and the regions' launches).
        ("rggb10p", 8, "frame-48x17.rggb10p"),
        ("mjpeg", 7, "frame-48x17.jpg"),
    ] {
        let json = out.join(format!("{format}.json"));
        let frames = out.join(format!("frames-{format}"));
        let o = edgesight(&[
            "bench",
            "--sizes",
            "48x17",
            "--runs",
            "2",
            "--warmup",
            "0",
            "--format",
            format,
            "--json",
            json.to_str().unwrap(),
            "--save-frames",
            frames.to_str().unwrap(),
        ]);
        assert!(
            o.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(stdout.contains(&format!("{format} frames")), "{stdout}");
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!(report["format"], format);
        let r = &report["results"][0];
        assert_eq!(r["kernels_per_frame"], kernels, "{format}");
        let saved = std::fs::read(frames.join(saved)).unwrap();
        if format == "mjpeg" {
            assert_eq!(&saved[..2], &[0xFF, 0xD8]);
            let luma = out.join("mjpeg-luma");
            let jpeg = frames.join("frame-48x17.jpg");
            let o = edgesight(&[
                "process",
                jpeg.to_str().unwrap(),
                "--out",
                luma.to_str().unwrap(),
                "--raw",
            ]);
            assert!(o.status.success());
            let luma = std::fs::read(luma.join("luma.u8")).unwrap();
            // A quality-85 JPEG of the pattern: its luma within a few levels of the
            // pattern's own.
            let grey = edgesight::capture::pattern::grey_frame(48, 17);
            let off = luma
                .iter()
                .zip(&grey)
                .map(|(a, b)| u32::from(a.abs_diff(*b)))
                .sum::<u32>();
            assert!(
                off < 4 * 48 * 17,
                "mean difference {}",
                f64::from(off) / (48.0 * 17.0)
            );
        } else {
            // RAW10: 48 samples in 60 bytes a row.
            assert_eq!(saved.len(), 60 * 17);
        }
    }
}

#[test]
fn bench_writes_json_with_positive_finite_medians() {
    let out = out_dir("cli-bench");
    std::fs::create_dir_all(&out).unwrap();
    let json = out.join("bench.json");
    let frames = out.join("frames");
    let o = edgesight(&[
        "bench",
        "--sizes",
        "33x17,16x1",
        "--runs",
        "3",
        "--warmup",
        "1",
        "--json",
        json.to_str().unwrap(),
        "--save-frames",
        frames.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("33x17") && stdout.contains("pipeline"),
        "{stdout}"
    );
    assert!(stdout.contains("held on the device"), "{stdout}");

    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(!report["device"].as_str().unwrap().is_empty());
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for (r, (w, h)) in results.iter().zip([(33u64, 17u64), (16, 1)]) {
        assert_eq!(r["width"], w);
        assert_eq!(r["height"], h);
        for key in [
            "pipeline_device_ms",
            "pipeline_wall_ms",
            "pipeline_floor_ms",
            "launch_floor_ms",
            "launch_floor_untimed_ms",
            "pipeline_untimed_span_ms",
            "host_cpu_untimed_pipeline_ms",
        ] {
            let v = r[key].as_f64().unwrap();
            assert!(v.is_finite() && v > 0.0, "{key} = {v}");
        }
        // The CPU tuning's grey frame, read in place: histogram, Otsu, Sobel, the
        // integral's tile pass, its tops and corners, the regions; motion adds none (it
        // runs in the corners' and the regions' launches).
        assert_eq!(r["kernels_per_frame"], 7);
        // What the pipeline holds, and per pixel: at least its byte-a-pixel images.
        let held = r["pipeline_held_bytes"].as_u64().unwrap();
        assert!(held >= 4 * w * h, "held {held}");
        assert_eq!(
            r["held_bytes_per_pixel"].as_f64().unwrap(),
            held as f64 / (w * h) as f64
        );
        // A frame's wall time includes its device work.
        assert!(
            r["pipeline_wall_ms"].as_f64().unwrap() >= r["pipeline_device_ms"].as_f64().unwrap()
        );
        let stages = r["stages"].as_object().unwrap();
        let names: Vec<&str> = stages.keys().map(|k| k.as_str()).collect();
        for stage in [
            "luma",
            "sobel",
            "histogram",
            "otsu",
            "binarize",
            "integral",
            "regions",
        ] {
            assert!(names.contains(&stage), "{stage} missing from {names:?}");
            let v = stages[stage].as_f64().unwrap();
            // Grey frames packed at stride = width are read in place: luma takes 0 ms;
            // bench runs the daemon's pipeline, which never binarizes (the integral stage
            // counts the foreground itself).
            let least = if stage == "luma" || stage == "binarize" {
                0.0
            } else {
                f64::MIN_POSITIVE
            };
            assert!(v.is_finite() && v >= least, "{stage} = {v}");
        }
        // The synthetic frame was saved, and its threshold is what the reference computes.
        let frame = std::fs::read(frames.join(format!("frame-{w}x{h}.gray"))).unwrap();
        assert_eq!(frame.len() as u64, w * h);
        let threshold = reference::otsu_threshold(&reference::histogram(&frame));
        assert_eq!(r["otsu_threshold"], u64::from(threshold));
    }
}

#[test]
fn bench_rejects_a_bad_size() {
    let o = edgesight(&["bench", "--sizes", "0x10", "--runs", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("0x10"));
}
