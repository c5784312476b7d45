//! The open-file limit against `web.max_connections`: every connection is a descriptor,
//! and a daemon out of them fails to accept (or worse, to open a camera).

/// Descriptors the daemon holds besides connections and cameras: the listening socket,
/// epoll, eventfds, stdio, the journal, a config read on SIGHUP. 9 were open with one
/// camera on POCL; the rest is headroom.
const FILES_BESIDE: u64 = 32;
/// Per camera: a V4L2 device and its exported buffers, an OpenCL driver's device files
/// (NVIDIA's opens about a dozen).
const FILES_PER_CAMERA: u64 = 16;

/// Raises the soft open-file limit to the hard one (systemd's default soft limit is 1024
/// whatever the hard one is) and returns the soft limit now, `None` where it is not
/// limited.
// One of the crate's named exceptions to `deny(unsafe_code)`: libc has no safe rlimit call.
#[allow(unsafe_code)]
pub(crate) fn raise_open_files() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given, which lives across the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the struct it is given, which lives across the call.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit.rlim_cur = limit.rlim_max;
        }
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is 32 bits on armv7
    (limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur as u64)
}

/// The open-file limit leaves no descriptor for an HTTP connection beside the cameras'.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the open-file limit ({open_files}) leaves no descriptor for HTTP connections \
     beside {cameras} camera(s), which take about {reserved}: raise it (LimitNOFILE= \
     in the unit, ulimit -n)"
)]
pub struct NoRoomForConnections {
    /// The soft open-file limit after raising it to the hard one.
    pub open_files: u64,
    /// The cameras the daemon runs.
    pub cameras: usize,
    /// The descriptors the cameras and the daemon itself are counted to take.
    pub reserved: u64,
}

/// The connections served: `max_connections`, or fewer where the open-file limit leaves
/// less room beside `cameras` cameras (then `Ok` with the smaller number, for the caller
/// to say so), or an error where it leaves none. Each slot is a descriptor, and so is
/// each connection retiring beside them ([`super::slots::retiring_max`]).
pub(crate) fn connections_that_fit(
    max_connections: u32,
    cameras: usize,
    open_files: Option<u64>,
) -> Result<u32, NoRoomForConnections> {
    let Some(open_files) = open_files else {
        return Ok(max_connections);
    };
    let reserved = FILES_BESIDE + FILES_PER_CAMERA * cameras as u64;
    let room = open_files.saturating_sub(reserved);
    let descriptors = |n: u64| n + super::slots::retiring_max(n as usize) as u64;
    // Retiring ones are a quarter of the slots: four fifths of the room is close, and a
    // few steps down from there find the largest that fits.
    let mut fit = u64::from(max_connections).min(room * 4 / 5 + 1);
    while fit > 0 && descriptors(fit) > room {
        fit -= 1;
    }
    if fit == 0 {
        return Err(NoRoomForConnections {
            open_files,
            cameras,
            reserved,
        });
    }
    Ok(fit as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_fit_the_open_file_limit_or_are_refused() {
        assert_eq!(connections_that_fit(64, 1, None), Ok(64));
        assert_eq!(connections_that_fit(64, 1, Some(1024)), Ok(64));
        // 4096 connections under `ulimit -n 1024`, two cameras: 1024 - 32 - 32 leaves
        // 960 descriptors, for 768 slots and 192 retiring beside them.
        assert_eq!(connections_that_fit(4096, 2, Some(1024)), Ok(768));
        // Every size up to the room: the largest that fits with its retiring ones.
        for room in 1..300u64 {
            let n = connections_that_fit(10_000, 0, Some(32 + room)).unwrap_or(0) as u64;
            let descriptors = |n: u64| n + (n / 4).max(1);
            assert!(n == 0 || descriptors(n) <= room, "room {room}: {n}");
            assert!(
                descriptors(n + 1) > room,
                "room {room}: {n} is not the largest"
            );
        }
        // Sixty-four slots and their sixteen retiring fit in 80 descriptors exactly.
        assert_eq!(connections_that_fit(64, 0, Some(32 + 80)), Ok(64));
        assert_eq!(connections_that_fit(64, 0, Some(32 + 79)), Ok(63));
        let err = connections_that_fit(64, 1, Some(24)).expect_err("no room");
        assert_eq!(
            err,
            NoRoomForConnections {
                open_files: 24,
                cameras: 1,
                reserved: 48
            }
        );
        assert_eq!(
            err.to_string(),
            "the open-file limit (24) leaves no descriptor for HTTP connections beside 1 \
             camera(s), which take about 48: raise it (LimitNOFILE= in the unit, ulimit -n)"
        );
        assert_eq!(
            connections_that_fit(64, 0, Some(33)),
            Err(NoRoomForConnections {
                open_files: 33,
                cameras: 0,
                reserved: 32
            }),
            "room for a slot only"
        );
    }

    #[test]
    #[allow(unsafe_code)] // reads the limit back as raise_open_files does
    fn the_soft_open_file_limit_is_raised_to_the_hard_one() {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        let raised = raise_open_files();
        // SAFETY: as in raise_open_files.
        let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
        assert_eq!(read, 0);
        assert_eq!(limit.rlim_cur, limit.rlim_max);
        #[allow(clippy::unnecessary_cast)] // rlim_t is 32 bits on armv7
        let soft = limit.rlim_cur as u64;
        assert_eq!(
            raised,
            (limit.rlim_cur != libc::RLIM_INFINITY).then_some(soft)
        );
    }
}
