//! HTTP basic auth against bcrypt hashes, as Prometheus' exporter web config does it.
//!
//! bcrypt is slow on purpose (tens of milliseconds on a board), so it runs on tokio's
//! blocking pool, and credentials that passed once are remembered: a scraper sends the
//! same header every few seconds.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use base64::Engine;

/// Remembered credentials at most; a full cache is cleared rather than grown.
const REMEMBERED: usize = 32;

pub struct Auth {
    users: Arc<BTreeMap<String, String>>,
    passed: Mutex<HashSet<String>>,
}

impl Auth {
    pub fn new(users: BTreeMap<String, String>) -> Auth {
        Auth {
            users: Arc::new(users),
            passed: Mutex::new(HashSet::new()),
        }
    }

    pub fn enabled(&self) -> bool {
        !self.users.is_empty()
    }

    /// Whether an `Authorization` header value names a user with the right password.
    pub async fn allows(&self, header: Option<&str>) -> bool {
        if !self.enabled() {
            return true;
        }
        let Some(header) = header else {
            return false;
        };
        if self.passed.lock().is_ok_and(|p| p.contains(header)) {
            return true;
        }
        let Some((user, password)) = decode(header) else {
            return false;
        };
        let Some(hash) = self.users.get(&user).cloned() else {
            return false;
        };
        let ok =
            tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash).unwrap_or(false))
                .await
                .unwrap_or(false);
        if ok {
            if let Ok(mut passed) = self.passed.lock() {
                if passed.len() >= REMEMBERED {
                    passed.clear();
                }
                passed.insert(header.to_string());
            }
        }
        ok
    }
}

/// `Basic base64(user:password)` → (user, password).
fn decode(header: &str) -> Option<(String, String)> {
    let (scheme, data) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(user: &str, password: &str) -> String {
        let raw = format!("{user}:{password}");
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }

    #[tokio::test]
    async fn checks_users_and_passwords() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let auth = Auth::new(BTreeMap::from([("prom".to_string(), hash)]));
        assert!(auth.allows(Some(&header("prom", "s3cret"))).await);
        // The second time comes from the cache and must agree.
        assert!(auth.allows(Some(&header("prom", "s3cret"))).await);
        assert!(!auth.allows(Some(&header("prom", "wrong"))).await);
        assert!(!auth.allows(Some(&header("other", "s3cret"))).await);
        assert!(!auth.allows(None).await);
        assert!(!auth.allows(Some("Bearer abc")).await);
        assert!(Auth::new(BTreeMap::new()).allows(None).await);
    }
}
