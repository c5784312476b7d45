//! Program binaries kept on disk between starts (`CL_PROGRAM_BINARIES`), so that a driver
//! that compiles a program for minutes does it once per board (Arm's libmali keeps no cache
//! of its own). Not with Mesa's Rusticl, whose binaries are SPIR-V it compiles again in
//! full: there Mesa's own shader cache does this (`keeps_binaries_worth_keeping`).
//!
//! A file is keyed by everything its binary depends on: the platform, the device, the
//! driver's version, the build options and the source. Its name is a hash of that key and
//! it holds the key itself, compared whole when read, so a file of another driver, device,
//! edgesight or source is never taken: the program is built from source again and the file
//! replaced. A binary the driver refuses is rebuilt the same way. Files are written to a
//! new name and renamed into place, so a reader never sees half of one, and opened without
//! following links.
//!
//! Where: `EDGESIGHT_KERNEL_CACHE` (a directory, or `off`), else systemd's cache directory
//! (`CacheDirectory=`, given as `CACHE_DIRECTORY`), else `$XDG_CACHE_HOME/edgesight` or
//! `~/.cache/edgesight`; in a `kernels/` folder there. Nowhere writable: no cache, and
//! every start builds from source as before.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::ClDeviceInfo;

/// The first line of every file, then the key's and the binary's lengths.
const MAGIC: &str = "edgesight program cache 1";
/// The most a file may hold: a program's binary is a few megabytes at most.
const MOST_BYTES: u64 = 256 << 20;

/// Where program binaries are kept.
#[derive(Clone, Debug)]
pub struct ProgramCache {
    dir: PathBuf,
}

/// FNV-1a, 64 bits: stable across builds and platforms, for file names (the key inside
/// the file is what decides).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl ProgramCache {
    /// The cache in `dir` (made where missing when a binary is first kept).
    pub fn at(dir: impl Into<PathBuf>) -> ProgramCache {
        ProgramCache { dir: dir.into() }
    }

    /// The cache the environment names (see the module's doc), or none.
    pub fn from_env() -> Option<ProgramCache> {
        ProgramCache::from_vars(|name| std::env::var_os(name))
    }

    /// [`ProgramCache::from_env`] with the variables `var` gives.
    fn from_vars(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<ProgramCache> {
        let var = |name| var(name).filter(|v| !v.is_empty());
        let base = match var("EDGESIGHT_KERNEL_CACHE") {
            Some(v) if v == "off" => return None,
            Some(v) => return Some(ProgramCache::at(v)),
            None => var("CACHE_DIRECTORY")
                // systemd may give several, ':'-separated: the first is the unit's own.
                .and_then(|v| {
                    v.to_str()
                        .and_then(|s| s.split(':').next())
                        .map(PathBuf::from)
                })
                .or_else(|| var("XDG_CACHE_HOME").map(|d| Path::new(&d).join("edgesight")))
                .or_else(|| var("HOME").map(|h| Path::new(&h).join(".cache/edgesight")))?,
        };
        Some(ProgramCache::at(base.join("kernels")))
    }

    /// The directory the binaries are kept in (made when the first one is kept).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Everything a program's binary depends on, as text.
    pub(super) fn key(info: &ClDeviceInfo, options: &str, source: &str) -> String {
        format!(
            "platform {} ({})\ndevice {} ({}, {})\ndriver {}\noptions {options}\n\
             source {} bytes, fnv1a {:016x}\nedgesight {}\n",
            info.platform,
            info.platform_version,
            info.name,
            info.vendor,
            info.version,
            info.driver_version,
            source.len(),
            fnv1a(source.as_bytes()),
            env!("CARGO_PKG_VERSION"),
        )
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{:016x}.bin", fnv1a(key.as_bytes())))
    }

    /// The binary kept for `key`, if a whole file of that very key is there.
    pub(super) fn load(&self, key: &str) -> Option<Vec<u8>> {
        let mut file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(self.path(key))
            .ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() > MOST_BYTES {
            return None;
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.read_to_end(&mut bytes).ok()?;
        let head_end = bytes.iter().position(|&b| b == b'\n')?;
        let head = std::str::from_utf8(&bytes[..head_end]).ok()?;
        let [key_len, binary_len] = head
            .strip_prefix(MAGIC)?
            .split_whitespace()
            .map(|n| n.parse::<usize>().ok())
            .collect::<Option<Vec<_>>>()?
            .try_into()
            .ok()?;
        let body = &bytes[head_end + 1..];
        if body.len() != key_len.checked_add(binary_len)? || &body[..key_len] != key.as_bytes() {
            return None;
        }
        Some(body[key_len..].to_vec())
    }

    /// Keeps `binary` for `key`, replacing what was there.
    pub(super) fn store(&self, key: &str, binary: &[u8]) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path(key);
        // A name no other writer uses, in this process or another.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let temp = self.dir.join(format!(".{}.{n}.tmp", std::process::id()));
        let written = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&temp)?;
            writeln!(file, "{MAGIC} {} {}", key.len(), binary.len())?;
            file.write_all(key.as_bytes())?;
            file.write_all(binary)?;
            file.sync_all()?;
            std::fs::rename(&temp, &path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written.map(|()| path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(driver: &str) -> ClDeviceInfo {
        ClDeviceInfo {
            platform: "rusticl".into(),
            platform_version: "OpenCL 3.0".into(),
            name: "Mali-G52 (Panfrost)".into(),
            vendor: "Arm".into(),
            kind: "GPU",
            version: "OpenCL 3.0".into(),
            driver_version: driver.into(),
            opencl_c_version: "OpenCL C 1.2".into(),
            compute_units: 4,
            local_mem_bytes: 32768,
            global_mem_bytes: 1 << 32,
            max_work_group_size: 256,
            unified_memory: Some(true),
            fp64: false,
        }
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("edgesight-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// A binary comes back only for its very key: another driver, other options or other
    /// source find nothing, and neither does a file cut short or replaced by a link.
    #[test]
    fn a_binary_comes_back_only_for_its_very_key() {
        let cache = ProgramCache::at(dir("program-cache-keys"));
        let key = ProgramCache::key(&info("25.0.7"), "-cl-std=CL1.2 -DX", "kernel void k() {}");
        assert_eq!(cache.load(&key), None);
        let path = cache.store(&key, b"\x00binary\n\xff").expect("store");
        assert_eq!(cache.load(&key).as_deref(), Some(&b"\x00binary\n\xff"[..]));
        for other in [
            ProgramCache::key(&info("25.0.8"), "-cl-std=CL1.2 -DX", "kernel void k() {}"),
            ProgramCache::key(&info("25.0.7"), "-cl-std=CL1.2 -DY", "kernel void k() {}"),
            ProgramCache::key(&info("25.0.7"), "-cl-std=CL1.2 -DX", "kernel void j() {}"),
        ] {
            assert_eq!(cache.load(&other), None, "{other}");
        }
        // Another key's file under this key's name (a hash collision, or a file copied in).
        let stranger = ProgramCache::key(&info("1.0"), "", "");
        let theirs = cache.store(&stranger, b"theirs").expect("store");
        std::fs::copy(&theirs, &path).expect("copy");
        assert_eq!(cache.load(&key), None);
        // Cut short.
        cache.store(&key, b"0123456789").expect("store");
        let whole = std::fs::read(&path).expect("read");
        std::fs::write(&path, &whole[..whole.len() - 1]).expect("cut");
        assert_eq!(cache.load(&key), None);
        // A link is not followed, and a store replaces it rather than writing through it.
        let target = cache.dir().join("elsewhere");
        std::fs::write(&target, &whole).expect("write");
        std::fs::remove_file(&path).expect("rm");
        std::os::unix::fs::symlink(&target, &path).expect("symlink");
        assert_eq!(cache.load(&key), None);
        cache.store(&key, b"again").expect("store");
        assert_eq!(
            std::fs::read(&target).expect("read"),
            whole,
            "the link's target kept"
        );
        assert_eq!(cache.load(&key).as_deref(), Some(&b"again"[..]));
    }

    #[test]
    fn the_environment_names_the_directory() {
        let dir = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            ProgramCache::from_vars(|name| {
                vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.into())
            })
            .map(|c| c.dir)
        };
        let home = ("HOME", "/home/cam");
        assert_eq!(
            dir(&[home]),
            Some(PathBuf::from("/home/cam/.cache/edgesight/kernels"))
        );
        assert_eq!(
            dir(&[home, ("XDG_CACHE_HOME", "/x")]),
            Some(PathBuf::from("/x/edgesight/kernels"))
        );
        assert_eq!(
            dir(&[
                home,
                ("CACHE_DIRECTORY", "/var/cache/edgesight:/var/cache/other")
            ]),
            Some(PathBuf::from("/var/cache/edgesight/kernels"))
        );
        assert_eq!(
            dir(&[home, ("EDGESIGHT_KERNEL_CACHE", "/k")]),
            Some(PathBuf::from("/k"))
        );
        assert_eq!(dir(&[home, ("EDGESIGHT_KERNEL_CACHE", "off")]), None);
        assert_eq!(dir(&[("HOME", "")]), None);
    }
}
