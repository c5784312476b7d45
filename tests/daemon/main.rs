//! `edgesight run` as a user runs it: the real binary on a temporary config and a free
//! loopback port, scraped by `promtool`, a real Prometheus server and `wrk` (Debian's
//! `prometheus` and `wrk` packages; `scripts/install-deps.sh test` installs them).
//!
//! One test binary, a module per topic, so that the daemon's tests link once:
//!
//! | module | what the daemon is held to |
//! |---|---|
//! | `endpoints` | every route on one camera, a reload by SIGHUP, HEAD, port 0 |
//! | `prometheus` | a real Prometheus scraping two cameras; the deploy files' rules |
//! | `agent` | deploy/agent's Prometheus agent pushing to a receiver, through its outage |
//! | `load` | frames and scrapes under wrk, a bad-password flood, idle connections and attacks on the slots |
//! | `logs` | `--log.format` logfmt and JSON, every line parsed strictly |
//! | `web` | basic auth, TLS and its renewal, the open-file limit, `[web]` checks |
//! | `config` | configs refused before anything starts, FIFOs, many cameras |
//! | `cameras` | an absent camera, a failing one, an MJPEG recording |
//! | `health` | the camera-health detectors on the pattern and a frozen replay |
//! | `signals` | systemd's notifications, a SIGHUP right after start |
//! | `verify` | live frames checked against the reference, and a reload that stops it |
//! | `memory` | a warm 1080p camera with every feature on within 40 MiB of anonymous memory |
//! | `mqtt` | a real broker (mosquitto): state topics, discovery, last will, wrong password, restart, TLS |
//!
//! The daemon itself starts and stops through `common::daemon` (`Daemon::start`,
//! `Daemon::stop`); what several modules here share is below.

#[path = "../common/mod.rs"]
mod common;

mod agent;
mod cameras;
mod config;
mod endpoints;
mod events;
mod health;
mod load;
mod logs;
mod memory;
mod motion;
mod mqtt;
mod prometheus;
mod signals;
mod verify;
mod web;

use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::daemon::{edgesight_command, exchange, request, tmp_dir};

/// Runs `edgesight ARGS` and returns its exit code and stderr.
fn edgesight(args: &[&str]) -> (Option<i32>, String) {
    let out = edgesight_command()
        .args(args)
        .output()
        .expect("run edgesight");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// Runs `edgesight ARGS`, which must succeed; its stderr (warnings go there).
fn edgesight_ok(args: &[&str]) -> String {
    let (code, err) = edgesight(args);
    assert_eq!(code, Some(0), "edgesight {args:?}: {err}");
    err
}

/// Runs `edgesight ARGS` to its end, or fails the test once `limit` has passed (a command
/// that blocks is killed rather than left to hang the test run).
fn edgesight_within(args: &[&str], limit: Duration) -> (Option<i32>, String) {
    // A file of its own per call: tests run this at the same time.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = tmp_dir(&format!("within-{}-{call}", std::process::id()));
    let err_path = dir.join("stderr");
    let mut child = edgesight_command()
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("run edgesight");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("edgesight {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    (status.code(), err)
}

/// Writes `text` as `dir/NAME.toml` and checks that `check-config` and `run` both refuse
/// it within a minute (a check that opens a device must not hang) with exit code 2, the
/// file's name followed by `expect` in their message, and that `run` serves nothing.
fn assert_refused(dir: &Path, name: &str, text: &str, expect: &str) {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).expect("write");
    let file = path.display().to_string();
    for args in [vec!["check-config", &file], vec!["run", "--config", &file]] {
        let (code, err) = edgesight_within(&args, Duration::from_secs(60));
        assert_eq!(code, Some(2), "{name} {args:?}: {err}");
        assert!(
            err.contains(&format!("{file}{expect}")),
            "{name} {args:?}: {err}"
        );
        assert!(!err.contains("serving"), "{name} was served: {err}");
    }
}

/// Status of a GET with basic auth as `user` (password `s3cret`); 0 when it fails.
fn get_as(port: u16, path: &str, user: &str) -> u16 {
    let token = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!("{user}:s3cret"),
    );
    let auth = format!("Authorization: Basic {token}\r\n");
    TcpStream::connect(("127.0.0.1", port))
        .and_then(|s| exchange(s, "GET", path, &auth, Duration::from_secs(10)))
        .map_or(0, |r| r.status)
}

/// `/api/v1/latest` of the daemon's first camera, once it has published a frame.
/// Waits until the daemon counts its first refused reload (a SIGHUP with a bad config).
fn wait_refused_reload(d: &common::daemon::Daemon) {
    common::daemon::wait_until("the refused reload", Duration::from_secs(30), || {
        common::daemon::sample(
            &d.metrics(),
            r#"edgesight_config_reloads_total{result="failure"}"#,
        )
        .filter(|v| *v == 1.0)
    });
}

fn latest_frame(port: u16) -> Option<serde_json::Value> {
    let r = request(port, "GET", "/api/v1/latest").ok()?;
    (r.status == 200).then(|| serde_json::from_slice(&r.body).expect("JSON"))
}
