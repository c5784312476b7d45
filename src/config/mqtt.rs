//! The `[mqtt]` table's checks: the broker's URL, the TLS files loaded as the client will
//! load them, the password file read, the names that go into topics, QoS and keepalive.

use std::path::PathBuf;
use std::time::Duration;

use toml::Spanned;

use super::schema::MqttConfig;
use super::Settings;
use super::{ConfigError, Doc};
use crate::mqtt::{read_password, MqttSettings, PORT, TLS_PORT};

pub(super) fn check_mqtt(
    doc: &Doc,
    mqtt: Option<&Spanned<MqttConfig>>,
    host_name: impl FnOnce() -> Option<String>,
) -> Result<Option<MqttSettings>, ConfigError> {
    let Some(table) = mqtt else {
        return Ok(None);
    };
    let m = table.get_ref();
    let url = m.url.as_ref().ok_or_else(|| {
        doc.at(
            table.span(),
            "mqtt.url",
            "[mqtt] needs url = \"mqtt://HOST:PORT\"",
        )
    })?;
    let (tls, host, port) =
        parse_url(url.get_ref()).map_err(|e| doc.at(url.span(), "mqtt.url", e))?;
    let file_at =
        |file: &Option<Spanned<PathBuf>>, key: &str| -> Result<Option<PathBuf>, ConfigError> {
            let Some(file) = file else { return Ok(None) };
            if !tls {
                return Err(doc.at(
                    file.span(),
                    key,
                    format!("{key} is for TLS: the url must be mqtts://"),
                ));
            }
            Ok(Some(file.get_ref().clone()))
        };
    let ca_file = file_at(&m.ca_file, "mqtt.ca_file")?;
    let cert = file_at(&m.cert_file, "mqtt.cert_file")?;
    let key = file_at(&m.key_file, "mqtt.key_file")?;
    let client_cert = match (cert, key) {
        (None, None) => None,
        (Some(c), Some(k)) => Some((c, k)),
        (Some(_), None) | (None, Some(_)) => {
            let span = m
                .cert_file
                .as_ref()
                .or(m.key_file.as_ref())
                .expect("one given")
                .span();
            return Err(doc.at(
                span,
                "mqtt.cert_file",
                "a client certificate needs both cert_file and key_file",
            ));
        }
    };
    let username = m.username.as_ref().map(|u| u.get_ref().clone());
    let password_file = match &m.password_file {
        None => None,
        Some(file) => {
            if username.is_none() {
                return Err(doc.at(
                    file.span(),
                    "mqtt.password_file",
                    "a password needs a username",
                ));
            }
            read_password(file.get_ref())
                .map_err(|e| doc.at(file.span(), "mqtt.password_file", e))?;
            Some(file.get_ref().clone())
        }
    };
    let board = match &m.board {
        Some(b) => {
            check_topic_level(b.get_ref()).map_err(|e| doc.at(b.span(), "mqtt.board", e))?;
            b.get_ref().clone()
        }
        None => {
            let name = host_name().unwrap_or_default();
            check_topic_level(&name).map_err(|e| {
                doc.at(
                    table.span(),
                    "mqtt.board",
                    format!("the host name {e}: give [mqtt] board"),
                )
            })?;
            name
        }
    };
    let topic_prefix = match &m.topic_prefix {
        Some(p) => {
            check_topic(p.get_ref()).map_err(|e| doc.at(p.span(), "mqtt.topic_prefix", e))?;
            p.get_ref().clone()
        }
        None => format!("edgesight/{board}"),
    };
    let discovery_prefix = match &m.discovery_prefix {
        Some(p) if p.get_ref().is_empty() => String::new(),
        Some(p) => {
            check_topic(p.get_ref()).map_err(|e| doc.at(p.span(), "mqtt.discovery_prefix", e))?;
            p.get_ref().clone()
        }
        None => "homeassistant".into(),
    };
    let client_id = match &m.client_id {
        Some(id) => {
            let ok = !id.get_ref().is_empty()
                && id.get_ref().len() <= 128
                && id.get_ref().chars().all(|c| c.is_ascii_graphic());
            if !ok {
                return Err(doc.at(
                    id.span(),
                    "mqtt.client_id",
                    format!(
                        "'{}': use 1-128 printable ASCII characters, no space",
                        id.get_ref()
                    ),
                ));
            }
            id.get_ref().clone()
        }
        None => format!("edgesight-{board}"),
    };
    let qos = match &m.qos {
        None => 0,
        Some(q) => u8::try_from(*q.get_ref())
            .ok()
            .filter(|q| *q <= 2)
            .ok_or_else(|| {
                doc.at(
                    q.span(),
                    "mqtt.qos",
                    format!("{} is not a QoS: 0, 1 or 2", q.get_ref()),
                )
            })?,
    };
    let keepalive = match &m.keepalive_seconds {
        None => 30,
        Some(k) => u16::try_from(*k.get_ref())
            .ok()
            .filter(|k| *k >= 1)
            .ok_or_else(|| {
                doc.at(
                    k.span(),
                    "mqtt.keepalive_seconds",
                    format!("{} is not between 1 and 65535", k.get_ref()),
                )
            })?,
    };
    let settings = MqttSettings {
        url: url.get_ref().clone(),
        host,
        port,
        tls,
        ca_file,
        client_cert,
        username,
        password_file,
        client_id,
        board,
        topic_prefix,
        discovery_prefix,
        qos,
        keepalive: Duration::from_secs(keepalive.into()),
    };
    if tls {
        // The client's own loader: what passes here is what `run` connects with.
        crate::mqtt::tls::client_config(&settings).map_err(|(key, e)| {
            let span = match key {
                "mqtt.ca_file" => m.ca_file.as_ref(),
                "mqtt.key_file" => m.key_file.as_ref(),
                _ => m.cert_file.as_ref(),
            }
            .map_or(url.span(), |s| s.span());
            doc.at(span, key, e)
        })?;
    }
    Ok(Some(settings))
}

/// `mqtt://HOST[:PORT]` or `mqtts://HOST[:PORT]` (an IPv6 address in brackets): whether
/// TLS, the host and the port.
pub(crate) fn parse_url(url: &str) -> Result<(bool, String, u16), String> {
    let bad =
        |why: &str| format!("'{url}': {why} (expected mqtt://HOST:PORT or mqtts://HOST:PORT)");
    let (tls, rest) = if let Some(rest) = url.strip_prefix("mqtt://") {
        (false, rest)
    } else if let Some(rest) = url.strip_prefix("mqtts://") {
        (true, rest)
    } else {
        return Err(bad("not an mqtt:// or mqtts:// URL"));
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains(['/', '?', '#', '@']) {
        return Err(bad("a broker's URL has no path, query or user"));
    }
    let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or_else(|| bad("no closing ']'"))?;
        (host, after.strip_prefix(':'))
    } else {
        match rest.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (rest, None),
        }
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    let port = match port {
        None => {
            if tls {
                TLS_PORT
            } else {
                PORT
            }
        }
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| bad(&format!("'{p}' is not a port")))?,
    };
    Ok((tls, host.to_string(), port))
}

/// A topic prefix: levels without MQTT's wildcards, none empty.
fn check_topic(topic: &str) -> Result<(), String> {
    if topic.is_empty()
        || topic
            .split('/')
            .any(|level| check_topic_level(level).is_err())
    {
        return Err(format!(
            "'{topic}': use levels of letters, digits, '_', '-' or '.' between '/' \
             (no '+', '#', space or empty level)"
        ));
    }
    Ok(())
}

/// One level of a topic, which a board name becomes.
fn check_topic_level(level: &str) -> Result<(), String> {
    let ok = !level.is_empty()
        && level.len() <= 64
        && level
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    if !ok {
        return Err(format!(
            "'{level}' is not 1-64 letters, digits, '_', '-' or '.'"
        ));
    }
    Ok(())
}

/// The machine's host name, the board's name unless `[mqtt] board` gives one.
pub(super) fn host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim();
    // A fully qualified name's first label: dots would read as part of the board.
    Some(name.split('.').next().unwrap_or(name).to_string())
}

/// What Home Assistant's discovery shows of the config's cameras, and the status page's
/// URL for each device's link.
pub fn discovery_cameras(settings: &Settings, board: &str) -> crate::mqtt::Cameras {
    let cameras = settings
        .cameras
        .iter()
        .map(|c| crate::mqtt::Camera {
            name: c.name.clone(),
            regions: c.regions.iter().map(|r| r.name.clone()).collect(),
            health: c.health.enabled,
        })
        .collect();
    crate::mqtt::Cameras::new(cameras, status_url(settings, board))
}

/// The status page's URL as the board's first listen address gives it; an address of
/// every interface (`:PORT`, `0.0.0.0`, `[::]`) is reached by the board's name.
fn status_url(settings: &Settings, board: &str) -> String {
    let scheme = if settings.web.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let first = settings
        .web
        .listen
        .first()
        .map(|l| l.to_string())
        .unwrap_or_default();
    let (host, port) = first.rsplit_once(':').unwrap_or(("", &first));
    let host = match host {
        "" | "0.0.0.0" | "[::]" => board,
        h => h,
    };
    format!("{scheme}://{host}:{port}/")
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{load_text, refusal, write_tmp, GOOD};
    use super::*;

    fn with(mqtt: &str) -> String {
        format!("{GOOD}\n[mqtt]\n{mqtt}")
    }

    #[test]
    fn defaults_follow_the_board() {
        let s = load_text(&with("url = \"mqtt://broker.lan\"\nboard = \"b7\"\n")).unwrap();
        let m = s.mqtt.unwrap();
        assert_eq!(
            (m.host.as_str(), m.port, m.tls),
            ("broker.lan", 1883, false)
        );
        assert_eq!(m.topic_prefix, "edgesight/b7");
        assert_eq!(m.client_id, "edgesight-b7");
        assert_eq!(m.discovery_prefix, "homeassistant");
        assert_eq!((m.qos, m.keepalive), (0, Duration::from_secs(30)));
        assert_eq!(m.availability_topic(), "edgesight/b7/availability");
        assert_eq!(load_text(GOOD).unwrap().mqtt, None);
    }

    #[test]
    fn urls_give_tls_host_and_port() {
        assert_eq!(parse_url("mqtts://h"), Ok((true, "h".into(), 8883)));
        assert_eq!(
            parse_url("mqtt://10.0.0.2:1884/"),
            Ok((false, "10.0.0.2".into(), 1884))
        );
        assert_eq!(
            parse_url("mqtt://[::1]:1885"),
            Ok((false, "::1".into(), 1885))
        );
        assert_eq!(
            parse_url("http://h").unwrap_err(),
            "'http://h': not an mqtt:// or mqtts:// URL (expected mqtt://HOST:PORT or \
             mqtts://HOST:PORT)"
        );
        assert!(parse_url("mqtt://h:0")
            .unwrap_err()
            .contains("'0' is not a port"));
        assert!(parse_url("mqtt://u@h")
            .unwrap_err()
            .contains("no path, query or user"));
        assert!(parse_url("mqtt://:1883").unwrap_err().contains("no host"));
    }

    #[test]
    fn bad_values_name_their_line_and_key() {
        let line = GOOD.lines().count() + 3;
        assert_eq!(
            refusal(&with("url = \"tcp://h\"\n")),
            format!(
                "t.toml:{line}:7: mqtt.url: 'tcp://h': not an mqtt:// or mqtts:// URL \
                 (expected mqtt://HOST:PORT or mqtts://HOST:PORT)"
            )
        );
        assert_eq!(
            refusal(&with("url = \"mqtt://h\"\nboard = \"b\"\nqos = 3\n")),
            format!("t.toml:{}:7: mqtt.qos: 3 is not a QoS: 0, 1 or 2", line + 2)
        );
        assert_eq!(
            refusal(&with(
                "url = \"mqtt://h\"\nboard = \"b\"\nkeepalive_seconds = 0\n"
            )),
            format!(
                "t.toml:{}:21: mqtt.keepalive_seconds: 0 is not between 1 and 65535",
                line + 2
            )
        );
        assert_eq!(
            refusal(&with(
                "url = \"mqtt://h\"\nboard = \"b\"\ntopic_prefix = \"a/+\"\n"
            )),
            format!(
                "t.toml:{}:16: mqtt.topic_prefix: 'a/+': use levels of letters, digits, \
                 '_', '-' or '.' between '/' (no '+', '#', space or empty level)",
                line + 2
            )
        );
        assert_eq!(
            refusal(&with("board = \"b\"\n")),
            format!(
                "t.toml:{}:1: mqtt.url: [mqtt] needs url = \"mqtt://HOST:PORT\"",
                line - 1
            )
        );
        assert_eq!(
            refusal(&with(
                "url = \"mqtt://h\"\nboard = \"b\"\nca_file = \"ca.pem\"\n"
            )),
            format!(
                "t.toml:{}:11: mqtt.ca_file: mqtt.ca_file is for TLS: the url must be mqtts://",
                line + 2
            )
        );
        assert_eq!(
            refusal(&with(
                "url = \"mqtt://h\"\nboard = \"b\"\nusername = \"u\"\nwat = 1\n"
            )),
            format!(
                "t.toml:{}:1: mqtt.wat: unknown field `wat`, expected one of `url`, \
                 `ca_file`, `cert_file`, `key_file`, `username`, `password_file`, \
                 `client_id`, `board`, `topic_prefix`, `discovery_prefix`, `qos`, \
                 `keepalive_seconds`",
                line + 3
            )
        );
    }

    #[test]
    fn the_password_file_is_read_and_needs_a_username() {
        let file = write_tmp("mqtt.password", "s3cret\n");
        assert_eq!(read_password(&file), Ok("s3cret".into()));
        let text = format!(
            "url = \"mqtt://h\"\nboard = \"b\"\nusername = \"u\"\npassword_file = \"{}\"\n",
            file.display()
        );
        let m = load_text(&with(&text)).unwrap().mqtt.unwrap();
        assert_eq!(m.password_file.as_deref(), Some(file.as_path()));
        let line = GOOD.lines().count() + 6;
        assert_eq!(
            refusal(&with(&text.replace("username = \"u\"\n", ""))),
            format!(
                "t.toml:{}:17: mqtt.password_file: a password needs a username",
                line - 1
            )
        );
        let empty = write_tmp("mqtt.empty", "\n");
        assert_eq!(
            refusal(&with(&text.replace(
                &file.display().to_string(),
                &empty.display().to_string()
            ))),
            format!(
                "t.toml:{line}:17: mqtt.password_file: {}: empty",
                empty.display()
            )
        );
        let absent = "/nonexistent/mqtt.password";
        assert!(
            refusal(&with(&text.replace(&file.display().to_string(), absent))).starts_with(
                &format!("t.toml:{line}:17: mqtt.password_file: {absent}: cannot read: ")
            ),
        );
    }

    #[test]
    fn tls_files_are_loaded_as_the_client_loads_them() {
        let not_pem = write_tmp("mqtt-ca.txt", "not a certificate\n");
        let text = format!(
            "url = \"mqtts://h\"\nboard = \"b\"\nca_file = \"{}\"\n",
            not_pem.display()
        );
        let line = GOOD.lines().count() + 5;
        assert_eq!(
            refusal(&with(&text)),
            format!(
                "t.toml:{line}:11: mqtt.ca_file: {}: no PEM certificate in it",
                not_pem.display()
            )
        );
        let one = format!(
            "url = \"mqtts://h\"\nboard = \"b\"\nkey_file = \"{}\"\n",
            not_pem.display()
        );
        assert_eq!(
            refusal(&with(&one)),
            format!(
                "t.toml:{line}:12: mqtt.cert_file: a client certificate needs both cert_file \
                 and key_file"
            )
        );
    }

    #[test]
    fn discovery_is_off_when_its_prefix_is_empty() {
        let text = "url = \"mqtt://h\"\nboard = \"b\"\ndiscovery_prefix = \"\"\n";
        let m = load_text(&with(text)).unwrap().mqtt.unwrap();
        assert_eq!(m.discovery_prefix, "");
    }

    #[test]
    fn printed_settings_read_back_the_same() {
        let s = load_text(&with(
            "url = \"mqtts://[::1]:8884\"\nboard = \"b\"\nqos = 1\nkeepalive_seconds = 7\n\
             username = \"u\"\ndiscovery_prefix = \"\"\n",
        ))
        .unwrap();
        assert_eq!(load_text(&s.to_toml()).unwrap(), s);
    }
}
