//! Finding OpenCL platforms and devices, describing them, and choosing one from a spec.

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

use opencl3::device::{
    Device, CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU,
};
use opencl3::error_codes::{DLOPEN_FUNCTION_NOT_AVAILABLE, DLOPEN_RUNTIME_LOAD_FAILED};
use opencl3::platform::{get_platforms, Platform};
use serde::Serialize;

use super::{CallContext, ClError};

/// What `edgesight devices` prints about an OpenCL device, and what the reports name (the
/// V4L2 nodes have their own `capture::v4l2::list::DeviceInfo`).
#[derive(Clone, Debug, Serialize)]
pub struct ClDeviceInfo {
    /// Name of the OpenCL platform the device belongs to (e.g. "NVIDIA CUDA").
    pub platform: String,
    /// The platform's OpenCL version string (`CL_PLATFORM_VERSION`).
    pub platform_version: String,
    /// The device's name as its driver reports it, surrounding whitespace trimmed.
    pub name: String,
    /// The device vendor's name, trimmed; NVIDIA's devices are waited for by polling.
    pub vendor: String,
    /// The device type: "GPU", "CPU", "accelerator" or "other".
    pub kind: &'static str,
    /// The device's OpenCL version string (`CL_DEVICE_VERSION`).
    pub version: String,
    /// The driver's version string (`CL_DRIVER_VERSION`), part of a kept binary's key.
    pub driver_version: String,
    /// The newest OpenCL C its compiler accepts (`CL_DEVICE_OPENCL_C_VERSION`).
    pub opencl_c_version: String,
    /// Parallel compute units (shader cores, SMs, CPU threads), which sizes some launches.
    pub compute_units: u32,
    /// Local memory a work-group can use, in bytes.
    pub local_mem_bytes: u64,
    /// Global memory of the device, in bytes.
    pub global_mem_bytes: u64,
    /// The most work-items one work-group may hold.
    pub max_work_group_size: usize,
    /// `None` where the driver no longer answers the (OpenCL 1.x) query.
    pub unified_memory: Option<bool>,
    /// Whether the device offers doubles (`cl_khr_fp64`), which Otsu's kernel can use natively.
    pub fp64: bool,
}

impl fmt::Display for ClDeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.platform)
    }
}

/// One platform and its devices, in the driver's order.
pub struct PlatformDevices {
    /// The platform's OpenCL handle.
    pub platform: Platform,
    /// The platform's name (`CL_PLATFORM_NAME`).
    pub name: String,
    /// Its devices, each with its description, in the driver's order.
    pub devices: Vec<(Device, ClDeviceInfo)>,
}

fn kind_name(device_type: u64) -> &'static str {
    if device_type & CL_DEVICE_TYPE_GPU != 0 {
        "GPU"
    } else if device_type & CL_DEVICE_TYPE_CPU != 0 {
        "CPU"
    } else if device_type & CL_DEVICE_TYPE_ACCELERATOR != 0 {
        "accelerator"
    } else {
        "other"
    }
}

fn describe(platform: &Platform, device: &Device) -> Result<ClDeviceInfo, ClError> {
    let q = "clGetDeviceInfo";
    let extensions = device.extensions().call(q)?;
    Ok(ClDeviceInfo {
        platform: platform.name().call("clGetPlatformInfo")?,
        platform_version: platform.version().call("clGetPlatformInfo")?,
        name: device.name().call(q)?.trim().to_string(),
        vendor: device.vendor().call(q)?.trim().to_string(),
        kind: kind_name(device.dev_type().call(q)?),
        version: device.version().call(q)?,
        driver_version: device.driver_version().call(q)?,
        opencl_c_version: device.opencl_c_version().call(q)?,
        compute_units: device.max_compute_units().call(q)?,
        local_mem_bytes: device.local_mem_size().call(q)?,
        global_mem_bytes: device.global_mem_size().call(q)?,
        max_work_group_size: device.max_work_group_size().call(q)?,
        unified_memory: device.host_unified_memory().ok(),
        fp64: extensions.split_whitespace().any(|e| e == "cl_khr_fp64"),
    })
}

/// Every platform and device the OpenCL loader reports.
pub fn list_devices() -> Result<Vec<PlatformDevices>, ClError> {
    // POCL initialises itself on the first query and answers "no devices" to a thread that
    // asks while another is initialising it: enumerate one thread at a time.
    static ENUMERATION: Mutex<()> = Mutex::new(());
    let _one_at_a_time = ENUMERATION
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let platforms = get_platforms().map_err(|e| match e.0 {
        DLOPEN_RUNTIME_LOAD_FAILED | DLOPEN_FUNCTION_NOT_AVAILABLE => ClError::NoLibrary(e),
        // The ICD loader answers "no platform" with CL_PLATFORM_NOT_FOUND_KHR (-1001).
        -1001 => ClError::NoPlatform,
        _ => ClError::Call {
            call: "clGetPlatformIDs",
            code: e,
        },
    })?;
    if platforms.is_empty() {
        return Err(ClError::NoPlatform);
    }
    let mut out = Vec::new();
    for platform in platforms {
        let name = platform.name().call("clGetPlatformInfo")?;
        // A platform without devices answers CL_DEVICE_NOT_FOUND; list it empty.
        let ids = platform.get_devices(CL_DEVICE_TYPE_ALL).unwrap_or_default();
        let mut devices = Vec::new();
        for id in ids {
            let device = Device::new(id);
            let info = describe(&platform, &device)?;
            devices.push((device, info));
        }
        out.push(PlatformDevices {
            platform,
            name,
            devices,
        });
    }
    Ok(out)
}

/// Which device to use.
///
/// * empty or `default`: the first GPU of any platform, else the first device;
/// * `N`: the N-th device (from 0) in the order `edgesight devices` lists them;
/// * `P:D`: device D of platform P, each an index or a case-insensitive name substring
///   (either may be empty: `:1`, `NVIDIA:`, `pocl:0`);
/// * `NAME`: the first device whose name or platform name contains NAME, case-insensitive.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DeviceSpec {
    /// Empty or `default`: the first GPU of any platform, else the first device.
    #[default]
    Default,
    /// `N`: the N-th device, from 0, across all platforms in `edgesight devices`' order.
    Index(usize),
    /// `P:D`: the first device that D selects on a platform that P selects.
    PlatformDevice(Selector, Selector),
    /// `NAME`: the first device whose name or platform name holds it (kept in lowercase).
    Name(String),
}

/// One half of `P:D`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    /// Empty: any platform, or any device of it.
    Any,
    /// The platform's index among all platforms, or the device's among its platform's, from 0.
    Index(usize),
    /// A lowercase substring of the platform's or device's name, matched case-insensitively.
    Name(String),
}

impl Selector {
    fn parse(s: &str) -> Selector {
        let s = s.trim();
        if s.is_empty() {
            Selector::Any
        } else if let Ok(i) = s.parse() {
            Selector::Index(i)
        } else {
            Selector::Name(s.to_lowercase())
        }
    }

    fn matches(&self, index: usize, name: &str) -> bool {
        match self {
            Selector::Any => true,
            Selector::Index(i) => *i == index,
            Selector::Name(n) => name.to_lowercase().contains(n),
        }
    }
}

impl FromStr for DeviceSpec {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        Ok(if s.is_empty() || s.eq_ignore_ascii_case("default") {
            DeviceSpec::Default
        } else if let Some((p, d)) = s.split_once(':') {
            DeviceSpec::PlatformDevice(Selector::parse(p), Selector::parse(d))
        } else if let Ok(i) = s.parse() {
            DeviceSpec::Index(i)
        } else {
            DeviceSpec::Name(s.to_lowercase())
        })
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sel = |s: &Selector| match s {
            Selector::Any => String::new(),
            Selector::Index(i) => i.to_string(),
            Selector::Name(n) => n.clone(),
        };
        match self {
            DeviceSpec::Default => f.write_str("default"),
            DeviceSpec::Index(i) => write!(f, "{i}"),
            DeviceSpec::PlatformDevice(p, d) => write!(f, "{}:{}", sel(p), sel(d)),
            DeviceSpec::Name(n) => f.write_str(n),
        }
    }
}

/// Picks the device `spec` names among `platforms`: (platform index, device index).
fn choose(
    spec: &DeviceSpec,
    platforms: &[(String, Vec<(String, &'static str)>)],
) -> Option<(usize, usize)> {
    let all = || {
        platforms
            .iter()
            .enumerate()
            .flat_map(|(p, (_, devs))| devs.iter().enumerate().map(move |(d, dev)| (p, d, dev)))
    };
    match spec {
        DeviceSpec::Default => all()
            .find(|(_, _, (_, kind))| *kind == "GPU")
            .or_else(|| all().next())
            .map(|(p, d, _)| (p, d)),
        DeviceSpec::Index(i) => all().nth(*i).map(|(p, d, _)| (p, d)),
        DeviceSpec::PlatformDevice(ps, ds) => all()
            .find(|(p, d, (name, _))| ps.matches(*p, &platforms[*p].0) && ds.matches(*d, name))
            .map(|(p, d, _)| (p, d)),
        DeviceSpec::Name(n) => all()
            .find(|(p, _, (name, _))| {
                name.to_lowercase().contains(n) || platforms[*p].0.to_lowercase().contains(n)
            })
            .map(|(p, d, _)| (p, d)),
    }
}

pub(super) fn select(spec: &DeviceSpec) -> Result<(Device, ClDeviceInfo), ClError> {
    let mut platforms = list_devices()?;
    let names: Vec<(String, Vec<(String, &'static str)>)> = platforms
        .iter()
        .map(|p| {
            let devs = p
                .devices
                .iter()
                .map(|(_, i)| (i.name.clone(), i.kind))
                .collect();
            (p.name.clone(), devs)
        })
        .collect();
    let Some((p, d)) = choose(spec, &names) else {
        let available: Vec<String> = names
            .iter()
            .enumerate()
            .flat_map(|(pi, (pn, devs))| {
                devs.iter()
                    .enumerate()
                    .map(move |(di, (dn, _))| format!("{pi}:{di} {dn} ({pn})"))
            })
            .collect();
        return Err(ClError::NoDevice {
            spec: spec.to_string(),
            available: if available.is_empty() {
                "none".into()
            } else {
                available.join(", ")
            },
        });
    };
    Ok(platforms.swap_remove(p).devices.swap_remove(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Vec<(String, Vec<(String, &'static str)>)> {
        vec![
            (
                "Portable Computing Language".into(),
                vec![("pthread-haswell".into(), "CPU")],
            ),
            (
                "ARM Platform".into(),
                vec![
                    ("Mali-G610 r0p0".into(), "GPU"),
                    ("Mali-G610 r0p0".into(), "GPU"),
                ],
            ),
        ]
    }

    fn pick(s: &str) -> Option<(usize, usize)> {
        choose(&s.parse().unwrap(), &machine())
    }

    #[test]
    fn default_prefers_the_first_gpu() {
        assert_eq!(pick(""), Some((1, 0)));
        assert_eq!(pick("default"), Some((1, 0)));
        let cpu_only = vec![("pocl".to_string(), vec![("cpu".to_string(), "CPU")])];
        assert_eq!(choose(&DeviceSpec::Default, &cpu_only), Some((0, 0)));
    }

    #[test]
    fn indices_substrings_and_pairs() {
        assert_eq!(pick("0"), Some((0, 0)));
        assert_eq!(pick("2"), Some((1, 1)));
        assert_eq!(pick("3"), None);
        assert_eq!(pick("mali"), Some((1, 0)));
        assert_eq!(pick("Portable"), Some((0, 0)));
        assert_eq!(pick("1:1"), Some((1, 1)));
        assert_eq!(pick("arm:"), Some((1, 0)));
        assert_eq!(pick(":0"), Some((0, 0)));
        assert_eq!(pick("pocl:mali"), None);
        assert_eq!(pick("nvidia"), None);
    }
}
