//! The motion stage against `reference::motion`: background, mask, counts and each
//! region's moving pixels exact, frame after frame, for every tuning and awkward sizes.

use super::*;
use crate::reference::motion as reference;
use edgesight_frame::frame::PixelFormat;

fn gpu() -> Gpu {
    crate::cl::test_gpu()
}

/// A random frame (xorshift from `seed`).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.max(1);
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// Frames of a scene: a random picture, then the same with a bright block moved into
/// it and a little noise, then all of it at 1.5 times the light, then another picture,
/// then that one a little darker (its light taken over the few tiles the one before left
/// still: the kernel sums the many it listed as moving).
fn scene(w: usize, h: usize, seed: u64) -> Vec<Vec<u8>> {
    let base = noise(w * h, seed);
    let wobble = noise(w * h, seed + 1);
    let moved: Vec<u8> = base
        .iter()
        .zip(&wobble)
        .enumerate()
        .map(|(i, (&v, &n))| {
            let (x, y) = (i % w, i / w);
            if x >= w / 3 && x < w / 3 + 24 && y >= h / 4 && y < h / 4 + 20 {
                250
            } else {
                v.saturating_add(n % 3)
            }
        })
        .collect();
    let brighter: Vec<u8> = moved
        .iter()
        .map(|&v| (u32::from(v) * 3 / 2).min(255) as u8)
        .collect();
    let other = noise(w * h, seed + 2);
    let darker = other.iter().map(|&v| v - v / 16).collect();
    vec![base, moved, brighter, other, darker]
}

#[test]
fn motion_is_exact_against_the_reference() {
    let gpu = gpu();
    let sizes = [
        (1, 1),
        (17, 3),
        (16, 16),
        (33, 17),
        (47, 35),
        (100, 37),
        (641, 479),
        // 68 tiles across: two groups of the CPU layout's motion work-items.
        (1090, 47),
    ];
    // Rates: learn afresh, then a slow follow, a fast one and two odd ones; thresholds in
    // 1/256 of a luma level.
    // (rate, still_rate, threshold), as the self-test's.
    let told = [
        (65536, 65536, 512),
        (37, 4349, 512),
        (20000, 3001, 100),
        (4099, 77, 0),
        (700, 9000, 300),
    ];
    for (k, (w, h)) in sizes.into_iter().enumerate() {
        for (name, tuning) in Tuning::ALL {
            let what = format!("{w}x{h}, {name}");
            let layout = FrameLayout::packed(PixelFormat::Grey, w as u32, h as u32);
            let regions: Vec<Region> = [
                format!("a:0,0,{},{}", w.min(5), h.min(3)),
                format!(
                    "b:{},{},{},{}",
                    w / 3,
                    h / 4,
                    (w - w / 3).min(29),
                    (h - h / 4).min(23)
                ),
                format!("edge:{},{},{},{}", w - 1, h - 1, 1, 1),
            ]
            .iter()
            .map(|r| r.parse().expect("region"))
            .collect();
            let mut pipeline =
                Pipeline::with_tuning(&gpu, layout, PipelineOptions::default(), &regions, tuning)
                    .expect("pipeline");
            pipeline
                .set_health_grid(&gpu, Some(crate::health::GRID))
                .expect("grid");
            let mut slot = pipeline.new_slot(&gpu).expect("slot");
            let mut background = reference::Background::new(w, h);
            let all: Vec<Region> = std::iter::once(Region {
                name: String::new(),
                x: 0,
                y: 0,
                width: w as u32,
                height: h as u32,
            })
            .chain(regions.iter().cloned())
            .chain(edgesight_frame::region::grid(w as u32, h as u32, 16, 12))
            .collect();
            for (n, (frame, (rate, still_rate, threshold))) in
                scene(w, h, 40 + k as u64).iter().zip(told).enumerate()
            {
                let what = format!("{what}, frame {n}");
                pipeline.tell_motion(Some(FrameMotion {
                    rate,
                    still_rate,
                    threshold,
                }));
                slot.write_bytes(&gpu, frame).expect("write");
                let result = pipeline.process(&gpu, &slot).expect("frame").into_result();
                let want =
                    reference::tiles(frame, w, h, &mut background, rate, still_rate, threshold);
                if background.means.is_empty() {
                    assert_eq!(result.frame.motion, 0, "{what}");
                    continue;
                }
                let got = pipeline.read_motion(&gpu).expect("motion");
                let (got, means) = (got.tiles, got.background);
                assert_eq!(got.diff_histogram, want.diff_histogram, "histogram, {what}");
                assert_eq!(got.moving, want.moving, "moving, {what}");
                assert_eq!(got.frame_sum, want.frame_sum, "F, {what}");
                assert_eq!(got.background_sum, want.background_sum, "B, {what}");
                assert_eq!(got.gain, want.gain, "gain, {what}");
                assert!(means == background.means, "background, {what}");
                assert!(got.mask == want.mask, "mask, {what}");
                let (tx, ty) = (background.tiles_x, background.tiles_y);
                let moving = |r: &Region| reference::moving_pixels(&want.mask, tx, ty, r);
                assert_eq!(result.frame.motion, moving(&all[0]), "frame, {what}");
                for (i, (r, st)) in result.regions.iter().enumerate() {
                    assert_eq!(st.motion, moving(&all[1 + i]), "{}, {what}", r.name);
                }
                let cells = &all[1 + regions.len()..];
                for (i, (c, st)) in cells.iter().zip(&result.cells).enumerate() {
                    assert_eq!(st.motion, moving(c), "cell {i}, {what}");
                }
            }
            let broken = pipeline.broken_guards(&gpu).expect("guards");
            assert!(broken.is_empty(), "{broken:?}, {what}");
        }
    }
}

/// A scene moves where it should: a block walking in is seen where it is, a little more
/// light over all of it is not motion (the gain takes it, measured on the still tiles),
/// and a new picture is seen everywhere.
#[test]
fn a_block_moves_and_more_light_does_not() {
    let (w, h) = (160, 120);
    let wobble = noise(w * h, 3);
    // A smooth scene with a little texture, at most 190: brightened it never clips.
    let base: Vec<u8> = (0..w * h)
        .map(|i| (40 + (i % w + i / w) % 140 + usize::from(wobble[i] % 11)) as u8)
        .collect();
    let block = |x: usize, y: usize| (53..77).contains(&x) && (30..50).contains(&y);
    let moved: Vec<u8> = (0..w * h)
        .map(|i| if block(i % w, i / w) { 250 } else { base[i] })
        .collect();
    // The light up by 6 % (a cloud passing): a gradual change, which the gain follows.
    let brighter: Vec<u8> = moved
        .iter()
        .map(|&v| (u32::from(v) * 106 / 100).min(255) as u8)
        .collect();
    let mut background = reference::Background::new(w, h);
    let t = 2 * 256;
    reference::tiles(&base, w, h, &mut background, 65536, 65536, t);
    let seen = reference::tiles(&moved, w, h, &mut background, 37, 37, t);
    // x 53..77 and y 30..50 touch tiles 3..4 across and 1..3 down.
    let moving: Vec<(usize, usize)> = (0..seen.mask.len())
        .filter(|&i| seen.mask[i] == 1)
        .map(|i| (i % (w / 16), i / (w / 16)))
        .collect();
    assert_eq!(moving, [(3, 1), (4, 1), (3, 2), (4, 2), (3, 3), (4, 3)]);
    let lit = reference::tiles(&brighter, w, h, &mut background, 37, 37, t);
    assert!(
        (f64::from(lit.gain) / 65536.0 - 1.06).abs() < 0.005,
        "gain {}",
        lit.gain
    );
    // The block is still there (far whiter than the background, even in more light: the
    // tiles it mostly covers, those it touches with two rows may pass as the light's), and
    // nothing else moves.
    let moving: Vec<(usize, usize)> = (0..lit.mask.len())
        .filter(|&i| lit.mask[i] == 1)
        .map(|i| (i % (w / 16), i / (w / 16)))
        .collect();
    assert!(
        moving.contains(&(3, 2)) && moving.contains(&(4, 2)),
        "{moving:?}"
    );
    let touched = [(3, 1), (4, 1), (3, 2), (4, 2), (3, 3), (4, 3)];
    assert!(moving.iter().all(|t| touched.contains(t)), "{moving:?}");
    let other = reference::tiles(&noise(w * h, 9), w, h, &mut background, 37, 37, t);
    assert!(other.moving > 70 / 2, "{}", other.moving);
}

/// Light that changes unevenly, as real light does (the sun on one facade): the top band
/// of a still scene brightens by 3 luma levels a second for 4 s (+12, a tenth) while the
/// rest stays, at 30 fps. The still tiles follow it within a second and
/// none moves; at the background's slow rate alone (60 s) the band's tiles moved within
/// the first second and stayed moving. A block standing in the scene all that time still
/// moves at the end: it is far from the background, which takes it in only slowly.
#[test]
fn light_changing_unevenly_is_followed_and_a_standing_block_is_not() {
    let (w, h) = (160, 128);
    let wobble = noise(w * h, 5);
    let base: Vec<u8> = (0..w * h)
        .map(|i| (90 + (i % w) % 40 + usize::from(wobble[i] % 5)) as u8)
        .collect();
    let block = |x: usize, y: usize| (96..128).contains(&x) && (64..96).contains(&y);
    // Frame n: the band (the top two rows of tiles) brighter by n / 10 levels, the block
    // there from frame 1 on.
    let frame = |n: usize| -> Vec<u8> {
        (0..w * h)
            .map(|i| {
                let (x, y) = (i % w, i / w);
                if n > 0 && block(x, y) {
                    30
                } else if y < 32 {
                    base[i] + (n / 10) as u8
                } else {
                    base[i]
                }
            })
            .collect()
    };
    let band = |mask: &[u8]| mask[..2 * w / 16].iter().filter(|&&m| m == 1).count();
    let (slow, still) = (
        motion::control::follow_rate(1.0 / 30.0, 60.0),
        motion::control::follow_rate(1.0 / 30.0, motion::control::STILL_FOLLOW_SECONDS),
    );
    let t = 2 * 256;
    for (still_rate, band_moving_at_end) in [(still, 0), (slow, 20)] {
        let mut background = reference::Background::new(w, h);
        reference::tiles(&frame(0), w, h, &mut background, 65536, 65536, t);
        let mut most = 0;
        let mut last = None;
        for n in 1..=120 {
            let got = reference::tiles(&frame(n), w, h, &mut background, slow, still_rate, t);
            most = most.max(band(&got.mask));
            last = Some(got);
        }
        let last = last.expect("frames");
        assert_eq!(
            band(&last.mask),
            band_moving_at_end,
            "still rate {still_rate}"
        );
        if still_rate == still {
            assert_eq!(most, 0, "the band moved at some frame");
        }
        // The block's four tiles (x 96..128, y 64..96) move still.
        let moving: Vec<(usize, usize)> = (0..last.mask.len())
            .filter(|&i| last.mask[i] == 1 && i >= 2 * w / 16)
            .map(|i| (i % (w / 16), i / (w / 16)))
            .collect();
        assert_eq!(
            moving,
            [(6, 4), (7, 4), (6, 5), (7, 5)],
            "still rate {still_rate}"
        );
    }
}

/// motion.cl counts into the bins the host reads: built without the host's count it is
/// refused, naming it.
#[test]
fn motion_cl_takes_its_bins_from_the_host() {
    let gpu = gpu();
    let err = gpu
        .build_with(crate::cl::INTEGRAL_MOTION_REGIONS_CL, "")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("DIFF_BINS is given by the host (-DDIFF_BINS=...)"),
        "{err}"
    );
    assert_eq!(motion_tiles::defines(), "-DDIFF_BINS=64");
}
