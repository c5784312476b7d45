//! TLS: the certificate and key served (read again on SIGHUP), the protocol versions, and
//! the client certificates asked for, as `[web]` or an exporter web config file sets them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::{self, PemObject};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::TlsAcceptor;

use edgesight_frame::files;

/// How the server takes TLS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSettings {
    /// The PEM certificate chain file served, read again on SIGHUP.
    pub cert: PathBuf,
    /// The PEM private key file of the certificate, read again on SIGHUP.
    pub key: PathBuf,
    /// The CA whose certificates clients show, and whether they must.
    pub client_ca: Option<(PathBuf, ClientAuth)>,
    /// The oldest TLS version served.
    pub min_version: TlsVersion,
    /// The newest TLS version served.
    pub max_version: TlsVersion,
}

impl TlsSettings {
    /// TLS from `cert` and `key`, any client, TLS 1.2 and 1.3.
    pub fn new(cert: PathBuf, key: PathBuf) -> TlsSettings {
        TlsSettings {
            cert,
            key,
            client_ca: None,
            min_version: TlsVersion::Tls12,
            max_version: TlsVersion::Tls13,
        }
    }
}

/// Client certificates (exporter-toolkit's `client_auth_type`, of which rustls serves
/// these two).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// `RequireAndVerifyClientCert`.
    Require,
    /// `VerifyClientCertIfGiven`.
    IfGiven,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
/// A TLS protocol version (exporter-toolkit's `min_version` and `max_version`),
/// ordered oldest first.
pub enum TlsVersion {
    /// TLS 1.2 (`TLS12`).
    Tls12,
    /// TLS 1.3 (`TLS13`).
    Tls13,
}

/// The certificate and key served, read again on SIGHUP: a certificate renewed in place
/// (as ACME clients do) is served to new handshakes from then on.
#[derive(Clone)]
pub struct TlsIdentity {
    settings: TlsSettings,
    acceptor: Arc<std::sync::RwLock<TlsAcceptor>>,
}

impl TlsIdentity {
    pub(super) fn load(settings: &TlsSettings) -> Result<TlsIdentity, TlsError> {
        let acceptor = TlsAcceptor::from(Arc::new(tls_config(settings)?));
        Ok(TlsIdentity {
            settings: settings.clone(),
            acceptor: Arc::new(std::sync::RwLock::new(acceptor)),
        })
    }

    /// The acceptor new connections get now.
    pub(super) fn acceptor(&self) -> TlsAcceptor {
        self.acceptor
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reads the certificate, key and client CA again and serves them to new handshakes;
    /// files that no longer make an identity leave the one served in place (the error
    /// says why).
    pub fn reload(&self) -> Result<(), TlsError> {
        let acceptor = TlsAcceptor::from(Arc::new(tls_config(&self.settings)?));
        *self.acceptor.write().unwrap_or_else(|e| e.into_inner()) = acceptor;
        Ok(())
    }

    /// The certificate file, for messages.
    pub fn cert_path(&self) -> &Path {
        &self.settings.cert
    }
}

/// Why the TLS settings cannot serve, by the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{0}")]
    /// The certificate chain cannot be read or parsed, or the protocol versions are
    /// refused; the message names the file and what is wrong.
    Cert(String),
    /// Also a key that does not belong to the certificate.
    #[error("{0}")]
    Key(String),
    #[error("{0}")]
    /// The client CA file cannot be read, parsed or made a certificate verifier;
    /// the message names the file and what is wrong.
    ClientCa(String),
}

/// The most a PEM file may hold: a long chain is a few tens of kilobytes.
const MAX_PEM_BYTES: u64 = 1 << 20;

/// Why a file of PEM certificates (a chain, a CA) cannot be used; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum PemError {
    /// The file cannot be read: missing, not a regular file, or too large.
    #[error("{}: {error}", path.display())]
    Read {
        /// The file named.
        path: PathBuf,
        /// What reading it said.
        error: files::SmallFileError,
    },
    /// The file is not PEM, or a certificate in it is malformed.
    #[error("{}: not a PEM certificate chain: {error}", path.display())]
    NotPem {
        /// The file named.
        path: PathBuf,
        /// What the PEM reader said.
        error: pem::Error,
    },
    /// The file holds no certificate (a key alone, or nothing).
    #[error("{}: no PEM certificate in it", path.display())]
    Empty {
        /// The file named.
        path: PathBuf,
    },
}

/// The PEM certificates in `path`, at least one.
pub fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let pem = files::read_small_file(path, MAX_PEM_BYTES).map_err(|error| PemError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| PemError::NotPem {
            path: path.to_path_buf(),
            error,
        })?;
    if certs.is_empty() {
        return Err(PemError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// Reads and parses the certificate chain, the private key and the client CA into a TLS
/// server config. `check-config` calls it too, so files it accepts are ones `run` can
/// serve.
pub fn tls_config(settings: &TlsSettings) -> Result<rustls::ServerConfig, TlsError> {
    let (cert, key) = (&settings.cert, &settings.key);
    let certs = certificates(cert).map_err(|e| TlsError::Cert(e.to_string()))?;
    let key_pem = files::read_small_file(key, MAX_PEM_BYTES)
        .map_err(|e| TlsError::Key(format!("{}: {e}", key.display())))?;
    let key_der = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| match e {
        pem::Error::NoItemsFound => {
            TlsError::Key(format!("{}: no PEM private key in it", key.display()))
        }
        e => TlsError::Key(format!("{}: not a PEM private key: {e}", key.display())),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = [
        (TlsVersion::Tls12, &rustls::version::TLS12),
        (TlsVersion::Tls13, &rustls::version::TLS13),
    ]
    .into_iter()
    .filter(|(v, _)| (settings.min_version..=settings.max_version).contains(v))
    .map(|(_, p)| p)
    .collect();
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| TlsError::Cert(format!("TLS protocol versions: {e}")))?;
    let builder = match &settings.client_ca {
        None => builder.with_no_client_auth(),
        Some((ca, auth)) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certificates(ca).map_err(|e| TlsError::ClientCa(e.to_string()))? {
                roots
                    .add(c)
                    .map_err(|e| TlsError::ClientCa(format!("{}: {e}", ca.display())))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = match auth {
                ClientAuth::Require => verifier,
                ClientAuth::IfGiven => verifier.allow_unauthenticated(),
            };
            let verifier = verifier
                .build()
                .map_err(|e| TlsError::ClientCa(format!("{}: {e}", ca.display())))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    builder.with_single_cert(certs, key_der).map_err(|e| {
        TlsError::Key(format!(
            "{} and {} do not make a TLS identity: {e}",
            cert.display(),
            key.display()
        ))
    })
}
