//! What `run`, SIGHUP and `check-config` check beyond the file: that each camera's OpenCL
//! device resolves and each V4L2 node is a video device, and how many cameras there are.

use std::path::{Path, PathBuf};

use toml::Spanned;

use super::{flag, load, ConfigError, Doc, Loaded, Overrides, Settings};
use edgesight_capture::capture::SourceSpec;
use edgesight_core::cl::{ClError, DeviceSpec, Gpu};

/// More cameras than this draw a warning: each is two threads and its own OpenCL queue,
/// buffers and kernels (the cameras on a device share its context and programs), and
/// past it the memory and threads add up on a small board
/// (bench/notes/code-comment-figures.md#many-cameras, BENCHMARKS.md#board-memory).
pub(crate) const MANY_CAMERAS: usize = 16;

/// A config as `run` takes it: checked by `load` and against the machine.
pub struct Checked {
    pub settings: Settings,
    /// Things that do not stop `run` but that its log and `check-config` show.
    pub warnings: Vec<String>,
    /// Each drop-in merged into the config, in order, and what it set.
    pub origins: Vec<String>,
}

/// Why a camera's OpenCL device could not be opened, and whether it was its profiling queue
/// that the driver refused (the key to blame is then `[opencl] profiling`).
#[derive(Clone)]
struct Unopened {
    profiling_refused: bool,
    why: String,
}

/// Everything `run` checks before it starts anything, in one place for `run`, SIGHUP and
/// `check-config`: `load`, then each camera's OpenCL device must resolve to a device,
/// a V4L2 node that exists must be a video device (one that does not exist yet is waited
/// for: boards enumerate USB cameras late), and many cameras draw a warning.
pub fn validate(path: Option<&Path>, overrides: &Overrides) -> Result<Checked, ConfigError> {
    let Loaded {
        parts,
        file,
        origins,
        settings,
        placed,
    } = load(path, overrides)?;
    let doc = Doc {
        path,
        parts: &parts,
    };
    let mut warnings = Vec::new();
    // Each device is opened once.
    let mut devices: Vec<(&DeviceSpec, Result<(), Unopened>)> = Vec::new();
    for (i, camera) in settings.cameras.iter().enumerate() {
        let written = placed
            .get(i)
            .and_then(|w| file.cameras.get(*w))
            .map(Spanned::get_ref);
        let resolved = match devices.iter().find(|(spec, _)| **spec == camera.device) {
            Some((_, resolved)) => resolved.clone(),
            None => {
                let resolved = Gpu::open_with(&camera.device, camera.profiling)
                    .map(drop)
                    .map_err(|e| Unopened {
                        profiling_refused: matches!(e, ClError::NoProfiling(_)),
                        why: e.to_string(),
                    });
                devices.push((&camera.device, resolved.clone()));
                resolved
            }
        };
        if let Err(Unopened {
            profiling_refused,
            why,
        }) = resolved
        {
            let message = format!("camera '{}': {why}", camera.name);
            return Err(match written.and_then(|c| c.opencl_device.as_ref()) {
                _ if profiling_refused => {
                    doc.at(file.opencl.profiling.span(), "opencl.profiling", message)
                }
                Some(d) => doc.at(d.span(), "camera.opencl_device", message),
                None => doc.at(file.opencl.device.span(), "opencl.device", message),
            });
        }
        let SourceSpec::V4l2 { device, .. } = &camera.source else {
            continue;
        };
        if super::glob::is_pattern(device) {
            // `load` made a camera per match: this pattern matched nothing.
            warnings.push(format!(
                "camera '{}': no device matches {} now; `run` waits for it under this name, \
                 and takes each match as a camera of its own when it starts again",
                camera.name,
                device.display()
            ));
            continue;
        }
        match video_node(device) {
            Ok(true) => {}
            Ok(false) => warnings.push(format!(
                "camera '{}': {} is not present now; `run` waits for it",
                camera.name,
                device.display()
            )),
            Err(why) if i == 0 && overrides.source.is_some() => {
                return Err(flag("--source", "source", why.to_string()))
            }
            Err(why) => {
                let span = written
                    .and_then(|c| c.source.as_ref()?.get_ref().device.as_ref())
                    .map_or(0..0, Spanned::span);
                return Err(doc.at(span, "camera.source.device", why.to_string()));
            }
        }
    }
    // The threads must fit the cgroup's task limit (TasksMax=): refused here rather than
    // a thread that cannot start later.
    super::threads::check(
        settings.cameras.len(),
        super::threads::cores(),
        super::threads::cgroup_limit(),
    )
    .map_err(|why| {
        let span = file.cameras.last().map_or(0..0, Spanned::span);
        doc.at(span, "camera", why.to_string())
    })?;
    if settings.cameras.len() > MANY_CAMERAS {
        warnings.push(format!(
            "{} cameras: each one is two threads (capture and publisher) and its own OpenCL \
             queue, frame buffers and kernels (about 1.6 MB at 320x240 on a CPU device); \
             more than {MANY_CAMERAS} rarely keep their frame rates on one board",
            settings.cameras.len()
        ));
    }
    warnings.extend(super::web::exposure_warnings(&settings.web));
    if let Some(web_file) = &overrides.web_config_file {
        // Read already by the checks, which refuse a file that cannot be read.
        if let Ok(read) = super::web_file::read(web_file) {
            warnings.extend(read.not_applied);
        }
    }
    Ok(Checked {
        settings,
        warnings,
        origins,
    })
}

/// The character device major number of every V4L2 node (`VIDEO_MAJOR` in the kernel).
const VIDEO_MAJOR: u32 = 81;

/// Why a camera's device path cannot be a camera.
#[derive(Debug, thiserror::Error)]
enum NotAVideoNode {
    /// Its metadata cannot be read (other than its absence, which is waited for).
    #[error("{}: {error}", path.display())]
    Unreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    /// Not a character device at all (`kind`: what it is).
    #[error(
        "{} is {kind}, not a V4L2 device (a character device such as /dev/video0)",
        path.display()
    )]
    NotADevice { path: PathBuf, kind: &'static str },
    /// A character device of another driver than V4L2.
    #[error(
        "{} is not a V4L2 device: a character device of major {major}, where V4L2's are \
         {VIDEO_MAJOR}",
        path.display()
    )]
    OtherMajor { path: PathBuf, major: u32 },
}

/// Whether the V4L2 node `path` is there (`Ok(false)` when it does not exist yet), or why
/// it cannot be a camera.
fn video_node(path: &Path) -> Result<bool, NotAVideoNode> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(error) => {
            return Err(NotAVideoNode::Unreadable {
                path: path.to_path_buf(),
                error,
            })
        }
    };
    if !meta.file_type().is_char_device() {
        return Err(NotAVideoNode::NotADevice {
            path: path.to_path_buf(),
            kind: edgesight_frame::files::kind_name(meta.file_type()),
        });
    }
    let major = libc::major(meta.rdev());
    if major != VIDEO_MAJOR {
        return Err(NotAVideoNode::OtherMajor {
            path: path.to_path_buf(),
            major,
        });
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{refusal, write_tmp, GOOD};
    use super::*;

    fn validate_text(name: &str, text: &str) -> Result<Checked, String> {
        let path = write_tmp(name, text);
        validate(Some(&path), &Overrides::default()).map_err(|e| {
            let shown = e.to_string();
            shown.replace(&path.display().to_string(), "FILE")
        })
    }

    #[test]
    fn a_device_path_is_a_v4l2_node_absent_or_refused_for_what_it_is() {
        assert!(matches!(
            video_node(Path::new("/nonexistent/video0")),
            Ok(false)
        ));
        assert!(matches!(
            video_node(Path::new("/dev/null")),
            Err(NotAVideoNode::OtherMajor { path, major: 1 }) if path == Path::new("/dev/null")
        ));
        let err = video_node(Path::new("/")).unwrap_err();
        assert!(
            matches!(
                err,
                NotAVideoNode::NotADevice {
                    kind: "a directory",
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "/ is a directory, not a V4L2 device (a character device such as /dev/video0)"
        );
    }

    #[test]
    fn validate_resolves_opencl_devices_at_their_key() {
        let text = "[[camera]]\nname = \"front\"\nopencl_device = \"99:99\"\n\
                    [camera.source]\nkind = \"pattern\"\n";
        let err = validate_text("device.toml", text).err().expect("refused");
        assert!(
            err.starts_with("FILE:3:17: camera.opencl_device: camera 'front': no OpenCL device matches '99:99'; available: 0:0 "),
            "{err}"
        );
        let err = validate_text(
            "default-device.toml",
            "[opencl]\ndevice = \"no-such-device\"\n",
        )
        .err()
        .expect("refused");
        assert!(
            err.starts_with("FILE:2:10: opencl.device: camera 'default': no OpenCL device matches 'no-such-device'; available: "),
            "{err}"
        );
        assert!(validate_text("good.toml", GOOD).is_ok());
    }

    #[test]
    fn validate_takes_only_video_devices_for_v4l2() {
        let v4l2 = |device: &str| {
            format!("[[camera]]\nname = \"c\"\n[camera.source]\nkind = \"v4l2\"\ndevice = \"{device}\"\n")
        };
        assert_eq!(
            validate_text("null.toml", &v4l2("/dev/null")).err(),
            Some("FILE:5:10: camera.source.device: /dev/null is not a V4L2 device: a character device of major 1, where V4L2's are 81".into())
        );
        let plain = write_tmp("plain-file", "");
        assert_eq!(
            validate_text("plain.toml", &v4l2(&plain.display().to_string())).err(),
            Some(format!("FILE:5:10: camera.source.device: {} is a regular file, not a V4L2 device (a character device such as /dev/video0)", plain.display()))
        );
        let absent = validate_text("absent.toml", &v4l2("/dev/video-edgesight-none")).unwrap();
        assert_eq!(
            absent.warnings,
            ["camera 'c': /dev/video-edgesight-none is not present now; `run` waits for it"]
        );
        assert_eq!(
            refusal(&v4l2("")),
            "t.toml:5:10: camera.source.device: empty: a v4l2 source needs its device node, e.g. device = \"/dev/video0\""
        );
    }

    #[test]
    fn a_device_pattern_that_matches_nothing_is_waited_for() {
        let text = "[[camera]]\nname = \"c\"\n[camera.source]\nkind = \"v4l2\"\n\
                    device = \"/dev/v4l/by-id/edgesight-none-*\"\n";
        let checked = validate_text("pattern.toml", text).unwrap();
        assert_eq!(
            checked.warnings,
            [
                "camera 'c': no device matches /dev/v4l/by-id/edgesight-none-* now; `run` waits \
              for it under this name, and takes each match as a camera of its own when it \
              starts again"
            ]
        );
        assert_eq!(checked.settings.cameras[0].name, "c");
    }

    #[test]
    fn devices_that_a_pattern_matches_are_checked_at_the_pattern() {
        // /dev/null matches `/dev/nul*`: a match that is no video device is refused at the
        // pattern of the camera it came from, the second [[camera]].
        let text = "[[camera]]\nname = \"p\"\n[camera.source]\nkind = \"pattern\"\n\
                    [[camera]]\nname = \"c\"\n[camera.source]\nkind = \"v4l2\"\n\
                    device = \"/dev/nul*\"\n";
        assert_eq!(
            validate_text("null-pattern.toml", text).err(),
            Some("FILE:9:10: camera.source.device: /dev/null is not a V4L2 device: a character device of major 1, where V4L2's are 81".into())
        );
    }

    #[test]
    fn many_cameras_draw_a_warning() {
        let cameras = |n: usize| -> String {
            (0..n)
                .map(|i| format!("[[camera]]\nname = \"c{i}\"\n[camera.source]\nkind = \"pattern\"\nsize = \"64x48\"\n"))
                .collect()
        };
        assert!(validate_text("16.toml", &cameras(16))
            .unwrap()
            .warnings
            .is_empty());
        let warnings = validate_text("17.toml", &cameras(17)).unwrap().warnings;
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].starts_with("17 cameras: each one is two threads"),
            "{warnings:?}"
        );
    }
}
