//! Target `http`: mutated raw HTTP/1.1 requests sent over a socket to the real server (the
//! library's accept loop, auth and routes on their own runtime, with basic auth and
//! snapshots on, one camera that has published nothing yet).
//!
//! Invariants: every answer starts with a well-formed status line and comes within a
//! deadline (or the server closes without a word, as it does on a head cut short), and
//! no request that lacks the one valid `Authorization` token gets a 200: every path is
//! protected when users are configured.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{mpsc, Arc, OnceLock};
use std::time::Duration;

use edgesight::config::WebSettings;
use edgesight::metrics::Metrics;
use edgesight::server::{self, CameraView, ListenAddress, Listener};

use super::fuzz;

/// base64("prom:pw"), the only credentials the server accepts.
const TOKEN: &[u8] = b"cHJvbTpwdw==";
/// Longer than the server's 3 s head timeout: a request it waits on is closed by then.
const DEADLINE: Duration = Duration::from_secs(10);

/// The port of a server started once for the whole run.
fn server_port() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        let web = WebSettings {
            listen: vec![ListenAddress::parse("127.0.0.1:0").expect("address")],
            snapshots: true,
            stale_after: Duration::from_secs(5),
            max_connections: 64,
            tls: None,
            headers: Vec::new(),
            users: [("prom".to_string(), bcrypt::hash("pw", 4).expect("bcrypt"))].into(),
        };
        let listener = Listener::prepare(&web, 1).expect("listen");
        let port = listener.addr.port();
        let (ready, started) = mpsc::channel();
        std::thread::spawn(move || {
            let runtime = server::runtime().expect("runtime");
            let (_latest_tx, latest) = tokio::sync::watch::channel(None);
            // The camera's end of its snapshot requests is gone: snapshots answer 503.
            let (snapshots, _) = mpsc::channel();
            let cameras = Arc::new(vec![CameraView::new("c".into(), latest, snapshots)]);
            let (_stop, shutdown) = tokio::sync::watch::channel(false);
            let metrics = Arc::new(Metrics::new());
            let _ = ready.send(());
            let served = runtime.block_on(server::serve(listener, web, metrics, cameras, shutdown));
            panic!("the fuzzed server stopped: {served:?}");
        });
        started.recv().expect("server thread");
        port
    })
}

/// The status code of the first answer in `raw`, or why its status line is malformed.
fn first_status(raw: &[u8]) -> Result<u16, String> {
    let shown = || String::from_utf8_lossy(&raw[..raw.len().min(80)]).to_string();
    let end = find(raw, b"\r\n").ok_or_else(|| format!("no CRLF in {:?}", shown()))?;
    let line = &raw[..end];
    let well_formed = (line.starts_with(b"HTTP/1.1 ") || line.starts_with(b"HTTP/1.0 "))
        && line.len() > 13
        && line[9..12].iter().all(u8::is_ascii_digit)
        && line[12] == b' '
        && line[13..]
            .iter()
            .all(|b| b.is_ascii_graphic() || *b == b' ');
    if !well_formed {
        return Err(format!("malformed status line in {:?}", shown()));
    }
    Ok(std::str::from_utf8(&line[9..12])
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(0))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn exchange(port: u16, request: &[u8]) -> Result<Vec<u8>, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(DEADLINE))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(DEADLINE))
        .map_err(|e| e.to_string())?;
    // The server may answer and close before it read everything: a failed write is fine.
    let _ = s.write_all(request);
    let _ = s.shutdown(Shutdown::Write);
    let mut raw = Vec::new();
    match s.read_to_end(&mut raw) {
        Ok(_) => Ok(raw),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Err(format!(
                "no end of the answer within {DEADLINE:?} ({} bytes read)",
                raw.len()
            ))
        }
        // A reset after the answer (the server closed with our bytes unread) is fine.
        Err(_) => Ok(raw),
    }
}

fn check(request: &[u8]) -> Result<String, String> {
    let raw = exchange(server_port(), request)?;
    if raw.is_empty() {
        return Ok("closed".into());
    }
    let status = first_status(&raw)?;
    // Any 200 counts, also one to a request pipelined behind the first.
    let any_200 = [b"HTTP/1.1 200 ", b"HTTP/1.0 200 "]
        .iter()
        .any(|line| find(&raw, *line).is_some());
    if any_200 && find(request, TOKEN).is_none() {
        return Err("a 200 without the credentials".into());
    }
    Ok(format!("status-{status}"))
}

#[test]
fn http_requests() {
    fuzz("http", check);
}

/// Found by this target: a client that shut its side after the request got no answer
/// when the answer took a moment (a password check), as hyper closed on the EOF.
#[test]
fn a_half_closed_request_still_gets_its_answer() {
    let request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic cHJvbTpwdw==\r\n\r\n";
    assert_eq!(check(request), Ok("status-200".into()));
    // A head cut short is closed at once rather than waited on.
    assert_eq!(check(b"GET /metr"), Ok("closed".into()));
}

#[test]
fn the_scheme_is_case_blind_and_the_token_is_not() {
    for (authorization, expect) in [
        ("bAsIc cHJvbTpwdw==", "status-200"),
        ("Basic cHJvbTpwdw=", "status-401"),
        ("Basic cHJvbTpwdX==", "status-401"),
        ("Basic cHJvbTpwdw==x", "status-401"),
    ] {
        let request =
            format!("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: {authorization}\r\n\r\n");
        assert_eq!(
            check(request.as_bytes()),
            Ok(expect.into()),
            "{authorization}"
        );
    }
}
