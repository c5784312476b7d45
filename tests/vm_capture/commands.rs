//! The commands on real drivers: `edgesight capture` and `devices` on vivid, the reports
//! against the reference; `edgesight capture` on the loopback, byte for byte what `process`
//! gives on the same frame, and `edgesight run` there.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::loopback::{
    clip_frame_of, clip_lumas, feeder, mjpeg_clip, truncated_clip_frames, LOOPBACK,
};
use crate::{edgesight_bin, http_get, metric, shared_gpu, vivid, Running};
use edgesight::jpeg::Scale;
use edgesight::reference;

#[test]
#[ignore = "needs the vivid camera: run through tests/vm/run.sh (make vm-test)"]
fn capture_command_writes_the_reports() {
    shared_gpu();
    let node = vivid(0);
    let out = Path::new("/tmp/capture-cli");
    let _ = std::fs::remove_dir_all(out);
    let o = Command::new(edgesight_bin())
        .args([
            "capture",
            node.to_str().unwrap(),
            "--frames",
            "5",
            "--timeout",
            "900",
            "--out",
        ])
        .arg(out)
        .args([
            "--format", "rgb24", "--size", "320x180", "--fps", "30", "--io", "mmap", "--raw",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("capture.json")).unwrap()).unwrap();
    assert_eq!(json["frames"], 5);
    assert_eq!(json["io_mode"], "mmap");
    assert_eq!(json["format"], "rgb24");
    assert_eq!(json["width"], 320);
    assert_eq!(json["height"], 180);
    assert_eq!(json["bytesperline"], 960);
    assert!(json["fps_measured"].as_f64().unwrap() > 1.0, "{json}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let luma = std::fs::read(out.join("luma.u8")).unwrap();
    assert_eq!(luma.len(), 320 * 180);
    let hist: Vec<u32> = serde_json::from_value(report["histogram"].clone()).unwrap();
    assert_eq!(hist, reference::histogram(&luma).to_vec());
    for name in [
        "luma.png",
        "edges.png",
        "mask.png",
        "histogram.png",
        "mask.u8",
    ] {
        assert!(out.join(name).is_file(), "{name}");
    }

    let o = Command::new(edgesight_bin())
        .arg("devices")
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&o.stdout);
    assert!(
        listing.contains(&format!("{}: vivid", node.display())),
        "{listing}"
    );
    assert!(listing.contains("YUYV"), "{listing}");
    assert!(listing.contains("320x180 at"), "{listing}");

    // A path that is no device: exit code 2 and a message naming it.
    let o = Command::new(edgesight_bin())
        .args([
            "capture",
            "/dev/video99",
            "--frames",
            "1",
            "--out",
            "/tmp/x",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/dev/video99: no such device"));
}

/// `edgesight capture` and `edgesight run` on the loopback: capture's last frame, found in
/// the clip by its luma, gives byte for byte what `process` gives on that frame's JPEG
/// file (every raw output and report.json but its timings and device); the daemon, with
/// format mjpeg and no rate, publishes frames of the clip, counts the cut ones as
/// corrupt_frame, times the decoding as stage decode and exports the driver's rate as its
/// target.
#[test]
#[ignore = "needs the v4l2loopback device: run through tests/vm/run.sh (make vm-test)"]
fn capture_and_run_read_the_loopback_as_process_reads_its_frames() {
    shared_gpu();
    feeder();
    let frames = truncated_clip_frames();
    let lumas = clip_lumas(&frames, Scale::Full);
    let out = Path::new("/tmp/capture-mjpeg");
    let _ = std::fs::remove_dir_all(out);
    let o = Command::new(edgesight_bin())
        .args([
            "capture",
            LOOPBACK,
            "--frames",
            "4",
            "--timeout",
            "900",
            "--raw",
            "--out",
        ])
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("capture.json")).unwrap()).unwrap();
    assert_eq!(json["source_format"], "mjpeg");
    assert_eq!(json["format"], "grey");
    assert_eq!(json["io_mode"], "mmap");
    assert_eq!(
        (json["width"].as_u64(), json["height"].as_u64()),
        (Some(640), Some(480))
    );
    let luma = std::fs::read(out.join("luma.u8")).unwrap();
    let index = clip_frame_of(&luma, &lumas).expect("the last frame is a frame of the clip");
    let processed = Path::new("/tmp/process-mjpeg");
    let _ = std::fs::remove_dir_all(processed);
    let o = Command::new(edgesight_bin())
        .arg("process")
        .arg(mjpeg_clip(&format!("frames/{:03}.jpg", index + 1)))
        .args(["--raw", "--out"])
        .arg(processed)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for name in [
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
    ] {
        assert!(
            std::fs::read(out.join(name)).unwrap() == std::fs::read(processed.join(name)).unwrap(),
            "{name} of frame {index}"
        );
    }
    let report = |dir: &Path| {
        let mut r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
        let o = r.as_object_mut().unwrap();
        o.remove("timings_ms");
        o.remove("device");
        r
    };
    assert_eq!(
        report(out),
        report(processed),
        "report.json of frame {index}"
    );

    // The daemon.
    let dir = Path::new("/tmp/run-mjpeg");
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let port = 18947;
    let config = dir.join("edgesight.toml");
    std::fs::write(
        &config,
        format!(
            "[web]\nlisten_address = \"127.0.0.1:{port}\"\n[[camera]]\nname = \"webcam\"\n\
             [camera.source]\nkind = \"v4l2\"\ndevice = \"{LOOPBACK}\"\nformat = \"mjpeg\"\n"
        ),
    )
    .unwrap();
    // Killed if an assertion fails, so that it does not hold the loopback for the tests
    // that read it next.
    let mut daemon = Running(
        Command::new(edgesight_bin())
            .args(["run", "--config"])
            .arg(&config)
            .stderr(std::fs::File::create(dir.join("log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(600);
    let metrics = loop {
        // The detail tier: a JPEG camera's decode stage times are only there.
        if let Some((200, m)) = http_get(port, "/metrics?collect[]=detail") {
            let corrupt = metric(
                &m,
                r#"edgesight_frames_dropped_total{camera="webcam",reason="corrupt_frame"}"#,
            );
            let frames = metric(&m, r#"edgesight_frames_total{camera="webcam"}"#);
            if corrupt >= Some(1.0) && frames >= Some(4.0) {
                break m;
            }
        }
        if Instant::now() > deadline || daemon.0.try_wait().unwrap().is_some() {
            let _ = daemon.0.kill();
            panic!(
                "{}",
                std::fs::read_to_string(dir.join("log")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(
        metric(&metrics, r#"edgesight_target_frame_rate{camera="webcam"}"#),
        Some(30.0)
    );
    assert!(
        metric(
            &metrics,
            r#"edgesight_stage_duration_seconds_count{camera="webcam",stage="decode"}"#
        ) >= Some(4.0),
        "{metrics}"
    );
    let (status, latest) = http_get(port, "/api/v1/latest?camera=webcam").unwrap();
    assert_eq!(status, 200);
    let latest: serde_json::Value = serde_json::from_str(&latest).unwrap();
    let histogram: Vec<u32> = serde_json::from_value(latest["histogram"].clone()).unwrap();
    assert!(
        lumas
            .iter()
            .flatten()
            .any(|l| reference::histogram(l).to_vec() == histogram),
        "the latest frame's histogram is no whole frame's of the clip"
    );
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(daemon.0.id() as i32, libc::SIGTERM) };
    assert!(daemon.0.wait().unwrap().success());
}
