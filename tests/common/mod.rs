//! Helpers shared by the integration tests: an OpenCL device, seeded random frames, and
//! comparisons that report the first differing pixel.

#![allow(dead_code)]

pub mod daemon;
pub mod logfmt;

use std::sync::Once;

use edgesight::cl::{DeviceSpec, Gpu};

/// Opens the default OpenCL device (POCL in CI) with a writable kernel cache.
pub fn gpu() -> Gpu {
    static CACHE: Once = Once::new();
    CACHE.call_once(|| {
        if std::env::var_os("POCL_CACHE_DIR").is_none() {
            let dir = concat!(env!("CARGO_TARGET_TMPDIR"), "/pocl-cache");
            std::fs::create_dir_all(dir).expect("create the POCL cache directory");
            // Set before any thread opens OpenCL: the first call here runs before the tests
            // that follow it touch the driver.
            std::env::set_var("POCL_CACHE_DIR", dir);
        }
    });
    let spec: DeviceSpec = std::env::var("EDGESIGHT_TEST_DEVICE")
        .unwrap_or_default()
        .parse()
        .expect("device spec");
    Gpu::open(&spec).expect("an OpenCL device (install pocl-opencl-icd)")
}

/// xorshift64*: small, seeded, reproducible.
pub struct Rng(pub u64);

impl Rng {
    /// Seeded from `EDGESIGHT_SEED` when set, else from `default`; prints the seed so a
    /// failure can be replayed.
    pub fn new(default: u64) -> Rng {
        let seed = std::env::var("EDGESIGHT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default);
        eprintln!("seed {seed} (set EDGESIGHT_SEED to replay)");
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn fill(&mut self, bytes: &mut [u8]) {
        for b in bytes {
            *b = (self.next_u64() >> 32) as u8;
        }
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        self.fill(&mut v);
        v
    }
}

/// Asserts equal images; on failure names the first differing (x, y), both values, how many
/// differ, and `label` (size, format, options).
pub fn assert_image_eq<T: PartialEq + std::fmt::Debug>(
    what: &str,
    label: &str,
    width: usize,
    got: &[T],
    want: &[T],
) {
    assert_eq!(got.len(), want.len(), "{what} length, {label}");
    let diffs = got.iter().zip(want).filter(|(g, w)| g != w).count();
    if let Some(i) = got.iter().zip(want).position(|(g, w)| g != w) {
        panic!(
            "{what} differs at (x {}, y {}): got {:?}, want {:?} ({diffs} values differ), {label}",
            i % width,
            i / width,
            got[i],
            want[i]
        );
    }
}
