use std::time::{Duration, Instant};

use super::*;
use crate::pipeline::MotionResult;
use edgesight_frame::region::{Region, RegionStats};

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
) -> Vec<(usize, MotionChange)> {
    let mut seen = Vec::new();
    for (n, &(state, moving, lost)) in frames.iter().enumerate() {
        let at = start + Duration::from_millis(100 * n as u64);
        events.update(&frame(state, moving), at, lost, |c, _| seen.push((n, c)));
    }
    seen
}

#[test]
fn an_event_needs_its_ratio_for_min_seconds_and_ends_below_half_of_it() {
    let settings = CameraMotionSettings {
        min_ratio: 0.05,
        min_seconds: 0.5,
        ..CameraMotionSettings::default()
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
    assert_eq!(
        seen,
        [(9, MotionChange::Began(0)), (20, MotionChange::Ended(0))]
    );
    assert_eq!(events.report().regions[0].events, 1);
    assert!(!events.report().regions[0].active);
    assert_eq!(events.report().state, "watching");
}

#[test]
fn nothing_moves_while_learning_after_a_change_of_scene_or_with_the_view_lost() {
    let mut events = MotionEvents::new(CameraMotionSettings {
        min_seconds: 0.0,
        ..CameraMotionSettings::default()
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
    assert_eq!(seen, [(0, MotionChange::Began(0))]);
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
    assert_eq!(CameraMotionSettings::default().check(), Ok(()));
    let bad = |f: fn(&mut CameraMotionSettings)| {
        let mut s = CameraMotionSettings::default();
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
    let parse = |text: &str| toml::from_str::<CameraMotionSettings>(text).map(|s| s.threshold);
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
    let off = CameraMotionSettings {
        enabled: false,
        ..CameraMotionSettings::default()
    };
    assert_eq!(off.pipeline(), None);
}

/// A watched frame of `regions` (definition, moving pixels of its 1000).
fn frame_of(regions: &[(&str, u64)]) -> FrameResult {
    let stats = |motion: u64| RegionStats {
        area: 1000,
        motion,
        ..RegionStats::default()
    };
    FrameResult {
        frame: stats(0),
        regions: regions
            .iter()
            .map(|&(def, moving)| (def.parse().expect("region"), stats(moving)))
            .collect(),
        motion: MotionResult {
            state: MotionState::Watching,
            ..MotionResult::default()
        },
        ..FrameResult::empty()
    }
}

/// Frames `from..to` of `regions`, one every 100 ms from `start`; the changes, with the
/// frame and the region's name, go to `seen`.
fn play(
    events: &mut MotionEvents,
    start: Instant,
    (from, to): (u64, u64),
    regions: &[(&str, u64)],
    seen: &mut Vec<(u64, MotionChange, String)>,
) {
    let frame = frame_of(regions);
    for n in from..to {
        let at = start + Duration::from_millis(100 * n);
        events.update(&frame, at, None, |c, name| seen.push((n, c, name.into())));
    }
}

/// Issue 46, finding 12: a reload keeps the events of the regions whose definition it
/// left alone (active, begun when they began, counted once), starts the added and the
/// redefined ones afresh, and ends the events of those it removed or redefined.
#[test]
fn round3_12_a_reload_keeps_the_events_of_the_regions_it_left_alone() {
    let mut events = MotionEvents::new(CameraMotionSettings {
        min_ratio: 0.05,
        min_seconds: 0.5,
        ..CameraMotionSettings::default()
    });
    let start = Instant::now();
    let mut seen = Vec::new();
    let (door, gate) = ("door:0,0,100,10", "gate:0,10,100,10");
    play(
        &mut events,
        start,
        (0, 10),
        &[(door, 200), (gate, 200)],
        &mut seen,
    );
    // A region added between the two, the gate moved: the door's event goes on.
    let (yard, gate_moved) = ("yard:0,20,100,10", "gate:0,30,100,10");
    let reloaded = [(door, 200), (yard, 0), (gate_moved, 200)];
    play(&mut events, start, (10, 20), &reloaded, &mut seen);
    let named = |n: u64, c: MotionChange, name: &str| (n, c, name.to_string());
    let before = [
        named(5, MotionChange::Began(0), "door"),
        named(5, MotionChange::Began(1), "gate"),
        named(10, MotionChange::Withdrawn, "gate"),
        named(15, MotionChange::Began(2), "gate"),
    ];
    assert_eq!(seen, before);
    let shown = |events: &MotionEvents| {
        let r = events.report();
        r.regions
            .iter()
            .map(|m| (m.active, m.events))
            .collect::<Vec<_>>()
    };
    // The gate keeps its count, as its series (of the same name) does.
    assert_eq!(shown(&events), [(true, 1), (false, 0), (true, 2)]);
    // The door removed: its event ends with it.
    play(
        &mut events,
        start,
        (20, 30),
        &[(yard, 0), (gate_moved, 200)],
        &mut seen,
    );
    play(
        &mut events,
        start,
        (30, 40),
        &[(yard, 0), (gate_moved, 0)],
        &mut seen,
    );
    assert_eq!(shown(&events), [(false, 0), (false, 2)]);
    assert_eq!(
        seen[before.len()..],
        [
            named(20, MotionChange::Withdrawn, "door"),
            named(35, MotionChange::Ended(1), "gate"),
        ]
    );
}
