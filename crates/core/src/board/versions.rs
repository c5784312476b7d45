//! The versions an OpenCL driver's own strings carry: Arm's libmali puts its release
//! (`arm_release_ver`, "r38p1-01eac0") into its platform, device and driver versions;
//! Mesa's Clover and Rusticl their Mesa version ("Mesa 23.1.3", or the bare version as
//! the driver version). What board reports are compared by, where the device's name alone
//! says nothing of the driver.

use serde::Serialize;

/// The driver's versions found in its strings; `None` where none matches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DriverVersions {
    /// Arm libmali's release, `rNpM` with its suffix ("r38p1-01eac0").
    pub arm_release_ver: Option<String>,
    /// The Mesa version of Clover or Rusticl ("23.1.3", "24.1.0-devel").
    pub mesa_version: Option<String>,
}

impl DriverVersions {
    /// From the platform's name and the driver's version strings (platform version,
    /// device version, driver version), in that order of trust for neither.
    pub fn parse(platform: &str, strings: &[&str]) -> DriverVersions {
        let arm_release_ver = strings.iter().find_map(|s| arm_release_ver(s));
        let mesa_version = strings.iter().find_map(|s| after_mesa(s)).or_else(|| {
            // Rusticl's driver version is the bare Mesa version.
            let mesa =
                ["rusticl", "clover"].contains(&platform.trim().to_ascii_lowercase().as_str());
            let driver = strings.last()?.trim();
            (mesa && starts_as_version(driver)).then_some(driver)
        });
        DriverVersions {
            arm_release_ver: arm_release_ver.map(str::to_string),
            mesa_version: mesa_version.map(str::to_string),
        }
    }
}

/// The first `rNpM` in `s` that starts a word, with its `-suffix` (one run of letters and
/// digits) where it has one: "v1.r38p1-01eac0.c1a71ccca2" gives "r38p1-01eac0".
pub fn arm_release_ver(s: &str) -> Option<&str> {
    let bytes = s.as_bytes();
    (0..bytes.len()).find_map(|start| {
        let word_start = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
        if !word_start || bytes[start] != b'r' {
            return None;
        }
        let mut i = start + 1;
        let digits = |i: usize| bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        let major = digits(i);
        i += major;
        if major == 0 || bytes.get(i) != Some(&b'p') {
            return None;
        }
        i += 1;
        let minor = digits(i);
        if minor == 0 {
            return None;
        }
        i += minor;
        if bytes.get(i) == Some(&b'-') {
            let suffix = bytes[i + 1..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric())
                .count();
            if suffix > 0 {
                i += 1 + suffix;
            }
        }
        Some(&s[start..i])
    })
}

/// The version after "Mesa " in `s` ("OpenCL 1.1 Mesa 23.1.3" gives "23.1.3";
/// "Mesa 24.1.0-devel (git-abc)" gives "24.1.0-devel").
fn after_mesa(s: &str) -> Option<&str> {
    let (_, rest) = s.split_once("Mesa ")?;
    let version = rest.split_whitespace().next()?;
    starts_as_version(version).then_some(version)
}

/// Digits, a dot, a digit: "25.0.7", "23.2.1-1ubuntu3".
fn starts_as_version(s: &str) -> bool {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0
        && s[digits..].starts_with('.')
        && s[digits + 1..].starts_with(|c: char| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libmali's strings as boards print them: the release after "v1.", with and
    /// without a suffix, beside a git hash that holds no `rNpM`.
    #[test]
    fn libmali_release_from_its_version_strings() {
        let v = DriverVersions::parse(
            "ARM Platform",
            &[
                "OpenCL 3.0 v1.r38p1-01eac0.c1a71ccca2acf211eb87c5db5322f569",
                "OpenCL 3.0 v1.r38p1-01eac0.c1a71ccca2acf211eb87c5db5322f569",
                "3.0",
            ],
        );
        assert_eq!(
            v,
            DriverVersions {
                arm_release_ver: Some("r38p1-01eac0".into()),
                mesa_version: None,
            }
        );
        assert_eq!(
            arm_release_ver(
                "OpenCL 1.2 v1.r14p0-01rel0-git(966ed26).f44c85cb3d2ceb87e8be88e7592755c3"
            ),
            Some("r14p0-01rel0")
        );
        assert_eq!(arm_release_ver("2.1 r20p0"), Some("r20p0"));
        assert_eq!(arm_release_ver("v1.r9p0-."), Some("r9p0"));
        // Not a word's start, no minor, no digits.
        assert_eq!(
            arm_release_ver("OpenCL 3.0 PoCL HSTR: pthread-x86_64"),
            None
        );
        assert_eq!(arm_release_ver("mirr12p3"), None);
        assert_eq!(arm_release_ver("r12p"), None);
        assert_eq!(arm_release_ver("rp1"), None);
        assert_eq!(arm_release_ver(""), None);
    }

    /// Clover says "Mesa X" in its versions; Rusticl gives the bare version as its driver
    /// version; POCL's "3.1+debian" is no Mesa version.
    #[test]
    fn mesa_version_from_clover_and_rusticl() {
        let clover = DriverVersions::parse(
            "Clover",
            &["OpenCL 1.1 Mesa 23.1.3", "OpenCL 1.1 Mesa 23.1.3", "23.1.3"],
        );
        assert_eq!(clover.mesa_version.as_deref(), Some("23.1.3"));
        assert_eq!(clover.arm_release_ver, None);
        let rusticl = DriverVersions::parse("rusticl", &["OpenCL 3.0 ", "OpenCL 3.0 ", "25.0.7"]);
        assert_eq!(rusticl.mesa_version.as_deref(), Some("25.0.7"));
        let devel = DriverVersions::parse(
            "rusticl",
            &[
                "OpenCL 3.0 ",
                "OpenCL 3.0 ",
                "Mesa 25.1.0-devel (git-0a1b2c3)",
            ],
        );
        assert_eq!(devel.mesa_version.as_deref(), Some("25.1.0-devel"));
        let pocl = DriverVersions::parse(
            "Portable Computing Language",
            &[
                "OpenCL 3.0 PoCL 3.1+debian  Linux, None+Asserts, RELOC, SPIR, LLVM 15.0.6",
                "OpenCL 3.0 PoCL HSTR: pthread-x86_64-pc-linux-gnu-skylake-avx512",
                "3.1+debian",
            ],
        );
        assert_eq!(pocl, DriverVersions::default());
        // A version only where the platform is Mesa's.
        assert_eq!(
            DriverVersions::parse("NVIDIA CUDA", &["OpenCL 3.0 CUDA 12.8.97", "580.95.05"]),
            DriverVersions::default()
        );
        assert_eq!(
            DriverVersions::parse("rusticl", &["OpenCL 3.0 ", "OpenCL 3.0 ", "devel"]),
            DriverVersions::default()
        );
    }
}
