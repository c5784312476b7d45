//! `process`: the report, pictures and raw outputs of the bundled sample against the
//! reference; raw frames, JPEG and PGM inputs; every tuning giving the same bytes.

use std::path::Path;

use edgesight::frame::{FrameLayout, PixelFormat};
use edgesight::pipeline::Border;
use edgesight::reference;

use crate::{assert_bad_input, bad_input_line, common, edgesight, out_dir, sample};

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
        "unknown tuning 'bifrost' (expected auto, gpu, cpu, mali or midgard)",
    );
}

/// Several inputs in one run: each one's results in its own directory, byte for byte what
/// a run of its own gives; a bad one among them is named, the others are still written,
/// and the exit status says so; two inputs of one file name are refused before anything.
#[test]
fn several_inputs_are_processed_each_into_its_own_directory() {
    let dir = out_dir("cli-several");
    std::fs::create_dir_all(&dir).unwrap();
    let scene = dir.join("scene.png");
    std::fs::copy(sample(), &scene).unwrap();
    let mut rng = common::Rng::new(7);
    let grey: Vec<u8> = (0..641 * 479).map(|_| rng.next_u64() as u8).collect();
    let pgm = dir.join("grey.pgm");
    let mut file = b"P5\n641 479\n255\n".to_vec();
    file.extend_from_slice(&grey);
    std::fs::write(&pgm, file).unwrap();
    let broken = dir.join("broken.png");
    std::fs::write(&broken, "not a picture").unwrap();
    let (scene, pgm, broken) = (
        scene.to_str().unwrap(),
        pgm.to_str().unwrap(),
        broken.to_str().unwrap(),
    );

    let alone = dir.join("alone");
    let o = edgesight(&["process", scene, "--out", alone.to_str().unwrap(), "--raw"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let together = dir.join("together");
    let o = edgesight(&[
        "process",
        scene,
        broken,
        pgm,
        "--out",
        together.to_str().unwrap(),
        "--raw",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.lines().collect::<Vec<_>>(),
        [
            format!(
                "edgesight: error: {broken}: not a readable PNG, JPEG or PGM/PPM image (The \
                 image format could not be determined); for a raw frame give --format and --size"
            )
            .as_str(),
            "edgesight: error: 1 of 3 inputs failed (each named above)",
        ],
    );
    for name in RAW_OUTPUTS {
        let want = std::fs::read(alone.join(name)).unwrap();
        let got = std::fs::read(together.join("scene.png").join(name)).unwrap();
        assert!(got == want, "scene.png's {name} differs from its own run's");
    }
    let luma = std::fs::read(together.join("grey.pgm").join("luma.u8")).unwrap();
    assert!(luma == grey, "grey.pgm's luma is not its pixels");
    assert!(!together.join("broken.png").exists());

    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let twin = elsewhere.join("scene.png");
    std::fs::copy(sample(), &twin).unwrap();
    let twins = dir.join("twins");
    let line = bad_input_line(&[
        "process",
        scene,
        twin.to_str().unwrap(),
        "--out",
        twins.to_str().unwrap(),
    ]);
    assert_eq!(
        line,
        format!(
            "edgesight: error: output directory {}: inputs {scene} and {} have one file name, \
             so their results would share it; rename or copy one\n",
            twins.join("scene.png").display(),
            twin.display()
        )
    );
    assert!(!twins.exists());
}
