//! Importing V4L2 dma-bufs into OpenCL with Arm's `cl_arm_import_memory_dma_buf`: the
//! camera's own buffers become the kernels' input, with no copy and no CPU mapping.
//!
//! `clImportMemoryARM` is looked up with `clGetExtensionFunctionAddressForPlatform`, since
//! an ICD loader does not export it; platforms without the extension (POCL, desktop GPUs)
//! report why, and capture falls through to USERPTR.

use std::ffi::c_void;
use std::os::fd::RawFd;

use opencl3::memory::Buffer;
use opencl3::platform::Platform;
use opencl3::types::{cl_context, cl_int, cl_mem, cl_mem_flags, cl_platform_id};

use crate::cl::{ClError, Gpu};

const EXTENSION: &str = "cl_arm_import_memory_dma_buf";
/// `CL_IMPORT_TYPE_ARM` and `CL_IMPORT_TYPE_DMA_BUF_ARM` from Khronos' cl_ext.h.
const CL_IMPORT_TYPE_ARM: isize = 0x40B2;
const CL_IMPORT_TYPE_DMA_BUF_ARM: isize = 0x40B4;
const CL_MEM_READ_ONLY: cl_mem_flags = 1 << 2;

type ImportMemoryArm = unsafe extern "C" fn(
    context: cl_context,
    flags: cl_mem_flags,
    properties: *const isize,
    memory: *mut c_void,
    size: usize,
    errcode_ret: *mut cl_int,
) -> cl_mem;

/// `clImportMemoryARM` of the GPU's platform.
pub(crate) struct DmabufImporter {
    import: ImportMemoryArm,
}

impl DmabufImporter {
    /// The importer, or why the platform cannot import dma-bufs.
    pub(crate) fn for_gpu(gpu: &Gpu) -> Result<DmabufImporter, String> {
        let platform: cl_platform_id = gpu
            .device
            .platform()
            .map_err(|e| format!("clGetDeviceInfo(CL_DEVICE_PLATFORM): {e}"))?;
        let platform_ext = Platform::new(platform).extensions().unwrap_or_default();
        let device_ext = gpu.device.extensions().unwrap_or_default();
        let offered = |list: &str| list.split_whitespace().any(|e| e == EXTENSION);
        if !offered(&platform_ext) && !offered(&device_ext) {
            return Err(format!("the OpenCL platform does not offer {EXTENSION}"));
        }
        let runtime = cl3::load_library()
            .as_ref()
            .map_err(|e| format!("OpenCL library: {e}"))?;
        let address = runtime
            .clGetExtensionFunctionAddressForPlatform(platform, c"clImportMemoryARM".as_ptr());
        match address {
            Some(f) if !f.is_null() => Ok(DmabufImporter {
                // SAFETY: the extension defines clImportMemoryARM with this signature.
                import: unsafe { std::mem::transmute::<*mut c_void, ImportMemoryArm>(f) },
            }),
            _ => Err("clGetExtensionFunctionAddressForPlatform has no clImportMemoryARM".into()),
        }
    }

    /// A read-only OpenCL buffer over `len` bytes of the dma-buf `fd`.
    pub fn import(&self, gpu: &Gpu, fd: RawFd, len: usize) -> Result<Buffer<u8>, ClError> {
        let properties = [CL_IMPORT_TYPE_ARM, CL_IMPORT_TYPE_DMA_BUF_ARM, 0];
        let mut fd_arg: i32 = fd;
        let mut status: cl_int = 0;
        // SAFETY: for a dma-buf import, `memory` points to the file descriptor; the driver
        // takes its own reference to the buffer.
        let mem = unsafe {
            (self.import)(
                gpu.context().get(),
                CL_MEM_READ_ONLY,
                properties.as_ptr(),
                (&mut fd_arg as *mut i32).cast(),
                len,
                &mut status,
            )
        };
        if status != 0 || mem.is_null() {
            return Err(ClError::Call {
                call: "clImportMemoryARM",
                code: opencl3::error_codes::ClError(if status != 0 { status } else { -1 }),
            });
        }
        Ok(Buffer::new(mem))
    }
}
