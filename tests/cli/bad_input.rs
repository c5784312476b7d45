//! Bad input to every command: exit code 2 and one line naming the culprit and its cause,
//! never a panic; inputs bounded before they are read.

use std::path::Path;

use crate::{assert_bad_input, bad_input_line, edgesight, out_dir, sample};

#[test]
fn bad_input_is_named_with_exit_code_2() {
    let dir = out_dir("cli-bad");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    let raw = dir.join("frame.yuyv");
    std::fs::write(&raw, vec![0u8; 100]).unwrap();
    let raw = raw.to_str().unwrap();
    let text = dir.join("notes.png");
    std::fs::write(&text, "not an image").unwrap();
    let text = text.to_str().unwrap();
    let s = sample();

    assert_bad_input(
        &["process", "/nonexistent/frame.png", "--out", out],
        "/nonexistent/frame.png",
    );
    assert_bad_input(&["process", text, "--out", out], "notes.png");
    assert_bad_input(
        &[
            "process", raw, "--out", out, "--format", "mjpeg", "--size", "10x5",
        ],
        "mjpeg",
    );
    assert_bad_input(
        &[
            "process", raw, "--out", out, "--format", "yuyv", "--size", "10x6",
        ],
        "120 bytes",
    );
    assert_bad_input(
        &[
            "process", raw, "--out", out, "--format", "yuyv", "--size", "0x5",
        ],
        "0x5",
    );
    assert_bad_input(
        &["process", raw, "--out", out, "--format", "yuyv"],
        "--size",
    );
    assert_bad_input(
        &["process", &s, "--out", out, "--roi", "door:600,0,64,48"],
        "door",
    );
    assert_bad_input(
        &["process", &s, "--out", out, "--roi", "door:1,2,3"],
        "door:1,2,3",
    );
    assert_bad_input(&["process", &s, "--out", out, "--border", "wrap"], "wrap");
    assert_bad_input(
        &["process", &s, "--out", out, "--device", "no-such-gpu"],
        "no-such-gpu",
    );
    assert_bad_input(
        &["process", &s, "--out", "/proc/edgesight-out"],
        "/proc/edgesight-out",
    );
}

/// Issue item 9: a JPEG cut in half, baseline or progressive, is refused naming the byte
/// where its data ends, never processed with its missing rows made up (grey 128).
#[test]
fn r9_a_cut_jpeg_is_refused_naming_it() {
    let dir = out_dir("cli-cut-jpeg");
    std::fs::create_dir_all(&dir).unwrap();
    let whole = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jpeg/scene-420.jpg");
    let bytes = std::fs::read(&whole).unwrap();
    let cut = dir.join("cut.jpg");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    let o = edgesight(&["process", whole.to_str().unwrap(), "--out", out]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        bad_input_line(&["process", cut.to_str().unwrap(), "--out", out]),
        format!(
            "edgesight: error: {}: incomplete JPEG image: the data ends at byte {} in a scan, before the end-of-image marker\n",
            cut.display(),
            bytes.len() / 2
        )
    );

    let progressive = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fuzz/corpus/inputs/progressive-33x17.jpg"
    ))
    .unwrap();
    let cut = dir.join("cut-progressive.jpg");
    std::fs::write(&cut, &progressive[..progressive.len() - 40]).unwrap();
    assert_eq!(
        bad_input_line(&["process", cut.to_str().unwrap(), "--out", out]),
        format!(
            "edgesight: error: {}: incomplete JPEG image: the data ends at byte {} in a scan, before the end-of-image marker\n",
            cut.display(),
            progressive.len() - 40
        )
    );
}

/// Issue items 10 and 11: a raw input is a regular file of the frame's size, so that
/// `process /dev/zero` is refused rather than read without end, and a size is checked on
/// the command line before any byte count is made of it (one of a saturated stride was
/// named before).
#[test]
fn r10_r11_raw_input_is_bounded_and_its_size_checked() {
    let dir = out_dir("cli-raw-bounds");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    let refusal = "edgesight: error: /dev/zero: not a regular file (a character device); give an image file or a raw frame file\n";
    for args in [
        &["process", "/dev/zero", "--out", out][..],
        &[
            "process",
            "/dev/zero",
            "--out",
            out,
            "--format",
            "grey",
            "--size",
            "640x480",
        ],
    ] {
        assert_eq!(bad_input_line(args), refusal);
    }
    let raw = dir.join("frame.rgbx");
    std::fs::write(&raw, [0u8; 100]).unwrap();
    let process_raw = |size: &str| {
        bad_input_line(&[
            "process",
            raw.to_str().unwrap(),
            "--out",
            out,
            "--format",
            "rgbx",
            "--size",
            size,
        ])
    };
    // The command line holds a side to 16384, so an overflowing size never reaches a file.
    assert_eq!(
        process_raw("4294967295x1"),
        "error: invalid value '4294967295x1' for '--size <SIZE>': frame size 4294967295x1 is \
         too large (at most 16384 on a side)\n\nFor more information, try '--help'.\n"
    );
    // A size within the sides but beyond the pipeline's pixel limit is refused there too;
    // the layout's own checked arithmetic is tested in frame::tests.
    assert_eq!(
        process_raw("16384x16384"),
        "error: invalid value '16384x16384' for '--size <SIZE>': frame size 16384x16384 is \
         too large (at most 16843009 pixels and a width of at most 65535)\n\nFor more \
         information, try '--help'.\n"
    );
}

/// A file that cannot be opened was named with its cause twice ("No such file or directory
/// (os error 2): No such file or directory (os error 2)").
#[test]
fn r_each_cause_of_an_input_error_is_said_once() {
    let dir = out_dir("cli-missing");
    let missing = dir.join("missing.png");
    let out = dir.join("out");
    assert_eq!(
        bad_input_line(&[
            "process",
            missing.to_str().unwrap(),
            "--out",
            out.to_str().unwrap()
        ]),
        format!(
            "edgesight: error: {}: No such file or directory (os error 2)\n",
            missing.display()
        )
    );
    let replay = format!("replay:{}@5", dir.join("no-dir").display());
    assert_eq!(
        bad_input_line(&[
            "capture",
            &replay,
            "--frames",
            "1",
            "--out",
            out.to_str().unwrap()
        ]),
        format!(
            "edgesight: error: replay {}: No such file or directory (os error 2)\n",
            dir.join("no-dir").display()
        )
    );
}

/// Issue "Resilience and security": `--roi` took names the config refuses (quotes,
/// newlines, one name twice); both now go through one check.
#[test]
fn roi_names_are_checked_as_the_config_checks_them() {
    let out = out_dir("cli-roi-names");
    let out = out.to_str().unwrap();
    let s = sample();
    for (roi, culprit) in [
        (
            "a\"b:0,0,8,8",
            "--roi: \"a\\\"b\": use 1-64 characters without quotes, backslashes or control characters",
        ),
        (
            "a\nb:0,0,8,8",
            "--roi: \"a\\nb\": use 1-64 characters without quotes, backslashes or control characters",
        ),
    ] {
        assert_bad_input(&["process", &s, "--out", out, "--roi", roi], culprit);
    }
    assert_bad_input(
        &[
            "process",
            &s,
            "--out",
            out,
            "--roi",
            "door:0,0,8,8",
            "--roi",
            "door:8,8,8,8",
        ],
        "--roi: ROI 'door' is named twice",
    );
    assert_bad_input(
        &[
            "capture",
            "pattern:64x48@5",
            "--frames",
            "1",
            "--out",
            out,
            "--roi",
            "x:0,0,1,1",
            "--roi",
            "x:1,1,1,1",
        ],
        "--roi: ROI 'x' is named twice",
    );
}

/// Issue "Resilience and security", items 2 and 12: rates and sizes are bounded wherever
/// the command line takes them.
#[test]
fn rates_and_sizes_are_bounded_on_the_command_line() {
    let out = out_dir("cli-bounds");
    let out = out.to_str().unwrap();
    for (args, culprit) in [
        (
            vec![
                "capture",
                "pattern:64x48@1e-300",
                "--frames",
                "1",
                "--out",
                out,
            ],
            "frame rate '1e-300' is not a number from 0.01 to 1000",
        ),
        (
            vec![
                "capture",
                "pattern:100000x100000@1",
                "--frames",
                "1",
                "--out",
                out,
            ],
            "frame size 100000x100000 is too large (at most 16384 on a side)",
        ),
        (
            vec![
                "capture",
                "/dev/null",
                "--size",
                "16385x2",
                "--frames",
                "1",
                "--out",
                out,
            ],
            "frame size 16385x2 is too large (at most 16384 on a side)",
        ),
        (
            vec![
                "capture",
                "/dev/null",
                "--fps",
                "0.001",
                "--frames",
                "1",
                "--out",
                out,
            ],
            "frame rate '0.001' is not a number from 0.01 to 1000",
        ),
        (
            vec!["run", "--source", "pattern:64x48@6e-20"],
            "frame rate '6e-20' is not a number from 0.01 to 1000",
        ),
        (
            vec!["bench", "--sizes", "20000x1", "--runs", "1"],
            "frame size 20000x1 is too large (at most 16384 on a side)",
        ),
    ] {
        assert_bad_input(&args, culprit);
    }
}

/// `selftest --json` into a directory that is not there is refused before any check runs,
/// naming the file; `--camera` is for the report, so only with `--json`.
#[test]
fn selftest_json_and_camera_are_checked_first() {
    let started = std::time::Instant::now();
    let line = bad_input_line(&["selftest", "--json", "/nonexistent/dir/board.json"]);
    assert_eq!(
        line,
        "edgesight: error: output directory /nonexistent/dir: not a directory (for --json \
         /nonexistent/dir/board.json)\n"
    );
    assert!(started.elapsed().as_secs() < 5, "refused before the checks");
    // Issue 46, finding 2: so is a --json path a file would not be written to.
    let dir = crate::out_dir("cli-round3-2-json");
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("board.json");
    std::os::unix::fs::symlink(dir.join("elsewhere"), &link).unwrap();
    for command in ["selftest", "bench", "kernels"] {
        let started = std::time::Instant::now();
        let line = bad_input_line(&[command, "--json", link.to_str().unwrap()]);
        assert_eq!(
            line,
            format!(
                "edgesight: error: {}: not a regular file but a symbolic link; edgesight \
                 replaces only regular files (remove it or choose another path)\n",
                link.display()
            ),
            "{command}"
        );
        assert!(started.elapsed().as_secs() < 5, "{command}: refused first");
    }
    assert!(!dir.join("elsewhere").exists());
    let o = edgesight(&["selftest", "--camera", "/dev/video0"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--json <FILE>"), "{stderr}");
}

/// `${VAR}` in a config comes from the environment `check-config` (and `run`) is given; an
/// unset one is refused at its place in the file.
#[test]
fn config_variables_come_from_the_environment() {
    let dir = out_dir("cli-config-env");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("board.toml");
    std::fs::write(
        &path,
        "[[camera]]\nname = \"${ES_TEST_BOARD}-front\"\n[camera.source]\nkind = \"pattern\"\n",
    )
    .unwrap();
    let path = path.to_str().unwrap();
    let check = |board: Option<&str>| {
        crate::common::gpu();
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_edgesight"));
        command.args(["check-config", path]);
        match board {
            Some(board) => command.env("ES_TEST_BOARD", board),
            None => command.env_remove("ES_TEST_BOARD"),
        };
        command.output().expect("run edgesight")
    };
    let o = check(Some("b42"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let printed = String::from_utf8_lossy(&o.stdout);
    assert!(printed.contains("name = \"b42-front\"\n"), "{printed}");
    let o = check(None);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "edgesight: error: {path}:2:9: camera.name: ${{ES_TEST_BOARD}}: ES_TEST_BOARD is \
             not set in the environment (give it, or a default: ${{ES_TEST_BOARD:-...}})\n"
        )
    );
}
