//! The files `process` and `capture` write: never through what is already at their
//! paths (a link planted in `--out`, a FIFO), and no temporary file left by a failed run.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::{common, edgesight, edgesight_ok, out_dir, sample};

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Runs edgesight, killed after `limit`: a run that hangs fails the test instead of
/// holding it forever.
fn edgesight_within(args: &[&str], limit: Duration) -> Output {
    common::gpu();
    let mut child = Command::new(env!("CARGO_BIN_EXE_edgesight"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run edgesight");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            let o = child.wait_with_output().unwrap();
            panic!(
                "{args:?} still running after {limit:?}: stderr {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// Issue 46, finding 2: a link planted in `--out` under the name of an output had its
/// target overwritten (and a hard link's other name had its bytes replaced). Now the run
/// is refused at a symbolic link, naming it and what it is; the link's target keeps its
/// bytes, the link stays a link, and no temporary file is left behind.
#[test]
fn round3_2_a_link_planted_in_out_is_refused_and_its_target_kept() {
    let dir = out_dir("cli-round3-2-link");
    let victim = dir.join("precious");
    let (process, capture) = (dir.join("process"), dir.join("capture"));
    for out in [&process, &capture] {
        std::fs::create_dir_all(out).unwrap();
    }
    std::fs::write(&victim, "not to be overwritten\n").unwrap();
    // report.json is written first, mask.png after it and through the PNG encoder, and
    // capture.json last.
    let (mask, summary) = (process.join("mask.png"), capture.join("capture.json"));
    for link in [&mask, &summary] {
        std::os::unix::fs::symlink(&victim, link).unwrap();
    }
    // A hard link is a regular file: its name is replaced, and the other name keeps
    // the bytes it had.
    let hard = dir.join("hard");
    std::fs::write(&hard, "kept too\n").unwrap();
    std::fs::hard_link(&hard, process.join("luma.png")).unwrap();
    let refusal = |path: &Path| {
        format!(
            "edgesight: error: {}: not a regular file but a symbolic link; edgesight \
             replaces only regular files (remove it or choose another path)\n",
            path.display()
        )
    };
    let o = edgesight(&["process", &sample(), "--out", process.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&o.stderr), refusal(&mask));
    let o = edgesight(&[
        "capture",
        "pattern:64x48@30",
        "--frames",
        "2",
        "--out",
        capture.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr {stderr}");
    assert!(stderr.ends_with(&refusal(&summary)), "stderr {stderr}");

    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "not to be overwritten\n"
    );
    assert_eq!(std::fs::read_to_string(&hard).unwrap(), "kept too\n");
    let luma = image::open(process.join("luma.png")).unwrap();
    assert_eq!((luma.width(), luma.height()), (640, 480));
    for link in [&mask, &summary] {
        let kind = std::fs::symlink_metadata(link).unwrap().file_type();
        assert!(kind.is_symlink(), "{}", link.display());
    }
    // What came before the refused file was written; nothing else is there.
    assert_eq!(
        names(&process),
        ["edges.png", "luma.png", "mask.png", "report.json"]
    );
    assert_eq!(
        names(&capture),
        [
            "capture.json",
            "edges.png",
            "histogram.png",
            "luma.png",
            "mask.png",
            "report.json"
        ]
    );
}

/// Issue 46, finding 2: a FIFO at an output's path held `process` forever, waiting for
/// a reader. Now it is refused at once.
#[test]
fn round3_2_a_fifo_in_out_is_refused_without_waiting() {
    let out = out_dir("cli-round3-2-fifo");
    std::fs::create_dir_all(&out).unwrap();
    let fifo = out.join("report.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let o = edgesight_within(
        &["process", &sample(), "--out", out.to_str().unwrap()],
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr {stderr}");
    assert_eq!(
        stderr,
        format!(
            "edgesight: error: {}: not a regular file but a FIFO; edgesight replaces only \
             regular files (remove it or choose another path)\n",
            fifo.display()
        )
    );
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(names(&out), ["report.json"]);
}

/// Issue 46, finding 2: the outputs are written into new files renamed into place. A
/// second run over the first replaces its regular files with the same bytes, each
/// keeping the permissions it had, and leaves nothing else.
#[test]
fn round3_2_a_rerun_replaces_regular_files_with_the_same_bytes() {
    let out = out_dir("cli-round3-2-rerun");
    let out_s = out.to_str().unwrap();
    edgesight_ok(&["process", &sample(), "--out", out_s]);
    let first: Vec<(String, Vec<u8>)> = names(&out)
        .into_iter()
        .filter(|n| n != "report.json") // its timings differ from run to run
        .map(|n| (n.clone(), std::fs::read(out.join(&n)).unwrap()))
        .collect();
    std::fs::set_permissions(out.join("mask.png"), PermissionsExt::from_mode(0o600)).unwrap();
    edgesight_ok(&["process", &sample(), "--out", out_s]);
    assert_eq!(
        names(&out),
        [
            "edges.png",
            "histogram.png",
            "luma.png",
            "mask.png",
            "report.json"
        ]
    );
    for (name, bytes) in first {
        assert_eq!(std::fs::read(out.join(&name)).unwrap(), bytes, "{name}");
    }
    let mode = |n: &str| std::fs::metadata(out.join(n)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("mask.png"), 0o600);
    let umask = unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m
    };
    assert_eq!(mode("luma.png"), 0o666 & !umask);
}
