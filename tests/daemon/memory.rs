//! A board's memory: one 1080p YUYV camera with every feature on (camera health, motion,
//! the live frames' check, snapshots served though none asked for) holds at most 40 MiB
//! of anonymous memory once warm, the line BENCHMARKS.md#board-memory sizes boards by.
//! (A snapshot asked for holds its pictures for `KEEP`: the server's route tests.) Read
//! from the daemon's own /proc/PID/status, so other tests running beside it do not count.

use std::time::Duration;

use crate::common::daemon::*;
use crate::latest_frame;

/// The most anonymous memory (RssAnon) one warm 1080p YUYV camera's daemon may hold.
const MAX_ANON_KIB: u64 = 40 << 10;

fn config() -> String {
    "[web]\nsnapshots = true\n\
     [[camera]]\nname = \"yard\"\n[camera.source]\nkind = \"pattern\"\nsize = \"1920x1080\"\n\
     format = \"yuyv\"\nfps = 30\n\
     [[camera.roi]]\nname = \"corner\"\nx = 0\ny = 0\nw = 64\nh = 64\n\
     [[camera.roi]]\nname = \"block\"\nx = 100\ny = 100\nw = 320\nh = 240\n\
     [camera.health]\nenabled = true\n[camera.motion]\nenabled = true\n"
        .into()
}

fn anon_kib(d: &Daemon) -> u64 {
    let kib = proc_status(d.child.id(), "RssAnon:").expect("RssAnon in /proc/PID/status");
    kib.parse().expect("RssAnon in kB")
}

#[test]
fn a_warm_1080p_camera_with_every_feature_holds_at_most_40_mib() {
    let dir = tmp_dir("daemon-memory");
    // POCL starts a worker thread a core, each holding about 0.15 MiB: the line is held
    // for the 8 cores of the largest Mali boards, whatever cores the test host has.
    let d = Daemon::start_with(&dir, &config(), |c| {
        c.env("POCL_MAX_PTHREAD_COUNT", "8");
    });
    // Warm: motion watching (its background learned), health's view learned, and the
    // first frame's check against the reference done (a camera's first frame is checked).
    wait_until("a warm camera", Duration::from_secs(120), || {
        let l = latest_frame(d.port)?;
        let verified = sample(
            &d.metrics(),
            r#"edgesight_kernel_verified_frames_total{camera="yard"}"#,
        );
        (l["motion"]["state"] == "watching"
            && l["health"]["learning"] == false
            && verified >= Some(1.0))
        .then_some(())
    });
    // The most over two seconds of frames after it.
    let most = (0..10)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(200));
            anon_kib(&d)
        })
        .max()
        .expect("readings");
    let log = d.log();
    d.stop();
    assert!(
        most <= MAX_ANON_KIB,
        "RssAnon {:.1} MiB, more than {} MiB\n{log}",
        most as f64 / 1024.0,
        MAX_ANON_KIB >> 10
    );
}
