//! The daemon from Prometheus' side: a real Prometheus server scraping two cameras (in
//! OpenMetrics, which it asks for first) and running every expression of the Grafana
//! dashboard and the alert rules on that scrape, and promtool on the deploy files (the
//! config the package installs, its alert rules and their unit tests).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::daemon::*;
use crate::edgesight_ok;

/// A Prometheus server (or agent) on loopback, its log in its directory.
pub(crate) struct Prometheus {
    child: Child,
    pub(crate) port: u16,
    log: PathBuf,
}

impl Prometheus {
    /// A Prometheus server on loopback scraping `target` every second.
    fn start(dir: &Path, target: u16) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  \
                 - job_name: edgesight\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
            ),
        )
        .expect("prometheus.yml");
        Prometheus::spawn(
            dir,
            "prometheus",
            free_port(),
            &[
                format!("--config.file={}", config.display()),
                format!("--storage.tsdb.path={}", dir.join("tsdb").display()),
            ],
            &[],
        )
    }

    /// `prometheus ARGS` listening on `port`, with `env` added to its environment and its
    /// log in `dir/NAME.log` (appended to, so a restart keeps the first run's).
    pub(crate) fn spawn(
        dir: &Path,
        name: &str,
        port: u16,
        args: &[String],
        env: &[(&str, &str)],
    ) -> Prometheus {
        let log = dir.join(format!("{name}.log"));
        let child = Command::new("prometheus")
            .args(args)
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log)
                    .expect("log"),
            )
            .spawn()
            .expect("start prometheus (scripts/install-deps.sh test installs it)");
        Prometheus { child, port, log }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, and waits for the exit (Prometheus closes its storage cleanly on it).
    pub(crate) fn stop(mut self) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        assert_eq!(rc, 0, "kill(SIGTERM)");
        let _ = self.child.wait();
    }

    /// The result vector of an instant query, or `None` while Prometheus is not up.
    pub(crate) fn query(&self, q: &str) -> Option<Vec<serde_json::Value>> {
        let encoded: String = q
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let r = request(self.port, "GET", &format!("/api/v1/query?query={encoded}")).ok()?;
        let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
        (v["status"] == "success").then(|| v["data"]["result"].as_array().cloned())?
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn value(series: &serde_json::Value) -> f64 {
    series["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

#[test]
fn a_real_prometheus_scrapes_two_cameras() {
    let dir = tmp_dir("daemon-prometheus");
    let config = format!(
        "{}{}",
        camera("front", "160x120", &[("door", 0, 0, 80, 60)], 64),
        camera(
            "rear",
            "96x64",
            &[("sky", 0, 0, 96, 20), ("road", 0, 40, 96, 24)],
            64
        )
    );
    let d = Daemon::start(&dir, &config);
    let prom = Prometheus::start(&dir, d.port);
    // The first scrape lands about 5 s after Prometheus starts.
    let first = wait_until("a first scrape", Duration::from_secs(30), || {
        prom.query("edgesight_frames_total")
            .filter(|r| r.len() == 2)
    });
    let front_first = first
        .iter()
        .find(|s| s["metric"]["camera"] == "front")
        .map(value)
        .expect("front camera");
    wait_until(
        "edgesight_frames_total to grow",
        Duration::from_secs(20),
        || {
            let now = prom.query(r#"edgesight_frames_total{camera="front"}"#)?;
            (now.len() == 1 && value(&now[0]) > front_first).then_some(())
        },
    );
    let rois = prom.query("edgesight_roi_mean_luma").expect("ROI series");
    let mut names: Vec<(String, String)> = rois
        .iter()
        .map(|s| {
            (
                s["metric"]["camera"].as_str().unwrap_or("").to_string(),
                s["metric"]["roi"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ("front".into(), "door".into()),
            ("rear".into(), "road".into()),
            ("rear".into(), "sky".into())
        ]
    );
    for s in &rois {
        let v = value(s);
        assert!((0.0..=255.0).contains(&v), "mean luma {v}");
    }
    let up = prom.query(r#"up{job="edgesight"}"#).expect("up");
    assert_eq!(up.len(), 1);
    assert_eq!(value(&up[0]), 1.0);
    every_deploy_expression_runs_on_the_scrape(&prom);
    d.stop();
}

/// Every expression of the Grafana dashboard and the alert rules is a query this
/// Prometheus runs on the live scrape, and every metric each names has series in it (the
/// health families apart: these cameras run without health).
pub(crate) fn every_deploy_expression_runs_on_the_scrape(prom: &Prometheus) {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(deploy.join("grafana-dashboard.json")).expect("dashboard"),
    )
    .expect("dashboard JSON");
    let mut expressions: Vec<String> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .collect();
    let alerts = std::fs::read_to_string(deploy.join("alerts.yml")).expect("alerts");
    let lines: Vec<&str> = alerts.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        let Some(value) = line.trim().strip_prefix("expr: ") else {
            continue;
        };
        if !value.starts_with(['|', '>']) {
            expressions.push(value.to_string());
            continue;
        }
        // A block scalar: the lines indented past `expr:`.
        let indent = line.len() - line.trim_start().len();
        let block: Vec<&str> = lines[n + 1..]
            .iter()
            .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > indent)
            .map(|l| l.trim())
            .collect();
        expressions.push(block.join(" "));
    }
    assert!(expressions.len() > 20, "{expressions:?}");
    for expr in &expressions {
        let q = expr
            .replace("$instance", ".*")
            .replace("$camera", ".*")
            .replace("$__rate_interval", "1m");
        assert!(prom.query(&q).is_some(), "Prometheus refuses {q}");
        for (i, _) in q.match_indices(['e', 'p']) {
            let name: String = q[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let known = name.starts_with("edgesight_") || name.starts_with("process_");
            let at_word =
                i == 0 || !q[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
            if !known
                || !at_word
                || name.starts_with("edgesight_camera_")
                    && name != "edgesight_camera_up"
                    && !name.contains("restarts")
                    && !name.contains("reconnects")
            {
                continue;
            }
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(&name);
            // A histogram named bare is its native form (Prometheus 3 converting the
            // classic one): it has series where its `_count` has.
            let family = if base == name && !name.ends_with("_seconds") {
                name.clone()
            } else {
                format!("{base}_count")
            };
            let series = prom.query(&family).unwrap_or_default();
            assert!(
                !series.is_empty(),
                "{family} (in {expr}) has no series in the scrape"
            );
        }
    }
}

#[test]
fn deploy_files_check() {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    edgesight_ok(&[
        "check-config",
        &deploy.join("edgesight.toml").display().to_string(),
    ]);
    for args in [
        &["check", "rules", "alerts.yml"][..],
        &["test", "rules", "alerts.test.yml"],
        &["check", "config", "prometheus.yml"],
        // The board's agent: promtool refuses there what agent mode does not run (rules,
        // alerting, remote_read).
        &["check", "config", "--agent", "agent/agent.yml"],
    ] {
        run_tool_ok(
            Command::new("promtool").args(args).current_dir(&deploy),
            None,
        );
    }
}
