//! Importing V4L2 dma-bufs into OpenCL with Arm's `cl_arm_import_memory_dma_buf`: the
//! camera's own buffers become the kernels' input, with no copy and no CPU mapping.
//!
//! `clImportMemoryARM` is looked up with `clGetExtensionFunctionAddressForPlatform`, since
//! an ICD loader does not export it; platforms without the extension (POCL, desktop GPUs)
//! report why, and capture falls through to USERPTR.

use opencl3::memory::Buffer;
use opencl3::platform::Platform;
use opencl3::types::cl_platform_id;

use crate::cl::{ClError, Gpu, ImportMemoryArm};

const EXTENSION: &str = "cl_arm_import_memory_dma_buf";

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
        Ok(DmabufImporter {
            import: ImportMemoryArm::of_platform(platform)?,
        })
    }

    /// A read-only OpenCL buffer over `len` bytes of the dma-buf `fd`.
    ///
    /// # Safety
    /// `fd` is an open dma-buf of at least `len` bytes.
    pub unsafe fn import(&self, gpu: &Gpu, fd: i32, len: usize) -> Result<Buffer<u8>, ClError> {
        // SAFETY: the dma-buf is this function's contract; `gpu`'s context is of the
        // platform the importer was looked up on (`for_gpu`).
        unsafe { self.import.dma_buf(gpu.context(), fd, len) }
    }
}
