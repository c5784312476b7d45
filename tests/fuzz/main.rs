//! Byte-mutation fuzzing of the parts that read what a user or a network peer hands the
//! daemon: the config parser, the image and raw frame readers, the HTTP request path,
//! and the running daemon itself under scripts of reloads and hostile clients.
//!
//! Each target starts from a corpus kept in the repo (`tests/fuzz/corpus/<target>/`) and
//! mutates it (bit flips, cuts, inserted, deleted, duplicated and spliced runs, "magic"
//! numbers) for a bounded time. A target passes when no input panics, hangs past its own
//! limit, or breaks the invariant the target checks. A failing input is written to
//! `target/fuzz-failures/<target>/` and named in the failure together with the seed.
//!
//! `EDGESIGHT_FUZZ_SECS` sets the time per target (default 15 s in `make test`),
//! `EDGESIGHT_SEED` the seed (default 1, so that `make test` plays the same inputs each
//! run; `random` for a new one, printed, in long runs), and
//! `EDGESIGHT_FUZZ_SAVE=1` keeps every input that reached a new outcome in the corpus.

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[path = "../common/mod.rs"]
mod common;

use common::Rng;

/// Runs `check` on mutations of the corpus of `target` until the time budget is spent.
///
/// `check` returns `Err(reason)` for an input that breaks the target's invariant (a wrong
/// answer rather than a panic); it returns `Ok(outcome)` otherwise, where `outcome` is a
/// short label of what happened (used to keep inputs that reach new outcomes).
pub fn fuzz(target: &str, check: impl Fn(&[u8]) -> Result<String, String>) {
    let corpus_dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus")
        .join(target);
    let mut corpus = read_corpus(&corpus_dir);
    assert!(
        !corpus.is_empty(),
        "{}: the corpus of fuzz target '{target}' is empty",
        corpus_dir.display()
    );
    let budget = Duration::from_secs_f64(
        std::env::var("EDGESIGHT_FUZZ_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(15.0),
    );
    // A fixed seed unless asked otherwise: `make test` plays the same inputs every run (as
    // many as fit in the budget), so a failure there is a change of the code, not luck.
    let seed = match std::env::var("EDGESIGHT_SEED").as_deref() {
        Ok("random") => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("EDGESIGHT_SEED={s}: a number or \"random\"")),
        Err(_) => 1,
    };
    eprintln!("fuzz {target}: seed {seed} (set EDGESIGHT_SEED to replay), {budget:?}");
    let mut rng = Rng(seed.max(1));
    let save = std::env::var_os("EDGESIGHT_FUZZ_SAVE").is_some();
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();

    // The corpus itself first, unmutated: it must pass as it is.
    let mut runs = 0usize;
    for input in corpus.clone() {
        run_one(target, seed, &input, &check, &mut outcomes);
        runs += 1;
    }
    let start = Instant::now();
    while start.elapsed() < budget {
        let base = &corpus[rng.below(corpus.len() as u64) as usize];
        let other = &corpus[rng.below(corpus.len() as u64) as usize];
        let input = mutate(&mut rng, base, other);
        let outcome = run_one(target, seed, &input, &check, &mut outcomes);
        if outcome.1 && save {
            let name = format!("found-{:016x}", fnv(&input));
            std::fs::write(corpus_dir.join(name), &input).expect("write a corpus entry");
            corpus.push(input);
        }
        runs += 1;
    }
    eprintln!("fuzz {target}: {runs} inputs, outcomes {outcomes:?}");
}

/// Runs one input; returns its outcome and whether that outcome was new.
fn run_one(
    target: &str,
    seed: u64,
    input: &[u8],
    check: &impl Fn(&[u8]) -> Result<String, String>,
    outcomes: &mut std::collections::BTreeMap<String, usize>,
) -> (String, bool) {
    let result = panic::catch_unwind(AssertUnwindSafe(|| check(input)));
    let failure = match result {
        Ok(Ok(outcome)) => {
            let count = outcomes.entry(outcome.clone()).or_default();
            *count += 1;
            return (outcome, *count == 1);
        }
        Ok(Err(reason)) => reason,
        Err(payload) => format!(
            "panic: {}",
            payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        ),
    };
    let saved = save_failure(target, input);
    panic!(
        "fuzz {target}: {failure}\n  input saved as {} ({} bytes), seed {seed}",
        saved.display(),
        input.len()
    );
}

fn save_failure(target: &str, input: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/fuzz-failures")
        .join(target);
    std::fs::create_dir_all(&dir).expect("create the fuzz failure directory");
    let path = dir.join(format!("{:016x}", fnv(input)));
    std::fs::write(&path, input).expect("write the failing input");
    path
}

fn read_corpus(dir: &Path) -> Vec<Vec<u8>> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    entries.sort();
    entries
        .iter()
        .filter(|p| p.is_file())
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

/// FNV-1a, to name saved inputs by their content.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Values that sit on boundaries of lengths, counts and sizes.
const MAGIC: [&[u8]; 12] = [
    b"0",
    b"-1",
    b"4294967295",
    b"18446744073709551616",
    b"1e-300",
    b"nan",
    b"\xff\xff\xff\xff",
    b"\x00\x00\x00\x00",
    b"\x7f\xff\xff\xff",
    b"\x80\x00\x00\x00",
    b"\r\n\r\n",
    b"\"",
];

/// One to four stacked mutations of `base`, some splicing in a run of `other`.
fn mutate(rng: &mut Rng, base: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = base.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = out.len() as u64;
        let at = |rng: &mut Rng| rng.below(len + 1) as usize;
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len) as usize;
                out[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len) as usize;
                out[i] = rng.next_u64() as u8;
            }
            2 => out.truncate(at(rng)),
            3 => {
                let (a, b) = (at(rng), at(rng));
                let (a, b) = (a.min(b), a.max(b));
                out.drain(a..b.min(a + 64));
            }
            4 => {
                let (a, b) = (at(rng), at(rng));
                let (a, b) = (a.min(b), a.max(b).min(a + 256));
                let run = out[a..b].to_vec();
                let i = at(rng);
                out.splice(i..i, run);
            }
            5 if !other.is_empty() => {
                let a = rng.below(other.len() as u64) as usize;
                let b = (a + 1 + rng.below(256) as usize).min(other.len());
                let i = at(rng);
                out.splice(i..i, other[a..b].iter().copied());
            }
            6 => {
                let magic = MAGIC[rng.below(MAGIC.len() as u64) as usize];
                let i = at(rng);
                let end = (i + magic.len()).min(out.len());
                out.splice(i..end, magic.iter().copied());
            }
            7 => {
                let i = at(rng);
                let n = 1 + rng.below(16) as usize;
                let byte = rng.next_u64() as u8;
                out.splice(i..i, std::iter::repeat_n(byte, n));
            }
            _ => {
                let i = at(rng);
                let n = 1 + rng.below(8) as usize;
                let bytes = (0..n).map(|_| rng.next_u64() as u8).collect::<Vec<_>>();
                out.splice(i..i, bytes);
            }
        }
    }
    out
}

// The targets; each is a module with its own #[test] functions calling `fuzz`.
mod config;
mod daemon;
mod http;
mod inputs;
