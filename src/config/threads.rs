//! The daemon's threads against the task limit of the cgroup it runs in (systemd's
//! `TasksMax=`, the cgroup's `pids.max`): a process that cannot start a thread it needs
//! fails in the middle of its work, so a config that cannot fit is refused up front.

use std::path::PathBuf;

/// Threads a camera takes: its capture/GPU thread and its publisher.
pub(crate) const PER_CAMERA: u64 = 2;
/// Threads besides the cameras: main, signals, two tokio workers, four blocking workers,
/// bcrypt and the verifier of live frames (10), and headroom for an OpenCL driver's own
/// (POCL starts one per core, NVIDIA's a handful); [`needed`] adds the cores.
const BESIDE_CAMERAS: u64 = 10 + 4;

/// The threads a daemon of `cameras` cameras needs on a machine of `cores` cores.
pub(crate) fn needed(cameras: usize, cores: u64) -> u64 {
    BESIDE_CAMERAS + cores + PER_CAMERA * cameras as u64
}

/// The task limit of the cgroup this process runs in, and the file that says it; `None`
/// where there is none (no cgroup v2, or `max`).
pub(crate) fn cgroup_limit() -> Option<(u64, PathBuf)> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    pids_max_files(&cgroup).into_iter().find_map(|file| {
        let limit = std::fs::read_to_string(&file).ok()?.trim().parse().ok()?;
        Some((limit, file))
    })
}

/// The `pids.max` files that may limit a process whose /proc/self/cgroup is `cgroup`:
/// cgroup v2's ("0::/system.slice/edgesight.service") and v1's pids controller's
/// ("8:pids:/system.slice/edgesight.service").
fn pids_max_files(cgroup: &str) -> Vec<PathBuf> {
    cgroup
        .lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once(':')?;
            let (controllers, path) = rest.split_once(':')?;
            match controllers {
                "" => Some(format!("/sys/fs/cgroup{path}/pids.max")),
                c if c.split(',').any(|c| c == "pids") => {
                    Some(format!("/sys/fs/cgroup/pids{path}/pids.max"))
                }
                _ => None,
            }
        })
        .map(|f| PathBuf::from(f.replace("//", "/")))
        .collect()
}

/// The cameras need more threads than the cgroup's task limit allows.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{cameras} cameras need about {needed} threads ({per} a camera, {besides} besides on \
     {cores} cores), but this cgroup allows {limit} tasks ({}): at most {most} cameras \
     fit; raise TasksMax= in the unit (a drop-in) or run fewer cameras",
    file.display(),
    per = PER_CAMERA,
    besides = BESIDE_CAMERAS + cores
)]
pub(crate) struct TooManyThreads {
    pub cameras: usize,
    pub needed: u64,
    pub cores: u64,
    pub limit: u64,
    /// The file the limit was read from (`pids.max`).
    pub file: PathBuf,
    /// The cameras that fit the limit.
    pub most: u64,
}

/// Why `cameras` cameras do not fit `limit` tasks (from `file`), if they do not.
pub(crate) fn check(
    cameras: usize,
    cores: u64,
    limit: Option<(u64, PathBuf)>,
) -> Result<(), TooManyThreads> {
    let Some((limit, file)) = limit else {
        return Ok(());
    };
    let needed = needed(cameras, cores);
    if needed <= limit {
        return Ok(());
    }
    let most = limit.saturating_sub(BESIDE_CAMERAS + cores) / PER_CAMERA;
    Err(TooManyThreads {
        cameras,
        needed,
        cores,
        limit,
        file,
        most,
    })
}

/// The cores the OpenCL driver may start threads for.
pub(crate) fn cores() -> u64 {
    std::thread::available_parallelism().map_or(4, |n| n.get() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resilience round 2, item 7: under `TasksMax=64` 30 cameras made tokio panic at
    /// start, and 29 a snapshot request. The limit is read and a config that cannot fit
    /// is refused, naming it.
    #[test]
    fn round2_7_cameras_beyond_the_task_limit_are_refused() {
        let unit = Some((
            64,
            PathBuf::from("/sys/fs/cgroup/system.slice/edgesight.service/pids.max"),
        ));
        // 8 cores: 14 + 8 besides the cameras, so 21 cameras fit 64 tasks.
        assert_eq!(check(21, 8, unit.clone()), Ok(()));
        let err = check(22, 8, unit.clone()).expect_err("too many");
        assert_eq!(
            err,
            TooManyThreads {
                cameras: 22,
                needed: 66,
                cores: 8,
                limit: 64,
                file: unit.clone().unwrap().1,
                most: 21,
            }
        );
        assert_eq!(
            err.to_string(),
            "22 cameras need about 66 threads (2 a camera, 22 besides on 8 cores), but this \
             cgroup allows 64 tasks (/sys/fs/cgroup/system.slice/edgesight.service/pids.max): \
             at most 21 cameras fit; raise TasksMax= in the unit (a drop-in) or run fewer \
             cameras"
        );
        assert_eq!(
            check(30, 2, unit),
            Err(check(
                30,
                2,
                Some((
                    64,
                    "/sys/fs/cgroup/system.slice/edgesight.service/pids.max".into()
                ))
            )
            .unwrap_err())
        );
        assert_eq!(check(1000, 64, None), Ok(()));
    }

    #[test]
    fn the_pids_max_files_of_cgroup_v1_and_v2() {
        assert_eq!(
            pids_max_files("0::/system.slice/edgesight.service\n"),
            [PathBuf::from(
                "/sys/fs/cgroup/system.slice/edgesight.service/pids.max"
            )]
        );
        assert_eq!(
            pids_max_files(
                "9:name=systemd:/x\n8:pids:/system.slice/e.service\n4:memory:/y\n0::/\n"
            ),
            [
                PathBuf::from("/sys/fs/cgroup/pids/system.slice/e.service/pids.max"),
                PathBuf::from("/sys/fs/cgroup/pids.max"),
            ]
        );
    }

    #[test]
    fn the_cgroup_limit_is_read_where_there_is_one() {
        // Whatever this test runs under: a number with its file, or none.
        if let Some((limit, file)) = cgroup_limit() {
            assert!(limit > 0);
            assert!(file.ends_with("pids.max"), "{}", file.display());
        }
    }
}
