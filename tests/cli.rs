//! The `edgesight` binary end to end: `process` on the bundled sample against the reference,
//! the files it writes, and one clear error line with exit code 2 for each kind of bad input.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use edgesight::frame::{FrameLayout, PixelFormat};
use edgesight::pipeline::{Border, Tuning};
use edgesight::reference;

fn edgesight(args: &[&str]) -> Output {
    common::gpu(); // sets POCL_CACHE_DIR for the child as well
    Command::new(env!("CARGO_BIN_EXE_edgesight"))
        .args(args)
        .output()
        .expect("run edgesight")
}

fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn sample() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/samples/scene.png").to_string()
}

#[test]
fn process_writes_the_report_pictures_and_raw_outputs() {
    let out = out_dir("cli-sample");
    let o = edgesight(&[
        "process",
        &sample(),
        "--out",
        out.to_str().unwrap(),
        "--raw",
        "--roi",
        "sky:0,0,640,100",
    ]);
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    // What the pipeline moves and holds per pixel, for the 640x480 RGB frame with --raw:
    // the frame's 3 bytes read, luma, magnitude, dx and dy, the edge mask and the mask
    // written (1 + 1 + 4 + 1 + 1), and the blocked integrals (8 bytes a pixel, 20 per 16 of each row and column);
    // held, all but the frame, with the small buffers and guard bands.
    let stdout = String::from_utf8_lossy(&o.stdout);
    let integrals = (8 * 640 * 480 + 20 * (40 * 480 + 30 * 640 + 40 * 30)) as f64;
    let moved = (11 * 640 * 480) as f64 + integrals;
    let line = format!(
        "  bytes per pixel: {:.2} moved per frame, ",
        moved / (640.0 * 480.0)
    );
    assert!(stdout.contains(&line), "{line} in {stdout}");
    assert!(stdout.contains("held on the device"), "{stdout}");

    let img = image::open(sample()).unwrap().to_rgb8();
    let layout = FrameLayout::packed(PixelFormat::Rgb24, img.width(), img.height());
    let luma = reference::luma(&layout, img.as_raw());
    let hist = reference::histogram(&luma);
    let threshold = reference::otsu_threshold(&hist);

    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["width"], 640);
    assert_eq!(report["height"], 480);
    assert_eq!(report["otsu_threshold"], u64::from(threshold));
    let got_hist: Vec<u32> = serde_json::from_value(report["histogram"].clone()).unwrap();
    assert_eq!(got_hist, hist);
    let mean = luma.iter().map(|&v| f64::from(v)).sum::<f64>() / luma.len() as f64;
    assert!((report["mean_luma"].as_f64().unwrap() - mean).abs() < 1e-9);
    let fg = luma.iter().filter(|&&v| v > threshold).count() as f64 / luma.len() as f64;
    assert!((report["foreground_ratio"].as_f64().unwrap() - fg).abs() < 1e-12);
    let sky = &report["rois"][0];
    assert_eq!(sky["name"], "sky");
    let sky_mean = luma[..640 * 100].iter().map(|&v| f64::from(v)).sum::<f64>() / 64000.0;
    assert!((sky["mean"].as_f64().unwrap() - sky_mean).abs() < 1e-9);
    for stage in [
        "luma",
        "sobel",
        "histogram",
        "otsu",
        "binarize",
        "integral",
        "regions",
        "total",
    ] {
        assert!(
            report["timings_ms"][stage].as_f64().unwrap() > 0.0,
            "timing of {stage}"
        );
    }

    assert_eq!(std::fs::read(out.join("luma.u8")).unwrap(), luma);
    // --raw builds the pipeline with dx and dy kept: they are written, and exact.
    let (dx, dy) = reference::sobel(&luma, 640, 480, Border::Reflect101);
    let le = |v: &[i16]| v.iter().flat_map(|d| d.to_le_bytes()).collect::<Vec<u8>>();
    assert_eq!(std::fs::read(out.join("sobel_dx.s16")).unwrap(), le(&dx));
    assert_eq!(std::fs::read(out.join("sobel_dy.s16")).unwrap(), le(&dy));
    assert_eq!(
        std::fs::metadata(out.join("integral_sqsum.u64"))
            .unwrap()
            .len(),
        641 * 481 * 8
    );
    let mask = image::open(out.join("mask.png")).unwrap().to_luma8();
    assert_eq!(mask.into_raw(), reference::binarize(&luma, threshold));
    let chart = image::open(out.join("histogram.png")).unwrap().to_rgb8();
    assert!(
        chart.pixels().any(|p| p.0 == [220, 30, 30]),
        "threshold line drawn"
    );
}

#[test]
fn raw_frames_are_read_with_format_and_size() {
    let dir = out_dir("cli-raw");
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = common::Rng::new(5);
    let layout = FrameLayout::packed(PixelFormat::Nv12, 34, 6);
    let frame = rng.bytes(layout.frame_bytes());
    let input = dir.join("frame.nv12");
    std::fs::write(&input, &frame).unwrap();
    let out = dir.join("out");
    let o = edgesight(&[
        "process",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--raw",
        "--format",
        "nv12",
        "--size",
        "34x6",
    ]);
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        std::fs::read(out.join("luma.u8")).unwrap(),
        &frame[..34 * 6]
    );
}

/// A JPEG gives its luma as OpenCV decodes it in grey (the corpus's PGM, made by
/// OpenCV), whole or at a reduced scale; a PGM its pixels.
#[test]
fn jpeg_and_pgm_inputs_are_decoded() {
    let dir = out_dir("cli-jpeg");
    std::fs::create_dir_all(&dir).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jpeg");
    let grey = |name: &str| {
        image::open(fixtures.join(name))
            .unwrap()
            .to_luma8()
            .into_raw()
    };
    let pgm = dir.join("scene.pgm");
    image::open(sample())
        .unwrap()
        .to_luma8()
        .save(&pgm)
        .unwrap();
    let jpeg = fixtures.join("scene-420.jpg");
    for (input, scale, luma) in [
        (&jpeg, None, grey("scene-420.pgm")),
        (&jpeg, Some("1/2"), grey("scene-420.half.pgm")),
        (&jpeg, Some("1/8"), grey("scene-420.eighth.pgm")),
        (&pgm, None, image::open(&pgm).unwrap().to_luma8().into_raw()),
    ] {
        let what = format!("{} at {scale:?}", input.display());
        let out = dir.join(format!("out-{}", luma.len()));
        let mut args = vec![
            "process",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--raw",
        ];
        if let Some(scale) = scale {
            args.extend(["--scale", scale]);
        }
        let o = edgesight(&args);
        assert!(
            o.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(std::fs::read(out.join("luma.u8")).unwrap(), luma, "{what}");
    }
    // A scale applies to JPEG images only.
    let line = bad_input_line(&[
        "process",
        pgm.to_str().unwrap(),
        "--out",
        dir.join("out-pgm-half").to_str().unwrap(),
        "--scale",
        "1/2",
    ]);
    assert_eq!(
        line,
        format!(
            "edgesight: error: {}: not a readable PNG, JPEG or PGM/PPM image (a scale of 1/2 applies to JPEG images only); for a raw frame give --format and --size\n",
            pgm.display()
        )
    );
}

/// Runs a command that must fail on bad input: exit code 2, one line naming `culprit`.
fn assert_bad_input(args: &[&str], culprit: &str) {
    let o = edgesight(args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: stderr {stderr}");
    assert!(
        stderr.contains(culprit),
        "{args:?}: stderr does not name '{culprit}': {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
}

#[test]
fn bad_input_is_named_with_exit_code_2() {
    let dir = out_dir("cli-bad");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    let raw = dir.join("frame.yuyv");
    std::fs::write(&raw, vec![0u8; 100]).unwrap();
    let raw = raw.to_str().unwrap();
    let text = dir.join("notes.png");
    std::fs::write(&text, "not an image").unwrap();
    let text = text.to_str().unwrap();
    let s = sample();

    assert_bad_input(
        &["process", "/nonexistent/frame.png", "--out", out],
        "/nonexistent/frame.png",
    );
    assert_bad_input(&["process", text, "--out", out], "notes.png");
    assert_bad_input(
        &[
            "process", raw, "--out", out, "--format", "mjpeg", "--size", "10x5",
        ],
        "mjpeg",
    );
    assert_bad_input(
        &[
            "process", raw, "--out", out, "--format", "yuyv", "--size", "10x6",
        ],
        "120 bytes",
    );
    assert_bad_input(
        &[
            "process", raw, "--out", out, "--format", "yuyv", "--size", "0x5",
        ],
        "0x5",
    );
    assert_bad_input(
        &["process", raw, "--out", out, "--format", "yuyv"],
        "--size",
    );
    assert_bad_input(
        &["process", &s, "--out", out, "--roi", "door:600,0,64,48"],
        "door",
    );
    assert_bad_input(
        &["process", &s, "--out", out, "--roi", "door:1,2,3"],
        "door:1,2,3",
    );
    assert_bad_input(&["process", &s, "--out", out, "--border", "wrap"], "wrap");
    assert_bad_input(
        &["process", &s, "--out", out, "--device", "no-such-gpu"],
        "no-such-gpu",
    );
    assert_bad_input(
        &["process", &s, "--out", "/proc/edgesight-out"],
        "/proc/edgesight-out",
    );
}

#[test]
fn devices_lists_the_opencl_devices() {
    let o = edgesight(&["devices"]);
    assert!(o.status.success());
    let stdout = String::from_utf8_lossy(&o.stdout);
    let gpu = common::gpu();
    assert!(stdout.contains(&gpu.info.name), "{stdout}");
    for field in [
        "OpenCL C:",
        "compute units:",
        "local memory:",
        "max work-group:",
        "unified memory:",
        "fp64:",
        "[default]",
    ] {
        assert!(stdout.contains(field), "missing {field}: {stdout}");
    }
    // Each device says which tuning `auto` gives it.
    let tuning = Tuning::for_info(&gpu.info).name();
    assert!(
        stdout.contains(&format!("tuning (auto):      {tuning}\n")),
        "{stdout}"
    );
}

/// The files `process --raw` writes that hold results (report.json also holds timings).
const RAW_OUTPUTS: [&str; 10] = [
    "luma.u8",
    "sobel_dx.s16",
    "sobel_dy.s16",
    "magnitude.u8",
    "edge_mask.u8",
    "mask.u8",
    "integral_sum.u32",
    "integral_sqsum.u64",
    "integral_edges.u32",
    "integral_foreground.u32",
];

/// `--tuning` builds the pipeline with any tuning on any device, and every one gives the
/// same bytes; an unknown name is refused.
#[test]
fn process_takes_every_tuning_with_the_same_results() {
    let dir = out_dir("cli-tuning");
    let mut first: Option<Vec<Vec<u8>>> = None;
    for tuning in ["auto", "gpu", "cpu", "MALI"] {
        let out = dir.join(tuning);
        let o = edgesight(&[
            "process",
            &sample(),
            "--out",
            out.to_str().unwrap(),
            "--raw",
            "--roi",
            "sky:0,0,640,100",
            "--tuning",
            tuning,
        ]);
        assert!(
            o.status.success(),
            "{tuning}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
        let mut results: Vec<Vec<u8>> = RAW_OUTPUTS
            .iter()
            .map(|name| std::fs::read(out.join(name)).unwrap())
            .collect();
        for key in ["histogram", "otsu_threshold", "rois", "mean_luma"] {
            results.push(report[key].to_string().into_bytes());
        }
        match &first {
            None => first = Some(results),
            Some(want) => {
                for (i, (got, want)) in results.iter().zip(want).enumerate() {
                    assert!(got == want, "{tuning}: output {i} differs from auto's");
                }
            }
        }
    }
    let out = dir.join("bad");
    assert_bad_input(
        &[
            "process",
            &sample(),
            "--out",
            out.to_str().unwrap(),
            "--tuning",
            "bifrost",
        ],
        "unknown tuning 'bifrost' (expected auto, gpu, cpu or mali)",
    );
}

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

/// `check-config` prints each camera's tuning, and refuses an unknown one at its key.
#[test]
fn check_config_prints_the_tuning_and_refuses_unknown_ones() {
    let dir = out_dir("cli-check-config-tuning");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tuning.toml");
    std::fs::write(
        &path,
        "[opencl]\ntuning = \"mali\"\n\
         [[camera]]\nname = \"a\"\n[camera.source]\nkind = \"pattern\"\n\
         [[camera]]\nname = \"b\"\nopencl_tuning = \"cpu\"\n[camera.source]\nkind = \"pattern\"\n",
    )
    .unwrap();
    let o = edgesight(&["check-config", path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tunings: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("opencl_tuning = "))
        .collect();
    assert_eq!(
        tunings,
        ["opencl_tuning = \"mali\"", "opencl_tuning = \"cpu\""],
        "{stdout}"
    );

    std::fs::write(
        &path,
        "[opencl]\ndevice = \"default\"\ntuning = \"turbo\"\n",
    )
    .unwrap();
    assert_bad_input(
        &["check-config", path.to_str().unwrap()],
        &format!(
            "{}:3:10: opencl.tuning: unknown tuning 'turbo' (expected auto, gpu, cpu or mali)",
            path.display()
        ),
    );
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
            let grey = edgesight::bench::synthetic_frame(48, 17);
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
        // integral's tile pass, its tops and corners, the regions.
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

/// Runs a command that must fail on bad input and returns its stderr, which must be the one
/// line `edgesight: error: {line}`.
fn bad_input_line(args: &[&str]) -> String {
    let o = edgesight(args);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{args:?}: stderr {stderr}");
    stderr
}

/// Issue item 9: a JPEG cut in half was processed with exit 0, its missing rows grey 128
/// (Otsu 99 instead of 114 on this picture); a cut progressive JPEG too.
#[test]
fn r9_a_cut_jpeg_is_refused_naming_it() {
    let dir = out_dir("cli-cut-jpeg");
    std::fs::create_dir_all(&dir).unwrap();
    let whole = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jpeg/scene-420.jpg");
    let bytes = std::fs::read(&whole).unwrap();
    let cut = dir.join("cut.jpg");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    let o = edgesight(&["process", whole.to_str().unwrap(), "--out", out]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        bad_input_line(&["process", cut.to_str().unwrap(), "--out", out]),
        format!(
            "edgesight: error: {}: incomplete JPEG image: the data ends at byte {} in a scan, before the end-of-image marker\n",
            cut.display(),
            bytes.len() / 2
        )
    );

    let progressive = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fuzz/corpus/inputs/progressive-33x17.jpg"
    ))
    .unwrap();
    let cut = dir.join("cut-progressive.jpg");
    std::fs::write(&cut, &progressive[..progressive.len() - 40]).unwrap();
    assert_eq!(
        bad_input_line(&["process", cut.to_str().unwrap(), "--out", out]),
        format!(
            "edgesight: error: {}: incomplete JPEG image: the data ends at byte {} in a scan, before the end-of-image marker\n",
            cut.display(),
            progressive.len() - 40
        )
    );
}

/// Issue items 10 and 11: `process /dev/zero --size 640x480` grew to 2.1 GB; the byte
/// count named for `--format rgbx --size 4294967295x1` was of a saturated stride.
#[test]
fn r10_r11_raw_input_is_bounded_and_its_size_checked() {
    let dir = out_dir("cli-raw-bounds");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    let refusal = "edgesight: error: /dev/zero: not a regular file (a character device); give an image file or a raw frame file\n";
    for args in [
        &["process", "/dev/zero", "--out", out][..],
        &[
            "process",
            "/dev/zero",
            "--out",
            out,
            "--format",
            "grey",
            "--size",
            "640x480",
        ],
    ] {
        assert_eq!(bad_input_line(args), refusal);
    }
    let raw = dir.join("frame.rgbx");
    std::fs::write(&raw, [0u8; 100]).unwrap();
    let process_raw = |size: &str| {
        bad_input_line(&[
            "process",
            raw.to_str().unwrap(),
            "--out",
            out,
            "--format",
            "rgbx",
            "--size",
            size,
        ])
    };
    // The command line holds a side to 16384, so an overflowing size never reaches a file.
    assert_eq!(
        process_raw("4294967295x1"),
        "error: invalid value '4294967295x1' for '--size <SIZE>': frame size 4294967295x1 is \
         too large (at most 16384 on a side)\n\nFor more information, try '--help'.\n"
    );
    // A size within the sides but beyond the pipeline's pixel limit is refused there too;
    // the layout's own checked arithmetic is tested in frame::tests.
    assert_eq!(
        process_raw("16384x16384"),
        "error: invalid value '16384x16384' for '--size <SIZE>': frame size 16384x16384 is \
         too large (at most 16843009 pixels and a width of at most 65535)\n\nFor more \
         information, try '--help'.\n"
    );
}

/// A file that cannot be opened was named with its cause twice ("No such file or directory
/// (os error 2): No such file or directory (os error 2)").
#[test]
fn r_each_cause_of_an_input_error_is_said_once() {
    let dir = out_dir("cli-missing");
    let missing = dir.join("missing.png");
    let out = dir.join("out");
    assert_eq!(
        bad_input_line(&[
            "process",
            missing.to_str().unwrap(),
            "--out",
            out.to_str().unwrap()
        ]),
        format!(
            "edgesight: error: {}: No such file or directory (os error 2)\n",
            missing.display()
        )
    );
    let replay = format!("replay:{}@5", dir.join("no-dir").display());
    assert_eq!(
        bad_input_line(&[
            "capture",
            &replay,
            "--frames",
            "1",
            "--out",
            out.to_str().unwrap()
        ]),
        format!(
            "edgesight: error: replay {}: No such file or directory (os error 2)\n",
            dir.join("no-dir").display()
        )
    );
}

/// Issue "Resilience and security": `--roi` took names the config refuses (quotes,
/// newlines, one name twice); both now go through one check.
#[test]
fn roi_names_are_checked_as_the_config_checks_them() {
    let out = out_dir("cli-roi-names");
    let out = out.to_str().unwrap();
    let s = sample();
    for (roi, culprit) in [
        (
            "a\"b:0,0,8,8",
            "--roi: \"a\\\"b\": use 1-64 characters without quotes, backslashes or control characters",
        ),
        (
            "a\nb:0,0,8,8",
            "--roi: \"a\\nb\": use 1-64 characters without quotes, backslashes or control characters",
        ),
    ] {
        assert_bad_input(&["process", &s, "--out", out, "--roi", roi], culprit);
    }
    assert_bad_input(
        &[
            "process",
            &s,
            "--out",
            out,
            "--roi",
            "door:0,0,8,8",
            "--roi",
            "door:8,8,8,8",
        ],
        "--roi: ROI 'door' is named twice",
    );
    assert_bad_input(
        &[
            "capture",
            "pattern:64x48@5",
            "--frames",
            "1",
            "--out",
            out,
            "--roi",
            "x:0,0,1,1",
            "--roi",
            "x:1,1,1,1",
        ],
        "--roi: ROI 'x' is named twice",
    );
}

/// Issue "Resilience and security", items 2 and 12: rates and sizes are bounded wherever
/// the command line takes them.
#[test]
fn rates_and_sizes_are_bounded_on_the_command_line() {
    let out = out_dir("cli-bounds");
    let out = out.to_str().unwrap();
    for (args, culprit) in [
        (
            vec![
                "capture",
                "pattern:64x48@1e-300",
                "--frames",
                "1",
                "--out",
                out,
            ],
            "frame rate '1e-300' is not a number from 0.01 to 1000",
        ),
        (
            vec![
                "capture",
                "pattern:100000x100000@1",
                "--frames",
                "1",
                "--out",
                out,
            ],
            "frame size 100000x100000 is too large (at most 16384 on a side)",
        ),
        (
            vec![
                "capture",
                "/dev/null",
                "--size",
                "16385x2",
                "--frames",
                "1",
                "--out",
                out,
            ],
            "frame size 16385x2 is too large (at most 16384 on a side)",
        ),
        (
            vec![
                "capture",
                "/dev/null",
                "--fps",
                "0.001",
                "--frames",
                "1",
                "--out",
                out,
            ],
            "frame rate '0.001' is not a number from 0.01 to 1000",
        ),
        (
            vec!["run", "--source", "pattern:64x48@6e-20"],
            "frame rate '6e-20' is not a number from 0.01 to 1000",
        ),
        (
            vec!["bench", "--sizes", "20000x1", "--runs", "1"],
            "frame size 20000x1 is too large (at most 16384 on a side)",
        ),
    ] {
        assert_bad_input(&args, culprit);
    }
}

/// `selftest` passes on this device with every tuning: a table of the six stages, each
/// with its checks and "pass", and exit 0.
#[test]
fn selftest_passes_every_stage_with_every_tuning() {
    let o = edgesight(&["selftest"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("with the gpu, cpu, mali tunings"),
        "{stdout}"
    );
    for stage in edgesight::selftest::STAGES {
        let row = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(stage))
            .unwrap_or_else(|| panic!("no row for {stage}:\n{stdout}"));
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert!(
            fields.len() == 3
                && fields[1].parse::<u32>().is_ok_and(|n| n > 0)
                && fields[2] == "pass",
            "{row}"
        );
    }
}

/// A device result off in one pixel, one histogram bin or one region's sum is what
/// `selftest` (and `verify_every`) exists to catch: each is reported at its stage, with
/// the place and both values.
#[test]
fn selftest_names_the_first_wrong_pixel_bin_and_region() {
    use edgesight::pipeline::{FullImages, Pipeline, Setup};
    use edgesight::selftest::{self, Findings};

    let gpu = common::gpu();
    let case = &selftest::cases()[0];
    let setup = Setup {
        tuning: edgesight::pipeline::TuningChoice::Auto.resolve(&gpu),
        images: FullImages::Discarded,
    };
    let mut pipeline = Pipeline::with_setup(&gpu, case.layout, case.options, &case.regions, setup)
        .expect("pipeline");
    let mut slot = pipeline.new_slot(&gpu).expect("slot");
    slot.write_bytes(&gpu, &case.frame).expect("write");
    let processed = pipeline.process(&gpu, &slot).expect("process");
    let mut pictures = processed.read_pictures(&gpu).expect("pictures");
    let mut result = (*processed).clone();
    drop(processed);
    let expected = selftest::Expected::of(&case.layout, case.options, &case.frame);
    let compare = |result: &_, pictures: &_| {
        let mut findings = Findings::default();
        selftest::compare_frame(
            &mut findings,
            &"case 0",
            &expected,
            result,
            pictures,
            &case.regions,
        );
        findings
    };
    assert!(compare(&result, &pictures).passed());

    let w = case.layout.width as usize;
    let at = 2 * w + 5;
    let was = pictures.luma[at];
    pictures.luma[at] = was.wrapping_add(1);
    result.histogram[200] += 1;
    result.regions[1].1.sum += 3;
    let findings = compare(&result, &pictures);
    assert!(!findings.passed());
    let first = |stage: &str| {
        findings.stages[stage]
            .first_mismatch
            .clone()
            .unwrap_or_default()
    };
    assert_eq!(
        first("luma"),
        format!(
            "luma, case 0: first difference at (x 5, y 2): device {}, reference {was} \
             (1 of {} values differ)",
            was.wrapping_add(1),
            case.layout.pixels()
        )
    );
    assert!(
        first("histogram").starts_with("luma histogram, case 0: first difference in bin 200"),
        "{}",
        first("histogram")
    );
    assert!(
        first("regions").starts_with("region 'r1' sums, case 0"),
        "{}",
        first("regions")
    );
    assert_eq!(findings.stages["sobel"].mismatches, 0);
}
