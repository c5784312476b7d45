//! Kernel launches: every argument set from a buffer or a plain scalar, then the enqueue,
//! in one call.
//!
//! `clSetKernelArg` copies `size` bytes from a pointer, and a kernel indexes its buffers
//! with the sizes it is given, so a launch is sound only when each argument is what the
//! kernel's parameter takes and the sizes fit the buffers. [`launch`] narrows what a
//! caller has to get right to exactly that: arguments are [`KernelArg`]s, which only
//! [`Buffer`]s (passed as their `cl_mem` handle) and plain integers (passed by value)
//! are; every argument is set on every launch, right before the enqueue, while the
//! caller borrows the buffers; and the work sizes are checked against each other.

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem};
use opencl3::types::cl_mem;

use super::raw::{self, Record};
use super::{ClError, Gpu};

mod sealed {
    use super::{ClError, Kernel};

    pub trait Sealed {
        /// Sets argument `index` of `kernel` to this value.
        ///
        /// # Safety
        /// Parameter `index` of `kernel` must take this kind of value: a `__global`
        /// pointer for a buffer, a scalar of the same type for a scalar.
        unsafe fn set(&self, kernel: &Kernel, index: u32) -> Result<(), ClError>;
    }
}

/// A value a kernel argument can be set from: a buffer or a plain integer. Sealed, so no
/// other type (a reference, a struct with padding, a host pointer) can be passed.
pub(crate) trait KernelArg: sealed::Sealed {}

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
}

macro_rules! scalar_args {
    ($($t:ty),*) => {$(
        impl KernelArg for $t {}

        impl sealed::Sealed for $t {
            unsafe fn set(&self, kernel: &Kernel, index: u32) -> Result<(), ClError> {
                // SAFETY: the parameter is a scalar of this type (this function's
                // contract).
                unsafe { raw::set_kernel_arg(kernel, index, self) }
            }
        }
    )*};
}

scalar_args!(i32, u32, i64, u64);

/// A kernel's arguments gathered on the stack, for kernels whose builds differ in which
/// parameters they have: up to `N`, pushed in parameter order.
pub(crate) struct Args<'a, const N: usize> {
    list: [&'a dyn KernelArg; N],
    len: usize,
}

impl<'a, const N: usize> Args<'a, N> {
    /// No arguments yet; `filler` only fills the unused places.
    pub(crate) fn new(filler: &'a dyn KernelArg) -> Args<'a, N> {
        Args {
            list: [filler; N],
            len: 0,
        }
    }

    /// Appends `args`; more than `N` in all is a bug in the caller, and panics.
    pub(crate) fn push(&mut self, args: &[&'a dyn KernelArg]) {
        self.list[self.len..self.len + args.len()].copy_from_slice(args);
        self.len += args.len();
    }

    pub(crate) fn as_slice(&self) -> &[&'a dyn KernelArg] {
        &self.list[..self.len]
    }
}

/// Sets argument `i` of `kernel` to `args[i]`, for every argument the kernel has, and
/// enqueues it on `gpu`'s queue over `global` work-items in groups of `local` (1 to 3
/// dimensions, each global size a multiple of its local size, as OpenCL 1.2 requires),
/// without allocating on the host. `what` names the call in an error; the command's event
/// comes back as `record` asks.
///
/// # Safety
/// - `args[i]` is what the kernel's parameter `i` takes: a buffer for a `__global`
///   pointer, a scalar of the same type for a scalar;
/// - the scalars and `global` keep the kernel's reads and writes inside every buffer in
///   `args`: a device that runs kernels in this process (a CPU driver such as POCL)
///   would otherwise write outside the allocation.
///
/// Each caller names the kernel's parameters it matches and why its buffers hold the
/// extents the kernel indexes.
pub(crate) unsafe fn launch(
    gpu: &Gpu,
    kernel: &Kernel,
    args: &[&dyn KernelArg],
    global: &[usize],
    local: &[usize],
    what: &'static str,
    record: Record,
) -> Result<Option<Event>, ClError> {
    debug_assert_eq!(
        kernel.num_args().ok(),
        u32::try_from(args.len()).ok(),
        "{what}: every argument is set on every launch"
    );
    for (index, arg) in (0u32..).zip(args) {
        // SAFETY: `arg` is what parameter `index` takes (this function's contract).
        unsafe { arg.set(kernel, index) }?;
    }
    // SAFETY: every argument was set just above to what its parameter takes, from a
    // buffer the caller borrows or a scalar, and the caller guarantees (this function's
    // contract) that the sizes keep the kernel inside those buffers.
    unsafe { raw::enqueue_kernel(&gpu.queue, kernel, global, local, record, what) }
}
