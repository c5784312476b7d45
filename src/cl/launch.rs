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
use opencl3::types::{cl_event, cl_mem};

use super::{CallContext, ClError, Gpu};

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
        // `mem` is a live local holding the handle of a buffer the caller borrows; the
        // call copies its `size_of::<cl_mem>()` bytes and the driver checks the handle
        // belongs to the kernel's context (CL_INVALID_MEM_OBJECT otherwise).
        unsafe { kernel.set_arg(index, &mem) }.call("clSetKernelArg")
    }
}

macro_rules! scalar_args {
    ($($t:ty),*) => {$(
        impl KernelArg for $t {}

        impl sealed::Sealed for $t {
            unsafe fn set(&self, kernel: &Kernel, index: u32) -> Result<(), ClError> {
                // SAFETY: the parameter is a scalar of this type (this function's
                // contract); the call copies `size_of::<Self>()` bytes from a live
                // reference to a plain integer, every bit pattern of which is valid.
                unsafe { kernel.set_arg(index, self) }.call("clSetKernelArg")
            }
        }
    )*};
}

scalar_args!(i32, u32, i64, u64);

/// Whether an enqueued command gives back an event. Each event is work for the driver
/// (NVIDIA's records and tracks it on a thread of its own), so the frames whose stage times
/// are not measured ask none of their kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Record {
    Event,
    NoEvent,
}

impl Record {
    /// [`Record::Event`] where `wanted`.
    pub(crate) fn event_if(wanted: bool) -> Record {
        if wanted {
            Record::Event
        } else {
            Record::NoEvent
        }
    }

    /// Where the driver writes the command's event: `slot`, or nowhere (a null pointer,
    /// which OpenCL takes as "no event").
    pub(crate) fn out(self, slot: &mut cl_event) -> *mut cl_event {
        match self {
            Record::Event => slot,
            Record::NoEvent => std::ptr::null_mut(),
        }
    }

    /// The event a command left in `slot`, where one was asked for.
    pub(crate) fn take(self, slot: cl_event) -> Option<Event> {
        match self {
            Record::Event => Some(Event::new(slot)),
            Record::NoEvent => None,
        }
    }
}

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
    if global.len() != local.len() || !(1..=3).contains(&global.len()) {
        return Err(ClError::Call {
            call: what,
            code: opencl3::error_codes::ClError(opencl3::error_codes::CL_INVALID_WORK_DIMENSION),
        });
    }
    let runtime = super::runtime()?;
    let mut event: cl_event = std::ptr::null_mut();
    // The library loader's wrapper is a safe fn, but the call is not, and sound only
    // because: `global` and `local` hold the same number (1 to 3) of sizes, checked
    // above, which is what the call reads through their pointers; no global offset and
    // no wait list are passed, and the event goes to a live local or nowhere. Every
    // argument was set just above from a buffer the caller borrows (the enqueued command
    // retains it) or a scalar, and the caller guarantees (this function's contract) that
    // the sizes keep the kernel inside those buffers.
    let status = runtime.clEnqueueNDRangeKernel(
        gpu.queue.get(),
        kernel.get(),
        global.len() as u32,
        std::ptr::null(),
        global.as_ptr(),
        local.as_ptr(),
        0,
        std::ptr::null(),
        record.out(&mut event),
    );
    super::status(status, what)?;
    Ok(record.take(event))
}
