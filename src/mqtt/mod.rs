//! MQTT: each camera's state published to a broker, where Home Assistant and home
//! automation read it. `[mqtt]` in the config turns it on ([`MqttSettings`]).
//!
//! The client is rumqttc: MQTT 3.1.1 (what mosquitto and Home Assistant speak), a last
//! will, TLS through rustls with the `ring` provider the HTTPS server already uses (no
//! aws-lc or OpenSSL to cross-build for ARM), and a connection it re-opens when polled
//! again after a failure, so that the backoff is ours.
//!
//! The rooms: `tls` builds the client's TLS config (`check-config` builds it too),
//! `outbox` is the bounded queue messages wait in while the broker is away, `states`
//! turns what the cameras hand the server into the retained state topics, `discovery`
//! makes Home Assistant's device and entity configs, and `link` is the task on the
//! daemon's tokio runtime that connects, backs off and publishes, the states and the
//! events and their pictures that [`crate::events`] hands it. Nothing here is ever
//! waited for by a camera thread: the task reads the same `watch` channels the HTTP
//! server reads.

mod discovery;
mod link;
mod outbox;
mod states;
pub(crate) mod tls;

use std::path::PathBuf;
use std::time::Duration;

pub use discovery::{Camera, Cameras};
pub use link::{start, MqttMetrics};

/// `[mqtt]`, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MqttSettings {
    /// As written: `mqtt://HOST[:PORT]` or `mqtts://HOST[:PORT]`.
    pub url: String,
    pub host: String,
    pub port: u16,
    pub tls: bool,
    /// The CA that signed the broker's certificate; the system's roots when absent.
    pub ca_file: Option<PathBuf>,
    /// The client certificate and its key, for a broker that asks for one.
    pub client_cert: Option<(PathBuf, PathBuf)>,
    pub username: Option<String>,
    /// Read at each connection, so that a password changed in its file (or a systemd
    /// credential) is taken without a restart.
    pub password_file: Option<PathBuf>,
    pub client_id: String,
    pub board: String,
    pub topic_prefix: String,
    /// Empty: no Home Assistant discovery.
    pub discovery_prefix: String,
    pub qos: u8,
    pub keepalive: Duration,
}

/// The most a password file may hold.
const MAX_PASSWORD_BYTES: u64 = 4096;

/// The password in `path`: the file's text without its final line break. Read by
/// `check-config` and again at each connection.
pub(crate) fn read_password(path: &std::path::Path) -> Result<String, String> {
    let text = edgesight_frame::files::read_small_file(path, MAX_PASSWORD_BYTES)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let password = text.strip_suffix('\n').unwrap_or(&text);
    let password = password.strip_suffix('\r').unwrap_or(password);
    if password.is_empty() {
        return Err(format!("{}: empty", path.display()));
    }
    Ok(password.to_string())
}

/// The default ports of MQTT over TCP and over TLS (IANA's).
pub const PORT: u16 = 1883;
pub const TLS_PORT: u16 = 8883;

impl MqttSettings {
    /// The topic of the daemon's availability: `online`, or `offline` (the last will).
    pub fn availability_topic(&self) -> String {
        format!("{}/availability", self.topic_prefix)
    }

    /// Where Home Assistant says `online` when it starts (its birth message).
    pub fn birth_topic(&self) -> String {
        format!("{}/status", self.discovery_prefix)
    }
}
