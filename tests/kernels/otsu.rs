//! Otsu's threshold (otsu.cl): the ties where rounding decides, the binary64 emulation
//! bit for bit, and the fast chain on the device's doubles, its quotients and its fallback.

use crate::common::{gpu, Rng};
use edgesight::cl::{launch, Gpu, KernelParams, Record};
use edgesight::frame::{FrameLayout, PixelFormat};
use edgesight::pipeline::{Pipeline, PipelineOptions, ThresholdParams, Tuning};
use edgesight::reference;
use opencl3::memory::Buffer;

/// The Otsu threshold a pipeline with `tuning` finds for one grey `frame`.
fn otsu_threshold_with(gpu: &Gpu, layout: FrameLayout, frame: &[u8], tuning: Tuning) -> u8 {
    let mut pipeline =
        Pipeline::with_tuning(gpu, layout, PipelineOptions::default(), &[], tuning).unwrap();
    let mut slot = pipeline.new_slot(gpu).unwrap();
    slot.write_bytes(gpu, frame).unwrap();
    pipeline.process(gpu, &slot).unwrap().otsu_threshold
}

/// A grey frame holding `count` pixels of each level, in a scrambled order.
fn levels_frame(rng: &mut Rng, levels: &[(u8, usize)]) -> (FrameLayout, Vec<u8>) {
    let mut pixels: Vec<u8> = levels
        .iter()
        .flat_map(|&(v, n)| std::iter::repeat_n(v, n))
        .collect();
    for i in (1..pixels.len()).rev() {
        pixels.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let n = pixels.len() as u32;
    let width = (1..=n)
        .rev()
        .find(|w| n.is_multiple_of(*w) && *w <= 4096)
        .unwrap_or(1);
    (
        FrameLayout::packed(PixelFormat::Grey, width, n / width),
        pixels,
    )
}

#[test]
fn otsu_where_rounding_decides_ties() {
    let gpu = gpu();
    let mut rng = Rng::new(10);
    let mut cases: Vec<Vec<(u8, usize)>> = Vec::new();
    // Three equal populations score an exact tie; OpenCV's doubles pick 10 or 128 by size.
    for n in [1, 5, 10, 30, 100, 300, 800, 1000, 3333] {
        cases.push(vec![(10, n), (128, n), (246, n)]);
    }
    cases.push(vec![(77, 64)]);
    cases.push(vec![(0, 3)]);
    cases.push(vec![(255, 5)]);
    cases.push(vec![(40, 7), (200, 9)]);
    cases.push(vec![(0, 1), (255, 1)]);
    cases.push(vec![(10, 50), (60, 50), (128, 50), (196, 50), (246, 50)]);
    for _ in 0..20 {
        let k = 2 + rng.below(5) as usize;
        cases.push(
            (0..k)
                .map(|_| (rng.below(256) as u8, 1 + rng.below(400) as usize))
                .collect(),
        );
    }
    for levels in cases {
        let (layout, frame) = levels_frame(&mut rng, &levels);
        let want = reference::otsu_threshold(&reference::histogram(&frame));
        // FOR_GPU uses the device's own doubles where it has them, the others the
        // emulation (the Mali ones with a smaller group scoring more thresholds a
        // work-item).
        for (name, tuning) in Tuning::ALL {
            assert_eq!(
                otsu_threshold_with(&gpu, layout, &frame, tuning),
                want,
                "levels {levels:?}, {name} tuning"
            );
        }
    }
}

#[test]
fn otsu_tie_pinned_values() {
    // Checked against cv2.threshold(THRESH_OTSU) with IPP off (OpenCV 5.0): equal
    // populations of 10/128/246 give 10 for 5 and 1000 pixels per level, 128 for 30 and 800.
    let gpu = gpu();
    let mut rng = Rng::new(11);
    for (n, want) in [(5, 10), (1000, 10), (30, 128), (800, 128)] {
        let (layout, frame) = levels_frame(&mut rng, &[(10, n), (128, n), (246, n)]);
        for (name, tuning) in Tuning::ALL {
            assert_eq!(
                otsu_threshold_with(&gpu, layout, &frame, tuning),
                want,
                "{n} per level, {name} tuning"
            );
        }
    }
}

/// A normal double of random sign and mantissa with a biased exponent in `lo..lo + span`.
fn random_f64(rng: &mut Rng, lo: u64, span: u64) -> f64 {
    let exp = lo + rng.below(span);
    f64::from_bits((rng.below(2) << 63) | (exp << 52) | (rng.next_u64() >> 12))
}

/// The binary64 emulation in otsu.cl against the host's doubles, bit for bit, on operands
/// of the kind the Otsu loop meets: normal numbers of both signs over a wide exponent range,
/// close exponents (cancellation, rounding ties) and zeros.
#[test]
fn binary64_emulation_is_exact() {
    let gpu = gpu();
    let program = gpu.build(edgesight::cl::OTSU_CL).unwrap();
    let kernel = opencl3::kernel::Kernel::create(&program, "otsu_f64_selftest").unwrap();
    let mut rng = Rng::new(64);
    let mut pairs: Vec<(f64, f64)> = Vec::new();
    for _ in 0..20000 {
        pairs.push((
            random_f64(&mut rng, 1023 - 60, 120),
            random_f64(&mut rng, 1023 - 60, 120),
        ));
    }
    for _ in 0..20000 {
        // b near a: the same or the next lower exponent and some low bits changed, where
        // subtraction cancels and rounding ties occur.
        let a = random_f64(&mut rng, 1023 - 3, 6);
        let flip = rng.next_u64() & ((1u64 << rng.below(53)) - 1);
        let b_bits = (a.to_bits() ^ flip ^ (rng.below(2) << 63)) - (rng.below(2) << 52);
        pairs.push((a, f64::from_bits(b_bits)));
    }
    for &(a, b) in &[
        (1.0, 1.0),
        (1.0, -1.0),
        (0.0, 3.5),
        (-0.0, 2.0),
        (0.0, -0.0),
        (7.0, 1e-300),
    ] {
        pairs.push((a, b));
    }
    pairs.push((1.0 + f64::EPSILON, f64::EPSILON / 2.0)); // exactly halfway: ties to even
    pairs.push((1.0 + 2.0 * f64::EPSILON, f64::EPSILON / 2.0));
    let out = run_on_pairs(&gpu, &kernel, &pairs, 5);
    for (i, &(x, y)) in pairs.iter().enumerate() {
        let want = [
            (x + y).to_bits(),
            (x - y).to_bits(),
            (x * y).to_bits(),
            (x / y).to_bits(),
            u64::from(x < y),
        ];
        // The emulation handles zero and normal results only: skip what the Otsu loop never
        // produces (a zero divisor, subnormal or infinite results).
        let names = ["add", "sub", "mul", "div", "lt"];
        for (k, &w) in want.iter().enumerate() {
            let exact = f64::from_bits(w);
            if k < 4 && (exact.is_subnormal() || !exact.is_finite() || (k == 3 && y == 0.0)) {
                continue;
            }
            assert_eq!(
                out[5 * i + k],
                w,
                "{} of {x:e} ({:#x}) and {y:e} ({:#x}): got {:e}, want {exact:e}",
                names[k],
                x.to_bits(),
                y.to_bits(),
                f64::from_bits(out[5 * i + k])
            );
        }
    }
}

edgesight::kernel_params! {
    /// The parameters of otsu.cl's self-test kernels: the bit patterns of the pairs' first
    /// and second doubles, how many pairs, and the words out.
    struct PairParams<'a> {
        a: &'a Buffer<u64>,
        b: &'a Buffer<u64>,
        count: u32,
        out: &'a Buffer<u64>,
    }
}

/// Launches the 1-D `kernel` with `params` over `global` work-items in groups of `local`
/// through the crate's own launch (which, in this debug build, checks `params` against
/// the kernel's parameters), and waits for it.
///
/// # Safety
/// As `edgesight::cl::launch`: `params` is the kernel's parameter list, and the sizes keep
/// its work-items inside the buffers.
unsafe fn run_1d(
    gpu: &Gpu,
    kernel: &opencl3::kernel::Kernel,
    params: &dyn KernelParams,
    global: usize,
    local: usize,
) {
    // SAFETY: this function's contract.
    unsafe {
        launch(
            gpu,
            kernel,
            params,
            &[global],
            &[local],
            "a test kernel",
            Record::NoEvent,
        )
    }
    .unwrap();
    gpu.finish().unwrap();
}

/// A device buffer holding `data`.
fn buffer_of<T: Copy + Default>(gpu: &Gpu, data: &[T]) -> Buffer<T> {
    use opencl3::memory::{Buffer, CL_MEM_READ_WRITE};
    use opencl3::types::CL_BLOCKING;
    // SAFETY: a new buffer of `data.len()` elements, no host pointer; the blocking write
    // copies exactly `data` into it and has finished reading `data` when it returns.
    unsafe {
        let mut buffer = Buffer::<T>::create(
            gpu.context(),
            CL_MEM_READ_WRITE,
            data.len(),
            std::ptr::null_mut(),
        )
        .unwrap();
        gpu.queue
            .enqueue_write_buffer(&mut buffer, CL_BLOCKING, 0, data, &[])
            .unwrap();
        buffer
    }
}

/// The contents of `buffer`, `len` elements.
fn read_back<T: Copy + Default>(gpu: &Gpu, buffer: &Buffer<T>, len: usize) -> Vec<T> {
    let mut out = vec![T::default(); len];
    // SAFETY: a blocking read of `len` elements into `out`, which holds `len` and lives
    // across the call; the caller's buffer holds at least as many.
    unsafe {
        gpu.queue
            .enqueue_read_buffer(buffer, opencl3::types::CL_BLOCKING, 0, &mut out, &[])
            .unwrap();
    }
    out
}

/// Runs a self-test `kernel` taking (a, b, count, out): the bit patterns of the pairs' first
/// and second doubles, and `per_pair` words out for each pair, which it returns.
fn run_on_pairs(
    gpu: &Gpu,
    kernel: &opencl3::kernel::Kernel,
    pairs: &[(f64, f64)],
    per_pair: usize,
) -> Vec<u64> {
    let n = pairs.len();
    let bits = |side: fn(&(f64, f64)) -> f64| -> Vec<u64> {
        pairs.iter().map(|p| side(p).to_bits()).collect()
    };
    let a = buffer_of(gpu, &bits(|p| p.0));
    let b = buffer_of(gpu, &bits(|p| p.1));
    let out = buffer_of(gpu, &vec![0u64; per_pair * n]);
    let params = PairParams {
        a: &a,
        b: &b,
        count: n as u32,
        out: &out,
    };
    // SAFETY: `PairParams` is the self-test kernels' parameter list; a work-item returns
    // unless its pair i < count, reads pair i of `a` and `b` (n words each) and writes
    // words per_pair * i .. per_pair * (i + 1) of `out`, per_pair * n words (the
    // callers pass each kernel's own per_pair).
    unsafe { run_1d(gpu, kernel, &params, n.div_ceil(64) * 64, 64) };
    read_back(gpu, &out, per_pair * n)
}

/// The test device where it has doubles (cl_khr_fp64), which the fast Otsu chain needs to
/// be built at all; `None`, said on stderr, where not.
fn gpu_with_doubles() -> Option<Gpu> {
    let gpu = gpu();
    if !gpu.info.fp64 {
        eprintln!("skipped: the device has no doubles, so the fast chain is never built");
        return None;
    }
    Some(gpu)
}

/// The quotients of the fast Otsu chain (otsu.cl on the device's doubles) on operands of
/// the range it meets, dividends up to 2^9 and divisors (q1) in [2^-23, 1]: a quotient from
/// the reciprocal is the correctly rounded one, and the check accepts the correctly rounded
/// quotient and rejects both its neighbours.
#[test]
fn otsu_quotients_from_reciprocals_are_correctly_rounded_and_checked() {
    let Some(gpu) = gpu_with_doubles() else {
        return;
    };
    let program = gpu
        .build_with(edgesight::cl::OTSU_CL, "-DOTSU_FP64")
        .unwrap();
    let kernel = opencl3::kernel::Kernel::create(&program, "otsu_quotient_selftest").unwrap();
    let mut rng = Rng::new(65);
    let mut pairs: Vec<(f64, f64)> = Vec::new();
    for _ in 0..50000 {
        let a = random_f64(&mut rng, 1023 - 60, 69).abs();
        let b = random_f64(&mut rng, 1023 - 23, 23).abs();
        pairs.push((a, b));
    }
    for _ in 0..5000 {
        // Exact quotients: the neighbours are a whole ulp away.
        let b = random_f64(&mut rng, 1023 - 23, 23).abs();
        let k = rng.below(1 << 20) as f64;
        pairs.push((k * b, b));
    }
    pairs.extend([
        (0.0, 0.5),
        (0.0, 2f64.powi(-23)),
        (0.0, 1.0),
        (1.0, 1.0),
        (255.0, 1.0),
    ]);
    let out = run_on_pairs(&gpu, &kernel, &pairs, 4);
    for (i, &(x, y)) in pairs.iter().enumerate() {
        let q = x / y;
        assert_eq!(
            out[4 * i..4 * i + 4],
            [q.to_bits(), 1, 0, 0],
            "{x:e} ({:#x}) / {y:e} ({:#x}) = {q:e}: got {:e} from the reciprocal",
            x.to_bits(),
            y.to_bits(),
            f64::from_bits(out[4 * i])
        );
    }
}

/// otsu_threshold run directly on `hist` with `defines`, in one group of `local`: the
/// threshold, after asserting that the counts came back and the histogram was cleared.
fn otsu_kernel_threshold(gpu: &Gpu, defines: &str, hist: &[u32; 256], local: usize) -> u8 {
    let program = gpu.build_with(edgesight::cl::OTSU_CL, defines).unwrap();
    let kernel = opencl3::kernel::Kernel::create(&program, "otsu_threshold").unwrap();
    let total: u32 = hist.iter().sum();
    let counts = buffer_of(gpu, hist);
    let results = buffer_of(gpu, &[u32::MAX; 257]);
    let params = ThresholdParams {
        hist: &counts,
        total,
        results: &results,
    };
    // SAFETY: `ThresholdParams` is otsu_threshold's parameter list; its one group reads and
    // clears the 256 counts and writes 257 words of `results`, the buffers' lengths.
    unsafe { run_1d(gpu, &kernel, &params, local, local) };
    let results = read_back(gpu, &results, 257);
    assert_eq!(results[..256], hist[..], "{defines}: the counts");
    assert_eq!(
        read_back(gpu, &counts, 256),
        vec![0; 256],
        "{defines}: cleared"
    );
    results[256] as u8
}

/// The fast Otsu chain made wrong at every step (-DOTSU_TEST_SKEW): its checks catch it and
/// the exact chain gives OpenCV's threshold; unskewed, it gives the same.
#[test]
fn otsu_fast_chain_falls_back_to_the_exact_chain() {
    let Some(gpu) = gpu_with_doubles() else {
        return;
    };
    let mut rng = Rng::new(66);
    let mut hists: Vec<[u32; 256]> = Vec::new();
    let of = |levels: &[(usize, u32)]| {
        let mut h = [0u32; 256];
        for &(v, n) in levels {
            h[v] += n;
        }
        h
    };
    for n in [1, 5, 10, 30, 100, 300, 800, 1000, 3333] {
        hists.push(of(&[(10, n), (128, n), (246, n)]));
    }
    hists.extend([
        of(&[(77, 64)]),
        of(&[(0, 3)]),
        of(&[(0, 1), (255, 1)]),
        of(&[(0, 500), (1, 7), (200, 300)]),
    ]);
    for _ in 0..30 {
        // Dense counts of a 1080p frame's size, sparse ones, and two humps.
        let mut dense = [0u32; 256];
        dense.iter_mut().for_each(|c| *c = rng.below(16200) as u32);
        hists.push(dense);
        let k = 2 + rng.below(6) as usize;
        hists.push(of(&(0..k)
            .map(|_| (rng.below(256) as usize, 1 + rng.below(5000) as u32))
            .collect::<Vec<_>>()));
        let (m1, m2) = (rng.below(128) as f64, 128.0 + rng.below(128) as f64);
        let mut humps = [0u32; 256];
        for (v, c) in humps.iter_mut().enumerate() {
            let v = v as f64;
            *c = (3000.0 * (-(v - m1).powi(2) / 200.0).exp()
                + 5000.0 * (-(v - m2).powi(2) / 800.0).exp()) as u32;
        }
        hists.push(humps);
    }
    for hist in &hists {
        let want = reference::otsu_threshold(hist);
        for defines in ["-DOTSU_FP64", "-DOTSU_FP64 -DOTSU_TEST_SKEW"] {
            for local in [256, 64] {
                assert_eq!(
                    otsu_kernel_threshold(&gpu, defines, hist, local),
                    want,
                    "{defines}, groups of {local}, histogram {hist:?}"
                );
            }
        }
    }
}
