//! Fuzz target `daemon`: scripts of reloads, hostile file names and slow or greedy
//! clients played against one running `edgesight run` (the real binary, started once).
//!
//! Three cameras: `a` a 320x240 test pattern, `b` a replay directory of 64x48 images that
//! the script can spoil (every image garbage: the camera fails and waits to restart) and
//! salt with files whose names carry newlines, carriage returns, escape codes and forged
//! syslog priorities, and `m` an MJPEG recording the script rewrites into the shapes that
//! once crashed or fooled a replay (resilience round 3). Each byte of an input is one step (letters are named below, any
//! other byte picks a step other than `b` by its value; a step that takes an argument eats
//! the next byte):
//!
//! | byte | step |
//! |------|------|
//! | `w`  | a valid change (regions, edge threshold, health on or off, per camera), SIGHUP |
//! | `x`  | an invalid config (its kind from the argument), SIGHUP |
//! | `d`  | a valid change and two SIGHUPs at once |
//! | `r`  | a client pipelining 1-64 requests (metrics, a snapshot, the latest frame, the status page) and reading nothing |
//! | `h`  | a client sending half a request head and nothing more |
//! | `k`  | every held client reads a little |
//! | `c`  | 1-64 connections opened and closed at once |
//! | `z`  | every held client gone, half of them with a reset |
//! | `p`  | a snapshot as a user asks for it |
//! | `f`  | an image in `b`'s directory under a hostile name, good or garbage |
//! | `b`  | `b`'s images spoiled, or healed when spoiled |
//! | `s`  | 1-8 connections from each of four peers (the scraper's too, by the argument) sending one byte of a head and nothing more |
//! | `m`  | `m`'s recording rewritten (by the argument): good, tiny images after good ones, a damaged header before a long tail, cut in place, frames of too many scans, grown |
//! | `a`  | 4-12 kept-alive connections from each of four peers other than the scraper's asking a cheap answer (a 404, `b`'s snapshot, a 404 of the API) over and over, while the scraper scrapes |
//!
//! Invariants, after every step: the daemon runs, and a scrape from its own address is
//! answered whole (200, the families in) at the first try within 5 s, whatever the held
//! clients do (four peers at their share of the slots with heads just begun or answers in
//! flight included); a snapshot is a PNG or a 503 with Retry-After; a rewritten recording
//! is noticed (a new file or a cut one is indexed again, and says so) and logged a few
//! lines at most, not a line a frame. After every script (each
//! ends with a reload of the last valid config): every camera that delivers frames runs
//! that config (regions, threshold, health on or off, as `/api/v1/latest` shows them); the
//! failure count of `edgesight_config_reloads_total` moved only for scripts that wrote an
//! invalid config; every log line is one line with its timestamp (no forged line); RSS
//! stays under 384 MiB (the unit allows 512), threads under the unit's 64, and open files
//! come back to what they were. At the end, SIGTERM with slow clients held ends the daemon
//! with status 0 within the unit's stop timeout.
//!
//! Over 500 lines as one room: one target of the `fuzz` binary (the others have a file
//! each), one daemon started once and held for every script, and the steps, the script
//! that plays them and the invariants checked between them share that daemon's state
//! (`Run`: held clients, the last valid config, spoiled images); split, each part would
//! take all of it.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::common::daemon::{
    connect_from, exchange, keep_alive_get, proc_status, sample, textured_pgm, tmp_dir, Daemon,
};
use super::common::Rng;
use super::fuzz;

/// The scraper's address; the script's clients come from three others, so that the
/// scraper always finds its share of the slots (a quarter each).
const SCRAPER: &str = "127.0.0.2";
const CLIENTS: [&str; 3] = ["127.0.0.3", "127.0.0.4", "127.0.0.5"];
const CHURN: &str = "127.0.0.6";
const MAX_CONNECTIONS: usize = 32;
/// A script's steps beyond this are not played: each costs up to a few seconds.
const MAX_STEPS: usize = 24;
const ANSWER_WITHIN: Duration = Duration::from_secs(5);
const RSS_LIMIT_KIB: u64 = 384 * 1024;
const TASKS_MAX: usize = 64;
/// The unit's `TimeoutStopSec`.
const STOP_WITHIN: Duration = Duration::from_secs(10);
/// Log lines naming `m`'s recording that one rewrite may cause (indexed again, failed,
/// reopened); a line a frame would be ten in the time the check waits.
const RECORDING_LINES: usize = 4;

/// What one camera runs, as `/api/v1/latest` shows it.
#[derive(Clone, Debug, PartialEq)]
struct CameraConfig {
    rois: Vec<(String, u32, u32, u32, u32)>,
    edge_threshold: u8,
    health: bool,
}

struct Camera {
    name: &'static str,
    width: u32,
    height: u32,
}

const CAMERAS: [Camera; 2] = [
    Camera {
        name: "a",
        width: 320,
        height: 240,
    },
    Camera {
        name: "b",
        width: 64,
        height: 48,
    },
];

struct Run {
    daemon: Daemon,
    dir: PathBuf,
    images: PathBuf,
    /// The last valid config written, per camera.
    valid: [CameraConfig; 2],
    /// `b`'s images are garbage now.
    spoiled: bool,
    /// When `b`'s images were last made good again.
    healed_at: Option<Instant>,
    /// Files with hostile names written into `b`'s directory.
    salted: Vec<PathBuf>,
    /// Clients held open by the script, reading nothing (or little).
    held: Vec<TcpStream>,
    /// The open files of the daemon after the first script, with no client held.
    base_fds: Option<usize>,
    /// `m`'s MJPEG recording.
    recording: PathBuf,
}

/// The daemon and the script's state, made by the first script; `None` once the last
/// test step stopped the daemon.
fn run() -> std::sync::MutexGuard<'static, Option<Run>> {
    static RUN: OnceLock<Mutex<Option<Run>>> = OnceLock::new();
    RUN.get_or_init(|| {
        let dir = tmp_dir("fuzz-daemon");
        let images = dir.join("images");
        std::fs::create_dir_all(&images).expect("mkdir");
        heal(&images);
        let recording = dir.join("clip.mjpeg");
        std::fs::write(&recording, good_recording(8)).expect("write the recording");
        let valid = [
            CameraConfig {
                rois: vec![("door".into(), 10, 20, 100, 80)],
                edge_threshold: 64,
                health: true,
            },
            CameraConfig {
                rois: vec![("desk".into(), 0, 0, 32, 24)],
                edge_threshold: 40,
                health: false,
            },
        ];
        let daemon = Daemon::start(&dir, &config_text(&dir, &valid, None));
        Mutex::new(Some(Run {
            daemon,
            dir,
            images,
            valid,
            spoiled: false,
            healed_at: None,
            salted: Vec::new(),
            held: Vec::new(),
            base_fds: None,
            recording,
        }))
    })
    .lock()
    .unwrap_or_else(|p| p.into_inner())
}

/// The config file of the run in `dir`: `a` and `b` as `cameras` says, or with the flaw
/// `invalid` names, and `m`.
fn config_text(dir: &Path, cameras: &[CameraConfig; 2], invalid: Option<u8>) -> String {
    let images = dir.join("images");
    let mut s = format!(
        "[web]\nsnapshots = true\nstale_after_seconds = 5\nmax_connections = {MAX_CONNECTIONS}\n"
    );
    for (i, (camera, c)) in CAMERAS.iter().zip(cameras).enumerate() {
        s += &format!("[[camera]]\nname = \"{}\"\n[camera.source]\n", camera.name);
        if i == 0 {
            s += &format!(
                "kind = \"pattern\"\nsize = \"{}x{}\"\nfps = 30\n",
                camera.width, camera.height
            );
        } else {
            s += &format!(
                "kind = \"replay\"\npath = \"{}\"\nfps = 20\n",
                images.display()
            );
        }
        let threshold = match invalid {
            Some(0) if i == 0 => "300".to_string(),
            _ => c.edge_threshold.to_string(),
        };
        s += &format!("[camera.pipeline]\nedge_threshold = {threshold}\n");
        s += &format!("[camera.health]\nenabled = {}\n", c.health);
        if invalid == Some(1) && i == 1 {
            s += "clipped_ratio = 0\n";
        }
        for (name, x, y, w, h) in &c.rois {
            s +=
                &format!("[[camera.roi]]\nname = \"{name}\"\nx = {x}\ny = {y}\nw = {w}\nh = {h}\n");
        }
        match invalid {
            Some(2) if i == 0 => {
                s += "[[camera.roi]]\nname = \"twice\"\nx = 0\ny = 0\nw = 1\nh = 1\n";
                s += "[[camera.roi]]\nname = \"twice\"\nx = 1\ny = 1\nw = 1\nh = 1\n";
            }
            Some(3) if i == 1 => {
                s += "[[camera.roi]]\nname = \"empty\"\nx = 0\ny = 0\nw = 0\nh = 4\n"
            }
            _ => {}
        }
    }
    s += &format!(
        "[[camera]]\nname = \"m\"\n[camera.source]\nkind = \"replay\"\npath = \"{}\"\nfps = 20\n",
        dir.join("clip.mjpeg").display()
    );
    if invalid.is_some_and(|k| k >= 4) {
        s += "[camera.pipeline\nedge_threshold = 1\n";
    }
    s
}

/// A corpus image of the `inputs` target.
fn corpus_image(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus/inputs")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `frames` good 33x17 JPEG images back to back.
fn good_recording(frames: usize) -> Vec<u8> {
    corpus_image("baseline-grey-33x17.jpg").repeat(frames)
}

/// Rewrites `m`'s recording into the shape `arg` picks (replaced by a rename, cut or grown
/// in place), the shapes of resilience round 3's findings at test size. Each begins with
/// good frames, so that `m` plays on through any script, and a cut leaves two of them:
/// a camera waiting to restart would hide what the next shapes do.
/// Returns whether the daemon is to notice the change (a new file, or one cut shorter).
fn reshape_recording(path: &Path, arg: u8) -> bool {
    let image = corpus_image("baseline-grey-33x17.jpg").len() as u64;
    let replace = |bytes: Vec<u8>| {
        let new = path.with_extension("new");
        std::fs::write(&new, bytes).expect("write a recording");
        std::fs::rename(&new, path).expect("rename the recording");
    };
    match arg % 6 {
        0 => replace(good_recording(8)),
        // Images that cannot be frames, a few bytes each, after the good ones.
        1 => {
            let mut bytes = good_recording(2);
            bytes.extend([0xff, 0xd8, 0xff, 0xd9].repeat(64 * 1024));
            replace(bytes)
        }
        // A damaged header before a long tail: the good frames play.
        2 => {
            let mut bytes = good_recording(4);
            bytes.extend_from_slice(&[0xff, 0xd8, 0xff, 0xc0, 0x00, 0x02]);
            bytes.extend(std::iter::repeat_n(0x5a, 1 << 20));
            replace(bytes)
        }
        // Cut in place, inside an image.
        3 => {
            let len = std::fs::metadata(path).map_or(0, |m| m.len());
            let cut = (len / 2).max(image * 5 / 2);
            if cut >= len {
                return false;
            }
            let file = std::fs::OpenOptions::new().write(true).open(path);
            file.and_then(|f| f.set_len(cut))
                .expect("cut the recording");
        }
        // Frames of more scans than an image may have, between good ones.
        4 => {
            let mut bytes = good_recording(2);
            bytes.extend(corpus_image("progressive-100-scans-48x32.jpg").repeat(2));
            bytes.extend(good_recording(2));
            replace(bytes)
        }
        _ => {
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(path)
                .expect("open the recording");
            file.write_all(&good_recording(4))
                .expect("grow the recording");
            return false;
        }
    }
    true
}

/// A valid change of `c`, drawn from `seed`.
fn changed(c: &CameraConfig, camera: &Camera, seed: u8, step: usize) -> CameraConfig {
    let mut rng = Rng(u64::from(seed) << 8 | (step as u64 + 1));
    let rois = (0..rng.below(4))
        .map(|i| {
            let x = rng.below(u64::from(camera.width)) as u32;
            let y = rng.below(u64::from(camera.height)) as u32;
            let w = 1 + rng.below(u64::from(camera.width - x)) as u32;
            let h = 1 + rng.below(u64::from(camera.height - y)) as u32;
            (format!("r{i}_{seed}"), x, y, w, h)
        })
        .collect();
    CameraConfig {
        rois,
        edge_threshold: if seed & 1 == 0 {
            c.edge_threshold
        } else {
            rng.below(256) as u8
        },
        health: if seed & 2 == 0 { c.health } else { !c.health },
    }
}

fn heal(images: &Path) {
    std::fs::write(images.join("one.pgm"), textured_pgm(64, 48)).expect("write");
    std::fs::write(images.join("two.pgm"), textured_pgm(64, 48)).expect("write");
}

fn spoil(run: &Run) {
    for name in ["one.pgm", "two.pgm"] {
        std::fs::write(run.images.join(name), b"P5\n64 48\n255\nshort").expect("write");
    }
    for path in &run.salted {
        let _ = std::fs::write(path, b"not an image");
    }
}

/// A file name with what a log line must not carry raw, drawn from `seed`.
fn hostile_name(seed: u8, step: usize) -> String {
    const PARTS: [&str; 8] = [
        "\n<3>edgesight: camera 'a' failed",
        "\r",
        "\x1b[2K",
        "\t",
        " ",
        "\"",
        "é",
        "\x7f",
    ];
    let mut rng = Rng(u64::from(seed) << 16 | step as u64 | 1);
    let mut name = format!("{seed:03}");
    for _ in 0..1 + rng.below(3) {
        name += PARTS[rng.below(PARTS.len() as u64) as usize];
    }
    name + ".pgm"
}

/// One scrape from the scraper's address: it must be answered whole, at once.
fn scrape(port: u16) -> Result<String, String> {
    let start = Instant::now();
    let s = connect_from(SCRAPER, port).map_err(|e| format!("scrape: connect: {e}"))?;
    let r = exchange(s, "GET", "/metrics", "", ANSWER_WITHIN)
        .map_err(|e| format!("scrape: no whole answer: {e}"))?;
    let text = String::from_utf8_lossy(&r.body).to_string();
    let length = r
        .headers
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    if r.status != 200 || !text.contains("edgesight_build_info") || length != Some(r.body.len()) {
        return Err(format!(
            "scrape: status {}, length {length:?} of {}: {:.300}",
            r.status,
            r.body.len(),
            text
        ));
    }
    if start.elapsed() > ANSWER_WITHIN {
        return Err(format!("scrape: answered after {:?}", start.elapsed()));
    }
    Ok(text)
}

fn reloads(metrics: &str, result: &str) -> f64 {
    sample(
        metrics,
        &format!("edgesight_config_reloads_total{{result=\"{result}\"}}"),
    )
    .unwrap_or(0.0)
}

fn camera_restarts(metrics: &str) -> f64 {
    sample(metrics, r#"edgesight_camera_restarts_total{camera="b"}"#).unwrap_or(0.0)
}

fn reloads_total(metrics: &str) -> f64 {
    ["success", "partial", "failure"]
        .iter()
        .map(|r| reloads(metrics, r))
        .sum()
}

/// What camera `name` runs, from its latest frame, and when that frame was published (a
/// camera's sequence starts again at 0 when it is opened again: it cannot order frames).
fn running(port: u16, name: &str) -> Option<(Instant, CameraConfig)> {
    let s = connect_from(SCRAPER, port).ok()?;
    let r = exchange(
        s,
        "GET",
        &format!("/api/v1/latest?camera={name}"),
        "",
        ANSWER_WITHIN,
    )
    .ok()?;
    if r.status != 200 {
        return None;
    }
    let l: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
    let rois = l["rois"]
        .as_array()?
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap_or(u64::MAX) as u32;
            (
                r["name"].as_str().unwrap_or_default().to_string(),
                n("x"),
                n("y"),
                n("w"),
                n("h"),
            )
        })
        .collect();
    let published =
        Instant::now().checked_sub(Duration::from_secs_f64(l["age_seconds"].as_f64()?))?;
    Some((
        published,
        CameraConfig {
            rois,
            edge_threshold: l["options"]["edge_threshold"].as_u64()? as u8,
            health: !l["health"].is_null(),
        },
    ))
}

/// Waits until camera `i` shows `want` on a frame published after `after`.
fn converges(port: u16, i: usize, want: &CameraConfig, after: Instant) -> Result<(), String> {
    let name = CAMERAS[i].name;
    let start = Instant::now();
    let mut last = None;
    while start.elapsed() < Duration::from_secs(20) {
        if let Some((published, got)) = running(port, name) {
            if published > after && got == *want {
                return Ok(());
            }
            last = Some((published.checked_duration_since(after), got));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!(
        "camera {name} never ran the last valid config:\n  want {want:?}\n  last frame \
         (published how long after the reload, and its config) {last:?}"
    ))
}

/// Camera `i` delivers frames now: its latest is under a second old, and for `b` (not
/// spoiled now) published after its images were last healed, so not a frame from
/// before a failure it still waits to restart from.
fn delivers(port: u16, i: usize, run: &Run) -> bool {
    let since_heal = |published: Instant| run.healed_at.is_none_or(|healed| published > healed);
    running(port, CAMERAS[i].name).is_some_and(|(published, _)| {
        published.elapsed() < Duration::from_secs(1)
            && (i == 0 || (!run.spoiled && since_heal(published)))
    })
}

fn snapshot(port: u16, arg: u8) -> Result<(), String> {
    let kind = ["luma", "edges", "mask", "histogram"][usize::from(arg % 4)];
    let camera = CAMERAS[usize::from(arg / 4 % 2)].name;
    let path = format!("/snapshot/{kind}.png?camera={camera}");
    let s = connect_from(SCRAPER, port).map_err(|e| format!("{path}: connect: {e}"))?;
    let r = exchange(s, "GET", &path, "", ANSWER_WITHIN)
        .map_err(|e| format!("{path}: no whole answer: {e}"))?;
    match r.status {
        200 if r.body.starts_with(b"\x89PNG\r\n\x1a\n") => Ok(()),
        503 if r.headers.contains("retry-after:") => Ok(()),
        s => Err(format!("{path}: status {s} ({} bytes)", r.body.len())),
    }
}

/// Four peers that fill the slots, each to its share and beyond: the script's clients and
/// the churn's address, or the scraper's own instead of the churn's (behind NAT or a
/// proxy, every client shares the scraper's address) when the argument's top bit is set.
fn slot_peers(arg: u8) -> [&'static str; 4] {
    let fourth = if arg & 0x80 != 0 { SCRAPER } else { CHURN };
    [CLIENTS[0], CLIENTS[1], CLIENTS[2], fourth]
}

/// Kept-alive connections from four peers other than the scraper's asking a cheap answer
/// over and over, each opened anew when the daemon closes it; the scraper must be
/// answered while they do. (From the scraper's own address, a flood beyond its share that
/// reconnects at once can close the scraper's connection before its request is read:
/// the daemon cannot tell one from the other.)
fn cheap_answer_flood(port: u16, arg: u8) -> Result<(), String> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let path = [
        "/nope",
        "/snapshot/luma.png?camera=b",
        "/api/v1/latest?camera=none",
    ][usize::from(arg % 3)];
    let per_peer = 4 + usize::from(arg / 3 % 9);
    let stop = AtomicBool::new(false);
    let answers = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for from in slot_peers(0) {
            let (stop, answers) = (&stop, &answers);
            scope.spawn(move || {
                let mut conns: Vec<Option<TcpStream>> = (0..per_peer).map(|_| None).collect();
                while !stop.load(Ordering::Relaxed) {
                    for c in conns.iter_mut() {
                        if c.is_none() {
                            *c = connect_from(from, port).ok();
                        }
                        let Some(s) = c.as_mut() else { continue };
                        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                        match keep_alive_get(s, path) {
                            Ok(_) => {
                                answers.fetch_add(1, Ordering::Relaxed);
                            }
                            // Its slot taken back: that is the daemon's right.
                            Err(_) => *c = None,
                        }
                    }
                }
            });
        }
        let start = Instant::now();
        while answers.load(Ordering::Relaxed) < 8 * per_peer
            && start.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        let scraped = scrape(port).map_err(|e| format!("{path} flood, {per_peer} a peer: {e}"));
        stop.store(true, Ordering::Relaxed);
        scraped.map(|_| ())
    })
}

/// A client pipelining requests and reading none of the answers.
fn greedy_client(port: u16, arg: u8) -> Option<TcpStream> {
    let path = [
        "/metrics",
        "/snapshot/luma.png?camera=a",
        "/snapshot/edges.png?camera=b",
        "/api/v1/latest?camera=b",
        "/",
    ][usize::from(arg % 5)];
    let mut s = connect_from(CLIENTS[usize::from(arg % 3)], port).ok()?;
    let n = 1 + usize::from(arg / 4 % 64);
    let head = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").repeat(n);
    s.set_write_timeout(Some(Duration::from_millis(500))).ok()?;
    // The daemon may close it (a slot taken back): that is its right.
    let _ = s.write_all(head.as_bytes());
    Some(s)
}

fn drain_a_little(held: &mut [TcpStream]) {
    let mut buf = vec![0u8; 64 * 1024];
    for s in held {
        let _ = s.set_read_timeout(Some(Duration::from_millis(20)));
        let _ = s.read(&mut buf);
    }
}

fn close_all(held: &mut Vec<TcpStream>) {
    for (i, s) in held.drain(..).enumerate() {
        if i % 2 == 0 {
            // SO_LINGER 0: the close sends a reset.
            let linger = libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            // SAFETY: setsockopt on an open socket with a correctly sized linger struct.
            unsafe {
                libc::setsockopt(
                    std::os::fd::AsRawFd::as_raw_fd(&s),
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&raw const linger).cast(),
                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                );
            }
        } else {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Every line of the log is one event: a timestamp, a level, and no raw control bytes.
fn log_lines_are_whole(log: &str) -> Result<(), String> {
    for line in log.lines() {
        let stamped = line.len() > 20
            && line.as_bytes()[..4].iter().all(u8::is_ascii_digit)
            && line.as_bytes()[4] == b'-'
            && line.contains('T');
        let level = ["ERROR", "WARN", "INFO"].iter().any(|l| line.contains(l));
        if !stamped || !level || line.contains(['\r', '\x1b', '\x7f']) {
            return Err(format!("a log line that is not one whole event: {line:?}"));
        }
    }
    Ok(())
}

/// Replaces the config as an administrator's tools do, whole: a reload still reading the
/// file from an earlier SIGHUP must not see it half written, which it would rightly refuse
/// ("missing field") and count as a failed reload of a valid config.
fn write_config(dir: &Path, text: &str) {
    let part = dir.join(".edgesight.toml.part");
    std::fs::write(&part, text).expect("write the config");
    std::fs::rename(&part, dir.join("edgesight.toml")).expect("put the config in place");
}

/// Plays one script; returns its outcome (which steps it reached).
fn check(script: &[u8]) -> Result<String, String> {
    let mut guard = run();
    let run = guard.as_mut().ok_or("the daemon was stopped")?;
    let port = run.daemon.port;
    let pid = run.daemon.child.id();
    let before = scrape(port)?;
    let failures_before = reloads(&before, "failure");
    let script_start = Instant::now();
    let mut wrote_invalid = false;
    let mut steps = BTreeSet::new();

    // A camera that delivers frames runs the last valid config, even one that took it
    // while waiting to restart (with `b` spoiled by an earlier script).
    let now = Instant::now();
    for i in 0..CAMERAS.len() {
        if delivers(port, i, run) {
            converges(port, i, &run.valid[i], now)?;
        }
    }

    let mut bytes = script.iter().copied();
    let mut step = 0;
    while let Some(b) = bytes.next() {
        if step == MAX_STEPS {
            break;
        }
        step += 1;
        let op = match b {
            b'w' | b'x' | b'd' | b'r' | b'h' | b'k' | b'c' | b'z' | b'p' | b'f' | b'b' | b's'
            | b'a' | b'm' => b,
            // Spoiling `b` sets back its restarts by seconds: only as asked for by name.
            _ => b"wxdrhkczpf"[usize::from(b) % 10],
        };
        let mut arg = || bytes.next().unwrap_or(step as u8);
        match op {
            b'w' | b'd' => {
                let seed = arg();
                let which = usize::from(seed >> 2) % 3;
                for (i, camera) in CAMERAS.iter().enumerate() {
                    if which == 2 || which == i {
                        run.valid[i] = changed(&run.valid[i], camera, seed, step);
                    }
                }
                let text = config_text(&run.dir, &run.valid, None);
                write_config(&run.dir, &text);
                run.daemon.signal(libc::SIGHUP);
                if op == b'd' {
                    run.daemon.signal(libc::SIGHUP);
                }
            }
            b'x' => {
                let kind = arg() % 5;
                let text = config_text(&run.dir, &run.valid, Some(kind));
                write_config(&run.dir, &text);
                run.daemon.signal(libc::SIGHUP);
                wrote_invalid = true;
            }
            b'r' => {
                let a = arg();
                if let Some(s) = greedy_client(port, a) {
                    run.held.push(s);
                }
            }
            b'h' => {
                let a = arg();
                if let Ok(mut s) = connect_from(CLIENTS[usize::from(a % 3)], port) {
                    let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHo");
                    run.held.push(s);
                }
            }
            b'k' => drain_a_little(&mut run.held),
            b'c' => {
                for _ in 0..=arg() % 64 {
                    drop(connect_from(CHURN, port));
                }
            }
            b'z' => close_all(&mut run.held),
            b's' => {
                let a = arg();
                for from in slot_peers(a) {
                    for _ in 0..=a % 8 {
                        if let Ok(mut s) = connect_from(from, port) {
                            let _ = s.write_all(b"G");
                            run.held.push(s);
                        }
                    }
                }
                // Read by the daemon (heads begun, not idle) before the scrape.
                std::thread::sleep(Duration::from_millis(200));
            }
            b'a' => cheap_answer_flood(port, arg())?,
            b'm' => {
                let shape = arg();
                let log = || run.daemon.log();
                let before = log().lines().count();
                let since = |log: &str| -> Vec<String> {
                    log.lines()
                        .skip(before)
                        .filter(|l| l.contains("clip.mjpeg"))
                        .map(str::to_string)
                        .collect()
                };
                let noticed = reshape_recording(&run.recording, shape);
                // Twenty frames' time: a line a frame would show, and a loop of the
                // longest recording ends within it.
                let start = Instant::now();
                std::thread::sleep(Duration::from_secs(1));
                while noticed
                    && !since(&log()).iter().any(|l| l.contains("indexed again"))
                    && start.elapsed() < Duration::from_secs(3)
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
                let lines = since(&log());
                if noticed && !lines.iter().any(|l| l.contains("indexed again")) {
                    return Err(format!(
                        "recording shape {}: the change went unnoticed\n{}",
                        shape % 6,
                        log()
                    ));
                }
                if lines.len() > RECORDING_LINES {
                    return Err(format!(
                        "recording shape {}: {} log lines in a second\n{}",
                        shape % 6,
                        lines.len(),
                        lines.join("\n")
                    ));
                }
            }
            b'p' => snapshot(port, arg())?,
            b'f' => {
                let seed = arg();
                let path = run.images.join(hostile_name(seed, step));
                let good = seed & 1 == 0 && !run.spoiled;
                let content = if good {
                    textured_pgm(64, 48)
                } else {
                    b"P5\n1 1\n255\n".to_vec()
                };
                std::fs::write(&path, content).expect("write a salted image");
                run.salted.push(path);
            }
            b'b' => {
                if run.spoiled {
                    heal(&run.images);
                    run.healed_at = Some(Instant::now());
                    run.spoiled = false;
                } else {
                    // A running `b` is seen to fail before the next step, so that reloads
                    // that follow reach it while it waits to restart.
                    let running = delivers(port, 1, run);
                    let restarts = camera_restarts(&scrape(port)?);
                    spoil(run);
                    run.spoiled = true;
                    let start = Instant::now();
                    while running && camera_restarts(&scrape(port)?) == restarts {
                        if start.elapsed() > Duration::from_secs(5) {
                            return Err("b's images all spoiled, and b did not fail".into());
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            }
            _ => unreachable!(),
        }
        steps.insert(op as char);
        if run.daemon.child.try_wait().ok().flatten().is_some() {
            return Err(format!("the daemon ended\n{}", run.daemon.log()));
        }
        scrape(port).map_err(|e| format!("after step {step} '{}': {e}", op as char))?;
        if run.held.len() > 48 {
            close_all(&mut run.held);
        }
    }

    // The end of every script: the last valid config, read again, reaches every camera
    // that delivers frames.
    let up: Vec<bool> = (0..CAMERAS.len()).map(|i| delivers(port, i, run)).collect();
    // A spoiled `b` is healed now, so that the reload below reaches it while it waits to
    // restart; it is checked below if it comes back soon (its first restarts are soon).
    let spoiled_here = run.spoiled || run.healed_at.is_some_and(|h| h > script_start);
    if run.spoiled {
        heal(&run.images);
        run.healed_at = Some(Instant::now());
        run.spoiled = false;
    }
    let total = reloads_total(&scrape(port)?);
    let text = config_text(&run.dir, &run.valid, None);
    write_config(&run.dir, &text);
    run.daemon.signal(libc::SIGHUP);
    let start = Instant::now();
    while reloads_total(&scrape(port)?) <= total {
        if start.elapsed() > Duration::from_secs(20) {
            return Err("the last SIGHUP was never counted".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let counted = Instant::now();
    for (i, up) in up.iter().enumerate() {
        if *up {
            converges(port, i, &run.valid[i], counted)?;
        }
    }
    if spoiled_here && !up[1] {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(4) {
            if delivers(port, 1, run) {
                converges(port, 1, &run.valid[1], counted)?;
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let after = scrape(port)?;
    if !wrote_invalid && reloads(&after, "failure") != failures_before {
        return Err(format!(
            "a reload of valid configs counted as failed\n{}",
            run.daemon.log()
        ));
    }
    log_lines_are_whole(&run.daemon.log())?;
    let rss = proc_status(pid, "VmRSS:")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if rss > RSS_LIMIT_KIB {
        return Err(format!("RSS {rss} KiB over {RSS_LIMIT_KIB} KiB"));
    }
    let threads = proc_status(pid, "Threads:")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if threads >= TASKS_MAX {
        return Err(format!("{threads} threads: over the unit's TasksMax"));
    }

    // Held clients gone, the daemon's open files come back to what they were.
    close_all(&mut run.held);
    for path in run.salted.drain(..) {
        let _ = std::fs::remove_file(path);
    }
    let start = Instant::now();
    let fds = loop {
        let fds = open_files(pid);
        match run.base_fds {
            Some(base) if fds > base + 4 && start.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Some(base) if fds > base + 4 => {
                return Err(format!("{fds} open files, {base} after the first script"))
            }
            _ => break fds,
        }
    };
    run.base_fds.get_or_insert(fds);
    Ok(steps.into_iter().collect())
}

#[test]
fn daemon() {
    // The daemon outlives a failing test unless stopped here: it is held in a static.
    if let Err(failure) = std::panic::catch_unwind(|| fuzz("daemon", check)) {
        drop(run().take());
        std::panic::resume_unwind(failure);
    }
    // SIGTERM with greedy clients held: the daemon ends, and in time.
    let mut run = run().take().expect("the daemon");
    let port = run.daemon.port;
    for a in [0u8, 7, 13, 255] {
        if let Some(s) = greedy_client(port, a) {
            run.held.push(s);
        }
    }
    let log = run.daemon.log();
    let (status, took) = run.daemon.terminate();
    assert!(
        status.code() == Some(0) && took < STOP_WITHIN,
        "SIGTERM: {status:?} after {took:?}\n{log}"
    );
}
