//! A warm pipeline allocates no host memory per frame: every Rust allocation is counted
//! while frames are written into a slot and processed (one test in this binary, so no
//! other test's allocations are counted).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use edgesight::frame::{FrameLayout, PixelFormat};
use edgesight::pipeline::{FrameResult, Pipeline, PipelineOptions, Tuning};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on unchanged to the system allocator, which upholds
// GlobalAlloc's contract; counting touches only an atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires it.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` or `realloc` above, that is from System, with
        // this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as in `dealloc`; `new_size` as the caller gives it.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_warm_pipeline_allocates_nothing_per_frame() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(6);
    let layout = FrameLayout::packed(PixelFormat::Yuyv, 97, 41);
    let frames = [
        rng.bytes(layout.frame_bytes()),
        rng.bytes(layout.frame_bytes()),
    ];
    let regions = [
        "a:0,0,10,10".parse().unwrap(),
        "b:5,5,90,30".parse().unwrap(),
    ];
    for tuning in [Tuning::FOR_GPU, Tuning::FOR_CPU] {
        let mut pipeline =
            Pipeline::with_tuning(&gpu, layout, PipelineOptions::default(), &regions, tuning)
                .unwrap();
        let mut slot = pipeline.new_slot(&gpu).unwrap();
        let mut result = FrameResult::empty();
        for frame in &frames {
            slot.write_bytes(&gpu, frame).unwrap();
            pipeline.process_into(&gpu, &slot, &mut result).unwrap();
        }
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for i in 0..10 {
            slot.write_bytes(&gpu, &frames[i % 2]).unwrap();
            pipeline.process_into(&gpu, &slot, &mut result).unwrap();
        }
        let during = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert_eq!(
            during, 0,
            "{during} allocations in 10 warm frames, {tuning:?}"
        );
        assert_eq!(result.regions.len(), 2);
        assert_eq!(result.regions[1].0.name, "b");
    }
}
