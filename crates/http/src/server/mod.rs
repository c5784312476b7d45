//! The HTTP side: an accept loop on tokio whose connection slots a slowloris cannot fill
//! ([`slots`]), optional TLS, basic auth that a password flood cannot turn into CPU load
//! ([`auth`]), and the routes in [`routes`]. It reads what the cameras published and
//! never waits on them, and its threads run at a lower priority than the cameras', so a
//! slow, stuck or hostile client costs a connection slot, not a frame.

mod api;
mod auth;
mod limits;
mod listen;
mod page;
mod reply;
mod routes;
#[cfg(test)]
mod routes_test;
mod scrape;
mod slots;
mod snapshots;
mod tls;
mod view;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

use crate::metrics::Metrics;

pub use auth::{check_hash, mixed_costs, Auth, HashError, UsersError, Verdict};
pub use limits::NoRoomForConnections;
pub use listen::{BadAddress, ListenAddress, ListenAddressError};
pub use routes::HttpMetrics;
pub use tls::{certificates, tls_config, PemError, TlsError};
pub use tls::{ClientAuth, TlsIdentity, TlsSettings, TlsVersion};
pub use view::CameraView;

/// The `[web]` table as the server runs it; config checks it and re-exports it.
#[derive(Clone, Debug, PartialEq)]
pub struct WebSettings {
    /// Every address served on (at least one).
    pub listen: Vec<ListenAddress>,
    /// Whether the pictures are served: `/snapshot/*.png` and the status page's
    /// (`snapshots`, off by default).
    pub snapshots: bool,
    /// How old a camera's newest frame may be before `/healthz` answers 503
    /// (`stale_after_seconds`).
    pub stale_after: Duration,
    /// Connections served at once (`max_connections`); fewer where the open-file
    /// limit leaves less room.
    pub max_connections: u32,
    /// TLS, where `[web]` or a web config file sets it; `None`: plain HTTP.
    pub tls: Option<TlsSettings>,
    /// Headers every answer carries (`http_server_config.headers` of a web config file).
    pub headers: Vec<(String, String)>,
    /// The basic-auth users: each name with its bcrypt hash; none: no password asked.
    pub users: BTreeMap<String, String>,
}

/// Request head bytes hyper buffers at most (its minimum is 8 KiB); longer heads get 431.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// A client gets this long to send a request head, and a kept-alive connection this long
/// to send its next one: a scraper sends its head at once, and an idle connection holds
/// a slot that others may need.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(3);
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection is closed after this long whatever it does, so a client that never reads
/// its response frees its slot; scrapers simply reconnect.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(120);
/// The nice value of the HTTP side's threads (tokio's workers and blocking pool, bcrypt):
/// the camera threads keep the default 0, so a flood of requests slows the answers, not
/// the frames. Raising one's own nice value needs no privilege.
const HTTP_NICE: libc::c_int = 10;
/// tokio's blocking pool (PNG encoding, config reloads) at most; its default of 512
/// would let a burst of snapshot requests start hundreds of threads.
const BLOCKING_THREADS: usize = 4;

/// The runtime the HTTP side runs on: two workers and a small blocking pool, all at
/// [`HTTP_NICE`].
pub fn runtime() -> Result<tokio::runtime::Runtime, ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(BLOCKING_THREADS)
        // Blocking workers, once started, stay: no thread is started after the start,
        // when the task limit (TasksMax=) may have been reached (tokio panics when it
        // cannot start one).
        .thread_keep_alive(Duration::from_secs(100 * 365 * 24 * 3600))
        .thread_name("es-tokio")
        .on_thread_start(lower_priority)
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    // Every blocking worker started now, each held until all are running.
    let all = Arc::new(std::sync::Barrier::new(BLOCKING_THREADS));
    let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async {
            let workers: Vec<_> = (0..BLOCKING_THREADS)
                .map(|_| {
                    let all = Arc::clone(&all);
                    tokio::task::spawn_blocking(move || {
                        all.wait();
                    })
                })
                .collect();
            for w in workers {
                let _ = w.await;
            }
        })
    }));
    if started.is_err() {
        return Err(ServeError::BlockingThreads {
            threads: BLOCKING_THREADS,
        });
    }
    Ok(runtime)
}

/// Gives the calling thread [`HTTP_NICE`]; a failure (a seccomp filter without
/// setpriority) is logged once and otherwise ignored.
fn lower_priority() {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if let Err(e) = crate::priority::lower_calling_thread(HTTP_NICE) {
        if !WARNED.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "cannot lower the HTTP threads' priority (setpriority: {e}): HTTP load \
                 competes with the cameras"
            );
        }
    }
}

/// Why the HTTP side cannot start or stopped serving. Each message names the setting or
/// the address at fault and says what failed, its cause included.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// tokio's runtime could not be built (no thread could be started).
    #[error("starting the tokio runtime: {0}")]
    Runtime(std::io::Error),
    /// The blocking pool's threads could not all be started at the start.
    #[error("cannot start the HTTP side's {threads} blocking threads (the task limit?)")]
    BlockingThreads {
        /// The threads the pool keeps.
        threads: usize,
    },
    /// The open-file limit leaves no descriptor for a connection beside the cameras'.
    #[error("web.max_connections: {0}")]
    Connections(NoRoomForConnections),
    /// A listen address could not be bound (taken, or not this machine's).
    #[error("cannot listen on {address}: {error}")]
    Listen {
        /// The address as the config wrote it.
        address: String,
        /// What binding it said.
        error: std::io::Error,
    },
    /// A bound socket could not be set up: `what` says which step.
    #[error("{what}: {error}")]
    Socket {
        /// The step that failed.
        what: &'static str,
        /// What the call said.
        error: std::io::Error,
    },
    /// `web.listen` named no address.
    #[error("no listen address")]
    NoAddress,
    /// The TLS settings cannot serve.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// A basic-auth user's hash is refused.
    #[error("web.basic_auth_users: {0}")]
    Users(UsersError),
    /// An accept loop panicked.
    #[error("an accept loop: {0}")]
    AcceptLoop(tokio::task::JoinError),
}

impl ServeError {
    /// A failed step `what` of a bound socket's setup, for `map_err`.
    fn socket(what: &'static str) -> impl FnOnce(std::io::Error) -> ServeError {
        move |error| ServeError::Socket { what, error }
    }
}

/// The bound socket, TLS and auth setup, made before any camera starts so that a taken
/// port, a bad certificate or a bad hash refuses the start.
pub struct Listener {
    sockets: Vec<std::net::TcpListener>,
    /// `web.max_connections`, or fewer where the open-file limit leaves less room.
    connections: u32,
    tls: Option<TlsIdentity>,
    auth: Arc<auth::Auth>,
    /// The first address bound (with the port the kernel chose for port 0).
    pub addr: SocketAddr,
    /// Every address bound.
    pub addrs: Vec<SocketAddr>,
}

impl Listener {
    /// Binds the socket and reads the TLS and auth setup for a daemon of `cameras`
    /// cameras; raises the open-file limit and fits the connections into it.
    pub fn prepare(web: &WebSettings, cameras: usize) -> Result<Listener, ServeError> {
        let connections =
            limits::connections_that_fit(web.max_connections, cameras, limits::raise_open_files())
                .map_err(ServeError::Connections)?;
        if connections < web.max_connections {
            tracing::warn!(
                "web.max_connections = {} does not fit the open-file limit: serving at most {connections} connections (raise LimitNOFILE= to serve more)",
                web.max_connections
            );
        }
        let mut sockets = Vec::new();
        for listen in &web.listen {
            sockets.extend(listen.bind().map_err(|error| ServeError::Listen {
                address: listen.to_string(),
                error,
            })?);
        }
        let mut addrs = Vec::with_capacity(sockets.len());
        for socket in &sockets {
            socket
                .set_nonblocking(true)
                .map_err(ServeError::socket("making the socket non-blocking"))?;
            addrs.push(
                socket
                    .local_addr()
                    .map_err(ServeError::socket("reading the bound address"))?,
            );
        }
        let addr = *addrs.first().ok_or(ServeError::NoAddress)?;
        let tls = match &web.tls {
            Some(settings) => Some(TlsIdentity::load(settings)?),
            None => None,
        };
        let auth = auth::Auth::new(web.users.clone()).map_err(ServeError::Users)?;
        Ok(Listener {
            sockets,
            connections,
            tls,
            auth: Arc::new(auth),
            addr,
            addrs,
        })
    }
}

impl Listener {
    /// The TLS identity served, for SIGHUP to read again.
    pub fn tls(&self) -> Option<TlsIdentity> {
        self.tls.clone()
    }

    /// The basic-auth users served, for SIGHUP to replace.
    pub fn auth(&self) -> Arc<Auth> {
        Arc::clone(&self.auth)
    }
}

/// Serves until `shutdown` turns true: an accept loop for each socket, sharing the
/// connection slots.
pub async fn serve(
    listener: Listener,
    web: WebSettings,
    metrics: Arc<Metrics>,
    cameras: Arc<Vec<CameraView>>,
    shutdown: watch::Receiver<bool>,
) -> Result<(), ServeError> {
    let slots = slots::Slots::new(listener.connections as usize);
    let state = Arc::new(routes::RouterState::new(
        web,
        metrics,
        cameras,
        listener.auth,
    ));
    let mut loops = Vec::new();
    for socket in listener.sockets {
        let socket = tokio::net::TcpListener::from_std(socket)
            .map_err(ServeError::socket("handing the socket to tokio"))?;
        loops.push(tokio::spawn(accept_loop(
            socket,
            Arc::clone(&slots),
            Arc::clone(&state),
            listener.tls.clone(),
            shutdown.clone(),
        )));
    }
    for accepting in loops {
        accepting.await.map_err(ServeError::AcceptLoop)?;
    }
    Ok(())
}

/// Accepts on `socket` until `shutdown` turns true.
async fn accept_loop(
    socket: tokio::net::TcpListener,
    slots: Arc<slots::Slots>,
    state: Arc<routes::RouterState>,
    tls: Option<TlsIdentity>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut accept_failures = AcceptFailures::default();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = socket.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: wait a little rather than spin,
                    // and say so once a minute, not ten times a second.
                    let _ = accept_failures.failed(&e);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        // Accepting at once and refusing here, rather than leaving clients in the
        // kernel's backlog, lets a newcomer take an idle connection's slot.
        let Some(slot) = slots.admit(peer.ip()) else {
            tracing::debug!(%peer, "no free connection slot: closed");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let stream = slots::Socket::new(stream, Arc::clone(&slot.connection));
        let state = Arc::clone(&state);
        let tls = tls.as_ref().map(TlsIdentity::acceptor);
        tokio::spawn(async move {
            let conn = Arc::clone(&slot.connection);
            let served = async {
                match tls {
                    Some(acceptor) => {
                        let handshake = acceptor.accept(stream);
                        match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, handshake).await {
                            Ok(Ok(tls_stream)) => {
                                connection(tls_stream, state, Arc::clone(&conn), peer).await
                            }
                            Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake: {e}"),
                            Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                        }
                    }
                    None => connection(stream, state, Arc::clone(&conn), peer).await,
                }
            };
            tokio::select! {
                _ = served => {}
                _ = conn.evicted() => tracing::debug!(%peer, "connection closed for a newcomer"),
            }
            drop(slot);
        });
    }
}

/// Failed accepts, logged the first time and then at most once a minute with how many
/// failed meanwhile.
#[derive(Default)]
struct AcceptFailures {
    logged: Option<std::time::Instant>,
    since: u64,
}

impl AcceptFailures {
    const EVERY: Duration = Duration::from_secs(60);

    /// Counts a failure; logs it (and says so) unless one was logged within a minute.
    fn failed(&mut self, e: &std::io::Error) -> bool {
        self.since += 1;
        if self.logged.is_some_and(|t| t.elapsed() < Self::EVERY) {
            return false;
        }
        tracing::warn!(
            failures = self.since,
            "accept: {e} (new connections wait; logged at most once a minute)"
        );
        self.logged = Some(std::time::Instant::now());
        self.since = 0;
        true
    }
}

async fn connection<S>(
    stream: S,
    state: Arc<routes::RouterState>,
    conn: Arc<slots::Connection>,
    peer: SocketAddr,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let stream = slots::Tracked::new(stream, Arc::clone(&conn));
    let slot = Arc::clone(&conn);
    let service = service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        req.extensions_mut().insert(routes::Peer(peer.ip()));
        let state = Arc::clone(&state);
        let busy = conn.request();
        async move {
            let response = routes::handle(&state, req).await;
            drop(busy);
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let serving = http1::Builder::new()
        // A client that shuts its side after the request still gets the answer; without
        // this, hyper dropped answers that take a moment (a password check, a snapshot).
        .half_close(true)
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(serving);
    let end = tokio::time::sleep(CONNECTION_LIFETIME);
    tokio::pin!(end);
    let mut retired = false;
    loop {
        tokio::select! {
            served = serving.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(%peer, "connection: {e}");
                }
                return;
            }
            _ = &mut end => {
                tracing::debug!(%peer, "connection closed after its lifetime or retirement");
                return;
            }
            // Its slot went to a newcomer: the answer in flight goes out whole, then the
            // connection closes (at once if none is), within the retirement deadline.
            _ = slot.retired(), if !retired => {
                retired = true;
                serving.as_mut().graceful_shutdown();
                let deadline = tokio::time::Instant::now() + slots::RETIRE_DEADLINE;
                if deadline < end.deadline() {
                    end.as_mut().reset(deadline);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Out of descriptors, accept fails ten times a second: logged once a minute.
    #[test]
    fn failed_accepts_are_logged_once_a_minute() {
        let mut failures = AcceptFailures::default();
        let e = std::io::Error::from_raw_os_error(libc::EMFILE);
        let logged = (0..600).filter(|_| failures.failed(&e)).count();
        assert_eq!(logged, 1);
        assert_eq!(failures.since, 599);
    }
}
