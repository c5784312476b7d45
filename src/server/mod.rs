//! The HTTP side: a bounded accept loop on tokio, optional TLS, optional basic auth, and
//! the routes in [`routes`]. It reads what the cameras published and never waits on
//! them, so a slow or stuck client costs a connection slot, not a frame.

mod auth;
mod page;
mod routes;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{watch, Semaphore};
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;

use crate::config::WebSettings;
use crate::metrics::Metrics;

pub use routes::CameraView;

/// Request head bytes hyper buffers at most (its minimum is 8 KiB); longer heads get 431.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// A client gets this long to send a request head (including idle keep-alive time).
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection is closed after this long whatever it does, so a client that never reads
/// its response frees its slot; scrapers simply reconnect.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(120);

/// The bound socket and TLS setup, made before any camera starts so that a taken port
/// or a bad certificate refuses the start.
pub struct Listener {
    socket: std::net::TcpListener,
    tls: Option<TlsAcceptor>,
    pub addr: SocketAddr,
}

impl Listener {
    pub fn prepare(web: &WebSettings) -> Result<Listener> {
        let socket = std::net::TcpListener::bind(web.listen)
            .with_context(|| format!("cannot listen on {}", web.listen))?;
        socket
            .set_nonblocking(true)
            .context("making the socket non-blocking")?;
        let addr = socket.local_addr().context("reading the bound address")?;
        let tls = match &web.tls {
            Some((cert, key)) => Some(tls_acceptor(cert, key)?),
            None => None,
        };
        Ok(Listener { socket, tls, addr })
    }
}

fn tls_acceptor(cert: &std::path::Path, key: &std::path::Path) -> Result<TlsAcceptor> {
    let read =
        |p: &std::path::Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    let cert_pem = read(cert)?;
    let certs = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{}: not a PEM certificate chain", cert.display()))?;
    if certs.is_empty() {
        anyhow::bail!("{}: no certificate in it", cert.display());
    }
    let key_pem = read(key)?;
    let key_der = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .with_context(|| format!("{}: not a PEM private key", key.display()))?
        .with_context(|| format!("{}: no private key in it", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .with_context(|| {
            format!(
                "{} and {} do not make a TLS identity",
                cert.display(),
                key.display()
            )
        })?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Serves until `shutdown` turns true.
pub async fn serve(
    listener: Listener,
    web: WebSettings,
    metrics: Arc<Metrics>,
    cameras: Arc<Vec<CameraView>>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<()> {
    let socket = tokio::net::TcpListener::from_std(listener.socket)
        .context("handing the socket to tokio")?;
    let state = Arc::new(routes::State::new(web.clone(), metrics, cameras));
    let slots = Arc::new(Semaphore::new(web.max_connections as usize));
    loop {
        // Waiting for a slot before accepting leaves extra clients in the kernel's
        // backlog instead of growing tasks without bound.
        let permit = tokio::select! {
            p = Arc::clone(&slots).acquire_owned() => p.context("connection slots")?,
            _ = shutdown.changed() => return Ok(()),
        };
        let (stream, peer) = tokio::select! {
            accepted = socket.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: wait a little rather than spin.
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return Ok(()),
        };
        let _ = stream.set_nodelay(true);
        let state = Arc::clone(&state);
        let tls = listener.tls.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tls {
                Some(acceptor) => {
                    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                    {
                        Ok(Ok(tls_stream)) => connection(tls_stream, state, peer).await,
                        Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake: {e}"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
                None => connection(stream, state, peer).await,
            }
        });
    }
}

async fn connection<S>(stream: S, state: Arc<routes::State>, peer: SocketAddr)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| {
        let state = Arc::clone(&state);
        async move { Ok::<_, std::convert::Infallible>(routes::handle(&state, req).await) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(stream), service);
    match tokio::time::timeout(CONNECTION_LIFETIME, conn).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(%peer, "connection: {e}"),
        Err(_) => tracing::debug!(%peer, "connection closed after its lifetime"),
    }
}
