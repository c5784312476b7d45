//! Fuzz target `config`: the config parser and every check `check-config` makes short of
//! looking at the machine's devices ([`config::check_text`]).
//!
//! Invariants: a refused config's error is placed in the file (line 1 or later) and names
//! a key; an accepted config's settings, printed in the file's schema
//! ([`config::Settings::to_toml_with_hashes`]), read back as the same settings.

use std::path::Path;

use edgesight::config::{self, Origin};

use super::fuzz;

/// What one input did, or why it breaks an invariant.
fn check(bytes: &[u8]) -> Result<String, String> {
    // A file that is not UTF-8 is refused before parsing; its text still exercises the
    // parser with the replacement characters in.
    let text = String::from_utf8_lossy(bytes);
    let path = Path::new("fuzz.toml");
    match config::check_text(path, &text) {
        Err(e) => {
            match &e.origin {
                Origin::File { line, .. } if *line >= 1 => {}
                _ => return Err(format!("an error without a position in the file: {e}")),
            }
            if e.key.trim().is_empty() {
                return Err(format!("an error that names no key: {e}"));
            }
            // Outcomes by table, so that keys made up by the mutations do not each count.
            let table = e.key.split('.').next().unwrap_or_default();
            let tables = [
                "log",
                "opencl",
                "web",
                "metrics",
                "camera",
                "(table header)",
            ];
            Ok(format!(
                "refused in {}",
                if tables.contains(&table) {
                    table
                } else {
                    "a made-up key"
                }
            ))
        }
        Ok(settings) => {
            let printed = settings.to_toml_with_hashes();
            let again = config::check_text(path, &printed)
                .map_err(|e| format!("the printed settings are refused: {e}\n{printed}"))?;
            if again != settings {
                return Err(format!(
                    "the printed settings read back differently:\n{settings:?}\n{again:?}\n{printed}"
                ));
            }
            Ok(format!(
                "accepted, {} cameras",
                settings.cameras.len().min(3)
            ))
        }
    }
}

#[test]
fn config() {
    fuzz("config", check);
}

#[test]
fn config_corpus_outcomes() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/corpus/config");
    let outcome = |name: &str| check(&std::fs::read(corpus.join(name)).expect("corpus file"));
    for name in [
        "deploy.toml",
        "two-cameras-rois.toml",
        "web-auth.toml",
        "replay.toml",
        "variables.toml",
    ] {
        assert!(
            outcome(name).is_ok_and(|o| o.starts_with("accepted")),
            "{name}: {:?}",
            outcome(name)
        );
    }
    assert_eq!(
        outcome("near-misses.toml"),
        Ok("refused in web".to_string())
    );
}
