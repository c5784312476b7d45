//! Live frames checked against the plain-Rust reference (`[opencl] verify_every`) as the
//! daemon runs them: each camera's checks counted, none differing on a correct driver,
//! and a reload that turns the checks off.

use std::time::Duration;

use crate::common::daemon::*;

fn config(every: u32) -> String {
    format!(
        "[opencl]\nverify_every = {every}\n\
         [[camera]]\nname = \"yuyv\"\n[camera.source]\nkind = \"pattern\"\nsize = \"161x97\"\n\
         format = \"yuyv\"\nfps = 50\n\
         [[camera.roi]]\nname = \"door\"\nx = 3\ny = 5\nw = 100\nh = 60\n\
         [[camera]]\nname = \"grey\"\n[camera.source]\nkind = \"pattern\"\nsize = \"64x48\"\n\
         fps = 50\n"
    )
}

fn verified(m: &str, camera: &str) -> f64 {
    let series = format!("edgesight_kernel_verified_frames_total{{camera=\"{camera}\"}}");
    sample(m, &series).unwrap_or(0.0)
}

fn frames(m: &str, camera: &str) -> f64 {
    sample(m, &format!("edgesight_frames_total{{camera=\"{camera}\"}}")).unwrap_or(0.0)
}

#[test]
fn live_frames_are_verified_and_a_reload_stops_it() {
    let dir = tmp_dir("daemon-verify");
    let d = Daemon::start(&dir, &config(5));
    let m = wait_until("ten checks of each camera", Duration::from_secs(60), || {
        let m = d.metrics();
        (verified(&m, "yuyv") >= 10.0 && verified(&m, "grey") >= 10.0).then_some(m)
    });
    // One in five, or fewer where a check was still running when a frame was due.
    for camera in ["yuyv", "grey"] {
        assert!(
            verified(&m, camera) <= frames(&m, camera) / 5.0 + 1.0,
            "{camera}: {m}"
        );
    }
    d.assert_verified_alike(&m, &["yuyv", "grey"]);

    std::fs::write(dir.join("edgesight.toml"), config(0)).expect("rewrite config");
    d.signal(libc::SIGHUP);
    let reloaded = |m: &str| sample(m, r#"edgesight_config_reloads_total{result="success"}"#);
    let m = wait_until("the reload", Duration::from_secs(30), || {
        let m = d.metrics();
        (reloaded(&m) == Some(1.0)).then_some(m)
    });
    // A check handed over before the reload may still be counted: from 10 frames on,
    // none is.
    let from = frames(&m, "yuyv");
    let m = wait_until("10 frames", Duration::from_secs(30), || {
        let m = d.metrics();
        (frames(&m, "yuyv") >= from + 10.0).then_some(m)
    });
    let (checked, from) = (verified(&m, "yuyv"), frames(&m, "yuyv"));
    let m = wait_until("50 more frames", Duration::from_secs(30), || {
        let m = d.metrics();
        (frames(&m, "yuyv") >= from + 50.0).then_some(m)
    });
    assert_eq!(
        verified(&m, "yuyv"),
        checked,
        "checks after verify_every = 0"
    );
    d.stop();
}
