//! The client's TLS: the broker's CA (or the system's roots), and a client certificate
//! when the broker asks for one, with rustls' `ring` provider.

use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::{self, PemObject};
use tokio_rustls::rustls::pki_types::PrivateKeyDer;

use super::MqttSettings;

/// The most a key file may hold.
const MAX_KEY_BYTES: u64 = 1 << 20;

/// The TLS config the client connects with; an error names the `[mqtt]` key at fault.
/// `check-config` builds it too, so that files it accepts are ones `run` can use.
pub(crate) fn client_config(
    m: &MqttSettings,
) -> Result<rustls::ClientConfig, (&'static str, String)> {
    let mut roots = rustls::RootCertStore::empty();
    match &m.ca_file {
        Some(ca) => {
            for cert in edgesight_http::server::certificates(ca)
                .map_err(|e| ("mqtt.ca_file", e.to_string()))?
            {
                roots
                    .add(cert)
                    .map_err(|e| ("mqtt.ca_file", format!("{}: {e}", ca.display())))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err((
                    "mqtt.ca_file",
                    "no CA certificate on this system: give ca_file".into(),
                ));
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ("mqtt.url", format!("TLS protocol versions: {e}")))?
        .with_root_certificates(roots);
    let Some((cert, key)) = &m.client_cert else {
        return Ok(builder.with_no_client_auth());
    };
    let chain = edgesight_http::server::certificates(cert)
        .map_err(|e| ("mqtt.cert_file", e.to_string()))?;
    let key_pem = edgesight_frame::files::read_small_file(key, MAX_KEY_BYTES)
        .map_err(|e| ("mqtt.key_file", format!("{}: {e}", key.display())))?;
    let key_der = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| {
        let why = match e {
            pem::Error::NoItemsFound => "no PEM private key in it".to_string(),
            e => format!("not a PEM private key: {e}"),
        };
        ("mqtt.key_file", format!("{}: {why}", key.display()))
    })?;
    builder.with_client_auth_cert(chain, key_der).map_err(|e| {
        (
            "mqtt.key_file",
            format!(
                "{} and {} do not make a client certificate: {e}",
                cert.display(),
                key.display()
            ),
        )
    })
}
