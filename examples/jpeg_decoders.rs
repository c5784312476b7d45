//! The two JPEG decoders the MJPEG path could use, timed on the same files in one run:
//! libjpeg-turbo (through edgesight's `jpeg::LumaDecoder`, the one it uses) and zune-jpeg
//! (pure Rust, with its luma-only output). bench/jpeg_decoders.py runs this beside OpenCV's
//! `imdecode(IMREAD_GRAYSCALE)` and prints the table for BENCHMARKS.md#jpeg-decoders.
//!
//!     cargo run --release --example jpeg_decoders -- [--runs N] FILE...
//!
//! Prints one JSON object: per file, each decoder's median milliseconds over `runs`
//! decodes (the two alternating, each into a buffer allocated once), and zune-jpeg's
//! largest difference from libjpeg-turbo's luma. Every file is first decoded a few times
//! by both, untimed: a process just started (and a CPU just woken) runs its first
//! milliseconds slower, which OpenCV, timed in a process already running, does not pay.

use std::time::Instant;

use edgesight::jpeg::{LumaDecoder, Scale};
use zune_jpeg::zune_core::bytestream::ZCursor;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut runs = 30;
    if args.first().map(String::as_str) == Some("--runs") {
        runs = args[1].parse().expect("--runs N");
        args.drain(..2);
    }
    let mut turbo = LumaDecoder::new().expect("libturbojpeg");
    let options = DecoderOptions::default().jpeg_set_out_colorspace(ColorSpace::Luma);
    let mut results = serde_json::Map::new();
    let decode_both = |jpeg: &[u8], ours: &mut [u8], theirs: &mut [u8], turbo: &mut LumaDecoder| {
        let size = turbo.size(jpeg).expect("a JPEG");
        turbo
            .decode(jpeg, size, Scale::Full, ours, size.width as usize)
            .expect("libjpeg-turbo");
        let mut zune = JpegDecoder::new_with_options(ZCursor::new(jpeg), options);
        zune.decode_into(theirs).expect("zune-jpeg");
    };
    for file in &args {
        let jpeg = std::fs::read(file).unwrap_or_else(|e| panic!("{file}: {e}"));
        let size = turbo.size(&jpeg).expect("a JPEG");
        let pixels = size.width as usize * size.height as usize;
        let (mut ours, mut theirs) = (vec![0u8; pixels], vec![0u8; pixels]);
        for _ in 0..5 {
            decode_both(&jpeg, &mut ours, &mut theirs, &mut turbo);
        }
    }
    for file in &args {
        let jpeg = std::fs::read(file).unwrap_or_else(|e| panic!("{file}: {e}"));
        let size = turbo.size(&jpeg).expect("a JPEG");
        let pixels = size.width as usize * size.height as usize;
        let mut ours = vec![0u8; pixels];
        let mut theirs = vec![0u8; pixels];
        let (mut turbo_ms, mut zune_ms) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let start = Instant::now();
            turbo
                .decode(&jpeg, size, Scale::Full, &mut ours, size.width as usize)
                .expect("libjpeg-turbo");
            turbo_ms.push(start.elapsed().as_secs_f64() * 1e3);
            let start = Instant::now();
            let mut zune = JpegDecoder::new_with_options(ZCursor::new(&jpeg), options);
            zune.decode_into(&mut theirs).expect("zune-jpeg");
            zune_ms.push(start.elapsed().as_secs_f64() * 1e3);
        }
        let max_diff = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| a.abs_diff(*b))
            .max()
            .unwrap_or(0);
        results.insert(
            file.clone(),
            serde_json::json!({
                "width": size.width,
                "height": size.height,
                "libjpeg_turbo_ms": median(turbo_ms),
                "zune_jpeg_ms": median(zune_ms),
                "zune_max_diff": max_diff,
            }),
        );
    }
    println!("{}", serde_json::Value::Object(results));
}
