//! Motion in a running daemon: on the test pattern, the lane its bar slides along moves
//! and the strip above the disk's reach never does (its events, its metrics, its log);
//! SIGHUP turns motion off and refuses a bad `[camera.motion]`, and check-config and run
//! refuse one at its key.

use std::time::Duration;

use crate::common::daemon::*;
use crate::{assert_refused, latest_frame, wait_refused_reload};

/// The pattern at 320x240: its bar slides along rows 160-190, its disk never rises above
/// row 20; `lane` holds the bar's rows, `sky` the rows above the disk. One live frame in 4
/// is checked against the reference (`verify_every`), its motion too once watched.
fn pattern(motion: &str) -> String {
    format!(
        "[opencl]\nverify_every = 4\n{}[camera.health]\nlearning_seconds = 0.5\n\
         [camera.motion]\n{motion}",
        camera(
            "front",
            "320x240",
            &[("lane", 0, 160, 320, 32), ("sky", 0, 0, 320, 16)],
            64
        )
    )
}

#[test]
fn the_bars_lane_moves_the_sky_does_not_and_sighup_turns_motion_off() {
    let dir = tmp_dir("daemon-motion");
    let d = Daemon::spawn(&dir, &pattern("min_seconds = 0.2\n"));
    // Watching once learned (2 s of the pattern), then the lane's event within seconds.
    let watched = wait_until("the lane's first event", Duration::from_secs(60), || {
        latest_frame(d.port).filter(|l| {
            l["motion"]["state"] == "watching"
                && l["motion"]["regions"]["lane"]["events"].as_u64() >= Some(1)
        })
    });
    let m = &watched["motion"];
    assert!(
        m["threshold"]
            .as_f64()
            .is_some_and(|t| (2.0..=40.0).contains(&t)),
        "{m}"
    );
    assert!(
        m["gain"].as_f64().is_some_and(|g| (g - 1.0).abs() < 0.1),
        "{m}"
    );
    // Over 60 more frames, the sky never moves.
    let first = watched["sequence"].as_u64().expect("sequence");
    wait_until("60 more frames", Duration::from_secs(60), || {
        let l = latest_frame(d.port).expect("a frame");
        let sky = &l["motion"]["regions"]["sky"];
        assert_eq!(
            (sky["ratio"].as_f64(), sky["events"].as_u64()),
            (Some(0.0), Some(0)),
            "{l}"
        );
        (l["sequence"].as_u64().expect("sequence") >= first + 60).then_some(())
    });
    let metrics = d.metrics();
    let roi = |family: &str, roi: &str| {
        sample(
            &metrics,
            &format!("{family}{{camera=\"front\",roi=\"{roi}\"}}"),
        )
    };
    assert!(
        roi("edgesight_roi_motion_events_total", "lane") >= Some(1.0),
        "{metrics}"
    );
    assert_eq!(roi("edgesight_roi_motion_events_total", "sky"), Some(0.0));
    assert_eq!(roi("edgesight_roi_motion_ratio", "sky"), Some(0.0));
    assert!(sample(&metrics, r#"edgesight_motion_ratio{camera="front"}"#).is_some());
    assert!(
        d.log().contains("motion began camera=front roi=lane"),
        "{}",
        d.log()
    );
    // The live frames checked meanwhile, the lane's moving pixels among them, all agreed
    // with the reference.
    let verified = sample(
        &metrics,
        r#"edgesight_kernel_verified_frames_total{camera="front"}"#,
    );
    assert!(verified >= Some(10.0), "{verified:?}");
    d.assert_verified_alike(&metrics, &["front"]);

    // Off by SIGHUP: the state says so, nothing moves, the counts stay.
    let config = dir.join("edgesight.toml");
    std::fs::write(&config, pattern("enabled = false\n")).expect("rewrite");
    d.signal(libc::SIGHUP);
    let off = wait_until("motion off", Duration::from_secs(30), || {
        latest_frame(d.port).filter(|l| l["motion"]["state"] == "off")
    });
    assert_eq!(off["motion"]["ratio"], 0.0, "{off}");
    assert!(
        off["motion"]["regions"]["lane"]["events"].as_u64() >= Some(1),
        "{off}"
    );

    // A bad value is refused whole: motion stays off.
    std::fs::write(&config, pattern("min_ratio = 0\n")).expect("rewrite");
    d.signal(libc::SIGHUP);
    wait_refused_reload(&d);
    assert!(d.log().contains("camera.motion.min_ratio"), "{}", d.log());
    let l = latest_frame(d.port).expect("a frame");
    assert_eq!(l["motion"]["state"], "off", "{l}");
}

#[test]
fn bad_motion_settings_are_refused_at_their_key() {
    let dir = tmp_dir("daemon-motion-refused");
    let good = "[[camera]]\nname = \"c\"\n[camera.source]\nkind = \"pattern\"\n[camera.motion]\n";
    for (name, text, expect) in [
        (
            "threshold-word",
            format!("{good}threshold = \"high\"\n"),
            ":6:13: camera.motion.threshold: \"high\" is not \"auto\" or a number of luma levels",
        ),
        (
            "threshold-small",
            format!("{good}threshold = 0.1\n"),
            ":6:13: camera.motion.threshold: 0.1 is not \"auto\" or 0.25 to 255 luma levels",
        ),
        (
            "background-short",
            format!("{good}background_seconds = 0.5\n"),
            ":6:22: camera.motion.background_seconds: 0.5 is not between 1 and 86400 seconds",
        ),
        (
            "unknown-key",
            format!("{good}min_secs = 1\n"),
            ":6:1: camera.motion.min_secs: unknown field `min_secs`, expected one of",
        ),
    ] {
        assert_refused(&dir, name, &text, expect);
    }
}
