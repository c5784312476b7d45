use std::time::{Duration, Instant};

use super::*;
use crate::pipeline::MotionResult;
use crate::region::{Region, RegionStats};

/// A frame whose one region has `moving` of its 1000 pixels moving.
fn frame(state: MotionState, moving: u64) -> FrameResult {
    let region: Region = "door:0,0,100,10".parse().expect("region");
    let stats = RegionStats {
        area: 1000,
        motion: moving,
        ..RegionStats::default()
    };
    FrameResult {
        frame: stats,
        regions: vec![(region, stats)],
        motion: MotionResult {
            state,
            ..MotionResult::default()
        },
        ..FrameResult::empty()
    }
}

/// Feeds the frames (state, moving pixels of 1000, the view-lost tamper not ok), one
/// every 100 ms from `start`, and returns the changes with the frame they came on.
fn run(
    events: &mut MotionEvents,
    start: Instant,
    frames: &[(MotionState, u64, Option<Kind>)],
) -> Vec<(usize, Change)> {
    let mut seen = Vec::new();
    for (n, &(state, moving, lost)) in frames.iter().enumerate() {
        let at = start + Duration::from_millis(100 * n as u64);
        events.update(&frame(state, moving), at, lost, |c| seen.push((n, c)));
    }
    seen
}

#[test]
fn an_event_needs_its_ratio_for_min_seconds_and_ends_below_half_of_it() {
    let settings = ActivitySettings {
        min_ratio: 0.05,
        min_seconds: 0.5,
        ..ActivitySettings::default()
    };
    let mut events = MotionEvents::new(settings);
    let w = MotionState::Watching;
    // A blip of 0.2 s, then 0.8 s above: the event begins 0.5 s after the ratio rose
    // (frame 4, so on frame 9); 0.03 (above half) keeps it; 0.02 for 0.5 s ends it.
    let mut frames = vec![(w, 0, None), (w, 80, None), (w, 80, None), (w, 0, None)];
    frames.extend([(w, 60, None); 8]);
    frames.extend([(w, 30, None); 3]);
    frames.extend([(w, 20, None); 7]);
    let seen = run(&mut events, Instant::now(), &frames);
    assert_eq!(seen, [(9, Change::Began(0)), (20, Change::Ended(0))]);
    assert_eq!(events.report().regions[0].events, 1);
    assert!(!events.report().regions[0].active);
    assert_eq!(events.report().state, "watching");
}

#[test]
fn nothing_moves_while_learning_after_a_change_of_scene_or_with_the_view_lost() {
    let mut events = MotionEvents::new(ActivitySettings {
        min_seconds: 0.0,
        ..ActivitySettings::default()
    });
    let start = Instant::now();
    for (state, lost, name) in [
        (MotionState::Learning, None, "learning"),
        (MotionState::SceneChange, None, "scene_change"),
        (MotionState::Watching, Some(Kind::Moved), "camera_moved"),
        (MotionState::Watching, Some(Kind::Covered), "camera_covered"),
        (MotionState::Watching, Some(Kind::Defocus), "camera_defocus"),
        (MotionState::Off, Some(Kind::Defocus), "off"),
        (MotionState::Off, None, "off"),
    ] {
        let seen = run(&mut events, start, &[(state, 900, lost); 5]);
        assert!(seen.is_empty(), "{name}: {seen:?}");
        let r = events.report();
        assert_eq!((r.state, r.ratio, r.regions[0].ratio), (name, 0.0, 0.0));
        assert_eq!(r.regions[0].events, 0);
    }
    let seen = run(&mut events, start, &[(MotionState::Watching, 900, None)]);
    assert_eq!(seen, [(0, Change::Began(0))]);
    assert_eq!(events.report().ratio, 0.9);
}

#[test]
fn the_view_is_lost_while_moved_covered_or_defocus_is_suspect_or_tampered() {
    let mut kinds = Kind::ALL.map(|kind| (kind, State::Ok));
    assert_eq!(view_lost(&kinds), None);
    // The exposure tampers and a frozen picture leave motion alone.
    for (kind, state) in &mut kinds {
        if !VIEW_LOST.contains(kind) {
            *state = State::Tampered;
        }
    }
    assert_eq!(kinds.iter().filter(|k| k.1 == State::Tampered).count(), 3);
    assert_eq!(view_lost(&kinds), None);
    for lost in VIEW_LOST {
        for state in [State::Suspect, State::Tampered] {
            let mut kinds = kinds;
            kinds.iter_mut().find(|(k, _)| *k == lost).unwrap().1 = state;
            assert_eq!(view_lost(&kinds), Some(lost), "{lost:?} {state:?}");
        }
    }
}

#[test]
fn settings_are_checked_by_key_and_the_threshold_reads_auto_or_a_number() {
    assert_eq!(ActivitySettings::default().check(), Ok(()));
    let bad = |f: fn(&mut ActivitySettings)| {
        let mut s = ActivitySettings::default();
        f(&mut s);
        s.check().map_err(|(key, _)| key)
    };
    assert_eq!(
        bad(|s| s.threshold = MotionThreshold::Luma(0.0)),
        Err("threshold")
    );
    assert_eq!(
        bad(|s| s.background_seconds = 0.5),
        Err("background_seconds")
    );
    assert_eq!(bad(|s| s.min_ratio = 0.0), Err("min_ratio"));
    assert_eq!(bad(|s| s.min_seconds = f64::NAN), Err("min_seconds"));
    let parse = |text: &str| toml::from_str::<ActivitySettings>(text).map(|s| s.threshold);
    assert_eq!(
        parse("threshold = \"auto\"").unwrap(),
        MotionThreshold::Auto
    );
    assert_eq!(
        parse("threshold = 3.5").unwrap(),
        MotionThreshold::Luma(3.5)
    );
    assert_eq!(parse("threshold = 3").unwrap(), MotionThreshold::Luma(3.0));
    let refused = parse("threshold = \"high\"").unwrap_err().to_string();
    assert!(refused.contains("not \"auto\" or a number"), "{refused}");
    let off = ActivitySettings {
        enabled: false,
        ..ActivitySettings::default()
    };
    assert_eq!(off.pipeline(), None);
}
