//! Cameras as the daemon runs them: one that is absent is waited for, one that fails is
//! opened again alone while the others go on, and an MJPEG recording is decoded; the
//! camera list says which is doing what.

use std::path::Path;
use std::time::Duration;

use crate::common::daemon::*;
use crate::{edgesight_ok, latest_frame};

#[test]
fn an_absent_camera_is_waited_for_and_a_failing_one_restarts_alone() {
    let dir = tmp_dir("daemon-camera-failures");
    let images = dir.join("images");
    std::fs::create_dir_all(&images).expect("mkdir");
    for (i, name) in ["a.pgm", "b.pgm"].iter().enumerate() {
        std::fs::write(images.join(name), pgm(64, 48, i * 40)).expect("write an image");
    }
    let config = format!(
        "[[camera]]\nname = \"absent\"\n[camera.source]\nkind = \"v4l2\"\n\
         device = \"/dev/video-edgesight-none\"\n\
         [[camera]]\nname = \"replay\"\n[camera.source]\nkind = \"replay\"\npath = \"{}\"\nfps = 50\n\
         [[camera]]\nname = \"steady\"\n[camera.source]\nkind = \"pattern\"\nsize = \"64x48\"\nfps = 50\n",
        images.display()
    );
    // `check-config` takes an absent device: the daemon waits for it.
    let path = dir.join("check.toml");
    std::fs::write(&path, &config).expect("write");
    let err = edgesight_ok(&["check-config", &path.display().to_string()]);
    assert!(
        err.contains("camera 'absent': /dev/video-edgesight-none is not present now"),
        "{err}"
    );

    let d = Daemon::spawn(&dir, &config);
    let frames = |m: &str, cam: &str| {
        sample(m, &format!("edgesight_frames_total{{camera=\"{cam}\"}}")).unwrap_or(0.0)
    };
    let up = |m: &str, cam: &str| sample(m, &format!("edgesight_camera_up{{camera=\"{cam}\"}}"));
    let restarts = |m: &str, cam: &str| {
        sample(
            m,
            &format!("edgesight_camera_restarts_total{{camera=\"{cam}\"}}"),
        )
        .unwrap_or(0.0)
    };
    let m = wait_until(
        "frames from both other cameras",
        Duration::from_secs(60),
        || {
            let m = String::from_utf8(request(d.port, "GET", "/metrics").ok()?.body).ok()?;
            (frames(&m, "replay") >= 3.0 && frames(&m, "steady") >= 3.0).then_some(m)
        },
    );
    assert_eq!(up(&m, "absent"), Some(0.0), "{m}");
    assert_eq!(up(&m, "steady"), Some(1.0));
    assert_eq!(
        restarts(&m, "absent"),
        0.0,
        "absent is waiting, not failing"
    );
    let health = get(d.port, "/healthz");
    assert_eq!(health.status, 503);
    let body = String::from_utf8_lossy(&health.body).to_string();
    assert!(
        body.contains("absent") && !body.contains("steady"),
        "{body}"
    );

    // Every image of the replay directory turns into garbage (one bad image is only
    // skipped): that camera fails and is opened again with a delay, alone; the daemon and
    // the other cameras go on.
    for name in ["a.pgm", "b.pgm"] {
        std::fs::write(images.join(name), b"P5\n64 48\n255\nshort").expect("corrupt");
    }
    let m = wait_until("the replay camera to fail", Duration::from_secs(20), || {
        let m = get_text(d.port, "/metrics");
        (restarts(&m, "replay") >= 1.0).then_some(m)
    });
    let bad_images = "edgesight_frames_dropped_total{camera=\"replay\",reason=\"bad_image\"}";
    assert!(sample(&m, bad_images).unwrap_or(0.0) >= 1.0, "{m}");
    let steady_before = frames(&m, "steady");
    wait_until(
        "the steady camera to go on while the replay one fails",
        Duration::from_secs(30),
        || (frames(&d.metrics(), "steady") >= steady_before + 10.0).then_some(()),
    );
    // Opened again after 1 s and failed again on the same image...
    wait_until(
        "the replay camera to be reopened and fail again",
        Duration::from_secs(30),
        || (restarts(&d.metrics(), "replay") >= 2.0).then_some(()),
    );
    let replay_frames = frames(&d.metrics(), "replay");
    std::fs::write(images.join("b.pgm"), pgm(64, 48, 99)).expect("repair");
    wait_until(
        "the replay camera to come back",
        Duration::from_secs(60),
        || {
            let m = get_text(d.port, "/metrics");
            (frames(&m, "replay") >= replay_frames + 5.0 && up(&m, "replay") == Some(1.0))
                .then_some(())
        },
    );
    let log = d.log();
    // Logged once per distinct reason, not once per attempt.
    let failed = log.matches("camera failed").count();
    assert!((1..=2).contains(&failed), "{failed} failure lines:\n{log}");
    d.stop();
}

/// An MJPEG camera's path through the daemon, on a recording: a config with
/// `format = "mjpeg"` and `scale = "1/2"` is checked and run; frames are published at
/// half size, the host's decoding is the `decode` stage of the stage-time histogram, a
/// cut image is counted as `corrupt_frame`, and a region in the decoded frame's
/// coordinates is measured.
#[test]
fn an_mjpeg_recording_runs_decoded_at_half_size_with_its_corrupt_frames_counted() {
    let dir = tmp_dir("daemon-mjpeg");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jpeg");
    let mut clip = Vec::new();
    for name in ["scene-420.jpg", "no-huffman-tables.jpg", "restarts.jpg"] {
        clip.extend(std::fs::read(fixtures.join(name)).unwrap());
    }
    let whole = std::fs::read(fixtures.join("progressive.jpg")).unwrap();
    clip.extend(&whole[..whole.len() - 300]);
    let path = dir.join("clip.mjpeg");
    std::fs::write(&path, &clip).unwrap();
    let config = format!(
        "[[camera]]\nname = \"webcam\"\n[camera.source]\nkind = \"replay\"\npath = \"{}\"\n\
         format = \"mjpeg\"\nscale = \"1/2\"\nfps = 60\n\
         [[camera.roi]]\nname = \"door\"\nx = 10\ny = 10\nw = 60\nh = 40\n",
        path.display()
    );
    std::fs::write(dir.join("check.toml"), &config).unwrap();
    let checked = edgesight_command()
        .args(["check-config", dir.join("check.toml").to_str().unwrap()])
        .output()
        .expect("run check-config");
    let printed = String::from_utf8_lossy(&checked.stdout);
    assert!(checked.status.success(), "{printed}");
    assert!(printed.contains("scale = \"1/2\""), "{printed}");
    let d = Daemon::start(&dir, &config);
    let metrics = wait_until(
        "decoded and corrupt frames",
        Duration::from_secs(60),
        || {
            let m = d.metrics();
            let decoded = sample(
                &m,
                r#"edgesight_stage_duration_seconds_count{camera="webcam",stage="decode"}"#,
            )?;
            let corrupt = sample(
                &m,
                r#"edgesight_frames_dropped_total{camera="webcam",reason="corrupt_frame"}"#,
            )?;
            (decoded >= 10.0 && corrupt >= 1.0).then_some(m)
        },
    );
    let frames = sample(&metrics, r#"edgesight_frames_total{camera="webcam"}"#).unwrap();
    assert!(frames >= 10.0, "{frames}");
    assert!(
        sample(
            &metrics,
            r#"edgesight_roi_mean_luma{camera="webcam",roi="door"}"#
        )
        .is_some_and(|v| v > 0.0),
        "{metrics}"
    );
    let latest = latest_frame(d.port).expect("a published frame");
    assert_eq!(
        (latest["width"].as_u64(), latest["height"].as_u64()),
        (Some(80), Some(60))
    );
    d.stop();
}

/// `/api/v1/cameras` lists every camera with what it is doing: one delivering frames, one
/// waiting for its absent device, and one restarting after a failure, with the error
/// naming the file at fault and when it is opened again.
#[test]
fn the_camera_list_says_what_each_camera_is_doing() {
    let dir = tmp_dir("daemon-camera-list");
    let broken = dir.join("broken");
    std::fs::create_dir_all(&broken).expect("mkdir");
    std::fs::write(broken.join("a.png"), "not a picture").expect("write");
    let config = format!(
        "[[camera]]\nname = \"front\"\n[camera.source]\nkind = \"pattern\"\nsize = \"64x48\"\nfps = 20\n\
         [[camera]]\nname = \"absent\"\n[camera.source]\nkind = \"v4l2\"\ndevice = \"/dev/video-edgesight-none\"\n\
         [[camera]]\nname = \"broken\"\n[camera.source]\nkind = \"replay\"\npath = \"{}\"\nfps = 20\n",
        broken.display()
    );
    let d = Daemon::spawn(&dir, &config);
    let list = wait_until("every camera in its state", Duration::from_secs(20), || {
        // Not listening yet at first: the daemon binds after its config checks.
        let body = request(d.port, "GET", "/api/v1/cameras").ok()?;
        let list: serde_json::Value = serde_json::from_slice(&body.body).ok()?;
        let states: Vec<&str> = list
            .as_array()?
            .iter()
            .filter_map(|c| c["state"].as_str())
            .collect();
        // The frame rate counts the last two seconds: above 0 from the second frame on.
        let counting = list[0]["fps"].as_f64().is_some_and(|f| f > 0.0);
        (states == ["up", "waiting_for_device", "restarting"] && counting).then_some(list)
    });
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["front", "absent", "broken"]);
    let (front, absent, restarting) = (&list[0], &list[1], &list[2]);
    assert!(front["fps"].as_f64().is_some_and(|f| f > 0.0), "{front}");
    assert!(
        front["last_frame_age_seconds"]
            .as_f64()
            .is_some_and(|a| a < 5.0),
        "{front}"
    );
    assert!(
        absent["fps"].is_null() && absent.get("error").is_none(),
        "{absent}"
    );
    let error = restarting["error"].as_str().expect("the error");
    assert!(
        error.contains(&broken.join("a.png").display().to_string()),
        "{error}"
    );
    let retry = restarting["retry_in_seconds"].as_f64().expect("when");
    assert!((0.0..=30.0).contains(&retry), "{restarting}");
    for camera in list.as_array().unwrap() {
        assert!(
            camera["since_seconds"].as_f64().is_some_and(|s| s >= 0.0),
            "{camera}"
        );
    }
    d.stop();
}

/// `[opencl] profiling = "off"`, as on a board whose driver refuses profiling queues: the
/// daemon starts on a plain queue, times its stages on the host's clock and says so in
/// `edgesight_opencl_device_info`, and every stage that launches kernels has its times.
#[test]
fn with_profiling_off_the_stages_are_timed_on_the_host() {
    let dir = tmp_dir("daemon-profiling-off");
    let config = "[opencl]\nprofiling = \"off\"\n\
                  [[camera]]\nname = \"plain\"\n[camera.source]\nkind = \"pattern\"\n\
                  size = \"96x64\"\nformat = \"yuyv\"\nfps = 50\n";
    let path = dir.join("check.toml");
    std::fs::write(&path, config).expect("write");
    edgesight_ok(&["check-config", &path.display().to_string()]);
    let d = Daemon::start(&dir, config);
    // Stage times are taken on one frame in 8.
    let count = |m: &str, stage: &str| {
        sample(
            m,
            &format!(
                "edgesight_stage_duration_seconds_count{{camera=\"plain\",stage=\"{stage}\"}}"
            ),
        )
        .unwrap_or(0.0)
    };
    let m = wait_until("three timed frames", Duration::from_secs(60), || {
        let m = d.metrics();
        (count(&m, "regions") >= 3.0).then_some(m)
    });
    let info = m
        .lines()
        .find(|l| l.starts_with("edgesight_opencl_device_info{"))
        .unwrap_or_else(|| panic!("no device info:\n{m}"));
    assert!(info.contains("timing=\"host\""), "{info}");
    for stage in ["luma", "sobel", "histogram", "integral", "regions"] {
        let sum = sample(
            &m,
            &format!("edgesight_stage_duration_seconds_sum{{camera=\"plain\",stage=\"{stage}\"}}"),
        )
        .unwrap_or(0.0);
        assert!(count(&m, stage) >= 3.0 && sum > 0.0, "{stage}: {m}");
    }
    d.stop();
}
