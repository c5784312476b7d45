//! The status page at `/` and the data its script keeps it current with (`/status.json`).
//!
//! Both come from one model, [`Page`]: a summary line and a tile per camera with a health
//! badge, why it is down (when it is), and its numbers as rows of text, each row keyed.
//! The HTML shows the model as it is when the page is asked for (readable without
//! JavaScript, refreshed by a `<noscript>` meta refresh); `/status.json` carries the same
//! rows' text by key, which the script writes in place. What the rows are (their keys, the
//! cameras, whether pictures are shown) is the page's layout, hashed into `layout`: when
//! it changes (a camera comes up, a reload adds a region) the script fetches the page
//! again and swaps its tiles, so the text is formatted in one place, here.

mod badge;
mod html;

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use serde::Serialize;

use badge::{down_badge, health_badge};
pub(crate) use html::{html, ASSETS};

use super::view::CameraView;
use crate::mailbox::{CameraState, Latest};
use edgesight_core::health::{HealthReport, State};
use edgesight_core::pipeline::MotionState;

/// One line of a tile: a label and its value's text, and a class that colours it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Row {
    pub key: String,
    pub label: String,
    pub value: String,
    /// `ok`, `learning`, `suspect`, `tampered`, `down` or empty.
    pub class: &'static str,
}

pub(crate) struct Group {
    pub title: &'static str,
    /// Shown folded (a click opens it): the detail behind the badge and the totals, which
    /// would make a phone's page three screens a camera.
    pub folded: bool,
    pub rows: Vec<Row>,
}

/// A region drawn over the luma picture, in frame coordinates.
pub(crate) struct RegionBox {
    pub name: String,
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
}

/// The pictures of a camera that is up, with snapshots on.
pub(crate) struct TilePictures {
    pub width: u32,
    pub height: u32,
    pub regions: Vec<RegionBox>,
}

pub(crate) struct Tile {
    pub name: String,
    /// Key `badge`: the state a person looks for first.
    pub badge: Row,
    /// Key `reason`: why the camera is down (empty while it is up).
    pub reason: Row,
    /// The newest frame's sequence number (none before the first).
    pub sequence: Option<u64>,
    pub pictures: Option<TilePictures>,
    pub groups: Vec<Group>,
}

impl Tile {
    fn rows(&self) -> impl Iterator<Item = &Row> {
        [&self.badge, &self.reason]
            .into_iter()
            .chain(self.groups.iter().flat_map(|g| &g.rows))
    }
}

/// The summary's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Counts {
    pub cameras: usize,
    pub up: usize,
    pub down: usize,
    pub tampered: usize,
}

impl Counts {
    pub fn text(&self) -> String {
        let s = if self.cameras == 1 { "" } else { "s" };
        format!(
            "{} camera{s}: {} up, {} down, {} tampered",
            self.cameras, self.up, self.down, self.tampered
        )
    }

    /// `ok` when every camera is up and untampered, else `tampered` (coloured as alarms are).
    pub fn class(&self) -> &'static str {
        if self.down + self.tampered == 0 {
            "ok"
        } else {
            "tampered"
        }
    }
}

pub(crate) struct Page {
    pub counts: Counts,
    pub tiles: Vec<Tile>,
    /// Whether pictures are served at all (`[web] snapshots`).
    pub snapshots: bool,
}

impl Page {
    /// The page as the cameras are now; a camera with no frame within `stale_after` is down.
    pub fn new(cameras: &[CameraView], snapshots: bool, stale_after: Duration) -> Page {
        let tiles: Vec<Tile> = cameras
            .iter()
            .map(|c| {
                let (state, since) = c.status();
                tile(
                    &c.name,
                    &state,
                    since,
                    c.latest().as_deref(),
                    snapshots,
                    stale_after,
                )
            })
            .collect();
        let mut counts = Counts {
            cameras: tiles.len(),
            ..Counts::default()
        };
        for t in &tiles {
            match t.badge.class {
                "down" => counts.down += 1,
                "tampered" => {
                    counts.up += 1;
                    counts.tampered += 1
                }
                _ => counts.up += 1,
            }
        }
        Page {
            counts,
            tiles,
            snapshots,
        }
    }

    /// A hash of what the rows are, not what they say: the cameras, each one's keys and
    /// labels, and its pictures' frame size and regions.
    pub fn layout(&self) -> String {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.snapshots.hash(&mut h);
        for t in &self.tiles {
            t.name.hash(&mut h);
            for r in t.rows() {
                (&r.key, &r.label).hash(&mut h);
            }
            if let Some(p) = &t.pictures {
                (p.width, p.height).hash(&mut h);
                for r in &p.regions {
                    (&r.name, r.x, r.y, r.width, r.height).hash(&mut h);
                }
            }
        }
        format!("{:016x}", h.finish())
    }

    /// `/status.json`: the layout, the summary, and each camera's rows as key -> [text, class].
    pub fn json(&self) -> serde_json::Result<Vec<u8>> {
        #[derive(Serialize)]
        struct CameraJson<'a> {
            name: &'a str,
            sequence: Option<u64>,
            values: BTreeMap<&'a str, (&'a str, &'static str)>,
        }
        #[derive(Serialize)]
        struct PageJson<'a> {
            layout: String,
            summary: String,
            summary_class: &'static str,
            counts: Counts,
            cameras: Vec<CameraJson<'a>>,
        }
        let cameras = self
            .tiles
            .iter()
            .map(|t| CameraJson {
                name: &t.name,
                sequence: t.sequence,
                values: t
                    .rows()
                    .map(|r| (r.key.as_str(), (r.value.as_str(), r.class)))
                    .collect(),
            })
            .collect();
        serde_json::to_vec(&PageJson {
            layout: self.layout(),
            summary: self.counts.text(),
            summary_class: self.counts.class(),
            counts: self.counts,
            cameras,
        })
    }
}

fn row(key: impl Into<String>, label: impl Into<String>, value: impl Into<String>) -> Row {
    Row {
        key: key.into(),
        label: label.into(),
        value: value.into(),
        class: "",
    }
}

fn percent(share: f64) -> String {
    format!("{:.1} %", 100.0 * share)
}

/// Seconds as a person reads them: `0.4 s`, `12 s`, `3 min 20 s`, `2 h 5 min`.
fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0);
    if s < 10.0 {
        format!("{s:.1} s")
    } else if s < 60.0 {
        format!("{s:.0} s")
    } else if s < 3600.0 {
        format!("{} min {} s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else {
        format!(
            "{} h {} min",
            (s / 3600.0) as u64,
            ((s % 3600.0) / 60.0) as u64
        )
    }
}

fn tile(
    name: &str,
    state: &CameraState,
    since: Duration,
    latest: Option<&Latest>,
    snapshots: bool,
    stale_after: Duration,
) -> Tile {
    let age = latest.map(|l| l.published.elapsed());
    let up = *state == CameraState::Up && age.is_some_and(|a| a <= stale_after);
    let (badge, reason) = if up {
        (
            health_badge(latest.and_then(|l| l.health.as_ref())),
            String::new(),
        )
    } else {
        down_badge(state, since, age)
    };
    let mut groups = Vec::new();
    if let Some(l) = latest {
        groups.push(frames(l, age.unwrap_or_default()));
        groups.push(picture(l));
        if l.motion.state != MotionState::Off.name() {
            groups.push(motion(l));
        }
        if let Some(h) = &l.health {
            groups.push(health(h));
        }
        if !l.result.regions.is_empty() {
            groups.push(regions(l));
        }
        groups.push(stages(l));
    }
    let pictures = match latest {
        Some(l) if up && snapshots => Some(TilePictures {
            width: l.result.width,
            height: l.result.height,
            regions: l
                .result
                .regions
                .iter()
                .map(|(r, _)| RegionBox {
                    name: r.name.clone(),
                    x: r.x,
                    y: r.y,
                    width: r.width,
                    height: r.height,
                })
                .collect(),
        }),
        _ => None,
    };
    Tile {
        name: name.to_string(),
        badge,
        reason: Row {
            class: if reason.is_empty() { "" } else { "down" },
            ..row("reason", "why", reason)
        },
        sequence: latest.map(|l| l.sequence),
        pictures,
        groups,
    }
}

fn frames(l: &Latest, age: Duration) -> Group {
    let r = &l.result;
    let a = &l.activity;
    let mut rows = vec![
        row(
            "frame",
            "frame",
            format!(
                "{} ({}x{} {})",
                l.sequence, r.width, r.height, l.source.format
            ),
        ),
        row("age", "age", duration(age.as_secs_f64())),
        row("fps", "frame rate", format!("{:.1} fps", a.fps)),
        row("dropped", "dropped", a.dropped_total().to_string()),
    ];
    // Only the reasons that happened: seven rows of zeros would hide the one that matters.
    for (reason, n) in a.dropped_by_reason().filter(|(_, n)| *n > 0) {
        rows.push(row(
            format!("dropped.{reason}"),
            format!("dropped: {}", reason.replace('_', " ")),
            n.to_string(),
        ));
    }
    Group {
        title: "frames",
        folded: false,
        rows,
    }
}

fn picture(l: &Latest) -> Group {
    let r = &l.result;
    Group {
        title: "picture",
        folded: false,
        rows: vec![
            row("mean", "mean luma", format!("{:.1}", r.frame.mean())),
            row("otsu", "Otsu threshold", r.otsu_threshold.to_string()),
            row("edges", "edges", percent(r.frame.edge_ratio())),
            row(
                "foreground",
                "foreground",
                percent(r.frame.foreground_ratio()),
            ),
        ],
    }
}

fn health(h: &HealthReport) -> Group {
    let share =
        |v: Option<f64>| v.map_or("learning".to_string(), |v| format!("{:.0} %", 100.0 * v));
    let mut rows: Vec<Row> = h
        .kinds
        .iter()
        .map(|(kind, state)| Row {
            class: match state {
                State::Ok => "ok",
                State::Suspect => "suspect",
                State::Tampered => "tampered",
            },
            ..row(format!("health.{}", kind.name()), kind.name(), state.name())
        })
        .collect();
    rows.extend([
        row("sharpness", "sharpness", share(h.sharpness)),
        row("scene_change", "scene change", share(h.scene_change)),
        row("light", "light vs learned", share(h.mean_luma_ratio)),
        row(
            "clipped",
            "clipped dark / bright",
            format!(
                "{} / {}",
                percent(h.clipped_dark),
                percent(h.clipped_bright)
            ),
        ),
        row("unchanged", "unchanged for", duration(h.unchanged_seconds)),
    ]);
    Group {
        title: "health detectors",
        folded: true,
        rows,
    }
}

/// The whole frame's motion; each region's is on its row.
fn motion(l: &Latest) -> Group {
    let m = &l.motion;
    let watching = m.state == MotionState::Watching.name();
    let threshold = format!(
        "{:.1} (noise {:.2}), light x{:.2}",
        m.threshold, m.noise, m.gain
    );
    Group {
        title: "motion",
        folded: false,
        rows: vec![
            row("motion", "motion", m.state.replace('_', " ")),
            Row {
                class: if watching && m.ratio > 0.0 {
                    "moving"
                } else {
                    ""
                },
                ..row("motion.ratio", "moving", percent(m.ratio))
            },
            row("motion.threshold", "threshold", threshold),
        ],
    }
}

fn regions(l: &Latest) -> Group {
    let motion = &l.motion.regions;
    Group {
        title: "regions",
        folded: false,
        rows: l
            .result
            .regions
            .iter()
            .enumerate()
            .map(|(i, (region, s))| {
                let moving = motion
                    .get(i)
                    .filter(|_| l.motion.state != MotionState::Off.name());
                let activity = moving.map_or(String::new(), |m| {
                    let events = if m.events == 1 { "event" } else { "events" };
                    format!(", motion {} ({} {events})", percent(m.ratio), m.events)
                });
                Row {
                    class: if moving.is_some_and(|m| m.active) {
                        "moving"
                    } else {
                        ""
                    },
                    ..row(
                        format!("roi.{i}"),
                        region.name.clone(),
                        format!(
                            "mean {:.1}, edges {}, foreground {}{activity}",
                            s.mean(),
                            percent(s.edge_ratio()),
                            percent(s.foreground_ratio())
                        ),
                    )
                }
            })
            .collect(),
    }
}

fn stages(l: &Latest) -> Group {
    let t = &l.result.timings;
    let rows = t
        .iter()
        .map(|(s, ns)| (s.name(), ns))
        .chain([("total", t.total())])
        .map(|(stage, ns)| {
            row(
                format!("stage.{stage}"),
                stage,
                format!("{:.3} ms", ns as f64 / 1e6),
            )
        })
        .collect();
    Group {
        title: "device time per stage",
        folded: true,
        rows,
    }
}

#[cfg(test)]
mod tests;
