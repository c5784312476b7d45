//! An exporter web config file (`--web.config.file`): Prometheus' exporter-toolkit format,
//! as node_exporter and the other exporters take it, so a site's file serves here
//! unchanged. TLS (certificate, key, client certificates and their CA, protocol
//! versions), basic auth users (bcrypt hashes), and headers for every answer. Paths in it
//! are relative to the file's directory. What rustls cannot do (TLS 1.0 and 1.1, client
//! certificates taken unverified, SAN filters, inline PEM) is refused by name; what it
//! chooses itself (cipher suites, curves) is accepted and reported as not applied.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use edgesight_http::server::{ClientAuth, TlsSettings, TlsVersion};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<Tls>,
    http_server_config: Option<Http>,
    basic_auth_users: Option<Users>,
}

/// The users in the order given: a map would keep the last of a name given twice, and
/// exporter-toolkit refuses such a file.
#[derive(Debug, Default)]
struct Users(Vec<(String, String)>);

impl<'de> Deserialize<'de> for Users {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Users, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = Users;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of user names to bcrypt hashes")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Users, A::Error> {
                let mut users = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    users.push(entry);
                }
                Ok(Users(users))
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

/// A web config's size at most: exporter-toolkit's files are a few KiB (a user is a line
/// of about 80 bytes).
const MAX_BYTES: u64 = 64 << 10;
/// Nesting at most: exporter-toolkit's keys nest 3 deep. The YAML parser takes time
/// quadratic in the nesting (200 KB of nested sequences took half a minute), so the
/// nesting is bounded before the text reaches it.
const MAX_DEPTH: usize = 16;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Tls {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    cert: Option<String>,
    key: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<PathBuf>,
    client_ca: Option<String>,
    client_allowed_sans: Option<Vec<String>>,
    min_version: Option<String>,
    max_version: Option<String>,
    cipher_suites: Option<Vec<String>>,
    prefer_server_cipher_suites: Option<bool>,
    curve_preferences: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Http {
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

/// The headers exporter-toolkit lets a web config set.
const HEADERS: [&str; 5] = [
    "Strict-Transport-Security",
    "X-Content-Type-Options",
    "X-Frame-Options",
    "X-XSS-Protection",
    "Content-Security-Policy",
];

/// What a web config file sets, checked but for the files' contents and the hashes
/// (which `[web]`'s own checks take).
#[derive(Debug, Default)]
pub(super) struct WebFile {
    pub tls: Option<TlsSettings>,
    pub users: BTreeMap<String, String>,
    pub headers: Vec<(String, String)>,
    /// Keys accepted but not applied, said as warnings.
    pub not_applied: Vec<String>,
}

/// Reads the web config file at `path`; an error names its key.
pub(super) fn read(path: &Path) -> Result<WebFile, (String, String)> {
    let text = edgesight_frame::files::read_small_file(path, MAX_BYTES)
        .map_err(|e| (String::new(), format!("{}: {e}", path.display())))?;
    if let Some(line) = too_deep(&text, MAX_DEPTH) {
        return Err((
            String::new(),
            format!(
                "{}: nested deeper than {MAX_DEPTH} levels at line {line}: an exporter web \
                 config nests 3 deep",
                path.display()
            ),
        ));
    }
    let file: File = if text.trim().is_empty() {
        File::default()
    } else {
        serde_norway::from_str(&text)
            .map_err(|e| (String::new(), format!("{}: {e}", path.display())))?
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let at = |p: &Path| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            dir.join(p)
        }
    };
    let bad = |key: &str, why: String| (key.to_string(), format!("{}: {why}", path.display()));
    let mut out = WebFile::default();
    if let Some(tls) = file.tls_server_config {
        for (given, key, why) in [
            (
                tls.cert.is_some(),
                "tls_server_config.cert",
                "inline PEM is not read: give cert_file",
            ),
            (
                tls.key.is_some(),
                "tls_server_config.key",
                "inline PEM is not read: give key_file",
            ),
            (
                tls.client_ca.is_some(),
                "tls_server_config.client_ca",
                "inline PEM is not read: give client_ca_file",
            ),
            (
                tls.client_allowed_sans.is_some(),
                "tls_server_config.client_allowed_sans",
                "not supported: every certificate the client CA signed is taken",
            ),
        ] {
            if given {
                return Err(bad(key, why.into()));
            }
        }
        let (Some(cert), Some(key)) = (tls.cert_file, tls.key_file) else {
            return Err(bad(
                "tls_server_config.cert_file",
                "TLS needs both cert_file and key_file".into(),
            ));
        };
        let version = |key: &str, given: Option<&str>, default: TlsVersion| match given {
            None => Ok(default),
            Some("TLS12") => Ok(TlsVersion::Tls12),
            Some("TLS13") => Ok(TlsVersion::Tls13),
            Some(other) => Err(bad(
                key,
                format!("'{other}' (TLS12 or TLS13: TLS 1.0 and 1.1 are not served)"),
            )),
        };
        let min_version = version(
            "tls_server_config.min_version",
            tls.min_version.as_deref(),
            TlsVersion::Tls12,
        )?;
        let max_version = version(
            "tls_server_config.max_version",
            tls.max_version.as_deref(),
            TlsVersion::Tls13,
        )?;
        if max_version < min_version {
            return Err(bad(
                "tls_server_config.max_version",
                "below min_version".into(),
            ));
        }
        let auth = match tls.client_auth_type.as_deref().unwrap_or("NoClientCert") {
            "NoClientCert" => None,
            "RequireAndVerifyClientCert" => Some(ClientAuth::Require),
            "VerifyClientCertIfGiven" => Some(ClientAuth::IfGiven),
            other @ ("RequestClientCert" | "RequireAnyClientCert") => {
                return Err(bad(
                    "tls_server_config.client_auth_type",
                    format!(
                        "{other} takes client certificates unverified, which is not served: \
                         use RequireAndVerifyClientCert or VerifyClientCertIfGiven with \
                         client_ca_file"
                    ),
                ))
            }
            other => {
                return Err(bad(
                    "tls_server_config.client_auth_type",
                    format!("unknown '{other}'"),
                ))
            }
        };
        let client_ca = match (auth, tls.client_ca_file) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(bad(
                    "tls_server_config.client_ca_file",
                    "set without a client_auth_type that verifies client certificates".into(),
                ))
            }
            (Some(_), None) => {
                return Err(bad(
                    "tls_server_config.client_ca_file",
                    "client certificates are verified against it: give it".into(),
                ))
            }
            (Some(auth), Some(ca)) => Some((at(&ca), auth)),
        };
        for (given, key) in [
            (
                tls.cipher_suites.is_some(),
                "tls_server_config.cipher_suites",
            ),
            (
                tls.curve_preferences.is_some(),
                "tls_server_config.curve_preferences",
            ),
            (
                tls.prefer_server_cipher_suites.is_some(),
                "tls_server_config.prefer_server_cipher_suites",
            ),
        ] {
            if given {
                out.not_applied.push(format!(
                    "{}: {key} is not applied: rustls offers its own (AEAD suites only)",
                    path.display()
                ));
            }
        }
        out.tls = Some(TlsSettings {
            cert: at(&cert),
            key: at(&key),
            client_ca,
            min_version,
            max_version,
        });
    }
    if let Some(http) = file.http_server_config {
        if http.http2 == Some(true) {
            out.not_applied.push(format!(
                "{}: http_server_config.http2 is not applied: HTTP/1.1 is served",
                path.display()
            ));
        }
        for (name, value) in http.headers.unwrap_or_default() {
            let Some(known) = HEADERS.iter().find(|h| h.eq_ignore_ascii_case(&name)) else {
                return Err(bad(
                    &format!("http_server_config.headers.{name}"),
                    format!("not a header a web config may set ({})", HEADERS.join(", ")),
                ));
            };
            if hyper::header::HeaderValue::from_str(&value).is_err() {
                return Err(bad(
                    &format!("http_server_config.headers.{name}"),
                    "not a valid header value".into(),
                ));
            }
            out.headers.push((known.to_string(), value));
        }
    }
    for (user, hash) in file.basic_auth_users.unwrap_or_default().0 {
        if out.users.insert(user.clone(), hash).is_some() {
            return Err(bad(
                &format!("basic_auth_users.{user}"),
                format!(
                    "user '{user}' is given twice: exporter-toolkit refuses it too, and \
                     which hash counts would be a guess"
                ),
            ));
        }
    }
    Ok(out)
}

/// The first line (from 1) where `text`'s YAML nests deeper than `max`, counted without
/// parsing: the open flow brackets (`[`, `{`) outside quotes and comments, plus, on a
/// block line, its indentation levels and its `- ` / `? ` markers. It may count a level
/// more than YAML would (a literal block's lines), never fewer than half.
fn too_deep(text: &str, max: usize) -> Option<usize> {
    // The indentations of the block levels open above the current line.
    let mut indents: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    for (n, line) in text.lines().enumerate() {
        let body = line.trim_start_matches(' ');
        let mut depth = flow;
        if flow == 0 && !body.is_empty() && !body.starts_with('#') {
            let indent = line.len() - body.len();
            while indents.last().is_some_and(|&i| i >= indent) {
                indents.pop();
            }
            indents.push(indent);
            let mut rest = body;
            let mut markers = 0;
            // A marker is followed by a space or a tab.
            while let Some(after) = ["- ", "-\t", "? ", "?\t"]
                .iter()
                .find_map(|m| rest.strip_prefix(m))
            {
                markers += 1;
                rest = after.trim_start_matches([' ', '\t']);
            }
            depth = indents.len() + markers;
        }
        let mut quote = None;
        // A quote opens a scalar, and `#` a comment, only where a token starts: `it's`
        // and `a#b` are plain text.
        let mut token_start = true;
        for c in line.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '#') if token_start => break,
                (None, '"' | '\'') if token_start => quote = Some(c),
                (None, '[' | '{') => flow += 1,
                (None, ']' | '}') => flow = flow.saturating_sub(1),
                _ => {}
            }
            token_start = quote.is_none() && (c.is_whitespace() || "[{,:".contains(c));
            if depth.max(indents.len() + flow) > max {
                return Some(n + 1);
            }
        }
        if depth > max {
            return Some(n + 1);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("edgesight-web-file-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("web.yml");
        std::fs::write(&path, text).expect("write");
        path
    }

    /// node_exporter's documented example, unchanged: TLS with relative paths, client
    /// certificates, a minimum version, headers and a user.
    #[test]
    fn an_exporter_web_config_reads_as_node_exporter_reads_it() {
        let path = write(
            "example",
            "tls_server_config:\n  cert_file: server.crt\n  key_file: /etc/tls/server.key\n  \
             client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  \
             min_version: TLS13\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n\
             http_server_config:\n  http2: true\n  headers:\n    \
             Strict-Transport-Security: max-age=31536000\n\
             basic_auth_users:\n  prometheus: $2y$10$abc\n",
        );
        let dir = path.parent().unwrap();
        let web = read(&path).expect("read");
        assert_eq!(
            web.tls,
            Some(TlsSettings {
                cert: dir.join("server.crt"),
                key: "/etc/tls/server.key".into(),
                client_ca: Some((dir.join("ca.crt"), ClientAuth::Require)),
                min_version: TlsVersion::Tls13,
                max_version: TlsVersion::Tls13,
            })
        );
        assert_eq!(web.users["prometheus"], "$2y$10$abc");
        assert_eq!(
            web.headers,
            [(
                "Strict-Transport-Security".to_string(),
                "max-age=31536000".to_string()
            )]
        );
        assert_eq!(web.not_applied.len(), 2, "{:?}", web.not_applied);
        assert!(read(&write("empty", "")).expect("empty").tls.is_none());
    }

    /// Brackets in quotes and comments do not nest; a quote or `#` inside a plain word
    /// opens nothing, so the brackets after it still count.
    #[test]
    fn round3_9_nesting_is_counted_as_yaml_nests() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert_eq!(too_deep(&format!("a: {}\n", deep(15)), 16), None);
        assert_eq!(too_deep(&format!("a: {}\n", deep(16)), 16), Some(1));
        let quoted = format!(
            "a: \"{}\"\nb: '{}' # {}\n",
            "[".repeat(40),
            "{".repeat(40),
            deep(40)
        );
        assert_eq!(too_deep(&quoted, 16), None);
        let plain = format!("a: [it's, a#b, {}]\n", "[".repeat(16));
        assert_eq!(too_deep(&plain, 16), Some(1));
        let tabs = format!("a:\n  b:\n    {}x\n", "-\t".repeat(15));
        assert_eq!(too_deep(&tabs, 16), Some(3));
        let across = format!("a:\n  b: [\n{}\n]\n", "[".repeat(15));
        assert_eq!(too_deep(&across, 16), Some(3));
    }

    #[test]
    fn what_cannot_be_served_is_refused_by_its_key() {
        for (text, key, why) in [
            ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS10\n", "tls_server_config.min_version", "TLS 1.0 and 1.1"),
            ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAnyClientCert\n", "tls_server_config.client_auth_type", "unverified"),
            ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: VerifyClientCertIfGiven\n", "tls_server_config.client_ca_file", "give it"),
            ("tls_server_config:\n  cert_file: a\n", "tls_server_config.cert_file", "both"),
            ("tls_server_config:\n  cert: PEM\n  key_file: b\n", "tls_server_config.cert", "inline"),
            ("http_server_config:\n  headers:\n    Server: x\n", "http_server_config.headers.Server", "not a header"),
        ] {
            let (got_key, message) = read(&write("bad", text)).unwrap_err();
            assert_eq!(got_key, key, "{text}");
            assert!(message.contains(why), "{text}: {message}");
        }
        let (_, message) =
            read(&write("unknown", "tls_server_config:\n  cert_fil: a\n")).unwrap_err();
        assert!(message.contains("unknown field `cert_fil`"), "{message}");
    }
}
