//! A V4L2 camera whose `device` has a `*` in its file name
//! (`/dev/v4l/by-id/*-video-index0`): one camera per node that matches, so that one config
//! serves boards whose cameras differ in their serial numbers.
//!
//! The `*` stands for any part of one file name (not a `/`), once: the stable names udev
//! gives (`by-id`, `by-path`) differ in one run of characters, and a pattern narrower than
//! a shell's keeps the camera names it makes predictable. Each match is a camera named
//! `NAME-PART`, PART being what the `*` matched with every character a label cannot hold
//! made `_`: the same device gets the same name on every start and on every board. The
//! matches are taken in name order when the config is read; with none, the camera waits
//! under its own name (see `validate`).

use std::path::{Path, PathBuf};

/// The most a camera name may hold (a label value kept short).
const MAX_NAME: usize = 64;

/// Whether a device path is a pattern rather than a node.
pub(crate) fn is_pattern(device: &Path) -> bool {
    device.as_os_str().as_encoded_bytes().contains(&b'*')
}

/// Why a device pattern gives no cameras.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadPattern {
    /// No directory or no file name to match in.
    #[error("{}: a pattern needs a directory and a file name", pattern.display())]
    NoFileName { pattern: PathBuf },
    /// A '*' in a directory, which this module does not walk.
    #[error(
        "{}: '*' may stand only in the file name, not in a directory",
        pattern.display()
    )]
    StarInDirectory { pattern: PathBuf },
    /// The file name holds no '*'.
    #[error("{}: '*' may stand only in the file name", pattern.display())]
    NoStarInName { pattern: PathBuf },
    /// More than one '*'.
    #[error("{}: one '*' at most", pattern.display())]
    TwoStars { pattern: PathBuf },
    /// The directory to match in cannot be read (its absence is no error: nothing matches).
    #[error("{}: {error}", dir.display())]
    UnreadableDirectory { dir: PathBuf, error: std::io::Error },
    /// Two nodes give one camera name.
    #[error(
        "{}: {} and {} both make camera '{camera}'; narrow the pattern",
        pattern.display(),
        first.display(),
        second.display()
    )]
    SameCamera {
        pattern: PathBuf,
        first: PathBuf,
        second: PathBuf,
        camera: String,
    },
}

/// The nodes `pattern` matches, in name order, each with the camera name it gives a
/// camera named `name`; or why `pattern` is not one this module takes.
pub(crate) fn matches(name: &str, pattern: &Path) -> Result<Vec<(PathBuf, String)>, BadPattern> {
    let pattern_buf = || pattern.to_path_buf();
    let (dir, file) = match (pattern.parent(), pattern.file_name()) {
        (Some(dir), Some(file)) => (dir, file.to_string_lossy()),
        _ => {
            return Err(BadPattern::NoFileName {
                pattern: pattern_buf(),
            })
        }
    };
    if is_pattern(dir) {
        return Err(BadPattern::StarInDirectory {
            pattern: pattern_buf(),
        });
    }
    let Some((prefix, suffix)) = file.split_once('*') else {
        return Err(BadPattern::NoStarInName {
            pattern: pattern_buf(),
        });
    };
    if suffix.contains('*') {
        return Err(BadPattern::TwoStars {
            pattern: pattern_buf(),
        });
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        // No directory yet (udev makes /dev/v4l with the first camera): nothing matches.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => {
            return Err(BadPattern::UnreadableDirectory {
                dir: dir.to_path_buf(),
                error,
            })
        }
    };
    let mut found: Vec<(String, String)> = entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter_map(|file| {
            let part = file.strip_prefix(prefix)?.strip_suffix(suffix)?;
            // `*` matches at least one character: `a-*-b` does not take `a--b`'s empty run.
            (!part.is_empty()).then(|| (file.clone(), part.to_string()))
        })
        .collect();
    found.sort();
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    for (file, part) in found {
        let camera = camera_name(name, &part);
        if let Some((other, _)) = out.iter().find(|(_, n)| *n == camera) {
            return Err(BadPattern::SameCamera {
                pattern: pattern_buf(),
                first: other.clone(),
                second: dir.join(&file),
                camera,
            });
        }
        out.push((dir.join(file), camera));
    }
    Ok(out)
}

/// `NAME-PART` with PART's characters that a camera name cannot hold made `_`, and PART
/// cut from its front where the whole would be too long: a by-id name ends in the
/// serial number, which tells two cameras of one model apart.
fn camera_name(name: &str, part: &str) -> String {
    let clean: Vec<char> = part
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_-.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let room = MAX_NAME.saturating_sub(name.len() + 1);
    let kept: String = clean[clean.len().saturating_sub(room)..].iter().collect();
    format!("{name}-{kept}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(name: &str, files: &[&str]) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("edgesight-glob-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for file in files {
            std::fs::write(dir.join(file), "").unwrap();
        }
        dir
    }

    #[test]
    fn one_camera_per_match_in_name_order() {
        let dir = dir_with(
            "order",
            &[
                "usb-Cam_B:2-video-index0",
                "usb-Cam_A_1-video-index0",
                "usb-Cam_A_1-video-index1",
                "-video-index0",
            ],
        );
        let found = matches("door", &dir.join("*-video-index0")).unwrap();
        assert_eq!(
            found,
            [
                (
                    dir.join("usb-Cam_A_1-video-index0"),
                    "door-usb-Cam_A_1".to_string()
                ),
                (
                    dir.join("usb-Cam_B:2-video-index0"),
                    "door-usb-Cam_B_2".to_string()
                ),
            ]
        );
        assert_eq!(
            matches("door", &dir.join("usb-*-video-index1")).unwrap(),
            [(
                dir.join("usb-Cam_A_1-video-index1"),
                "door-Cam_A_1".to_string()
            )]
        );
        assert_eq!(matches("door", &dir.join("pci-*")).unwrap(), []);
        assert_eq!(
            matches("door", Path::new("/nonexistent/v4l/by-id/*")).unwrap(),
            []
        );
    }

    #[test]
    fn long_parts_keep_their_end() {
        let part = format!("usb-{}-SERIAL42", "x".repeat(80));
        let name = camera_name("line-3", &part);
        assert_eq!(name.len(), MAX_NAME);
        assert_eq!(
            name,
            format!("line-3-{}-SERIAL42", "x".repeat(MAX_NAME - 7 - 9))
        );
    }

    #[test]
    fn patterns_it_does_not_take_and_names_that_collide() {
        let dir = dir_with("collide", &["a:1", "a_1"]);
        let err = matches("c", &dir.join("a*")).unwrap_err();
        assert!(
            matches!(&err, BadPattern::SameCamera { first, second, camera, .. }
                if *first == dir.join("a:1") && *second == dir.join("a_1") && camera == "c-_1"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "{}: {} and {} both make camera 'c-_1'; narrow the pattern",
                dir.join("a*").display(),
                dir.join("a:1").display(),
                dir.join("a_1").display()
            )
        );
        let err = matches("c", Path::new("/dev/*/video0")).unwrap_err();
        assert!(matches!(err, BadPattern::StarInDirectory { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "/dev/*/video0: '*' may stand only in the file name, not in a directory"
        );
        let err = matches("c", Path::new("/dev/v*o*")).unwrap_err();
        assert!(matches!(err, BadPattern::TwoStars { .. }), "{err:?}");
        assert_eq!(err.to_string(), "/dev/v*o*: one '*' at most");
    }
}
