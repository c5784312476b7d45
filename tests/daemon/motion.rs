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

/// The lane's events as `/api/v1/latest` (count, active), `edgesight_roi_motion_events_total`
/// and the log ("motion began", "motion ended" lines) tell them.
#[derive(Debug, PartialEq)]
struct LaneEvents {
    api: (u64, bool),
    metric: u64,
    began: u64,
    ended: u64,
}

fn lane_events(d: &Daemon) -> Option<LaneEvents> {
    let metric = || {
        let m = d.metrics();
        sample(
            &m,
            r#"edgesight_roi_motion_events_total{camera="front",roi="lane"}"#,
        )
        .expect("the lane's events") as u64
    };
    let l = latest_frame(d.port)?;
    let lane = &l["motion"]["regions"]["lane"];
    let log = d.log();
    let lines = |what: &str| {
        let line = format!("{what} camera=front roi=lane ");
        log.lines().filter(|l| l.contains(&line)).count() as u64
    };
    Some(LaneEvents {
        api: (lane["events"].as_u64()?, lane["active"].as_bool()?),
        metric: metric(),
        began: lines("motion began"),
        ended: lines("motion ended"),
    })
}

/// The API, the metric and the log agree on the lane's events: as many began as are
/// counted, and each but the active one ended.
fn agreeing(e: &LaneEvents) -> bool {
    let (count, active) = e.api;
    count == e.metric && e.began == count && e.ended + u64::from(active) == count
}

/// Issue 46, finding 12: a reload that only adds a region leaves the lane's event going:
/// no second "motion began" without an "ended", no event counted twice, the API and the
/// metric alike; a reload that removes the lane ends its event in the log.
#[test]
fn round3_12_adding_a_region_leaves_the_other_regions_events_alone() {
    let dir = tmp_dir("daemon-motion-reload-regions");
    // The event ends after a second under half its ratio: the bar never leaves the lane
    // that long, so the lane's one event lasts.
    let motion = "min_seconds = 1\n";
    let d = Daemon::spawn(&dir, &pattern(motion));
    let before = wait_until("the lane's event", Duration::from_secs(60), || {
        lane_events(&d).filter(|e| e.api.1 && agreeing(e))
    });
    let config = dir.join("edgesight.toml");
    let added = pattern(motion).replace(
        "[camera.health]",
        "[[camera.roi]]\nname = \"corner\"\nx = 0\ny = 0\nw = 64\nh = 8\n[camera.health]",
    );
    std::fs::write(&config, &added).expect("rewrite");
    d.signal(libc::SIGHUP);
    let corner = wait_until("the added region", Duration::from_secs(30), || {
        latest_frame(d.port).filter(|l| l["motion"]["regions"]["corner"].is_object())
    });
    let first = corner["sequence"].as_u64().expect("sequence");
    // A second and a half of frames later the lane's event is the one it was.
    wait_until("45 more frames", Duration::from_secs(60), || {
        latest_frame(d.port).filter(|l| l["sequence"].as_u64().expect("sequence") >= first + 45)
    });
    let mut after = lane_events(&d).expect("the lane");
    for _ in 0..50 {
        if agreeing(&after) {
            break;
        }
        // An event that began between two reads: read again.
        std::thread::sleep(Duration::from_millis(100));
        after = lane_events(&d).expect("the lane");
    }
    assert_eq!(after, before, "{}", d.log());

    // The lane removed while its event goes on: the event ends in the log.
    let removed = added.replace(
        "[[camera.roi]]\nname = \"lane\"\nx = 0\ny = 160\nw = 320\nh = 32\n",
        "",
    );
    assert_ne!(removed, added, "the lane's definition");
    std::fs::write(&config, &removed).expect("rewrite");
    d.signal(libc::SIGHUP);
    let ended = wait_until("the lane's event to end", Duration::from_secs(30), || {
        let log = d.log();
        log.lines()
            .find(|l| {
                l.contains("motion ended camera=front roi=lane ") && l.contains("cause=reload")
            })
            .map(str::to_string)
    });
    let log = d.log();
    let began = log.matches("motion began camera=front roi=lane ").count();
    let ended_lines = log.matches("motion ended camera=front roi=lane ").count();
    assert_eq!(
        (began, ended_lines),
        (before.began as usize, before.began as usize),
        "{ended}\n{log}"
    );
    let m = d.metrics();
    assert_eq!(
        sample(
            &m,
            r#"edgesight_roi_motion_events_total{camera="front",roi="lane"}"#
        ),
        None,
        "a removed region's series goes"
    );
    d.stop();
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
