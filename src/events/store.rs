//! `[events] dir`: each event's JSON and picture kept as files, `<dir>/<camera>/<stem>.json`
//! and `.jpg`, the stem being the event's start and kind (`20261129T194001.250Z-motion-lane`),
//! so that names sort as the events began. The JSON is written when the event begins and
//! again when it ends. Each camera keeps its newest `max_files` events and none older than
//! `max_age`, enforced at start and as events arrive.
//!
//! Files are written on a thread of their own, in the order asked, so that a slow disk
//! holds up neither the events nor a camera; a write that fails is logged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use edgesight_frame::files;

/// Events kept per camera, and for how long, unless `[events]` says otherwise: a month of
/// a busy camera's events at a picture of about 50 kB each is 50 MB.
pub const DEFAULT_MAX_FILES: usize = 1000;
pub const DEFAULT_MAX_AGE_DAYS: u64 = 30;

/// `[events]`, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventsSettings {
    pub dir: PathBuf,
    /// Events (a JSON and its picture) kept per camera.
    pub max_files: usize,
    pub max_age: Duration,
}

/// What the writer thread is asked to do.
pub(super) enum Job {
    Json {
        camera: String,
        stem: String,
        json: String,
    },
    Picture {
        camera: String,
        stems: Vec<String>,
        jpeg: Vec<u8>,
    },
}

/// Starts the writer thread, which first prunes what an earlier run left.
pub(super) fn start(settings: EventsSettings) -> mpsc::Sender<Job> {
    let (tx, rx) = mpsc::channel::<Job>();
    let spawned = std::thread::Builder::new()
        .name("es-events".into())
        .spawn(move || {
            if let Ok(cameras) = std::fs::read_dir(&settings.dir) {
                for camera in cameras.flatten() {
                    prune(&camera.path(), &settings, SystemTime::now());
                }
            }
            for job in rx {
                let (camera, written) = match job {
                    Job::Json { camera, stem, json } => {
                        let w = write(
                            &settings.dir,
                            &camera,
                            &format!("{stem}.json"),
                            json.as_bytes(),
                        );
                        (camera, w)
                    }
                    Job::Picture {
                        camera,
                        stems,
                        jpeg,
                    } => {
                        let w = stems.iter().try_for_each(|stem| {
                            write(&settings.dir, &camera, &format!("{stem}.jpg"), &jpeg)
                        });
                        (camera, w)
                    }
                };
                if let Err(e) = written {
                    tracing::warn!("[events] dir: {e}");
                }
                prune(
                    &settings.dir.join(file_name(&camera)),
                    &settings,
                    SystemTime::now(),
                );
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("[events] dir: cannot start its writer: {e}");
    }
    tx
}

/// A camera's or a region's name as a file name takes it: no separators, no leading dot.
pub(super) fn file_name(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe.starts_with('.') {
        format!("_{safe}")
    } else {
        safe
    }
}

fn write(dir: &Path, camera: &str, name: &str, bytes: &[u8]) -> Result<(), String> {
    let dir = dir.join(file_name(camera));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    files::write_file(&dir.join(name), bytes).map_err(|e| e.to_string())
}

/// Removes the events of `camera_dir` beyond the newest `max_files` and those older than
/// `max_age` (by the time their newest file was written).
fn prune(camera_dir: &Path, settings: &EventsSettings, now: SystemTime) {
    let Ok(entries) = std::fs::read_dir(camera_dir) else {
        return;
    };
    // By stem, in the order the events began: each event's files and when last written.
    let mut events: BTreeMap<String, (Vec<PathBuf>, SystemTime)> = BTreeMap::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("json" | "jpg")
        );
        let (Some(stem), true) = (path.file_stem().and_then(|s| s.to_str()), ours) else {
            continue;
        };
        let modified = entry.metadata().and_then(|m| m.modified()).unwrap_or(now);
        let event = events
            .entry(stem.to_string())
            .or_insert((Vec::new(), modified));
        event.1 = event.1.max(modified);
        event.0.push(path);
    }
    let beyond = events.len().saturating_sub(settings.max_files);
    for (i, (_, (paths, modified))) in events.iter().enumerate() {
        let old = now.duration_since(*modified).unwrap_or_default() > settings.max_age;
        if i < beyond || old {
            for path in paths {
                if let Err(e) = std::fs::remove_file(path) {
                    tracing::warn!("[events] dir: {}: {e}", path.display());
                }
            }
        }
    }
}

/// The stem of an event's files: its start (RFC 3339 without the colons a file name
/// may not take everywhere) and its kind and region.
pub(super) fn stem(started: &str, kind: &str, region: Option<&str>) -> String {
    let time = started.replace([':', '-'], "");
    match region {
        Some(r) => format!("{time}-{kind}-{}", file_name(r)),
        None => format!("{time}-{kind}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(dir: &Path, max_files: usize, days: u64) -> EventsSettings {
        EventsSettings {
            dir: dir.to_path_buf(),
            max_files,
            max_age: Duration::from_secs(days * 86_400),
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn stems_sort_as_the_events_began_and_take_no_separator() {
        assert_eq!(
            stem("2026-11-29T19:40:01.250Z", "motion", Some("lane/../x")),
            "20261129T194001.250Z-motion-lane_.._x"
        );
        assert_eq!(file_name(".."), "_..");
        assert_eq!(
            stem("2026-11-29T19:40:01.250Z", "tamper_frozen", None),
            "20261129T194001.250Z-tamper_frozen"
        );
    }

    #[test]
    fn the_newest_events_are_kept_and_the_old_ones_go() {
        let dir = std::env::temp_dir().join(format!("es-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cam = dir.join("front");
        std::fs::create_dir_all(&cam).unwrap();
        for stem in [
            "20260101T000001.000Z-motion-a",
            "20260101T000002.000Z-motion-a",
            "20260101T000003.000Z-camera_back",
        ] {
            std::fs::write(cam.join(format!("{stem}.json")), "{}").unwrap();
            std::fs::write(cam.join(format!("{stem}.jpg")), "j").unwrap();
        }
        std::fs::write(cam.join("notes.txt"), "not ours").unwrap();
        let now = SystemTime::now();
        prune(&cam, &settings(&dir, 2, 30), now);
        assert_eq!(
            names(&cam),
            [
                "20260101T000002.000Z-motion-a.jpg",
                "20260101T000002.000Z-motion-a.json",
                "20260101T000003.000Z-camera_back.jpg",
                "20260101T000003.000Z-camera_back.json",
                "notes.txt",
            ]
        );
        // Two days on, with a day's limit: every event is too old.
        prune(
            &cam,
            &settings(&dir, 2, 1),
            now + Duration::from_secs(2 * 86_400),
        );
        assert_eq!(names(&cam), ["notes.txt"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
