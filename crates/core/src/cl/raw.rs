//! The OpenCL calls made straight through the dynamically loaded library, where opencl3
//! has no wrapper that fits: an enqueue that must leave no event (opencl3's always ask
//! for one), a map without one, the extension function `clImportMemoryARM`.
//!
//! The loader's function table is made of safe `fn`s, but none of these calls is safe in
//! general: a driver reads and writes through the pointers it is given, and a CPU driver
//! runs kernels in this process. So each call has one `unsafe fn` here whose `# Safety`
//! says what makes it sound, and the callers (launches, frame slots, the histogram's
//! clear, dma-buf capture) say why they meet it; a call that its arguments alone make
//! sound (a query into a slice it is given the length of) is a safe `fn` that says why.
//! Nothing else calls the table.

use std::ffi::c_void;
use std::ptr::{self, NonNull};

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::error_codes::{CL_INVALID_WORK_DIMENSION, CL_MAP_FAILURE, CL_SUCCESS};
use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem, CL_MAP_WRITE_INVALIDATE_REGION};
use opencl3::types::CL_BLOCKING;
use opencl3::types::{cl_context, cl_event, cl_int, cl_mem, cl_mem_flags, cl_platform_id};

use super::{ClError, Plain, RawClError};

/// The OpenCL library's function table.
fn runtime() -> Result<&'static cl3::OpenClRuntime, ClError> {
    cl3::load_library().as_ref().map_err(|_| {
        ClError::NoLibrary(RawClError(opencl3::error_codes::DLOPEN_RUNTIME_LOAD_FAILED))
    })
}

/// A raw call's status (`None`: the library lacks the function) as a result naming `call`.
fn status(status: Option<i32>, call: &'static str) -> Result<(), ClError> {
    match status.unwrap_or(opencl3::error_codes::DLOPEN_FUNCTION_NOT_AVAILABLE) {
        CL_SUCCESS => Ok(()),
        code => Err(ClError::Call {
            call,
            code: RawClError(code),
        }),
    }
}

/// Whether an enqueued command gives back an event. Each event is work for the driver
/// (NVIDIA's records and tracks it on a thread of its own), so the frames whose stage times
/// are not measured ask none of their commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// The command gives back its event (to time the stage, or to wait on).
    Event,
    /// The command gives back no event.
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
    fn out(self, slot: &mut cl_event) -> *mut cl_event {
        match self {
            Record::Event => slot,
            Record::NoEvent => ptr::null_mut(),
        }
    }

    /// The event a command left in `slot`, where one was asked for.
    fn take(self, slot: cl_event) -> Option<Event> {
        match self {
            Record::Event => Some(Event::new(slot)),
            Record::NoEvent => None,
        }
    }
}

/// Sets argument `index` of `kernel` to the `size_of::<T>()` bytes of `value`.
///
/// # Safety
/// Parameter `index` of `kernel` takes exactly this: a `__global` pointer where `value`
/// is a `cl_mem` handle (of a buffer in the kernel's context, alive until the kernel's
/// last launch with it has been enqueued), else a scalar of `T`'s size and type.
pub(crate) unsafe fn set_kernel_arg<T>(
    kernel: &Kernel,
    index: u32,
    value: &T,
) -> Result<(), ClError> {
    // SAFETY: the call copies `size_of::<T>()` bytes from a live reference; what they mean
    // to the kernel is this function's contract.
    unsafe { kernel.set_arg(index, value) }.map_err(|code| ClError::Call {
        call: "clSetKernelArg",
        code,
    })
}

/// What `clGetKernelArgInfo` says of parameter `index` of `kernel` under `param`, written
/// into `buf`: the bytes written, or `None` where the program kept no description of its
/// parameters (it was built without `-cl-kernel-arg-info`). A query whose answer does not
/// fit `buf` is an error (CL_INVALID_VALUE). Debug builds check launches with it.
#[cfg(debug_assertions)]
pub(crate) fn kernel_arg_info<'b>(
    kernel: &Kernel,
    index: u32,
    param: opencl3::types::cl_kernel_arg_info,
    buf: &'b mut [u8],
) -> Result<Option<&'b [u8]>, ClError> {
    use opencl3::error_codes::CL_KERNEL_ARG_INFO_NOT_AVAILABLE;
    let runtime = runtime()?;
    let mut size = 0usize;
    // Safe whatever the arguments: the driver writes at most `buf.len()` bytes into `buf`
    // (a longer answer is refused) and one size into a live local.
    let code = runtime.clGetKernelArgInfo(
        kernel.get(),
        index,
        param,
        buf.len(),
        buf.as_mut_ptr().cast(),
        &mut size,
    );
    if code == Some(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) {
        return Ok(None);
    }
    status(code, "clGetKernelArgInfo")?;
    Ok(Some(&buf[..size.min(buf.len())]))
}

/// Enqueues `kernel` on `queue` over `global` work-items in groups of `local` (1 to 3
/// dimensions, the same number in both, checked here); its event comes back as `record`
/// asks. `what` names the call in an error.
///
/// # Safety
/// Every argument of `kernel` was set to what its parameter takes ([`set_kernel_arg`]),
/// and its scalars and `global` keep the kernel's reads and writes inside every buffer it
/// was given: a device that runs kernels in this process (a CPU driver such as POCL) would
/// otherwise write outside the allocation.
pub(crate) unsafe fn enqueue_kernel(
    queue: &CommandQueue,
    kernel: &Kernel,
    global: &[usize],
    local: &[usize],
    record: Record,
    what: &'static str,
) -> Result<Option<Event>, ClError> {
    if global.len() != local.len() || !(1..=3).contains(&global.len()) {
        return Err(ClError::Call {
            call: what,
            code: RawClError(CL_INVALID_WORK_DIMENSION),
        });
    }
    let runtime = runtime()?;
    let mut event: cl_event = ptr::null_mut();
    // `global` and `local` hold the same number (1 to 3) of sizes, checked above, which is
    // what the call reads through their pointers; no global offset and no wait list, and
    // the event goes to a live local or nowhere. The kernel's own accesses are the
    // caller's contract.
    let code = runtime.clEnqueueNDRangeKernel(
        queue.get(),
        kernel.get(),
        global.len() as u32,
        ptr::null(),
        global.as_ptr(),
        local.as_ptr(),
        0,
        ptr::null(),
        record.out(&mut event),
    );
    status(code, what)?;
    Ok(record.take(event))
}

/// Enqueues the copying of `data` into `buffer` from its first element on, without
/// waiting for it (opencl3's write wants the buffer `&mut`, which the pipeline's shared
/// buffers are not); its event comes back as `record` asks. A write past the buffer's end
/// is refused by the driver (CL_INVALID_VALUE), not done.
///
/// # Safety
/// `data` stays alive and unchanged until the command has completed (the driver reads it
/// then, not now), and no host mapping of `buffer` is in use while it may run.
pub(crate) unsafe fn enqueue_write<T: Plain>(
    queue: &CommandQueue,
    buffer: &Buffer<T>,
    data: &[T],
    record: Record,
    what: &'static str,
) -> Result<Option<Event>, ClError> {
    let runtime = runtime()?;
    let mut event: cl_event = ptr::null_mut();
    // `data` is `size_of_val(data)` bytes of plain values the caller keeps alive until
    // the command completes; no wait list, and the event goes to a live local or nowhere.
    let code = runtime.clEnqueueWriteBuffer(
        queue.get(),
        buffer.get(),
        opencl3::types::CL_NON_BLOCKING,
        0,
        std::mem::size_of_val(data),
        data.as_ptr().cast(),
        0,
        ptr::null(),
        record.out(&mut event),
    );
    status(code, what)?;
    Ok(record.take(event))
}

/// Enqueues the filling of elements `offset..offset + count` of `buffer` with `value`;
/// its event comes back as `record` asks. A range past the buffer's end is refused by the
/// driver (CL_INVALID_VALUE), not written.
///
/// # Safety
/// No host mapping of `buffer` is in use while the command may run: the device writes its
/// memory, which a CPU driver shares with this process.
pub(crate) unsafe fn enqueue_fill<T: Plain>(
    queue: &CommandQueue,
    buffer: &Buffer<T>,
    value: T,
    offset: usize,
    count: usize,
    record: Record,
    what: &'static str,
) -> Result<Option<Event>, ClError> {
    let runtime = runtime()?;
    let size = std::mem::size_of::<T>();
    let mut event: cl_event = ptr::null_mut();
    // The pattern is `size` bytes of a live local, copied by the call (a `Plain` value has
    // no padding); no wait list, and the event goes to a live local or nowhere.
    let code = runtime.clEnqueueFillBuffer(
        queue.get(),
        buffer.get(),
        (&raw const value).cast(),
        size,
        offset * size,
        count * size,
        0,
        ptr::null(),
        record.out(&mut event),
    );
    status(code, what)?;
    Ok(record.take(event))
}

/// Maps bytes `0..len` of `buffer` for writing, its old contents discarded, and returns
/// their host address once the map is done (blocking: every earlier command on `queue`
/// has finished). No event is asked for: nothing waits on it.
///
/// # Safety
/// The caller writes at most `len` bytes at the address, and only until it unmaps it with
/// [`enqueue_unmap`]; no command on the buffer is enqueued meanwhile. (A range past the
/// buffer's end is refused by the driver, CL_INVALID_VALUE.)
pub(crate) unsafe fn enqueue_map_for_write(
    queue: &CommandQueue,
    buffer: &Buffer<u8>,
    len: usize,
) -> Result<NonNull<u8>, ClError> {
    let call = "clEnqueueMapBuffer";
    let mut code: cl_int = CL_SUCCESS;
    // The call writes only `code`, a live local; no wait list, no event.
    let mem = runtime()?.clEnqueueMapBuffer(
        queue.get(),
        buffer.get(),
        CL_BLOCKING,
        CL_MAP_WRITE_INVALIDATE_REGION,
        0,
        len,
        0,
        ptr::null(),
        ptr::null_mut(),
        &mut code,
    );
    status(mem.map(|_| code), call)?;
    NonNull::new(mem.unwrap_or(ptr::null_mut()).cast::<u8>()).ok_or(ClError::Call {
        call,
        code: RawClError(CL_MAP_FAILURE),
    })
}

/// Unmaps `ptr` from `buffer`, so the commands enqueued after this on `queue` see what was
/// written there. No event is asked for.
///
/// # Safety
/// `ptr` is what [`enqueue_map_for_write`] returned for `buffer`, not unmapped since, and
/// the host touches none of its bytes after this call.
pub(crate) unsafe fn enqueue_unmap(
    queue: &CommandQueue,
    buffer: &Buffer<u8>,
    ptr: NonNull<u8>,
) -> Result<(), ClError> {
    // No wait list, no event; the address is the caller's contract.
    let code = runtime()?.clEnqueueUnmapMemObject(
        queue.get(),
        buffer.get(),
        ptr.as_ptr().cast(),
        0,
        ptr::null(),
        ptr::null_mut(),
    );
    status(code, "clEnqueueUnmapMemObject")
}

/// `clImportMemoryARM` as Arm's `cl_arm_import_memory` extension defines it.
type ImportMemoryArmFn = unsafe extern "C" fn(
    context: cl_context,
    flags: cl_mem_flags,
    properties: *const isize,
    memory: *mut c_void,
    size: usize,
    errcode_ret: *mut cl_int,
) -> cl_mem;

/// `CL_IMPORT_TYPE_ARM` and `CL_IMPORT_TYPE_DMA_BUF_ARM` from Khronos' cl_ext.h.
const CL_IMPORT_TYPE_ARM: isize = 0x40B2;
const CL_IMPORT_TYPE_DMA_BUF_ARM: isize = 0x40B4;
const CL_MEM_READ_ONLY: cl_mem_flags = 1 << 2;

/// A platform's `clImportMemoryARM`, which an ICD loader does not export: looked up with
/// `clGetExtensionFunctionAddressForPlatform`.
#[derive(Clone, Copy)]
pub struct ImportMemoryArm(ImportMemoryArmFn);

/// Why a platform's `clImportMemoryARM` cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum NoImportFunction {
    /// The OpenCL library itself cannot be loaded.
    #[error("OpenCL library: {0}")]
    Library(ClError),
    /// The platform gives no address for the function.
    #[error("clGetExtensionFunctionAddressForPlatform has no clImportMemoryARM")]
    Missing,
}

impl ImportMemoryArm {
    /// The platform's function, or why there is none. The caller has checked that the
    /// platform offers the extension (a platform may return an address for a name it
    /// does not implement).
    pub fn of_platform(platform: cl_platform_id) -> Result<ImportMemoryArm, NoImportFunction> {
        let runtime = runtime().map_err(NoImportFunction::Library)?;
        let address = runtime
            .clGetExtensionFunctionAddressForPlatform(platform, c"clImportMemoryARM".as_ptr());
        match address {
            Some(f) if !f.is_null() => Ok(ImportMemoryArm(
                // SAFETY: the extension defines clImportMemoryARM with this signature, and
                // the address is that function's in a library that stays loaded.
                unsafe { std::mem::transmute::<*mut c_void, ImportMemoryArmFn>(f) },
            )),
            _ => Err(NoImportFunction::Missing),
        }
    }

    /// A read-only buffer in `context` over `len` bytes of the dma-buf `fd`; the driver
    /// takes its own reference to the dma-buf.
    ///
    /// # Safety
    /// `fd` is an open dma-buf of at least `len` bytes, and `context` is of this
    /// function's platform.
    pub unsafe fn dma_buf(
        self,
        context: &Context,
        fd: i32,
        len: usize,
    ) -> Result<Buffer<u8>, ClError> {
        let properties = [CL_IMPORT_TYPE_ARM, CL_IMPORT_TYPE_DMA_BUF_ARM, 0];
        let mut fd_arg = fd;
        let mut code: cl_int = 0;
        // SAFETY: for a dma-buf import, `memory` points to the file descriptor, a live
        // local; the properties list is zero-terminated; the call writes only `code`. The
        // descriptor and context are the caller's contract.
        let mem = unsafe {
            (self.0)(
                context.get(),
                CL_MEM_READ_ONLY,
                properties.as_ptr(),
                (&raw mut fd_arg).cast(),
                len,
                &mut code,
            )
        };
        if code != CL_SUCCESS || mem.is_null() {
            return Err(ClError::Call {
                call: "clImportMemoryARM",
                code: RawClError(if code != CL_SUCCESS { code } else { -1 }),
            });
        }
        Ok(Buffer::new(mem))
    }
}
