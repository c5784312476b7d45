//! The daemon as a user runs it, for the integration tests that start `edgesight run`: a
//! temporary config on a free loopback port, plain HTTP/1.1 requests, scrapes read back
//! by series, and the process stopped by signal.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test: this build's, or `EDGESIGHT_TEST_BIN` (another build, e.g. an
/// older commit's, to see a regression test fail on the code it was written against).
pub fn bin() -> PathBuf {
    std::env::var_os("EDGESIGHT_TEST_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_edgesight")),
        PathBuf::from,
    )
}

pub fn tmp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a test directory");
    dir
}

pub fn pocl_cache() -> PathBuf {
    std::env::var_os("POCL_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("pocl-cache"))
}

/// The binary under test as a command, with the kernel cache every run of it shares.
pub fn edgesight_command() -> Command {
    let mut command = Command::new(bin());
    command.env("POCL_CACHE_DIR", pocl_cache());
    command
}

/// A port nobody listens on now (the kernel's choice, released at once).
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    l.local_addr().expect("local address").port()
}

pub fn wait_until<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub struct Response {
    pub status: u16,
    pub headers: String,
    pub body: Vec<u8>,
}

/// One HTTP/1.1 request on a fresh connection.
pub fn request(port: u16, method: &str, path: &str) -> std::io::Result<Response> {
    let s = TcpStream::connect(("127.0.0.1", port))?;
    exchange(s, method, path, "", Duration::from_secs(10))
}

/// Sends one request on `s`, with `extra` header lines (each ending in CRLF) after Host,
/// and reads the whole answer, waiting at most `timeout` for each read.
pub fn exchange(
    mut s: TcpStream,
    method: &str,
    path: &str,
    extra: &str,
    timeout: Duration,
) -> std::io::Result<Response> {
    s.set_read_timeout(Some(timeout))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}Connection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no end of headers"))?;
    let headers = String::from_utf8_lossy(&raw[..split]).to_lowercase();
    let status = headers
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status"))?;
    let body = &raw[split + 4..];
    let body = if headers.contains("transfer-encoding: chunked") {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// A chunked body's bytes (Prometheus' longer answers come chunked).
fn dechunk(mut rest: &[u8]) -> std::io::Result<Vec<u8>> {
    let bad = || std::io::Error::other("a malformed chunked body");
    let mut out = Vec::new();
    loop {
        let line = rest.windows(2).position(|w| w == b"\r\n").ok_or_else(bad)?;
        let size = std::str::from_utf8(&rest[..line]).map_err(|_| bad())?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| bad())?;
        rest = &rest[line + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(rest.get(..size).ok_or_else(bad)?);
        rest = rest.get(size + 2..).ok_or_else(bad)?;
    }
}

/// Waits until `/healthz` on `port` answers 200 without credentials. Kernel builds on a
/// cold cache take seconds on a small CPU: the minute is only a failure timeout.
pub fn wait_healthy(port: u16) {
    wait_until("/healthz to answer 200", Duration::from_secs(60), || {
        request(port, "GET", "/healthz")
            .ok()
            .filter(|r| r.status == 200)
    });
}

pub fn get(port: u16, path: &str) -> Response {
    request(port, "GET", path).unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

pub fn get_text(port: u16, path: &str) -> String {
    let r = get(port, path);
    assert_eq!(
        r.status,
        200,
        "GET {path}: {}",
        String::from_utf8_lossy(&r.body)
    );
    String::from_utf8(r.body).expect("UTF-8 body")
}

/// The value of the series `name{labels}` exactly as written in a scrape.
pub fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        let (s, v) = l.rsplit_once(' ')?;
        (s == series).then(|| v.parse().ok())?
    })
}

pub struct Daemon {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Daemon {
    /// Starts the daemon on `config` and waits until `/healthz` answers 200.
    pub fn start(dir: &Path, config: &str) -> Daemon {
        Daemon::start_with(dir, config, |_| {})
    }

    /// [`Daemon::start`] with the command changed by `prepare` first.
    pub fn start_with(dir: &Path, config: &str, prepare: impl FnOnce(&mut Command)) -> Daemon {
        let d = Daemon::spawn_with(dir, config, prepare);
        wait_healthy(d.port);
        d
    }

    /// Starts the daemon on `config` without waiting for it (for configs whose endpoints
    /// need a password or TLS).
    pub fn spawn(dir: &Path, config: &str) -> Daemon {
        Daemon::spawn_with(dir, config, |_| {})
    }

    /// [`Daemon::spawn`] with the command changed by `prepare` first.
    pub fn spawn_with(dir: &Path, config: &str, prepare: impl FnOnce(&mut Command)) -> Daemon {
        let port = free_port();
        let path = dir.join("edgesight.toml");
        std::fs::write(&path, config).expect("write the config");
        let log = dir.join("edgesight.log");
        let mut command = edgesight_command();
        command
            .args(["run", "--config"])
            .arg(&path)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"));
        prepare(&mut command);
        let child = command.spawn().expect("start edgesight");
        Daemon { child, port, log }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The live frames the daemon checked (`verify_every`) agreed with the reference: no
    /// stage of `cameras` counted a mismatch in `metrics`, and none was logged.
    pub fn assert_verified_alike(&self, metrics: &str, cameras: &[&str]) {
        for camera in cameras {
            for stage in edgesight::daemon::verify::CHECKED_STAGES {
                let series = format!(
                    "edgesight_kernel_mismatch_total{{camera=\"{camera}\",stage=\"{stage}\"}}"
                );
                assert_eq!(sample(metrics, &series), Some(0.0), "{series}");
            }
        }
        let log = self.log();
        assert!(!log.contains("differs from the reference"), "{log}");
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.child.id() as i32, sig) };
        assert_eq!(rc, 0, "kill({sig})");
    }

    /// Every series: the detail tier.
    pub fn metrics(&self) -> String {
        get_text(self.port, "/metrics?collect[]=detail")
    }

    /// SIGTERM, then the exit status and how long it took.
    pub fn terminate(self) -> (std::process::ExitStatus, Duration) {
        self.signal(libc::SIGTERM);
        self.terminate_after_signal()
    }

    /// SIGTERM, and the daemon must exit with status 0 (its log in the failure); how long
    /// it took.
    pub fn stop(self) -> Duration {
        let log = self.log.clone();
        let (status, took) = self.terminate();
        assert_eq!(
            status.code(),
            Some(0),
            "SIGTERM: {status:?}\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        took
    }

    /// The exit status once the process ends by itself, and how long that took.
    pub fn terminate_after_signal(self) -> (std::process::ExitStatus, Duration) {
        self.exit_within(Duration::from_secs(30))
    }

    /// The exit status of a process that must end by itself within `limit` (a failure
    /// timeout, not a measure), and how long that took.
    pub fn exit_within(mut self, limit: Duration) -> (std::process::ExitStatus, Duration) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return (status, start.elapsed());
            }
            assert!(
                start.elapsed() < limit,
                "no exit within {limit:?}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn camera(
    name: &str,
    size: &str,
    rois: &[(&str, u32, u32, u32, u32)],
    threshold: u8,
) -> String {
    let mut s = format!(
        "[[camera]]\nname = \"{name}\"\n[camera.source]\nkind = \"pattern\"\nsize = \"{size}\"\nfps = 30\n\
         [camera.pipeline]\nedge_threshold = {threshold}\n"
    );
    for (roi, x, y, w, h) in rois {
        s += &format!("[[camera.roi]]\nname = \"{roi}\"\nx = {x}\ny = {y}\nw = {w}\nh = {h}\n");
    }
    s
}

/// Runs a tool (promtool, openssl, curl, wrk) to its end with `input` on its stdin.
pub fn run_tool(cmd: &mut Command, input: Option<&[u8]>) -> Output {
    let name = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("{name}: {e} (scripts/install-deps.sh test installs prometheus and wrk)")
        });
    let mut stdin = child.stdin.take().expect("stdin");
    if let Some(input) = input {
        stdin.write_all(input).expect("write stdin");
    }
    drop(stdin);
    child.wait_with_output().expect("tool output")
}

/// [`run_tool`], and the tool must succeed (its stdout and stderr in the failure).
pub fn run_tool_ok(cmd: &mut Command, input: Option<&[u8]>) -> Output {
    let name = format!("{cmd:?}");
    let out = run_tool(cmd, input);
    assert!(
        out.status.success(),
        "{name}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A grey PGM image of `w`x`h` whose pixels are `(x + y + seed) % 256`.
pub fn pgm(w: usize, h: usize, seed: usize) -> Vec<u8> {
    let mut bytes = format!("P5\n{w} {h}\n255\n").into_bytes();
    bytes.extend((0..w * h).map(|i| ((i % w + i / w + seed) % 256) as u8));
    bytes
}

/// A connection to the daemon from the loopback address `from` (127.0.0.2 is as much
/// loopback on Linux as 127.0.0.1 is, but another peer).
pub fn connect_from(from: &str, port: u16) -> std::io::Result<TcpStream> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let s = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(format!("{from}:0").parse().expect("address"))?;
        socket
            .connect(format!("127.0.0.1:{port}").parse().expect("address"))
            .await
    })?;
    let s = s.into_std()?;
    s.set_nonblocking(false)?;
    Ok(s)
}

/// A GET of `path` on the kept-alive `s`: the answer's status, its body read whole.
pub fn keep_alive_get(s: &mut TcpStream, path: &str) -> std::io::Result<u16> {
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| std::io::Error::other("no content-length"))?;
    let mut body = vec![0u8; length];
    s.read_exact(&mut body)?;
    head.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status"))
}

/// The names in `dir`, sorted (none when it does not exist).
pub fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A grey PGM of `w`x`h` with detail at every scale: blocks, a ramp and a fine weave.
pub fn textured_pgm(w: usize, h: usize) -> Vec<u8> {
    let mut bytes = format!("P5\n{w} {h}\n255\n").into_bytes();
    bytes.extend((0..w * h).map(|i| {
        let (x, y) = (i % w, i / w);
        (40 + ((x / 8 + y / 6) % 3) * 50 + (x + 2 * y) % 17 + 20 * ((x ^ y) & 1)) as u8
    }));
    bytes
}

/// The first word of the line of `/proc/PID/status` that starts with `field` (`VmRSS:`,
/// `Threads:`, `SigIgn`).
pub fn proc_status(pid: u32, field: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    Some(line.split_whitespace().nth(1)?.to_string())
}

/// The connections waiting in the kernel's accept queue of the loopback listener on
/// `port`, and those still in their handshake (SYN_RECV), from /proc/net/tcp; `None`
/// while nothing listens there. Both 0: the server has accepted every client that
/// connected.
pub fn unaccepted(port: u16) -> Option<usize> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let local = format!("0100007F:{port:04X}");
    let mut listening = None;
    let mut handshakes = 0;
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, addr, _, state, queues, ..] = fields[..] else {
            continue;
        };
        if addr != local {
            continue;
        }
        match state {
            // LISTEN: rx_queue is the accept queue's length.
            "0A" => {
                let (_, rx) = queues.split_once(':')?;
                listening = Some(usize::from_str_radix(rx, 16).ok()?);
            }
            "03" => handshakes += 1,
            _ => {}
        }
    }
    Some(listening? + handshakes)
}
