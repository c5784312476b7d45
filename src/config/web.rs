//! The `[web]` table's checks: the listen address (or `--listen`), the staleness time, the
//! connection limit, the TLS files loaded with the server's own loader, and the bcrypt
//! hashes parsed with its verifier; pictures beyond loopback need basic auth.

use std::collections::BTreeMap;
use std::time::Duration;

use super::schema::{WebConfig, WebSettings};
use super::{flag, ConfigError, Doc, Overrides};
use edgesight_http::server::{ListenAddress, TlsSettings};

/// Makes the error of one entry, placed where the entry was given.
type ErrorAt<'a> = Box<dyn Fn(String) -> ConfigError + 'a>;

pub(super) fn check_web(
    doc: &Doc,
    web: &WebConfig,
    overrides: &Overrides,
) -> Result<WebSettings, ConfigError> {
    let listen: Vec<ListenAddress> = if overrides.listen.is_empty() {
        let given = web.listen_address.get_ref().items();
        if given.is_empty() {
            return Err(doc.at(
                web.listen_address.span(),
                "web.listen_address",
                "an empty list: give at least one address",
            ));
        }
        given
            .iter()
            .map(|a| ListenAddress::parse(a))
            .collect::<Result<_, _>>()
            .map_err(|e| {
                doc.at(
                    web.listen_address.span(),
                    "web.listen_address",
                    e.to_string(),
                )
            })?
    } else {
        overrides
            .listen
            .iter()
            .map(|a| ListenAddress::parse(a))
            .collect::<Result<_, _>>()
            .map_err(|e| flag("--web.listen-address", "web.listen_address", e.to_string()))?
    };
    let stale = *web.stale_after_seconds.get_ref();
    // From 1 ms: a shorter time is 0 once it is a Duration, and every frame is stale.
    if !(stale.is_finite() && (0.001..=3600.0).contains(&stale)) {
        return Err(doc.at(
            web.stale_after_seconds.span(),
            "web.stale_after_seconds",
            format!("{stale} is not a time from 0.001 to 3600 seconds"),
        ));
    }
    let max_connections = *web.max_connections.get_ref();
    if !(1..=4096).contains(&max_connections) {
        return Err(doc.at(
            web.max_connections.span(),
            "web.max_connections",
            format!("{max_connections} is not between 1 and 4096"),
        ));
    }
    let tls = match (&web.tls_cert_file, &web.tls_key_file) {
        (None, None) => None,
        (Some(cert), Some(key)) => {
            for (file, name) in [(cert, "web.tls_cert_file"), (key, "web.tls_key_file")] {
                if !file.get_ref().is_file() {
                    return Err(doc.at(
                        file.span(),
                        name,
                        format!("{}: no such file", file.get_ref().display()),
                    ));
                }
            }
            let settings = TlsSettings::new(cert.get_ref().clone(), key.get_ref().clone());
            // The server's own loader: what passes here is what `run` serves.
            if let Err(e) = edgesight_http::server::tls_config(&settings) {
                let (file, name) = match e {
                    edgesight_http::server::TlsError::Key(_) => (key, "web.tls_key_file"),
                    _ => (cert, "web.tls_cert_file"),
                };
                return Err(doc.at(file.span(), name, e.to_string()));
            }
            Some(settings)
        }
        (Some(one), None) | (None, Some(one)) => {
            return Err(doc.at(
                one.span(),
                "web.tls_cert_file",
                "TLS needs both tls_cert_file and tls_key_file",
            ))
        }
    };
    // A web config file (`--web.config.file`) sets TLS, users and headers instead of
    // `[web]`: both at once would leave one of them silently unused.
    let web_file = match &overrides.web_config_file {
        None => None,
        Some(path) => {
            let file = super::web_file::read(path).map_err(|(key, message)| {
                flag(
                    "--web.config.file",
                    if key.is_empty() {
                        "web.config.file"
                    } else {
                        &key
                    },
                    message,
                )
            })?;
            let set_here = [
                (
                    web.tls_cert_file.as_ref().map(|s| s.span()),
                    "web.tls_cert_file",
                ),
                (
                    web.tls_key_file.as_ref().map(|s| s.span()),
                    "web.tls_key_file",
                ),
                (
                    (!web.basic_auth_users.get_ref().is_empty())
                        .then(|| web.basic_auth_users.span()),
                    "web.basic_auth_users",
                ),
            ];
            if let Some((Some(span), key)) = set_here.into_iter().find(|(s, _)| s.is_some()) {
                return Err(doc.at(
                    span,
                    key,
                    format!(
                        "set here and --web.config.file {} given: TLS and users come from \
                         one of them",
                        path.display()
                    ),
                ));
            }
            if let Some(settings) = &file.tls {
                edgesight_http::server::tls_config(settings)
                    .map_err(|e| flag("--web.config.file", "tls_server_config", e.to_string()))?;
            }
            Some(file)
        }
    };
    let tls = match &web_file {
        Some(file) => file.tls.clone(),
        None => tls,
    };
    let mut users = BTreeMap::new();
    // Every user's hash must have one cost: a wrong password answers in its user's
    // time, an unknown user in the dummy's, and a difference would name the users.
    let mut first_cost: Option<(String, u32)> = None;
    let entries: Vec<(&String, &String, ErrorAt)> = match &web_file {
        Some(file) => file
            .users
            .iter()
            .map(|(user, hash)| {
                let key = format!("basic_auth_users.{user}");
                let at: ErrorAt = Box::new(move |m| flag("--web.config.file", &key, m));
                (user, hash, at)
            })
            .collect(),
        None => web
            .basic_auth_users
            .get_ref()
            .iter()
            .map(|(user, hash)| {
                let key = format!("web.basic_auth_users.{user}");
                let at: ErrorAt = Box::new(move |m| doc.at(hash.span(), &key, m));
                (user, hash.get_ref(), at)
            })
            .collect(),
    };
    for (user, hash, at) in entries {
        if user.contains(':') || user.is_empty() {
            return Err(at(format!(
                "user '{user}': a user name is not empty and has no ':'"
            )));
        }
        // The verifier's own parser: a hash that passes here is one `run` can check.
        let cost = edgesight_http::server::check_hash(hash)
            .map_err(|e| at(format!("user '{user}': {e}")))?;
        if let Some((first, first_cost)) = &first_cost {
            if cost != *first_cost {
                return Err(at(edgesight_http::server::mixed_costs(
                    first,
                    *first_cost,
                    user,
                    cost,
                )));
            }
        }
        first_cost.get_or_insert((user.clone(), cost));
        users.insert(user.clone(), hash.clone());
    }
    let snapshots = *web.snapshots.get_ref();
    // TLS only hides the pictures from the network; who may see them is auth's to say.
    if let Some(open) = listen
        .iter()
        .find(|l| !l.is_loopback())
        .filter(|_| snapshots && users.is_empty())
    {
        let message = format!(
            "snapshots and the status page show camera pictures: listening on {open}, \
             beyond loopback, they need basic_auth_users (TLS encrypts them but lets \
             anyone see them)"
        );
        return Err(if overrides.listen.is_empty() {
            doc.at(web.snapshots.span(), "web.snapshots", message)
        } else {
            flag("--web.listen-address", "web.snapshots", message)
        });
    }
    Ok(WebSettings {
        listen,
        snapshots,
        stale_after: Duration::from_secs_f64(stale),
        max_connections,
        tls,
        users,
        headers: web_file.map(|f| f.headers).unwrap_or_default(),
    })
}

/// A warning for each address beyond loopback served to peers who show nothing: no basic
/// auth, and no client certificate required. What every endpoint shows then is private
/// (motion per region says someone is there) or helps an attacker (paths, the revision).
pub(super) fn exposure_warnings(web: &WebSettings) -> Vec<String> {
    let certificates_required = web
        .tls
        .as_ref()
        .and_then(|t| t.client_ca.as_ref())
        .is_some_and(|(_, auth)| *auth == edgesight_http::server::ClientAuth::Require);
    if !web.users.is_empty() || certificates_required {
        return Vec::new();
    }
    web.listen
        .iter()
        .filter(|l| !l.is_loopback())
        .map(|open| {
            format!(
                "web.listen_address {open}: beyond loopback without basic auth, any peer \
                 that reaches it reads the live motion per region (presence), the tamper \
                 and health states, the status page, error texts with file paths and the \
                 build revision: add basic_auth_users (TLS alone does not say who may \
                 read) or listen on loopback (guide: deploying.md, What the network sees)"
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::super::test_support::{at, load_text};

    /// A throwaway self-signed P-256 certificate and its key (rustls does not check the
    /// dates), and a key of another pair.
    const TEST_CERT: &str = "\
-----BEGIN CERTIFICATE-----\n\
MIIBiTCCAS+gAwIBAgIULRh2PXlsukYs7J2Kl7qfLNe0rHIwCgYIKoZIzj0EAwIw\n\
GTEXMBUGA1UEAwwOZWRnZXNpZ2h0LXRlc3QwIBcNMjYxMTIzMTYyMzUxWhgPMjEy\n\
NjEwMzAxNjIzNTFaMBkxFzAVBgNVBAMMDmVkZ2VzaWdodC10ZXN0MFkwEwYHKoZI\n\
zj0CAQYIKoZIzj0DAQcDQgAEVC2asniYlAZrSE0JV4haIrOfqoIkMpWtYOfUH0og\n\
w5gXvsX7Pq9k/eKuapg8YStz6Pr0TTGnvS9L+UUL4VJ4lKNTMFEwHQYDVR0OBBYE\n\
FDik6ys8KCnmhBYhSGYYJOWX8VJ1MB8GA1UdIwQYMBaAFDik6ys8KCnmhBYhSGYY\n\
JOWX8VJ1MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIgbQnTUAuf\n\
xmRwaL2TuobFfWUpY48FjahkpIJt1tzQ/poCIQCxWYaBNX09WO0GSEEtgPIM+WRQ\n\
3GTfvdwyXWZQb0F1zw==\n\
-----END CERTIFICATE-----
";
    const TEST_KEY: &str = "\
-----BEGIN PRIVATE KEY-----\n\
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgQ6HGR9h0bBvscbyg\n\
ajYSoHUk/AtWbvQzrZIeHGZKTsihRANCAARULZqyeJiUBmtITQlXiFois5+qgiQy\n\
la1g59QfSiDDmBe+xfs+r2T94q5qmDxhK3Po+vRNMae9L0v5RQvhUniU\n\
-----END PRIVATE KEY-----
";
    const OTHER_KEY: &str = "\
-----BEGIN PRIVATE KEY-----\n\
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgd1Il8fUStfLNY2oF\n\
92OPSGXTtz8vU1uuEGTTJCbsjk6hRANCAARS9s72qgSvY1WfQvSmcPyc4Z1W6XMa\n\
eFI5wNssFJ7TtRqnt+EpkJzH/GEDN+dIHY9n0wOy3/D2pJMkfdcEwo58\n\
-----END PRIVATE KEY-----
";

    /// Writes `files` into a fresh directory; returns its path.
    fn files(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("edgesight-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (file, text) in files {
            std::fs::write(dir.join(file), text).unwrap();
        }
        dir
    }

    fn tls_section(dir: &Path, cert: &str, key: &str) -> String {
        format!(
            "tls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n",
            dir.join(cert).display(),
            dir.join(key).display()
        )
    }

    /// Resilience round 3, item 6: an address beyond loopback draws a warning unless
    /// peers must show a password or a client certificate; one taken if given is not
    /// enough.
    #[test]
    fn round3_6_only_unauthenticated_addresses_beyond_loopback_are_named() {
        use edgesight_http::server::{ClientAuth, ListenAddress, TlsSettings};
        let mut web = load_text("").unwrap().web;
        web.listen = ["127.0.0.1:1", "[::1]:2", "0.0.0.0:3", ":4"]
            .iter()
            .map(|a| ListenAddress::parse(a).unwrap())
            .collect();
        let named = |web: &edgesight_http::server::WebSettings| -> Vec<String> {
            super::exposure_warnings(web)
                .iter()
                .map(|w| w.split(':').take(2).collect::<Vec<_>>().join(":"))
                .collect()
        };
        assert_eq!(
            named(&web),
            ["web.listen_address 0.0.0.0:3", "web.listen_address :4"]
        );
        let mut tls = TlsSettings::new("c.pem".into(), "k.pem".into());
        tls.client_ca = Some(("ca.pem".into(), ClientAuth::IfGiven));
        web.tls = Some(tls.clone());
        assert_eq!(named(&web).len(), 2);
        tls.client_ca = Some(("ca.pem".into(), ClientAuth::Require));
        web.tls = Some(tls);
        assert!(named(&web).is_empty());
        web.tls = None;
        web.users.insert("prom".into(), "$2y$04$hash".into());
        assert!(named(&web).is_empty());
    }

    #[test]
    fn snapshots_beyond_loopback_need_auth_even_with_tls() {
        let text = "[web]\nlisten_address = \"0.0.0.0:9000\"\nsnapshots = true\n";
        let err = load_text(text).unwrap_err();
        assert_eq!((at(&err), err.key.as_str()), ((3, 13), "web.snapshots"));
        assert_eq!(
            err.message,
            "snapshots and the status page show camera pictures: listening on 0.0.0.0:9000, \
             beyond loopback, they need basic_auth_users (TLS encrypts them but lets anyone \
             see them)"
        );
        // TLS alone encrypts the pictures for anyone who asks: still refused.
        let dir = files("tls-only", &[("c.pem", TEST_CERT), ("k.pem", TEST_KEY)]);
        let tls = format!("{text}{}", tls_section(&dir, "c.pem", "k.pem"));
        let err = load_text(&tls).unwrap_err();
        assert_eq!((at(&err), err.key.as_str()), ((3, 13), "web.snapshots"));
        let hash = bcrypt::hash("pw", 4).unwrap();
        let users = format!("[web.basic_auth_users]\nprom = \"{hash}\"\n");
        assert!(load_text(&format!("{text}{users}")).unwrap().web.snapshots);
        assert!(load_text(&format!("{tls}{users}")).unwrap().web.snapshots);
        assert!(
            load_text("[web]\nsnapshots = true\n")
                .unwrap()
                .web
                .snapshots
        );
    }

    #[test]
    fn tls_files_are_loaded_as_the_server_loads_them() {
        let dir = files(
            "tls-files",
            &[
                ("c.pem", TEST_CERT),
                ("k.pem", TEST_KEY),
                ("other.pem", OTHER_KEY),
                ("garbage.pem", "not a PEM file\n"),
            ],
        );
        let path = |f: &str| dir.join(f).display().to_string();
        assert!(load_text(&format!("[web]\n{}", tls_section(&dir, "c.pem", "k.pem"))).is_ok());
        for (cert, key, place, expect) in [
            (
                "garbage.pem",
                "k.pem",
                ((2, 17), "web.tls_cert_file"),
                format!("{}: no PEM certificate in it", path("garbage.pem")),
            ),
            (
                "k.pem",
                "k.pem",
                ((2, 17), "web.tls_cert_file"),
                format!("{}: no PEM certificate in it", path("k.pem")),
            ),
            (
                "c.pem",
                "garbage.pem",
                ((3, 16), "web.tls_key_file"),
                format!("{}: no PEM private key in it", path("garbage.pem")),
            ),
            (
                "c.pem",
                "c.pem",
                ((3, 16), "web.tls_key_file"),
                format!("{}: no PEM private key in it", path("c.pem")),
            ),
            (
                "c.pem",
                "other.pem",
                ((3, 16), "web.tls_key_file"),
                format!(
                    "{} and {} do not make a TLS identity",
                    path("c.pem"),
                    path("other.pem")
                ),
            ),
        ] {
            let text = format!("[web]\n{}", tls_section(&dir, cert, key));
            let err = load_text(&text).unwrap_err();
            assert_eq!((at(&err), err.key.as_str()), place, "{cert} {key}: {err}");
            assert!(err.message.starts_with(&expect), "{cert} {key}: {err}");
        }
    }

    #[test]
    fn bcrypt_hashes_are_parsed_as_the_verifier_reads_them() {
        let good = bcrypt::hash("pw", 4).unwrap();
        let tail = &good[7..];
        let bad_chars = tail.replace(|c: char| c.is_ascii_digit(), "!");
        for (hash, expect) in [
            (
                format!("$2y$31${tail}"),
                "bcrypt cost 31 is too slow to serve",
            ),
            (
                format!("$2y$99${tail}"),
                "bcrypt cost 99 is too slow to serve",
            ),
            (
                format!("$2y$04${bad_chars}"),
                "not a bcrypt hash: its salt or hash has characters",
            ),
            (
                "$2y$10$short".to_string(),
                "not a bcrypt hash ($2y$COST$ and 53 characters)",
            ),
        ] {
            let text =
                format!("[web]\n[web.basic_auth_users]\nadmin = \"{good}\"\nprom = \"{hash}\"\n");
            let err = load_text(&text).unwrap_err();
            assert_eq!(
                (at(&err), err.key.as_str()),
                ((4, 8), "web.basic_auth_users.prom"),
                "{hash}: {err}"
            );
            let expect = format!("user 'prom': {expect}");
            assert!(err.message.starts_with(&expect), "{hash}: {err}");
        }
        let cost_14 = format!("$2y$14${tail}");
        let text = format!("[web.basic_auth_users]\nprom = \"{cost_14}\"\n");
        assert_eq!(load_text(&text).unwrap().web.users["prom"], cost_14);
    }

    /// `check-config` refuses users of different bcrypt costs as `run` does: their
    /// answer times would tell which user names exist.
    #[test]
    fn users_of_different_bcrypt_costs_are_refused() {
        let (low, high) = (bcrypt::hash("a", 4).unwrap(), bcrypt::hash("b", 5).unwrap());
        let text = format!("[web.basic_auth_users]\nadmin = \"{low}\"\nprom = \"{high}\"\n");
        let err = load_text(&text).unwrap_err();
        assert_eq!(err.key, "web.basic_auth_users.prom", "{err}");
        assert!(
            err.message
                .starts_with("user 'prom': bcrypt cost 5, but user 'admin' has cost 4"),
            "{err}"
        );
    }
}
