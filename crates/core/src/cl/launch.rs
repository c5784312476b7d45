//! Kernel launches: a kernel's parameters as a struct, every argument set from it, then the
//! enqueue, in one call.
//!
//! `clSetKernelArg` copies `size` bytes from a pointer, and a kernel indexes its buffers
//! with the sizes it is given, so a launch is sound only when each argument is what the
//! kernel's parameter takes and the sizes fit the buffers. The first half is a type's job
//! here: each kernel's parameter list is a struct made by [`kernel_params!`](crate::kernel_params), whose
//! fields are the parameters in order, named as the kernel names them, each a buffer
//! (passed as its `cl_mem` handle), a plain integer (passed by value), an optional
//! parameter or an optional group of them (for kernels whose builds differ in which
//! parameters they have). Every program is built with `-cl-kernel-arg-info`, and in
//! debug builds (every test) [`launch`] checks each field against the compiled kernel's
//! own parameter: its name, a `__global` pointer for a buffer, the OpenCL type of a
//! scalar, and that none is left over. What is left to each caller is the second half,
//! the extents, which it argues where it launches.
//!
//! Every launch goes through [`launch`], so it is also where a [`LaunchRecorder`] sees each
//! kernel enqueued on its thread, with its work sizes (`edgesight kernels --launches`, the
//! launch geometry Mali's compiler report models a frame's device time from).

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem};
use opencl3::types::cl_mem;
use serde::Serialize;

use super::raw::{self, Record};
use super::{ClError, Gpu};

mod sealed {
    use super::{ArgKind, ClError, Kernel};

    // Unnameable on purpose: only this module's types are kernel arguments, so no caller
    // can hand a kernel a value of a kind the launcher does not check.
    #[allow(unnameable_types)]
    pub trait Sealed {
        /// Sets argument `index` of `kernel` to this value.
        ///
        /// # Safety
        /// Parameter `index` of `kernel` must take this kind of value: a `__global`
        /// pointer for a buffer, a scalar of the same type for a scalar.
        unsafe fn set(&self, kernel: &Kernel, index: u32) -> Result<(), ClError>;

        /// What the kernel's parameter must be.
        fn kind(&self) -> ArgKind;
    }
}

/// What a kernel parameter must be to take a value: a `__global` pointer, or a scalar of
/// the OpenCL C type named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// A `__global` pointer, set from a buffer's `cl_mem` handle.
    Buffer,
    /// A scalar passed by value, of the OpenCL C type named (`int`, `uint`, `long`, `ulong`).
    Scalar(&'static str),
}

/// One kernel argument's value: a buffer or a plain integer. Sealed, so no other type (a
/// reference to something else, a struct with padding, a host pointer) can be passed.
pub trait KernelArg: sealed::Sealed {}

impl<T> KernelArg for Buffer<T> {}

impl<T> sealed::Sealed for Buffer<T> {
    unsafe fn set(&self, kernel: &Kernel, index: u32) -> Result<(), ClError> {
        // The handle itself, not `self`: `Buffer` is not `repr(transparent)`, so only a
        // `cl_mem` is certain to be the bytes a `__global` parameter takes.
        let mem: cl_mem = self.get();
        // SAFETY: the parameter takes a `__global` pointer (this function's contract), and
        // `mem` is the handle of a buffer the caller borrows until the launch is enqueued
        // (the enqueued command retains it); the driver checks it belongs to the kernel's
        // context (CL_INVALID_MEM_OBJECT otherwise).
        unsafe { raw::set_kernel_arg(kernel, index, &mem) }
    }

    fn kind(&self) -> ArgKind {
        ArgKind::Buffer
    }
}

/// What each parameter is told, in order: its name and value. A parameter struct's
/// [`KernelParams::each_param`] calls it once for each parameter it passes.
pub type ParamVisitor<'v> = dyn FnMut(&'static str, &dyn KernelArg) -> Result<(), ClError> + 'v;

/// A kernel's parameters, or a part of them: see [`kernel_params!`](crate::kernel_params).
pub trait KernelParams {
    /// Calls `visit` with each parameter this value passes, in the kernel's order: a
    /// single value passes itself under `name` (its field's name), an absent optional
    /// passes nothing, and a group its fields under their own names.
    fn each_param(&self, name: &'static str, visit: &mut ParamVisitor) -> Result<(), ClError>;
}

macro_rules! scalar_args {
    ($($t:ty => $cl:literal),*) => {$(
        impl KernelArg for $t {}

        impl sealed::Sealed for $t {
            unsafe fn set(&self, kernel: &Kernel, index: u32) -> Result<(), ClError> {
                // SAFETY: the parameter is a scalar of this type (this function's
                // contract).
                unsafe { raw::set_kernel_arg(kernel, index, self) }
            }

            fn kind(&self) -> ArgKind {
                ArgKind::Scalar($cl)
            }
        }

        impl KernelParams for $t {
            fn each_param(&self, name: &'static str, visit: &mut ParamVisitor) -> Result<(), ClError> {
                visit(name, self)
            }
        }
    )*};
}

scalar_args!(i32 => "int", u32 => "uint", i64 => "long", u64 => "ulong");

impl<T> KernelParams for &Buffer<T> {
    fn each_param(&self, name: &'static str, visit: &mut ParamVisitor) -> Result<(), ClError> {
        visit(name, *self)
    }
}

impl<P: KernelParams> KernelParams for Option<P> {
    fn each_param(&self, name: &'static str, visit: &mut ParamVisitor) -> Result<(), ClError> {
        match self {
            Some(params) => params.each_param(name, visit),
            None => Ok(()),
        }
    }
}

/// A kernel without parameters.
impl KernelParams for () {
    fn each_param(&self, _: &'static str, _: &mut ParamVisitor) -> Result<(), ClError> {
        Ok(())
    }
}

/// Declares a struct whose fields are a kernel's parameters, in order and named as the
/// kernel names them, and implements [`KernelParams`] for it. A field is a buffer
/// (`&'a Buffer<T>` for a `__global T *`), an `i32`, `u32`, `i64` or `u64` for a scalar
/// `int`, `uint`, `long` or `ulong`, an `Option` of one (a parameter some builds of the
/// kernel lack), or another such struct, or an `Option` of one (a group of parameters,
/// named by its own fields).
///
/// ```
/// use opencl3::memory::Buffer;
///
/// edgesight_core::kernel_params! {
///     /// otsu.cl's `otsu_threshold`.
///     pub struct ThresholdParams<'a> {
///         pub hist: &'a Buffer<u32>,
///         pub total: u32,
///         pub results: &'a Buffer<u32>,
///     }
/// }
/// ```
#[macro_export]
macro_rules! kernel_params {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident $(<$lt:lifetime>)? {
            $($(#[$field_meta:meta])* $field_vis:vis $field:ident : $ty:ty),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name $(<$lt>)? {
            $($(#[$field_meta])* $field_vis $field: $ty,)*
        }

        impl $(<$lt>)? $crate::cl::KernelParams for $name $(<$lt>)? {
            fn each_param(
                &self,
                _: &'static str,
                visit: &mut $crate::cl::ParamVisitor,
            ) -> ::std::result::Result<(), $crate::cl::ClError> {
                $($crate::cl::KernelParams::each_param(&self.$field, stringify!($field), visit)?;)*
                Ok(())
            }
        }
    };
}

/// Sets every parameter of `kernel` from `params` and enqueues it on `gpu`'s queue over
/// `global` work-items in groups of `local` (1 to 3 dimensions, each global size a
/// multiple of its local size, as OpenCL 1.2 requires), without allocating on the host.
/// `what` names the call in an error; the command's event comes back as `record` asks.
/// In debug builds each parameter is first checked against the kernel's own (see the
/// module's documentation); a difference is a bug in the caller, and panics.
///
/// # Safety
/// - `params` is the kernel's parameter list: its fields are the kernel's parameters, in
///   order, each of the kind [`kernel_params!`](crate::kernel_params) says (which debug builds check);
/// - the scalars and `global` keep the kernel's reads and writes inside every buffer in
///   `params`: a device that runs kernels in this process (a CPU driver such as POCL)
///   would otherwise write outside the allocation.
///
/// Each caller says why its buffers hold the extents the kernel indexes.
pub unsafe fn launch(
    gpu: &Gpu,
    kernel: &Kernel,
    params: &dyn KernelParams,
    global: &[usize],
    local: &[usize],
    what: &'static str,
    record: Record,
) -> Result<Option<Event>, ClError> {
    let mut index = 0u32;
    params.each_param("", &mut |name, arg| {
        #[cfg(debug_assertions)]
        check_param(kernel, index, name, arg.kind(), what)?;
        #[cfg(not(debug_assertions))]
        let _ = name;
        // SAFETY: `arg` is what parameter `index` takes (this function's contract).
        unsafe { arg.set(kernel, index) }?;
        index += 1;
        Ok(())
    })?;
    debug_assert_eq!(
        kernel.num_args().ok(),
        Some(index),
        "{what}: every parameter is set on every launch"
    );
    // SAFETY: every argument was set just above to what its parameter takes, from a
    // buffer the caller borrows or a scalar, and the caller guarantees (this function's
    // contract) that the sizes keep the kernel inside those buffers.
    let event = unsafe { raw::enqueue_kernel(&gpu.queue, kernel, global, local, record, what) }?;
    // One relaxed load when nothing records: the camera thread's launches stay as they were.
    if RECORDERS.load(Ordering::Relaxed) > 0 {
        note_launch(gpu, kernel, global, local);
    }
    Ok(event)
}

/// One kernel launch as a [`LaunchRecorder`] saw it: the kernel, the program it was made
/// of (its file and `-D` options, as [`Gpu::built_programs`] names them) and its work sizes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LaunchRecord {
    /// The kernel's function name.
    pub kernel: String,
    /// The program's kernel file (files joined by " + "); empty for a program built
    /// outside [`Gpu::build_with`].
    pub file: &'static str,
    /// The program's `-D` options (beside the common build options); empty where it has none.
    pub defines: String,
    /// Work-items in each dimension (each a multiple of `local`'s).
    pub global: Vec<usize>,
    /// Work-items a group in each dimension.
    pub local: Vec<usize>,
}

impl LaunchRecord {
    /// Work-items in all (the product of the global sizes).
    pub fn work_items(&self) -> usize {
        self.global.iter().product()
    }
}

/// How many [`LaunchRecorder`]s are alive in the process: [`launch`] looks no further
/// while none is.
static RECORDERS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The launches recorded on this thread, while a recorder of this thread is alive.
    static RECORDED: RefCell<Option<Vec<LaunchRecord>>> = const { RefCell::new(None) };
}

/// Records every kernel [`launch`] enqueues on the thread that made it, until it is
/// dropped; launches on other threads are not seen. Off (no recorder), a launch costs one
/// relaxed atomic load more.
pub struct LaunchRecorder {
    /// Tied to its thread: the list it reads is that thread's.
    _thread: std::marker::PhantomData<*const ()>,
}

impl LaunchRecorder {
    /// Starts recording this thread's launches (a recorder already alive on this thread
    /// starts again from none).
    pub fn start() -> LaunchRecorder {
        RECORDED.with(|r| *r.borrow_mut() = Some(Vec::new()));
        RECORDERS.fetch_add(1, Ordering::Relaxed);
        LaunchRecorder {
            _thread: std::marker::PhantomData,
        }
    }

    /// The launches recorded since the start or the last take, in the order enqueued.
    pub fn take(&self) -> Vec<LaunchRecord> {
        RECORDED.with(|r| {
            r.borrow_mut()
                .as_mut()
                .map(std::mem::take)
                .unwrap_or_default()
        })
    }
}

impl Drop for LaunchRecorder {
    fn drop(&mut self) {
        RECORDED.with(|r| *r.borrow_mut() = None);
        RECORDERS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Adds a launch to this thread's recorded launches, if this thread records.
fn note_launch(gpu: &Gpu, kernel: &Kernel, global: &[usize], local: &[usize]) {
    RECORDED.with(|r| {
        let mut recorded = r.borrow_mut();
        let Some(list) = recorded.as_mut() else {
            return;
        };
        let program = kernel.program().ok();
        let built = gpu
            .built_programs()
            .into_iter()
            .find(|b| Some(b.program.get()) == program);
        list.push(LaunchRecord {
            kernel: kernel.function_name().unwrap_or_default(),
            file: built.as_ref().map_or("", |b| b.file),
            defines: built.map(|b| b.defines).unwrap_or_default(),
            global: global.to_vec(),
            local: local.to_vec(),
        });
    });
}

/// Panics unless parameter `index` of `kernel` is named `name` and is of `kind`, where the
/// program kept its parameters' descriptions. Nothing is allocated: a launch on the
/// camera thread allocates nothing, in debug builds too.
#[cfg(debug_assertions)]
fn check_param(
    kernel: &Kernel,
    index: u32,
    name: &str,
    kind: ArgKind,
    what: &str,
) -> Result<(), ClError> {
    use opencl3::kernel::{
        CL_KERNEL_ARG_ADDRESS_CONSTANT, CL_KERNEL_ARG_ADDRESS_GLOBAL,
        CL_KERNEL_ARG_ADDRESS_QUALIFIER, CL_KERNEL_ARG_NAME, CL_KERNEL_ARG_TYPE_NAME,
    };
    let mut text = [0u8; 64];
    let Some(kernel_name) = raw::kernel_arg_info(kernel, index, CL_KERNEL_ARG_NAME, &mut text)?
    else {
        return Ok(());
    };
    let kernel_name = c_text(kernel_name);
    assert_eq!(
        kernel_name, name,
        "{what}: the kernel's parameter {index} is `{kernel_name}`, its parameter struct passes `{name}`"
    );
    let mut word = [0u8; 4];
    let qualifier =
        raw::kernel_arg_info(kernel, index, CL_KERNEL_ARG_ADDRESS_QUALIFIER, &mut word)?
            .and_then(|b| b.try_into().ok())
            .map(u32::from_ne_bytes);
    let mut text = [0u8; 64];
    let type_name =
        raw::kernel_arg_info(kernel, index, CL_KERNEL_ARG_TYPE_NAME, &mut text)?.map(c_text);
    match kind {
        ArgKind::Buffer => assert!(
            matches!(qualifier, Some(CL_KERNEL_ARG_ADDRESS_GLOBAL | CL_KERNEL_ARG_ADDRESS_CONSTANT))
                && type_name.is_none_or(|t| t.ends_with('*')),
            "{what}: parameter {index} `{name}` is passed a buffer, but the kernel takes a \
             {type_name:?} (address qualifier {qualifier:?})"
        ),
        ArgKind::Scalar(cl_type) => assert!(
            type_name.is_none_or(|t| t == cl_type),
            "{what}: parameter {index} `{name}` is passed a {cl_type}, but the kernel takes a {type_name:?}"
        ),
    }
    Ok(())
}

/// The text of a C string the driver wrote: up to its NUL.
#[cfg(debug_assertions)]
fn c_text(bytes: &[u8]) -> &str {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    std::str::from_utf8(&bytes[..end]).unwrap_or("(not UTF-8)")
}

#[cfg(test)]
mod tests {
    use opencl3::kernel::Kernel;
    use opencl3::memory::Buffer;

    use super::super::{new_buffer, read_blocking, test_gpu, CallContext, KernelSource};
    use super::*;

    /// A kernel of two parameters, for launches with right and wrong parameter structs.
    const FILL_CL: KernelSource = KernelSource {
        file: "fill (a test kernel)",
        text: "__kernel void fill(__global uint *out, uint value) \
               { out[get_global_id(0)] = value; }",
    };

    crate::kernel_params! {
        struct FillParams<'a> {
            out: &'a Buffer<u32>,
            value: u32,
        }
    }

    crate::kernel_params! {
        /// Right names, but `value` passed as a signed int.
        struct SignedFillParams<'a> {
            out: &'a Buffer<u32>,
            value: i32,
        }
    }

    crate::kernel_params! {
        /// A buffer where the kernel takes a scalar.
        struct BufferFillParams<'a> {
            out: &'a Buffer<u32>,
            value: &'a Buffer<u32>,
        }
    }

    crate::kernel_params! {
        /// The second parameter under another name.
        struct MisnamedFillParams<'a> {
            out: &'a Buffer<u32>,
            count: u32,
        }
    }

    fn fill_kernel(gpu: &Gpu) -> Kernel {
        let program = gpu.build(FILL_CL).expect("build");
        Kernel::create(&program, "fill")
            .call("clCreateKernel")
            .expect("kernel")
    }

    #[test]
    fn a_parameter_struct_launches_its_kernel() {
        let gpu = test_gpu();
        let kernel = fill_kernel(&gpu);
        let out: Buffer<u32> =
            new_buffer(&gpu, opencl3::memory::CL_MEM_READ_WRITE, 8).expect("buffer");
        let params = FillParams {
            out: &out,
            value: 0xfeed,
        };
        // SAFETY: `FillParams` is fill's parameter list; its 8 work-items write words 0..8
        // of the 8-word `out`.
        unsafe { launch(&gpu, &kernel, &params, &[8], &[8], "fill", Record::NoEvent) }
            .expect("launch");
        let mut back = [0u32; 8];
        read_blocking(&gpu, &out, 0, &mut back).expect("read");
        assert_eq!(back, [0xfeed; 8]);
    }

    /// A recorder sees its own thread's launches, named by kernel and program, with their
    /// sizes; once it is dropped nothing is kept.
    #[test]
    fn a_recorder_lists_the_launches_of_its_thread() {
        let gpu = test_gpu();
        let kernel = fill_kernel(&gpu);
        let out: Buffer<u32> =
            new_buffer(&gpu, opencl3::memory::CL_MEM_READ_WRITE, 16).expect("buffer");
        let params = FillParams {
            out: &out,
            value: 7,
        };
        let fill = |n: usize, group: usize| {
            // SAFETY: `FillParams` is fill's parameter list; its `n` <= 16 work-items write
            // words 0..n of the 16-word `out`.
            unsafe {
                launch(
                    &gpu,
                    &kernel,
                    &params,
                    &[n],
                    &[group],
                    "fill",
                    Record::NoEvent,
                )
            }
            .expect("launch");
        };
        let recorder = LaunchRecorder::start();
        fill(16, 8);
        fill(4, 4);
        let seen = recorder.take();
        assert_eq!(
            seen,
            [
                LaunchRecord {
                    kernel: "fill".into(),
                    file: FILL_CL.file,
                    defines: String::new(),
                    global: vec![16],
                    local: vec![8],
                },
                LaunchRecord {
                    kernel: "fill".into(),
                    file: FILL_CL.file,
                    defines: String::new(),
                    global: vec![4],
                    local: vec![4],
                },
            ]
        );
        assert_eq!(seen[0].work_items(), 16);
        assert!(recorder.take().is_empty(), "taken once");
        drop(recorder);
        fill(8, 8);
        let again = LaunchRecorder::start();
        assert!(again.take().is_empty(), "nothing kept while none recorded");
        // A recorder on another thread, alive while this thread launches, sees nothing.
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            let recorder = LaunchRecorder::start();
            ready_tx.send(()).expect("send");
            go_rx.recv().expect("recv");
            recorder.take()
        });
        ready_rx.recv().expect("recv");
        fill(8, 8);
        go_tx.send(()).expect("send");
        assert!(other.join().expect("join").is_empty());
        assert_eq!(again.take().len(), 1);
        gpu.queue.finish().expect("finish");
    }

    /// The devices the tests run on keep the parameters' descriptions (every program is
    /// built with -cl-kernel-arg-info), so the checks below are not skipped.
    #[cfg(debug_assertions)]
    #[test]
    fn the_kernels_keep_their_parameters_descriptions() {
        use opencl3::kernel::{CL_KERNEL_ARG_NAME, CL_KERNEL_ARG_TYPE_NAME};
        let gpu = test_gpu();
        let kernel = fill_kernel(&gpu);
        let mut text = [0u8; 64];
        let name = raw::kernel_arg_info(&kernel, 1, CL_KERNEL_ARG_NAME, &mut text)
            .expect("clGetKernelArgInfo")
            .map(|b| c_text(b).to_string());
        assert_eq!(name.as_deref(), Some("value"));
        let ty = raw::kernel_arg_info(&kernel, 0, CL_KERNEL_ARG_TYPE_NAME, &mut text)
            .expect("clGetKernelArgInfo")
            .map(|b| c_text(b).to_string());
        assert_eq!(ty.as_deref(), Some("uint*"));
    }

    /// What a launch with `params` panics with, before anything is enqueued.
    #[cfg(debug_assertions)]
    fn refusal(gpu: &Gpu, params: &dyn KernelParams) -> String {
        let kernel = fill_kernel(gpu);
        let launched = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: not sound for the wrong structs, which is what the check stops
            // before the enqueue.
            unsafe { launch(gpu, &kernel, params, &[8], &[8], "fill", Record::NoEvent) }.map(drop)
        }));
        match launched {
            Err(panic) => panic.downcast_ref::<String>().cloned().unwrap_or_default(),
            Ok(result) => panic!("the launch was not refused: {result:?}"),
        }
    }

    #[cfg(debug_assertions)]
    #[test]
    fn a_parameter_of_another_name_or_type_is_refused() {
        // One `Gpu` for the buffer and the kernel: another test may make the next one
        // open a context of its own (`Gpu::stop_sharing`).
        let gpu = test_gpu();
        let out: Buffer<u32> =
            new_buffer(&gpu, opencl3::memory::CL_MEM_READ_WRITE, 8).expect("buffer");
        let misnamed = refusal(
            &gpu,
            &MisnamedFillParams {
                out: &out,
                count: 1,
            },
        );
        assert!(
            misnamed.contains("parameter 1 is `value`, its parameter struct passes `count`"),
            "{misnamed}"
        );
        let signed = refusal(
            &gpu,
            &SignedFillParams {
                out: &out,
                value: 1,
            },
        );
        assert!(
            signed.contains("`value` is passed a int, but the kernel takes a Some(\"uint\")"),
            "{signed}"
        );
        let buffer_for_scalar = refusal(
            &gpu,
            &BufferFillParams {
                out: &out,
                value: &out,
            },
        );
        assert!(
            buffer_for_scalar.contains("is passed a buffer"),
            "{buffer_for_scalar}"
        );
    }
}
