//! What the board says of itself outside OpenCL, for `selftest --json`: its name (the
//! device tree's model and compatible strings), the kernel's release, the GPU's kernel
//! driver (Arm's kbase behind `/dev/mali0`, or the DRM render node's driver: panfrost,
//! panthor) and the GPU's clock (devfreq), and the versions the OpenCL driver's own
//! strings carry ([`versions`]).
//!
//! Every field is read from a file and is `None` (empty) where the file is absent or says
//! nothing readable: an x86 VM has none of them, and a report must never hold a value
//! nobody read. Knows no OpenCL; the root is a parameter so that tests read a fake tree.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub mod versions;

/// The board as the files under one root describe it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Board {
    /// `/proc/device-tree/model`: the board's name ("Radxa ROCK 5B").
    pub model: Option<String>,
    /// `/proc/device-tree/compatible`, most specific first ("radxa,rock-5b",
    /// "rockchip,rk3588"); `None` without a device tree.
    pub compatible: Option<Vec<String>>,
    /// `/proc/sys/kernel/osrelease` (panfrost's and panthor's features follow it).
    pub kernel_release: Option<String>,
    /// The GPU's kernel driver: `mali_kbase` where `/dev/mali0` exists (Arm's driver,
    /// which libmali talks to), else the driver of the first render node that is a Mali
    /// one (`panfrost`, `panthor`, which Mesa talks to); `None` where neither is found.
    pub kernel_driver: Option<String>,
    /// Whether `/dev/mali0` exists.
    pub mali0: bool,
    /// Every DRM render node and its driver.
    pub render_nodes: Vec<RenderNode>,
    /// The devfreq devices that are a GPU, with their clocks.
    pub gpu_devfreq: Vec<Devfreq>,
}

/// A DRM render node (`/dev/dri/renderD128`) and the kernel driver behind it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RenderNode {
    /// The node's device path (`/dev/dri/renderD128`).
    pub node: String,
    /// The name of its `device/driver` link.
    pub driver: Option<String>,
}

/// One devfreq device: its clock now and its bounds, in Hz, as the kernel reports them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Devfreq {
    /// The devfreq name (`fb000000.gpu`).
    pub name: String,
    /// The name of its `device/driver` link (`mali`, `panfrost`, `panthor`).
    pub driver: Option<String>,
    /// The governor that sets the clock (`simple_ondemand`, `performance`, ...).
    pub governor: Option<String>,
    /// The clock now (`cur_freq`), in Hz.
    pub cur_hz: Option<u64>,
    /// The lowest clock the governor may set (`min_freq`), in Hz.
    pub min_hz: Option<u64>,
    /// The highest clock the governor may set (`max_freq`), in Hz.
    pub max_hz: Option<u64>,
    /// `available_frequencies`, as listed.
    pub available_hz: Option<Vec<u64>>,
}

/// Drivers of Mali GPUs, by their names in sysfs.
const MALI_DRIVERS: [&str; 4] = ["mali", "mali_kbase", "panfrost", "panthor"];

impl Board {
    /// The board this process runs on.
    pub fn probe() -> Board {
        Board::probe_under(Path::new("/"))
    }

    /// The board the files under `root` describe (`root` stands for `/`).
    pub fn probe_under(root: &Path) -> Board {
        let mali0 = root.join("dev/mali0").exists();
        let render_nodes = render_nodes(root);
        let kernel_driver = if mali0 {
            Some("mali_kbase".to_string())
        } else {
            render_nodes
                .iter()
                .filter_map(|n| n.driver.as_deref())
                .find(|d| MALI_DRIVERS.contains(d))
                .map(str::to_string)
        };
        Board {
            model: read_text(&root.join("proc/device-tree/model")),
            compatible: read_strings(&root.join("proc/device-tree/compatible")),
            kernel_release: read_text(&root.join("proc/sys/kernel/osrelease")),
            kernel_driver,
            mali0,
            render_nodes,
            gpu_devfreq: gpu_devfreq(root),
        }
    }
}

/// A file's text trimmed (device-tree strings end in NUL); `None` where it is missing,
/// unreadable or empty.
fn read_text(path: &Path) -> Option<String> {
    let bytes = fs::read(path).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let text = text.trim_matches(|c: char| c == '\0' || c.is_whitespace());
    (!text.is_empty()).then(|| text.to_string())
}

/// A device-tree property of NUL-separated strings.
fn read_strings(path: &Path) -> Option<Vec<String>> {
    let bytes = fs::read(path).ok()?;
    let strings: Vec<String> = bytes
        .split(|&b| b == 0)
        .map(|s| String::from_utf8_lossy(s).trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    (!strings.is_empty()).then_some(strings)
}

/// A number file such as `cur_freq`.
fn read_number(path: &Path) -> Option<u64> {
    read_text(path)?.parse().ok()
}

/// The name of the driver bound to the device at `dir` (its `device/driver` link).
fn driver_of(dir: &Path) -> Option<String> {
    let target = fs::read_link(dir.join("device/driver")).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// The entries of a sysfs class directory, by name, sorted.
fn class_entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    out.sort();
    out
}

fn render_nodes(root: &Path) -> Vec<RenderNode> {
    class_entries(&root.join("sys/class/drm"))
        .into_iter()
        .filter(|(name, _)| name.starts_with("renderD"))
        .map(|(name, path)| RenderNode {
            node: format!("/dev/dri/{name}"),
            driver: driver_of(&path),
        })
        .collect()
}

/// The devfreq devices named as a GPU or driven by a Mali driver: a board has others
/// (the memory controller's, the NPU's) whose clocks say nothing of the GPU's.
fn gpu_devfreq(root: &Path) -> Vec<Devfreq> {
    class_entries(&root.join("sys/class/devfreq"))
        .into_iter()
        .filter_map(|(name, path)| {
            let driver = driver_of(&path);
            let lower = name.to_ascii_lowercase();
            let gpu = lower.contains("gpu")
                || lower.contains("mali")
                || driver.as_deref().is_some_and(|d| MALI_DRIVERS.contains(&d));
            gpu.then(|| Devfreq {
                governor: read_text(&path.join("governor")),
                cur_hz: read_number(&path.join("cur_freq")),
                min_hz: read_number(&path.join("min_freq")),
                max_hz: read_number(&path.join("max_freq")),
                available_hz: read_text(&path.join("available_frequencies")).map(|s| {
                    s.split_whitespace()
                        .filter_map(|f| f.parse().ok())
                        .collect()
                }),
                name,
                driver,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake root, removed when dropped.
    struct FakeRoot(PathBuf);

    impl FakeRoot {
        fn new(name: &str) -> FakeRoot {
            let dir =
                std::env::temp_dir().join(format!("edgesight-board-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).expect("fake root");
            FakeRoot(dir)
        }

        fn write(&self, path: &str, contents: &[u8]) {
            let path = self.0.join(path);
            fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            fs::write(&path, contents).expect("write");
        }

        /// `path/device/driver` linking to a driver directory named `driver`.
        fn driver(&self, path: &str, driver: &str) {
            let dir = self.0.join(path).join("device");
            fs::create_dir_all(&dir).expect("mkdir");
            let target = format!("../../../../bus/platform/drivers/{driver}");
            std::os::unix::fs::symlink(target, dir.join("driver")).expect("symlink");
        }
    }

    impl Drop for FakeRoot {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// An RK3588 board on Arm's driver: the device tree's strings without their NULs,
    /// kbase by `/dev/mali0`, the GPU's devfreq among others, the NPU's left out.
    #[test]
    fn a_board_on_arms_driver() {
        let root = FakeRoot::new("kbase");
        root.write("proc/device-tree/model", b"Radxa ROCK 5B\0");
        root.write(
            "proc/device-tree/compatible",
            b"radxa,rock-5b\0rockchip,rk3588\0",
        );
        root.write("proc/sys/kernel/osrelease", b"5.10.160-rockchip\n");
        root.write("dev/mali0", b"");
        let gpu = "sys/class/devfreq/fb000000.gpu";
        root.write(&format!("{gpu}/cur_freq"), b"300000000\n");
        root.write(&format!("{gpu}/min_freq"), b"300000000\n");
        root.write(&format!("{gpu}/max_freq"), b"1000000000\n");
        root.write(&format!("{gpu}/governor"), b"simple_ondemand\n");
        root.write(
            &format!("{gpu}/available_frequencies"),
            b"300000000 400000000 1000000000 \n",
        );
        root.driver(gpu, "mali");
        root.write("sys/class/devfreq/fdab0000.npu/cur_freq", b"1000000000\n");
        root.driver("sys/class/devfreq/fdab0000.npu", "RKNPU");
        root.write("sys/class/devfreq/dmc/cur_freq", b"2112000000\n");

        let board = Board::probe_under(&root.0);
        assert_eq!(
            board,
            Board {
                model: Some("Radxa ROCK 5B".into()),
                compatible: Some(vec!["radxa,rock-5b".into(), "rockchip,rk3588".into()]),
                kernel_release: Some("5.10.160-rockchip".into()),
                kernel_driver: Some("mali_kbase".into()),
                mali0: true,
                render_nodes: vec![],
                gpu_devfreq: vec![Devfreq {
                    name: "fb000000.gpu".into(),
                    driver: Some("mali".into()),
                    governor: Some("simple_ondemand".into()),
                    cur_hz: Some(300_000_000),
                    min_hz: Some(300_000_000),
                    max_hz: Some(1_000_000_000),
                    available_hz: Some(vec![300_000_000, 400_000_000, 1_000_000_000]),
                }],
            }
        );
    }

    /// A board on Mesa: the Mali render node's driver names the kernel driver, a display
    /// controller's node beside it does not; a devfreq named otherwise is found by its
    /// driver, and a file that says nothing readable is `None`, not 0.
    #[test]
    fn a_board_on_panthor() {
        let root = FakeRoot::new("panthor");
        root.write("sys/class/drm/renderD128/dev", b"226:128\n");
        root.driver("sys/class/drm/renderD128", "rockchip-drm");
        root.write("sys/class/drm/renderD129/dev", b"226:129\n");
        root.driver("sys/class/drm/renderD129", "panthor");
        root.write("sys/class/drm/card0/dev", b"226:0\n");
        let freq = "sys/class/devfreq/fb000000.graphics";
        root.write(&format!("{freq}/cur_freq"), b"unknown\n");
        root.write(&format!("{freq}/max_freq"), b"1000000000\n");
        root.driver(freq, "panthor");

        let board = Board::probe_under(&root.0);
        assert_eq!(board.kernel_driver.as_deref(), Some("panthor"));
        assert!(!board.mali0);
        assert_eq!(
            board.render_nodes,
            [
                RenderNode {
                    node: "/dev/dri/renderD128".into(),
                    driver: Some("rockchip-drm".into()),
                },
                RenderNode {
                    node: "/dev/dri/renderD129".into(),
                    driver: Some("panthor".into()),
                },
            ]
        );
        assert_eq!(
            board.gpu_devfreq,
            [Devfreq {
                name: "fb000000.graphics".into(),
                driver: Some("panthor".into()),
                governor: None,
                cur_hz: None,
                min_hz: None,
                max_hz: Some(1_000_000_000),
                available_hz: None,
            }]
        );
        assert_eq!((board.model, board.compatible), (None, None));
    }

    /// A machine with none of these files (an x86 VM) is described by nothing at all.
    #[test]
    fn an_empty_root_says_nothing() {
        let root = FakeRoot::new("empty");
        assert_eq!(Board::probe_under(&root.0), Board::default());
        let json = serde_json::to_value(Board::default()).expect("json");
        assert_eq!(
            json,
            serde_json::json!({
                "model": null, "compatible": null, "kernel_release": null,
                "kernel_driver": null, "mali0": false, "render_nodes": [], "gpu_devfreq": [],
            })
        );
    }
}
