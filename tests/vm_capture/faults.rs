//! Cameras that fail: dropped and damaged buffers counted, a disconnected camera reopened
//! with nothing leaked, one without USB bandwidth named and retried, and vivid's injected
//! driver errors, which neither panic nor leak.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{
    assert_no_leak, check_frames, edgesight_bin, http_get, metric, open, shared_gpu, size, vivid,
    Running,
};
use edgesight::capture::v4l2::{Device, Request, V4l2Source};
use edgesight::capture::{DropReason, FrameSource, IoMode, Next};
use edgesight::frame::PixelFormat;

/// Sets a vivid control by its v4l2-ctl name through a separate file descriptor.
fn set_control(node: &Path, key: &str, value: i32) {
    let dev = Device::open(node).unwrap();
    let control = dev
        .find_control(key)
        .unwrap_or_else(|| panic!("{}: no control {key}", node.display()));
    dev.set_control(control.id, value)
        .unwrap_or_else(|e| panic!("{}: setting {key}={value}: {e}", node.display()));
}

#[test]
#[ignore = "needs the vivid camera: run through tests/vm/run.sh (make vm-test)"]
fn dropped_and_damaged_buffers_are_counted() {
    let gpu = shared_gpu();
    let node = vivid(0);
    let request = Request {
        format: Some(PixelFormat::Grey.into()),
        size: Some(size(320, 180)),
        fps: Some(30.0),
        io: Some(IoMode::Userptr),
        ..Request::default()
    };
    let mut source = open(gpu, &node, request);
    check_frames(gpu, &mut source, 3, Duration::from_secs(120));
    assert_eq!(source.stats().dropped(DropReason::BufferError), 0);

    // vivid drops this share of its frames before they reach a buffer: sequence gaps.
    set_control(&node, "percentage_of_dropped_buffers", 50);
    let last = check_frames(gpu, &mut source, 20, Duration::from_secs(120));
    set_control(&node, "percentage_of_dropped_buffers", 0);
    let stats = source.stats();
    println!("after 50% dropped: {stats:?}");
    assert!(stats.dropped(DropReason::SequenceGap) >= 3, "{stats:?}");
    assert_eq!(stats.frames + stats.dropped_total(), last + 1, "{stats:?}");

    // One buffer flagged V4L2_BUF_FLAG_ERROR: counted, never processed.
    set_control(&node, "inject_v4l2_buf_flag_error", 1);
    let last = check_frames(gpu, &mut source, 5, Duration::from_secs(120));
    let stats = source.stats();
    assert_eq!(stats.dropped(DropReason::BufferError), 1, "{stats:?}");
    assert_eq!(stats.dropped(DropReason::ShortFrame), 0, "{stats:?}");
    assert_eq!(stats.frames, 28);
    assert_eq!(stats.frames + stats.dropped_total(), last + 1, "{stats:?}");
    assert_eq!(stats.reconnects, 0);
}

#[test]
#[ignore = "needs the vivid camera: run through tests/vm/run.sh (make vm-test)"]
fn a_disconnected_camera_is_reopened_when_it_comes_back() {
    let gpu = shared_gpu();
    let node = vivid(0);
    let request = Request {
        format: Some(PixelFormat::Yuyv.into()),
        size: Some(size(320, 180)),
        fps: Some(30.0),
        io: Some(IoMode::Userptr),
        ..Request::default()
    };
    // A call waits 200 ms for a frame. One that waited for the camera instead would wait
    // for as long as the file below holds it away: for ever, so the 5 s bound on each call
    // is a failure timeout, not a measure of how soon a call comes back.
    let wait = Duration::from_millis(200);
    let blocked = Duration::from_secs(5);
    let disconnect_and_return = |source: &mut V4l2Source| {
        // vivid's disconnect unregisters the device for every open file; it registers it
        // again once the last file using it is closed. Holding our own file open keeps
        // the camera gone for as long as we like.
        let control = Device::open(&node).unwrap();
        let id = control
            .find_control("disconnect")
            .expect("disconnect control")
            .id;
        control.set_control(id, 1).unwrap();
        let give_up = Instant::now() + Duration::from_secs(20);
        while source.is_up() {
            assert!(Instant::now() < give_up, "still up after the disconnect");
            let t = Instant::now();
            let _ = source.next_frame(gpu, wait).unwrap();
            assert!(
                t.elapsed() < blocked,
                "next_frame blocked {:?}",
                t.elapsed()
            );
        }
        // Down: every call comes back idle, and 15 retries (3 s of waits) keep failing.
        for _ in 0..15 {
            let t = Instant::now();
            assert!(matches!(source.next_frame(gpu, wait).unwrap(), Next::Idle));
            assert!(
                t.elapsed() < blocked,
                "next_frame blocked {:?}",
                t.elapsed()
            );
            assert!(!source.is_up());
        }
        drop(control);
    };

    let mut source = open(gpu, &node, request);
    check_frames(gpu, &mut source, 3, Duration::from_secs(120));
    disconnect_and_return(&mut source);
    let last = check_frames(gpu, &mut source, 5, Duration::from_secs(120));
    assert!(source.is_up());
    let stats = source.stats();
    assert_eq!(stats.reconnects, 1, "{stats:?}");
    assert_eq!(stats.frames, 8);
    // Sequence numbers go on across the reconnect.
    assert!(last >= 7, "{last}");
    assert_eq!(source.io_mode(), IoMode::Userptr);
    drop(source);

    assert_no_leak("disconnect", || {
        let mut source = open(gpu, &node, request);
        check_frames(gpu, &mut source, 1, Duration::from_secs(120));
        disconnect_and_return(&mut source);
        check_frames(gpu, &mut source, 1, Duration::from_secs(120));
        assert_eq!(source.stats().reconnects, 1);
    });
}

/// A camera whose VIDIOC_STREAMON answers ENOSPC (a USB controller out of bandwidth; here
/// vivid behind `tests/vm/no_bandwidth.c`, preloaded into the daemon) is shown as such in
/// `/api/v1/cameras` and the log, with what to do, and streams once the bus lets it: it
/// was retried all along, as an absent camera is.
#[test]
#[ignore = "needs the vivid camera: run through tests/vm/run.sh (make vm-test)"]
fn a_camera_without_usb_bandwidth_is_named_and_retried() {
    let shim = std::env::var_os("EDGESIGHT_NO_BANDWIDTH_SHIM")
        .expect("EDGESIGHT_NO_BANDWIDTH_SHIM: run through tests/vm/run.sh (make vm-test)");
    let node = vivid(0);
    let dir = Path::new("/tmp/run-no-bandwidth");
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let flag = dir.join("no-bandwidth");
    std::fs::write(&flag, "").unwrap();
    let port = 18948;
    let config = dir.join("edgesight.toml");
    std::fs::write(
        &config,
        format!(
            "[web]\nlisten_address = \"127.0.0.1:{port}\"\n[[camera]]\nname = \"shed\"\n\
             [camera.source]\nkind = \"v4l2\"\ndevice = \"{}\"\nformat = \"yuyv\"\n\
             size = \"320x180\"\nfps = 30\n",
            node.display()
        ),
    )
    .unwrap();
    let log = dir.join("log");
    let mut daemon = Running(
        Command::new(edgesight_bin())
            .args(["run", "--config"])
            .arg(&config)
            .env("LD_PRELOAD", &shim)
            .env("EDGESIGHT_TEST_NO_BANDWIDTH", &flag)
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let state_of = |body: &str| {
        body.lines()
            .find_map(|l| l.trim().strip_prefix("\"state\": \""))
            .and_then(|rest| rest.split('"').next())
            .map(str::to_string)
    };
    let wait_for = |daemon: &mut Running, state: &str, within: Duration| -> String {
        let deadline = Instant::now() + within;
        loop {
            if let Some((200, body)) = http_get(port, "/api/v1/cameras") {
                if state_of(&body).as_deref() == Some(state) {
                    return body;
                }
            }
            if Instant::now() > deadline || daemon.0.try_wait().unwrap().is_some() {
                let _ = daemon.0.kill();
                panic!(
                    "camera never {state}; log:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let starved = wait_for(&mut daemon, "no_usb_bandwidth", Duration::from_secs(120));
    let advice = edgesight::capture::v4l2::NO_BANDWIDTH;
    let error = format!("VIDIOC_STREAMON: No space left on device (os error 28): {advice}");
    assert!(
        starved.contains(&format!("\"error\": \"{error}\"")),
        "{starved}"
    );
    // Retried with the device's backoff, and logged once, not once a retry.
    std::thread::sleep(Duration::from_secs(12));
    let text = std::fs::read_to_string(&log).unwrap();
    let logged = text.lines().filter(|l| l.contains(advice)).count();
    assert_eq!(logged, 1, "{text}");
    assert_eq!(
        state_of(&http_get(port, "/api/v1/cameras").unwrap().1).as_deref(),
        Some("no_usb_bandwidth")
    );
    std::fs::remove_file(&flag).unwrap();
    wait_for(&mut daemon, "up", Duration::from_secs(600));
    let deadline = Instant::now() + Duration::from_secs(120);
    while metric(
        &http_get(port, "/metrics").map(|r| r.1).unwrap_or_default(),
        r#"edgesight_frames_total{camera="shed"}"#,
    ) < Some(3.0)
    {
        assert!(
            Instant::now() < deadline,
            "no frames after the bus let the camera stream"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[ignore = "needs the vivid camera: run through tests/vm/run.sh (make vm-test)"]
fn injected_driver_errors_neither_panic_nor_leak() {
    let gpu = shared_gpu();
    let node = vivid(0);
    let request = Request {
        format: Some(PixelFormat::Nv12.into()),
        size: Some(size(320, 180)),
        fps: Some(30.0),
        io: None,
        ..Request::default()
    };

    // REQBUFS fails once: userptr looks refused, mmap is next and works.
    assert_no_leak("reqbufs error", || {
        set_control(&node, "inject_vidioc_reqbufs_error", 1);
        let mut source = open(gpu, &node, request);
        assert_eq!(source.io_mode(), IoMode::Mmap);
        check_frames(gpu, &mut source, 2, Duration::from_secs(120));
    });

    // QBUF and STREAMON fail once while starting: the source starts down, retries and
    // streams (userptr); it was never up before, so no reconnect is counted.
    for key in ["inject_vidioc_qbuf_error", "inject_vidioc_streamon_error"] {
        assert_no_leak(key, || {
            set_control(&node, key, 1);
            let mut source = open(gpu, &node, request);
            assert!(!source.is_up(), "{key}: up despite the error");
            check_frames(gpu, &mut source, 2, Duration::from_secs(120));
            assert_eq!(source.io_mode(), IoMode::Userptr, "{key}");
            assert_eq!(source.stats().reconnects, 0, "{key}");
        });
    }

    // A fatal streaming error while running: torn down, reopened, streaming again.
    for io in [IoMode::Userptr, IoMode::Mmap] {
        assert_no_leak(&format!("fatal error, {io}"), || {
            let mut source = open(
                gpu,
                &node,
                Request {
                    io: Some(io),
                    ..request
                },
            );
            check_frames(gpu, &mut source, 2, Duration::from_secs(120));
            set_control(&node, "inject_fatal_streaming_error", 1);
            check_frames(gpu, &mut source, 2, Duration::from_secs(120));
            let stats = source.stats();
            assert_eq!(stats.reconnects, 1, "{io}: {stats:?}");
            assert_eq!(stats.frames, 4);
        });
    }
}
