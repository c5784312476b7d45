//! The camera-health detectors in a running daemon: learned on the test pattern and quiet
//! there, a frozen replay reported tampered, turned off and on by SIGHUP, and bad
//! `[camera.health]` settings refused.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::daemon::*;
use crate::{assert_refused, edgesight_ok, latest_frame, wait_refused_reload};

/// The camera-health kinds, in the order the detectors try them.
const TAMPER_KINDS: [&str; 6] = [
    "overexposed",
    "underexposed",
    "covered",
    "frozen",
    "moved",
    "defocus",
];

/// `edgesight_camera_tamper` and `edgesight_camera_tamper_events_total` of each kind.
fn tamper_series(m: &str, camera: &str) -> Vec<(&'static str, Option<f64>, Option<f64>)> {
    TAMPER_KINDS
        .iter()
        .map(|kind| {
            let labels = format!("{{camera=\"{camera}\",kind=\"{kind}\"}}");
            (
                *kind,
                sample(m, &format!("edgesight_camera_tamper{labels}")),
                sample(m, &format!("edgesight_camera_tamper_events_total{labels}")),
            )
        })
        .collect()
}

/// The log lines that contain `what`.
fn log_lines(log: &str, what: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains(what))
        .map(str::to_string)
        .collect()
}

/// A camera's health on the test pattern: learned over half a second, then ok on every
/// frame: the pattern's background stands still and its moving disk and bar, and its
/// noise, are the kind of change the detectors must take in their stride.
#[test]
fn camera_health_learns_the_pattern_and_raises_no_tamper() {
    let dir = tmp_dir("daemon-health-pattern");
    // A cold POCL cache builds the kernels on the first frame, seconds during which the
    // test pattern's clock runs on: the half second of learning would pass unseen. One
    // `process` of a frame of the same size fills the cache.
    let still = dir.join("still.pgm");
    std::fs::write(&still, pgm(320, 240, 0)).expect("write an image");
    edgesight_ok(&[
        "process",
        &still.display().to_string(),
        "--out",
        &dir.join("process").display().to_string(),
    ]);
    let config = format!(
        "{}[camera.health]\nlearning_seconds = 0.5\n",
        camera("front", "320x240", &[], 64)
    );
    let d = Daemon::spawn(&dir, &config);

    // From the first frame on: learning (no learned numbers yet), then ok.
    let mut learning_frames = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let learned = loop {
        assert!(Instant::now() < deadline, "never learned:\n{}", d.log());
        let Some(l) = latest_frame(d.port) else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let h = &l["health"];
        if h["state"] != "learning" {
            break l;
        }
        assert_eq!(h["learning"], true, "{l}");
        assert!(
            h["sharpness"].is_null() && h["scene_change"].is_null(),
            "{h}"
        );
        learning_frames.push(l["sequence"].as_u64().expect("sequence"));
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        !learning_frames.is_empty(),
        "the first frame seen was past learning: {learned}"
    );
    let check_ok = |l: &serde_json::Value| {
        let h = &l["health"];
        assert_eq!(h["state"], "ok", "{l}");
        assert_eq!(h["learning"], false, "{h}");
        let sharpness = h["sharpness"].as_f64().expect("sharpness once learned");
        assert!((sharpness - 1.0).abs() <= 0.2, "sharpness {sharpness}: {h}");
        let change = h["scene_change"]
            .as_f64()
            .expect("scene change once learned");
        assert!(change < 0.3, "scene change {change}: {h}");
        for kind in TAMPER_KINDS {
            assert_eq!(h["kinds"][kind], "ok", "{kind}: {h}");
        }
    };
    check_ok(&learned);

    // Ok on every frame seen over 3 s more of the pattern's clock: frame numbers count
    // its frames due (30 a second), published or skipped, however slow the machine. The
    // minute is a failure timeout for frames that stop.
    let first = learned["sequence"].as_u64().expect("sequence");
    wait_until("90 more frames, all ok", Duration::from_secs(60), || {
        let l = latest_frame(d.port).expect("a frame");
        check_ok(&l);
        (l["sequence"].as_u64().expect("sequence") >= first + 90).then_some(())
    });

    let m = d.metrics();
    assert_eq!(
        sample(&m, r#"edgesight_camera_health_learning{camera="front"}"#),
        Some(0.0),
        "{m}"
    );
    for (kind, tamper, events) in tamper_series(&m, "front") {
        assert_eq!((tamper, events), (Some(0.0), Some(0.0)), "{kind}:\n{m}");
    }
    let sharpness = sample(&m, r#"edgesight_camera_sharpness{camera="front"}"#);
    assert!(
        sharpness.is_some_and(|s| (s - 1.0).abs() <= 0.2),
        "sharpness {sharpness:?}"
    );
    let change = sample(&m, r#"edgesight_camera_scene_change{camera="front"}"#);
    assert!(change.is_some_and(|c| c < 0.3), "scene change {change:?}");

    let log = d.log();
    let learned_lines = log_lines(&log, "camera health: baseline learned");
    assert_eq!(learned_lines.len(), 1, "{log}");
    assert!(learned_lines[0].contains("camera=front frame="), "{log}");
    assert!(
        log_lines(&log, "camera health: tampered").is_empty(),
        "{log}"
    );
    d.stop();
}

/// A replay camera named "still" whose directory holds one image: frames keep coming and
/// the picture never changes, a frozen camera.
fn frozen_camera(dir: &Path, health: &str) -> String {
    let images = dir.join("images");
    std::fs::create_dir_all(&images).expect("mkdir");
    std::fs::write(images.join("still.pgm"), textured_pgm(64, 48)).expect("write an image");
    format!(
        "[[camera]]\nname = \"still\"\n[camera.source]\nkind = \"replay\"\npath = \"{}\"\nfps = 30\n\
         [camera.health]\n{health}",
        images.display()
    )
}

/// Waits until the still camera is reported tampered as frozen; returns its latest frame.
fn wait_frozen(d: &Daemon) -> serde_json::Value {
    wait_until("the frozen tamper", Duration::from_secs(60), || {
        latest_frame(d.port).filter(|l| l["health"]["kinds"]["frozen"] == "tampered")
    })
}

/// A replay of one image is a camera whose picture never changes: tampered as frozen, in
/// the report, the metrics and a warning.
#[test]
fn camera_health_a_frozen_replay_is_tampered() {
    let dir = tmp_dir("daemon-health-frozen");
    let d = Daemon::spawn(&dir, &frozen_camera(&dir, "learning_seconds = 0.5\n"));
    wait_frozen(&d);
    // Once learned, the state is the worst kind's; frozen took every frame, before moved
    // or defocus had a say.
    let l = wait_until("the state to say tampered", Duration::from_secs(60), || {
        latest_frame(d.port).filter(|l| l["health"]["state"] == "tampered")
    });
    let h = &l["health"];
    assert_eq!(h["learning"], false, "{h}");
    for kind in TAMPER_KINDS {
        let want = if kind == "frozen" { "tampered" } else { "ok" };
        assert_eq!(h["kinds"][kind], want, "{kind}: {h}");
    }
    let unchanged = h["unchanged_seconds"].as_f64().expect("unchanged_seconds");
    assert!(unchanged > 0.5, "unchanged for {unchanged} s: {h}");

    let m = d.metrics();
    for (kind, tamper, events) in tamper_series(&m, "still") {
        let want = if kind == "frozen" { 1.0 } else { 0.0 };
        assert_eq!((tamper, events), (Some(want), Some(want)), "{kind}:\n{m}");
    }
    let log = d.log();
    let tampered = log_lines(&log, "camera health: tampered");
    assert_eq!(tampered.len(), 1, "{log}");
    let line = &tampered[0];
    assert!(line.contains(" WARN "), "{line}");
    let frame = line
        .split_once("camera health: tampered camera=still kind=frozen frame=")
        .and_then(|(_, n)| n.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("not the frozen camera's line: {line}"));
    // Three identical frames at least: two that match the one before.
    assert!(frame >= 2, "{line}");
    assert!(l["sequence"].as_u64() >= Some(frame), "{l}\n{line}");
    d.stop();
}

/// SIGHUP turns a camera's detectors off (no report, NaN numbers, no tamper left
/// standing) and on again (learning from scratch), and a bad health value is refused.
#[test]
fn camera_health_off_and_on_again_by_sighup() {
    let dir = tmp_dir("daemon-health-reload");
    let d = Daemon::spawn(&dir, &frozen_camera(&dir, "learning_seconds = 0.5\n"));
    wait_frozen(&d);
    let frozen = r#"{camera="still",kind="frozen"}"#;
    let tamper = |m: &str| sample(m, &format!("edgesight_camera_tamper{frozen}"));
    let events = |m: &str| sample(m, &format!("edgesight_camera_tamper_events_total{frozen}"));
    let m = d.metrics();
    assert_eq!((tamper(&m), events(&m)), (Some(1.0), Some(1.0)), "{m}");

    let config = dir.join("edgesight.toml");
    std::fs::write(&config, frozen_camera(&dir, "enabled = false\n")).expect("rewrite");
    d.signal(libc::SIGHUP);
    let off = wait_until("the report to go", Duration::from_secs(30), || {
        latest_frame(d.port).filter(|l| l["health"].is_null())
    });
    let m = d.metrics();
    for family in ["sharpness", "scene_change"] {
        let v = sample(
            &m,
            &format!("edgesight_camera_{family}{{camera=\"still\"}}"),
        );
        assert!(v.is_some_and(f64::is_nan), "{family} {v:?} while off");
    }
    for end in ["dark", "bright"] {
        let series = format!("edgesight_camera_clipped_ratio{{camera=\"still\",end=\"{end}\"}}");
        let v = sample(&m, &series);
        assert!(v.is_some_and(f64::is_nan), "{series} {v:?} while off");
    }
    for (kind, tamper, _) in tamper_series(&m, "still") {
        assert_eq!(tamper, Some(0.0), "{kind} while off:\n{m}");
    }
    assert_eq!(events(&m), Some(1.0), "a counter keeps its count");
    assert_eq!(
        sample(&m, r#"edgesight_camera_health_learning{camera="still"}"#),
        Some(0.0)
    );
    assert_eq!(
        sample(&m, r#"edgesight_config_reloads_total{result="success"}"#),
        Some(1.0)
    );
    // Frames go on without a report (and without a tamper event).
    let sequence = off["sequence"].as_u64().expect("sequence");
    wait_until("more frames while off", Duration::from_secs(30), || {
        latest_frame(d.port)
            .filter(|l| l["sequence"].as_u64() >= Some(sequence + 30))
            .map(|l| assert!(l["health"].is_null(), "{l}"))
    });

    // A bad value is refused whole: the detectors stay off.
    std::fs::write(&config, frozen_camera(&dir, "clipped_ratio = 0\n")).expect("rewrite");
    d.signal(libc::SIGHUP);
    wait_refused_reload(&d);
    assert!(
        d.log()
            .contains("camera.health.clipped_ratio: 0 is not a share"),
        "{}",
        d.log()
    );
    assert!(latest_frame(d.port).expect("a frame")["health"].is_null());

    // On again: learning from scratch (for a minute, longer than this test), while the
    // still picture is found frozen again from the first frames.
    std::fs::write(&config, frozen_camera(&dir, "learning_seconds = 60\n")).expect("rewrite");
    d.signal(libc::SIGHUP);
    let on = wait_until("the report to come back", Duration::from_secs(30), || {
        latest_frame(d.port).filter(|l| !l["health"].is_null())
    });
    let h = &on["health"];
    assert_eq!(h["state"], "learning", "{h}");
    assert_eq!(h["learning"], true, "{h}");
    assert!(
        h["sharpness"].is_null() && h["scene_change"].is_null(),
        "{h}"
    );
    wait_frozen(&d);
    let m = d.metrics();
    assert_eq!((tamper(&m), events(&m)), (Some(1.0), Some(2.0)), "{m}");
    assert_eq!(
        sample(&m, r#"edgesight_camera_health_learning{camera="still"}"#),
        Some(1.0)
    );
    let log = d.log();
    let tampered = log_lines(&log, "camera health: tampered camera=still kind=frozen");
    assert_eq!(tampered.len(), 2, "{log}");
    assert_eq!(
        log_lines(&log, "camera health: baseline learned").len(),
        1,
        "{log}"
    );
    d.stop();
}

/// `check-config` and `run` refuse a bad `[camera.health]` at its key, as any other.
#[test]
fn camera_health_bad_settings_are_refused_at_their_key() {
    let dir = tmp_dir("daemon-health-bad");
    let good = format!(
        "{}[camera.health]\nlearning_seconds = 2\n",
        camera("front", "64x48", &[], 64)
    );
    for (name, text, expect) in [
        (
            "defocus-share",
            format!("{good}defocus_sharpness = 1.5\n"),
            ":11:21: camera.health.defocus_sharpness: 1.5 is not a share above 0 and at most 1",
        ),
        (
            "learning-zero",
            good.replace("learning_seconds = 2", "learning_seconds = 0"),
            ":10:20: camera.health.learning_seconds: 0 is not between 0.1 and 3600 seconds",
        ),
        (
            "unknown-key",
            format!("{good}frozen_secs = 1\n"),
            ":11:1: camera.health.frozen_secs: unknown field `frozen_secs`, expected one of",
        ),
        (
            "wrong-type",
            format!("{good}enabled = \"no\"\n"),
            ":11:11: camera.health.enabled: invalid type: string \"no\", expected a boolean",
        ),
    ] {
        assert_refused(&dir, name, &text, expect);
    }
}

/// Puts `images` (name, PGM bytes) in place by rename: the replay never reads half a file.
fn show(dir: &Path, images: &[(&str, Vec<u8>)]) {
    for (name, bytes) in images {
        let tmp = dir.join(format!("{name}.tmp"));
        std::fs::write(&tmp, bytes).expect("write an image");
        std::fs::rename(&tmp, dir.join(name)).expect("rename an image");
    }
}

/// The textured view, one pixel apart between its two images so that the picture keeps
/// changing (a frozen picture would be a tamper of its own).
fn live_view() -> [(&'static str, Vec<u8>); 2] {
    let a = textured_pgm(64, 48);
    let mut b = a.clone();
    let last = b.len() - 1;
    b[last] ^= 1;
    [("a.pgm", a), ("b.pgm", b)]
}

/// A flat grey cover.
fn cover() -> [(&'static str, Vec<u8>); 2] {
    let flat = |v: u8| {
        let mut bytes = b"P5\n64 48\n255\n".to_vec();
        bytes.extend(std::iter::repeat_n(v, 64 * 48));
        bytes
    };
    [("a.pgm", flat(20)), ("b.pgm", flat(21))]
}

/// Issue 46, finding 8: SIGHUP with changed health settings while the camera is covered
/// keeps the alarm (the report, the metric) and the view learned before the cover: no
/// learning again, and once uncovered the camera is ok again, not moved.
#[test]
fn round3_8_a_health_reload_while_covered_keeps_the_alarm() {
    let dir = tmp_dir("daemon-health-covered-reload");
    let images = dir.join("images");
    std::fs::create_dir_all(&images).expect("mkdir");
    show(&images, &live_view());
    let config = |health: &str| {
        format!(
            "[[camera]]\nname = \"cam\"\n[camera.source]\nkind = \"replay\"\npath = \"{}\"\n\
             fps = 30\n[camera.health]\nlearning_seconds = 0.5\n{health}",
            images.display()
        )
    };
    let d = Daemon::spawn(&dir, &config(""));
    wait_until("the view learned", Duration::from_secs(60), || {
        latest_frame(d.port).filter(|l| l["health"]["state"] == "ok")
    });
    show(&images, &cover());
    wait_until("the covered tamper", Duration::from_secs(30), || {
        latest_frame(d.port).filter(|l| l["health"]["kinds"]["covered"] == "tampered")
    });

    std::fs::write(
        dir.join("edgesight.toml"),
        config("clear_seconds = 1\nmoved_scene_change = 0.4\n"),
    )
    .expect("rewrite");
    d.signal(libc::SIGHUP);
    wait_until("the reload", Duration::from_secs(30), || {
        sample(
            &d.metrics(),
            r#"edgesight_config_reloads_total{result="success"}"#,
        )
        .filter(|v| *v == 1.0)
    });
    // Three learning periods of frames later, still covered: still tampered.
    let reloaded = latest_frame(d.port).expect("a frame")["sequence"]
        .as_u64()
        .expect("sequence");
    wait_until(
        "45 frames after the reload",
        Duration::from_secs(60),
        || {
            let l = latest_frame(d.port).expect("a frame");
            let h = &l["health"];
            assert_eq!(
                (&h["state"], &h["learning"], &h["kinds"]["covered"]),
                (&"tampered".into(), &false.into(), &"tampered".into()),
                "{l}\n{}",
                d.log()
            );
            (l["sequence"].as_u64().expect("sequence") >= reloaded + 45).then_some(())
        },
    );
    let covered = r#"{camera="cam",kind="covered"}"#;
    let m = d.metrics();
    assert_eq!(
        sample(&m, &format!("edgesight_camera_tamper{covered}")),
        Some(1.0),
        "{m}"
    );

    show(&images, &live_view());
    wait_until("ok again", Duration::from_secs(30), || {
        latest_frame(d.port).filter(|l| l["health"]["state"] == "ok")
    });
    let m = d.metrics();
    for (kind, tamper, events) in tamper_series(&m, "cam") {
        let want = if kind == "covered" { 1.0 } else { 0.0 };
        assert_eq!((tamper, events), (Some(0.0), Some(want)), "{kind}:\n{m}");
    }
    let log = d.log();
    assert_eq!(
        log_lines(&log, "camera health: baseline learned").len(),
        1,
        "{log}"
    );
    let tampered = log_lines(&log, "camera health: tampered");
    assert_eq!(tampered.len(), 1, "{log}");
    assert!(tampered[0].contains("kind=covered"), "{log}");
    let again = log_lines(&log, "camera health: ok again");
    assert_eq!(again.len(), 1, "{log}");
    assert!(again[0].contains("kind=covered"), "{log}");
    d.stop();
}
