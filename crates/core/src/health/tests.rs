//! The detectors on synthetic frames whose results come from the plain-Rust references,
//! at 30 fps with exact timestamps: each kind is raised by its own tamper at the frame the
//! settings say, and nuisances raise nothing.

use std::time::{Duration, Instant};

use super::*;
use crate::pipeline::{Border, Magnitude};
use crate::reference;
use edgesight_frame::region::{self, RegionStats};

const W: usize = 160;
const H: usize = 120;
const FPS: f64 = 30.0;

/// A textured scene: smooth shading, blocks of different grey and fine stripes.
fn scene(shift: usize) -> Vec<f32> {
    let mut img = vec![0f32; W * H];
    for y in 0..H {
        for x in 0..W {
            let sx = x + shift;
            let block = ((sx / 20) * 7 + (y / 15) * 3) % 5;
            let stripes = if (sx / 3 + y / 5).is_multiple_of(2) {
                12.0
            } else {
                -12.0
            };
            img[y * W + x] = 60.0 + 25.0 * block as f32 + stripes + 0.2 * y as f32;
        }
    }
    img
}

/// The scene at `gain` with sensor noise drawn from `seed` (a camera never repeats a
/// frame exactly).
fn shoot(view: &[f32], gain: f32, seed: u64) -> Vec<u8> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    view.iter()
        .map(|&v| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let noise = ((state >> 33) % 5) as f32 - 2.0;
            (v * gain + noise).round().clamp(0.0, 255.0) as u8
        })
        .collect()
}

fn box_blur(view: &[f32], radius: usize) -> Vec<f32> {
    let mut out = vec![0f32; W * H];
    for y in 0..H {
        for x in 0..W {
            let (mut sum, mut n) = (0.0, 0.0);
            for yy in y.saturating_sub(radius)..(y + radius + 1).min(H) {
                for xx in x.saturating_sub(radius)..(x + radius + 1).min(W) {
                    sum += view[yy * W + xx];
                    n += 1.0;
                }
            }
            out[y * W + x] = sum / n;
        }
    }
    out
}

/// What the pipeline would give for `luma` with the health grid on.
fn result_of(luma: &[u8], gradient: bool) -> FrameResult {
    let mut r = FrameResult::empty();
    (r.width, r.height) = (W as u32, H as u32);
    r.histogram = reference::histogram(luma);
    let (sum, sqsum) = reference::integral(luma, W, H);
    let stats = |x: u32, y: u32, w: u32, h: u32| {
        let at = |x: u32, y: u32| (y as usize) * (W + 1) + x as usize;
        let s = |img: &[u32]| {
            u64::from(img[at(x + w, y + h)]) + u64::from(img[at(x, y)])
                - u64::from(img[at(x + w, y)])
                - u64::from(img[at(x, y + h)])
        };
        let q =
            sqsum[at(x + w, y + h)] + sqsum[at(x, y)] - sqsum[at(x + w, y)] - sqsum[at(x, y + h)];
        RegionStats {
            area: u64::from(w) * u64::from(h),
            sum: s(&sum),
            sqsum: q,
            ..RegionStats::default()
        }
    };
    r.frame = stats(0, 0, W as u32, H as u32);
    r.grid = GRID;
    r.cells = region::grid(W as u32, H as u32, GRID.0, GRID.1)
        .iter()
        .map(|c| stats(c.x, c.y, c.width, c.height))
        .collect();
    if gradient {
        let (dx, dy) = reference::sobel(luma, W, H, Border::Reflect101);
        r.gradient_histogram = reference::histogram(&reference::magnitude(&dx, &dy, Magnitude::L1));
        r.gradient_sampled = true;
    }
    r
}

/// Plays `frames` (frame number -> luma) from frame `from` to `to` and returns the events
/// with the frame they came on.
struct Player {
    health: Health,
    t0: Instant,
    events: Vec<(u64, Event)>,
}

impl Player {
    fn new(settings: HealthSettings) -> Player {
        Player {
            health: Health::new(settings),
            t0: Instant::now(),
            events: Vec::new(),
        }
    }

    fn play(&mut self, from: u64, to: u64, frame: impl Fn(u64) -> Vec<u8>) {
        for i in from..to {
            let r = result_of(&frame(i), i % 4 == 0);
            let at = self.t0 + Duration::from_secs_f64(i as f64 / FPS);
            for e in self.health.update(&r, at) {
                self.events.push((i, *e));
            }
        }
    }
}

/// Frame number -> luma of a tampered camera.
type Tamper<'a> = Box<dyn Fn(u64) -> Vec<u8> + 'a>;

/// Learned after 3 s (frame 90), then whatever `tamper` does from frame 150 on.
fn after_learning(tamper: impl Fn(u64) -> Vec<u8>) -> Vec<(u64, Event)> {
    let view = scene(0);
    let mut p = Player::new(HealthSettings::default());
    p.play(0, 150, |i| shoot(&view, 1.0, i));
    p.play(150, 240, tamper);
    p.events
}

#[test]
fn a_steady_scene_is_learned_once_and_stays_ok() {
    let view = scene(0);
    let mut p = Player::new(HealthSettings::default());
    p.play(0, 600, |i| shoot(&view, 1.0, i));
    assert_eq!(p.events, [(90, Event::Learned)]);
    let r = p.health.report();
    assert_eq!(r.state, "ok");
    assert!((r.sharpness.expect("learned") - 1.0).abs() < 0.02, "{r:?}");
    assert_eq!(r.scene_change, Some(0.0));
    assert_eq!(r.unchanged_seconds, 0.0);
}

#[test]
fn each_tamper_raises_its_own_kind_after_the_confirm_time() {
    let view = scene(0);
    // Frame 150 is the first tampered one; 0.5 s to confirm is 15 frames.
    let cases: [(Kind, u64, Tamper); 6] = [
        (Kind::Overexposed, 165, Box::new(|i| shoot(&view, 4.0, i))),
        (Kind::Underexposed, 165, Box::new(|i| shoot(&view, 0.02, i))),
        (
            Kind::Covered,
            165,
            Box::new(|i| shoot(&[20.0; W * H], 1.0, i)),
        ),
        // Unchanged from frame 150 (a repeat of 149): 0.5 s unchanged, then 0.5 s.
        (
            Kind::Frozen,
            180,
            Box::new(|i| shoot(&view, 1.0, i.min(149))),
        ),
        (Kind::Moved, 165, {
            let moved = scene(70);
            Box::new(move |i| shoot(&moved, 1.0, i))
        }),
        // The gradient is sampled on every 4th frame: 152 is the first blurred sample.
        (Kind::Defocus, 167, {
            let blurred = box_blur(&view, 3);
            Box::new(move |i| shoot(&blurred, 1.0, i))
        }),
    ];
    for (kind, frame, tamper) in cases {
        let events = after_learning(tamper);
        assert_eq!(
            events,
            [(90, Event::Learned), (frame, Event::Tampered(kind))],
            "{kind}"
        );
    }
}

#[test]
fn light_steps_flickers_and_a_passing_object_raise_nothing() {
    let view = scene(0);
    let events = after_learning(|i| {
        match i {
            // an auto-exposure step, then a light switching on
            150..=179 => shoot(&view, 1.2, i),
            180..=183 => shoot(&view, 4.0, i), // a flicker: 4 frames overexposed
            184..=209 => shoot(&view, 1.4, i),
            _ => {
                // an object a tenth of the frame crossing
                let mut object = view.clone();
                let x0 = ((i - 210) * 4) as usize;
                for y in 40..88 {
                    for x in x0..(x0 + 32).min(W) {
                        object[y * W + x] = 30.0;
                    }
                }
                shoot(&object, 1.0, i)
            }
        }
    });
    assert_eq!(events, [(90, Event::Learned)]);
}

#[test]
fn a_tamper_clears_after_the_clear_time_and_off_and_on_learns_again() {
    let view = scene(0);
    let mut p = Player::new(HealthSettings::default());
    p.play(0, 150, |i| shoot(&view, 1.0, i));
    p.play(150, 200, |i| shoot(&[20.0; W * H], 1.0, i));
    p.play(200, 300, |i| shoot(&view, 1.0, i));
    // Covered at 165; the view is back at 200 and 2 s later (frame 260) it is ok.
    assert_eq!(
        p.events,
        [
            (90, Event::Learned),
            (165, Event::Tampered(Kind::Covered)),
            (260, Event::Cleared(Kind::Covered))
        ]
    );
    p.health.set_settings(HealthSettings::default());
    assert_eq!(
        p.health.report().state,
        "ok",
        "the same settings keep the baseline"
    );
    // Off and on again (two reloads) is what learns the view afresh.
    for enabled in [false, true] {
        p.health.set_settings(HealthSettings {
            enabled,
            ..HealthSettings::default()
        });
    }
    p.events.clear();
    p.play(300, 400, |i| shoot(&view, 1.0, i));
    assert_eq!(p.events, [(390, Event::Learned)]);
}

/// Issue 46, finding 8: a reload that changes the health settings while the camera is
/// covered keeps the alarm and the view learned before the cover. The cover is not
/// learned as normal, and the view coming back clears the alarm instead of reading as
/// moved.
#[test]
fn round3_8_a_reload_while_covered_keeps_the_alarm_and_the_learned_view() {
    let view = scene(0);
    let covered = |i| shoot(&[20.0; W * H], 1.0, i);
    let mut p = Player::new(HealthSettings::default());
    p.play(0, 150, |i| shoot(&view, 1.0, i));
    p.play(150, 200, covered);
    // Thresholds and times changed, the learning period among them.
    let reloaded = HealthSettings {
        learning_seconds: 1.0,
        clear_seconds: 1.0,
        moved_scene_change: 0.4,
        defocus_sharpness: 0.5,
        ..HealthSettings::default()
    };
    p.health.set_settings(reloaded);
    p.play(200, 300, covered);
    let r = p.health.report();
    assert_eq!((r.state, r.learning), ("tampered", false), "{r:?}");
    assert_eq!(r.kinds[2], (Kind::Covered, State::Tampered), "{r:?}");
    p.play(300, 400, |i| shoot(&view, 1.0, i));
    // Uncovered at 300, ok again after the new clear time (1 s: 30 frames); the view
    // is the learned one, so nothing reads as moved.
    assert_eq!(
        p.events,
        [
            (90, Event::Learned),
            (165, Event::Tampered(Kind::Covered)),
            (330, Event::Cleared(Kind::Covered))
        ]
    );
    let r = p.health.report();
    assert_eq!(r.state, "ok", "{r:?}");
    assert!(r.scene_change.is_some_and(|c| c < 0.05), "{r:?}");
    assert_eq!(p.health.settings(), &reloaded);
}

/// A reload while learning goes on learning with the new period, from the frames seen
/// so far.
#[test]
fn round3_8_a_reload_while_learning_keeps_the_frames_learned_so_far() {
    let view = scene(0);
    let mut p = Player::new(HealthSettings::default());
    p.play(0, 30, |i| shoot(&view, 1.0, i));
    p.health.set_settings(HealthSettings {
        learning_seconds: 2.0,
        ..HealthSettings::default()
    });
    p.play(30, 120, |i| shoot(&view, 1.0, i));
    assert_eq!(p.events, [(60, Event::Learned)]);
}

#[test]
fn a_tamper_while_learning_shows_over_learning() {
    let view = scene(0);
    let mut p = Player::new(HealthSettings::default());
    // A camera frozen from its first frame: the unchanged picture needs no baseline.
    p.play(0, 60, |_| shoot(&view, 1.0, 7));
    assert_eq!(p.events, [(31, Event::Tampered(Kind::Frozen))]);
    let r = p.health.report();
    assert!(r.learning, "{r:?}");
    assert_eq!(r.state, "tampered");
    assert_eq!(r.sharpness, None);
}

#[test]
fn learning_waits_for_two_gradient_samples() {
    let view = scene(0);
    let mut p = Player::new(HealthSettings::default());
    // Frames at 1 fps: the period is over at the 4th frame (3 s), but gradients come on
    // frames 0 and 4 only (one in 4).
    for i in 0..6u64 {
        let r = result_of(&shoot(&view, 1.0, i), i % 4 == 0);
        let at = p.t0 + Duration::from_secs(i);
        for e in p.health.update(&r, at) {
            p.events.push((i, *e));
        }
    }
    assert_eq!(p.events, [(4, Event::Learned)]);
}

/// Issue 33, item 4: a scene at an eighth of its light clips almost nothing (its mean near
/// 13, most pixels above luma 8) and is underexposed all the same; one lifted most of the
/// way to white without clipping is overexposed.
#[test]
fn a_much_darker_or_brighter_picture_without_clipping_is_flagged() {
    let view = scene(0);
    let dark = after_learning(|i| shoot(&view, 0.125, i));
    assert_eq!(
        dark,
        [
            (90, Event::Learned),
            (165, Event::Tampered(Kind::Underexposed))
        ]
    );
    let lifted: Vec<f32> = view.iter().map(|v| 255.0 - (255.0 - v) * 0.3).collect();
    let frame = result_of(&shoot(&lifted, 1.0, 1), false);
    let mut m = measures::Measures::default();
    m.fill(&frame);
    assert!(m.bright < 0.05, "clipped bright {}", m.bright);
    let bright = after_learning(|i| shoot(&lifted, 1.0, i));
    assert_eq!(
        bright,
        [
            (90, Event::Learned),
            (165, Event::Tampered(Kind::Overexposed))
        ]
    );
    let mut check = Measures::default();
    check.fill(&result_of(&shoot(&view, 0.125, 1), false));
    assert!(check.dark < 0.5 && check.mean < 16.0, "{check:?}");
    // As dark, but flat: a black cloth, which has none of the scene's pattern, is covered.
    let cloth = after_learning(|i| shoot(&[10.0; W * H], 1.0, i));
    assert_eq!(
        cloth,
        [(90, Event::Learned), (165, Event::Tampered(Kind::Covered))]
    );
}

/// A dark object over half the view, a glare spot over a third, and the light halved
/// move the mean but not the whole picture: no exposure tamper.
#[test]
fn a_dark_object_a_glare_spot_or_half_the_light_is_not_an_exposure_tamper() {
    let view = scene(0);
    let events = after_learning(|i| match i {
        150..=189 => {
            let mut v = view.clone();
            v[..W * H / 2].fill(12.0);
            shoot(&v, 1.0, i)
        }
        190..=219 => {
            let mut v = view.clone();
            for y in 0..H {
                for x in 0..W / 3 {
                    v[y * W + x] = 240.0;
                }
            }
            shoot(&v, 1.0, i)
        }
        _ => shoot(&view, 0.5, i),
    });
    let exposure =
        |e: &&(u64, Event)| matches!(e.1, Event::Tampered(Kind::Underexposed | Kind::Overexposed));
    assert_eq!(events.iter().filter(exposure).count(), 0, "{events:?}");
}

/// Dusk over the adapt time: the light falls to an eighth over 40 minutes, the baseline
/// follows (it adapts while every detector says ok), and nothing is raised; the mean
/// luma ratio shows how far the light is from the learned view.
#[test]
fn a_slow_dusk_is_followed_not_flagged_and_stays_visible() {
    let view = scene(0);
    let mut p = Player::new(HealthSettings::default());
    // 2 fps over 45 minutes: learned in the first 3 s, then dusk from minute 1 to 41.
    let fps = 2.0;
    let minutes = 45.0;
    let frames = (minutes * 60.0 * fps) as u64;
    let gain = |t: f64| {
        let u = ((t - 60.0) / 2400.0).clamp(0.0, 1.0);
        0.125f32.powf(u as f32)
    };
    let mut lowest_ratio = f64::MAX;
    for i in 0..frames {
        let t = i as f64 / fps;
        let r = result_of(&shoot(&view, gain(t), i), i % 4 == 0);
        for e in p.health.update(&r, p.t0 + Duration::from_secs_f64(t)) {
            p.events.push((i, *e));
        }
        if let Some(ratio) = p.health.report().mean_luma_ratio {
            lowest_ratio = lowest_ratio.min(ratio);
        }
    }
    assert_eq!(p.events, [(6, Event::Learned)]);
    // The baseline lags the light by about its time constant: the ratio dips below 1.
    assert!(
        lowest_ratio < 0.85 && lowest_ratio > 0.3,
        "lowest mean luma ratio {lowest_ratio}"
    );
}
