//! Reading frames from files (`edgesight::input`): what is accepted, with which layout, and
//! what is refused, naming the file. The images are the `inputs` fuzz corpus (tiny PNG,
//! baseline and progressive JPEG, PGM and PPM files). No OpenCL.

use std::path::{Path, PathBuf};

use edgesight::frame::{FrameLayout, PixelFormat, Size};
use edgesight::input::{self, InputError, MAX_IMAGE_FILE_BYTES};
use edgesight::jpeg;

fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus/inputs")
        .join(name)
}

fn tmp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The size a corpus file's name ends with: `rgb-33x17.png` is 33x17.
fn size_in_name(name: &str) -> (u32, u32) {
    let stem = name.split('.').next().unwrap();
    let size: Size = stem.rsplit('-').next().unwrap().parse().unwrap();
    (size.width, size.height)
}

#[test]
fn every_corpus_image_loads_with_the_size_and_format_in_its_name() {
    for (name, format) in [
        ("grey-8x6.png", PixelFormat::Grey),
        ("rgb-33x17.png", PixelFormat::Rgb24),
        ("rgba-12x9.png", PixelFormat::Rgbx),
        // A JPEG gives its luma (its Y plane) whether in colour or not.
        ("baseline-17x9.jpg", PixelFormat::Grey),
        ("baseline-grey-33x17.jpg", PixelFormat::Grey),
        ("progressive-33x17.jpg", PixelFormat::Grey),
        ("progressive-64-scans-48x32.jpg", PixelFormat::Grey),
        ("restarts-48x16.jpg", PixelFormat::Grey),
        ("grey-8x6.pgm", PixelFormat::Grey),
        ("rgb-9x7.ppm", PixelFormat::Rgb24),
    ] {
        let frame = input::load(&corpus(name), None).unwrap_or_else(|e| panic!("{e}"));
        let (width, height) = size_in_name(name);
        assert_eq!(
            frame.layout,
            FrameLayout::packed(format, width, height),
            "{name}"
        );
        assert_eq!(frame.bytes.len(), frame.layout.frame_bytes(), "{name}");
    }
}

/// Writes `bytes[..cut]` for every cut from `from` up to the whole file but its last
/// byte, and hands each file and its load result to `check`.
fn for_every_cut(name: &str, from: usize, check: impl Fn(usize, &Path, InputError)) {
    let bytes = std::fs::read(corpus(name)).unwrap();
    let dir = tmp_dir(&format!("inputs-cut-{name}"));
    for cut in from..bytes.len() {
        let path = dir.join(format!("cut-{cut}-{name}"));
        std::fs::write(&path, &bytes[..cut]).unwrap();
        match input::load(&path, None) {
            Ok(frame) => panic!(
                "{name} cut to {cut} of {} bytes was accepted as {:?}",
                bytes.len(),
                frame.layout
            ),
            Err(e) => check(cut, &path, e),
        }
        std::fs::remove_file(&path).unwrap();
    }
}

/// Issue item 9: the `image` crate runs zune-jpeg leniently, so a JPEG cut anywhere
/// decoded "fine" with its missing rows grey, baseline and progressive alike.
#[test]
fn r9_a_jpeg_cut_anywhere_before_its_end_is_refused() {
    for name in [
        "baseline-17x9.jpg",
        "baseline-grey-33x17.jpg",
        "progressive-33x17.jpg",
        "restarts-48x16.jpg",
    ] {
        let whole = std::fs::read(corpus(name)).unwrap();
        assert_eq!(jpeg::jpeg_end(&whole), Ok(whole.len()), "{name}");
        // From 3 bytes on, the content says JPEG (FF D8 FF).
        for_every_cut(name, 3, |cut, path, e| {
            let text = e.to_string();
            let want = format!(
                "{}: incomplete JPEG image: the data ends at byte {cut} in ",
                path.display()
            );
            assert!(text.starts_with(&want), "{text}");
            assert!(text.ends_with(", before the end-of-image marker"), "{text}");
        });
    }
}

#[test]
fn r9_a_png_cut_anywhere_before_its_end_is_refused() {
    for name in ["grey-8x6.png", "rgb-33x17.png", "rgba-12x9.png"] {
        for_every_cut(name, 8, |cut, path, e| {
            let text = e.to_string();
            let want = format!(
                "{}: incomplete PNG image: the data ends at byte {cut} ",
                path.display()
            );
            assert!(text.starts_with(&want), "{text}");
            assert!(text.ends_with("before the IEND chunk"), "{text}");
        });
    }
}

#[test]
fn r9_a_pgm_or_ppm_cut_anywhere_is_refused() {
    for (name, pixel_bytes) in [("grey-8x6.pgm", 8 * 6), ("rgb-9x7.ppm", 9 * 7 * 3)] {
        let header = std::fs::read(corpus(name)).unwrap().len() - pixel_bytes;
        for_every_cut(name, 0, |cut, path, e| {
            let text = e.to_string();
            assert!(text.starts_with(&format!("{}: ", path.display())), "{text}");
            if cut > header {
                assert_eq!(
                    text,
                    format!(
                        "{}: incomplete PGM/PPM image: the pixel data ends early",
                        path.display()
                    )
                );
            }
        });
    }
}

/// Issue item 10: `process /dev/zero --format grey --size 640x480` read until memory ran
/// out; a pipe would have blocked the open.
#[test]
fn r10_raw_frames_are_read_only_from_regular_files_of_the_exact_size() {
    let grey = Some((
        PixelFormat::Grey,
        Size {
            width: 640,
            height: 480,
        },
    ));
    let err = input::load(Path::new("/dev/zero"), grey).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/dev/zero: not a regular file (a character device); give an image file or a raw frame file"
    );
    let err = input::load(Path::new("/dev/zero"), None).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/dev/zero: not a regular file (a character device)"),
        "{err}"
    );

    let dir = tmp_dir("inputs-raw");
    let fifo = dir.join("frames.fifo");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let err = input::load(&fifo, grey).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: not a regular file (a FIFO); give an image file or a raw frame file",
            fifo.display()
        )
    );
    let err = input::load(&dir, None).unwrap_err();
    assert!(
        err.to_string().starts_with(&format!(
            "{}: not a regular file (a directory)",
            dir.display()
        )),
        "{err}"
    );

    let small = Some((
        PixelFormat::Yuyv,
        Size {
            width: 4,
            height: 2,
        },
    ));
    let long = dir.join("long.yuyv");
    std::fs::write(&long, [7u8; 17]).unwrap();
    assert_eq!(
        input::load(&long, small).unwrap_err().to_string(),
        format!(
            "{}: a raw yuyv frame of 4x2 is 16 bytes, the file has 17",
            long.display()
        )
    );
    std::fs::write(&long, [7u8; 16]).unwrap();
    let frame = input::load(&long, small).unwrap();
    assert_eq!(frame.bytes, vec![7u8; 16]);
}

/// Issue item 11: the byte count named for `--format rgbx --size 4294967295x1` came from a
/// stride saturated at u32::MAX; the size is refused as too large before any count.
#[test]
fn r11_a_raw_size_too_large_is_refused_before_its_bytes_are_counted() {
    let dir = tmp_dir("inputs-huge");
    let file = dir.join("frame.rgbx");
    std::fs::write(&file, [0u8; 100]).unwrap();
    let size = Size {
        width: u32::MAX,
        height: 1,
    };
    let err = input::load(&file, Some((PixelFormat::Rgbx, size))).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: frame size 4294967295x1 is too large (at most 16843009 pixels and a width of at most 65535)",
            file.display()
        )
    );
}

/// Issue item 10: an image file is read only up to a cap that the largest frame fits in.
#[test]
fn r10_an_image_file_over_the_cap_is_refused_unread() {
    let dir = tmp_dir("inputs-cap");
    let file = dir.join("huge.png");
    // Sparse: no block of it is written.
    std::fs::File::create(&file)
        .unwrap()
        .set_len(MAX_IMAGE_FILE_BYTES + 1)
        .unwrap();
    let err = input::load(&file, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: 135792649 bytes is more than an image file may have (135792648 bytes, enough for the largest frame the pipeline takes)",
            file.display()
        )
    );
}

/// A JPEG of `name` whose frame header says `width`x`height`; its data stays as it is.
fn jpeg_claiming(name: &str, width: u16, height: u16) -> Vec<u8> {
    let mut bytes = std::fs::read(corpus(name)).unwrap();
    let sof = bytes
        .windows(2)
        .position(|w| w == [0xFF, 0xC0])
        .expect("a baseline frame header");
    // FF C0, length (2), precision (1), height (2), width (2).
    bytes[sof + 5..sof + 7].copy_from_slice(&height.to_be_bytes());
    bytes[sof + 7..sof + 9].copy_from_slice(&width.to_be_bytes());
    bytes
}

/// The peak resident memory, in KiB, of `edgesight process FILE`, and its stderr.
// The child is reaped by wait4, which also reports its own peak memory (Child::wait would
// reap it without that).
#[allow(clippy::zombie_processes)]
fn process_peak_kib(file: &Path, out: &Path) -> (i64, String) {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_edgesight"))
        .args([
            "process",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.unwrap(), &mut stderr).unwrap();
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills in; the child is ours and not yet reaped.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live locals; the pid is our own unreaped child.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid);
    (usage.ru_maxrss, stderr)
}

/// Issue item 10: a file of a few hundred bytes whose header claims a huge frame was
/// decoded in full (grey 128 where its data ended) before the size was checked.
#[test]
fn r10_a_small_file_claiming_a_huge_frame_is_refused_before_decoding() {
    let dir = tmp_dir("inputs-claims");
    let file = dir.join("claims-16000x16000.jpg");
    std::fs::write(
        &file,
        jpeg_claiming("baseline-grey-33x17.jpg", 16000, 16000),
    )
    .unwrap();
    let err = input::load(&file, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: frame size 16000x16000 is too large (at most 16843009 pixels and a width of at most 65535)",
            file.display()
        )
    );
    // 16000x16000 grey is 244 MiB decoded; refused from its header, the whole command
    // stays within a few MiB.
    let (peak_kib, stderr) = process_peak_kib(&file, &dir.join("out"));
    assert!(
        stderr.contains("frame size 16000x16000 is too large"),
        "{stderr}"
    );
    assert!(peak_kib < 64 * 1024, "peak {peak_kib} KiB");
}

/// Issue 46 item 5: a valid progressive JPEG of 499 scans (49 MB) took 6.5 s to decode,
/// its data decoded again for each scan, and a replay directory of such files held the
/// camera loop and the daemon's start-up. An image of more scans than any encoder's
/// progression writes is refused from its markers, before any decoding; the most taken
/// still decodes.
#[test]
fn round3_5_a_jpeg_of_too_many_scans_is_refused_before_decoding() {
    let most = input::load(&corpus("progressive-64-scans-48x32.jpg"), None).unwrap();
    assert_eq!(most.layout, FrameLayout::packed(PixelFormat::Grey, 48, 32));
    let path = corpus("progressive-100-scans-48x32.jpg");
    assert_eq!(
        input::load(&path, None).unwrap_err().to_string(),
        format!(
            "{}: not a readable PNG, JPEG or PGM/PPM image (100 scans, more than the 64 an \
             image may have); for a raw frame give --format and --size",
            path.display()
        )
    );
}
