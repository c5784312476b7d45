//! Listen addresses as Prometheus exporters take them (`--web.listen-address`):
//! `IP:PORT`, `[IPv6]:PORT`, `:PORT` (every address, IPv6 and IPv4) and `HOST:PORT` (each
//! address the host name resolves to), bound before any camera starts.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs};

/// One listen address, as given, and the socket addresses it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenAddress {
    text: String,
    kind: Kind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    /// `:PORT`: IPv6's any address (which takes IPv4 too), or IPv4's where the host has no
    /// IPv6.
    Any(u16),
    /// The addresses an IP or a host name gave, in the resolver's order, each once.
    Addrs(Vec<SocketAddr>),
}

/// Why a listen address is refused: the address as given, what is wrong with it, and
/// the forms expected.
#[derive(Debug, thiserror::Error)]
#[error("'{text}': {why} (expected IP:PORT, [IPv6]:PORT, :PORT or HOST:PORT)")]
pub struct ListenAddressError {
    /// The address as it was given.
    pub text: String,
    /// What is wrong with it.
    pub why: BadAddress,
}

/// What is wrong with a listen address.
#[derive(Debug, thiserror::Error)]
pub enum BadAddress {
    /// The port is not a number from 0 to 65535.
    #[error("port: {0}")]
    Port(std::num::ParseIntError),
    /// No `:PORT` at the end.
    #[error("no port")]
    NoPort,
    /// Empty before the port, or with spaces or a '/'.
    #[error("not a host name")]
    NotAHostName,
    /// The resolver failed on the host name.
    #[error("cannot resolve {host}: {error}")]
    Unresolved {
        /// The host name, as given.
        host: String,
        /// The resolver's error.
        error: std::io::Error,
    },
    /// The resolver gave the host name no address.
    #[error("{host} resolves to no address")]
    NoAddress {
        /// The host name, as given.
        host: String,
    },
}

impl ListenAddress {
    /// Parses `text` (resolving a host name): the error says what was expected.
    pub fn parse(text: &str) -> Result<ListenAddress, ListenAddressError> {
        let bad = |why| ListenAddressError {
            text: text.to_string(),
            why,
        };
        if let Some(port) = text.strip_prefix(':') {
            let port = port.parse::<u16>().map_err(|e| bad(BadAddress::Port(e)))?;
            return Ok(ListenAddress {
                text: text.to_string(),
                kind: Kind::Any(port),
            });
        }
        if let Ok(addr) = text.parse::<SocketAddr>() {
            return Ok(ListenAddress {
                text: text.to_string(),
                kind: Kind::Addrs(vec![addr]),
            });
        }
        let Some((host, port)) = text.rsplit_once(':') else {
            return Err(bad(BadAddress::NoPort));
        };
        port.parse::<u16>().map_err(|e| bad(BadAddress::Port(e)))?;
        if host.is_empty() || host.contains(|c: char| c.is_whitespace() || c == '/') {
            return Err(bad(BadAddress::NotAHostName));
        }
        let mut addrs: Vec<SocketAddr> = Vec::new();
        for addr in text.to_socket_addrs().map_err(|error| {
            bad(BadAddress::Unresolved {
                host: host.to_string(),
                error,
            })
        })? {
            if !addrs.contains(&addr) {
                addrs.push(addr);
            }
        }
        if addrs.is_empty() {
            return Err(bad(BadAddress::NoAddress {
                host: host.to_string(),
            }));
        }
        Ok(ListenAddress {
            text: text.to_string(),
            kind: Kind::Addrs(addrs),
        })
    }

    /// Whether every address is a loopback one (`:PORT` is not).
    pub fn is_loopback(&self) -> bool {
        match &self.kind {
            Kind::Any(_) => false,
            Kind::Addrs(addrs) => addrs.iter().all(|a| a.ip().is_loopback()),
        }
    }

    /// Binds a socket to each address; `:PORT` falls back to IPv4 where IPv6 is off.
    pub(crate) fn bind(&self) -> std::io::Result<Vec<TcpListener>> {
        match &self.kind {
            Kind::Any(port) => TcpListener::bind((Ipv6Addr::UNSPECIFIED, *port))
                .or_else(|_| TcpListener::bind((Ipv4Addr::UNSPECIFIED, *port)))
                .map(|socket| vec![socket]),
            Kind::Addrs(addrs) => addrs.iter().map(TcpListener::bind).collect(),
        }
    }
}

impl fmt::Display for ListenAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_exporters_take_is_read() {
        let addrs = |text: &str| match ListenAddress::parse(text).unwrap().kind {
            Kind::Addrs(addrs) => addrs,
            Kind::Any(port) => vec![SocketAddr::from((Ipv6Addr::UNSPECIFIED, port))],
        };
        assert_eq!(addrs("127.0.0.1:8947"), ["127.0.0.1:8947".parse().unwrap()]);
        assert_eq!(addrs("[::]:8947"), ["[::]:8947".parse().unwrap()]);
        assert_eq!(addrs("[::1]:0"), ["[::1]:0".parse().unwrap()]);
        assert_eq!(ListenAddress::parse(":8947").unwrap().kind, Kind::Any(8947));
        let localhost = addrs("localhost:8947");
        assert!(
            localhost.contains(&"127.0.0.1:8947".parse().unwrap()),
            "{localhost:?}"
        );
        assert!(ListenAddress::parse("localhost:8947")
            .unwrap()
            .is_loopback());
        assert!(!ListenAddress::parse(":8947").unwrap().is_loopback());
        assert!(!ListenAddress::parse("0.0.0.0:8947").unwrap().is_loopback());
        assert_eq!(ListenAddress::parse(":8947").unwrap().to_string(), ":8947");
    }

    #[test]
    fn bad_addresses_say_what_is_expected() {
        let port = |e: &BadAddress| matches!(e, BadAddress::Port(_));
        for (text, why, kind) in [
            (
                "localhost",
                "no port",
                &(|e: &BadAddress| matches!(e, BadAddress::NoPort)) as &dyn Fn(&_) -> _,
            ),
            (":http", "port: invalid digit", &port),
            ("127.0.0.1:70000", "port: number too large", &port),
            ("/x:80", "not a host name", &|e| {
                matches!(e, BadAddress::NotAHostName)
            }),
            (
                "no-such-host.invalid:8947",
                "cannot resolve no-such-host.invalid",
                &|e| matches!(e, BadAddress::Unresolved { host, .. } if host == "no-such-host.invalid"),
            ),
            (":", "port: cannot parse integer from empty string", &port),
        ] {
            let err = ListenAddress::parse(text).unwrap_err();
            assert_eq!(err.text, text);
            assert!(kind(&err.why), "{text}: {err:?}");
            let message = err.to_string();
            assert!(
                message.starts_with(&format!("'{text}': {why}")),
                "{text}: {message}"
            );
            assert!(
                message.ends_with(" (expected IP:PORT, [IPv6]:PORT, :PORT or HOST:PORT)"),
                "{text}: {message}"
            );
        }
    }

    #[test]
    fn any_port_binds_for_ipv4_clients() {
        let socket = ListenAddress::parse(":0").unwrap().bind().unwrap();
        let port = socket[0].local_addr().unwrap().port();
        std::net::TcpStream::connect(("127.0.0.1", port)).expect("an IPv4 client gets in");
    }
}
