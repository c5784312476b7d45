//! Importing V4L2 dma-bufs into OpenCL with Arm's `cl_arm_import_memory_dma_buf`: the
//! camera's own buffers become the kernels' input, with no copy and no CPU mapping.
//!
//! `clImportMemoryARM` is looked up with `clGetExtensionFunctionAddressForPlatform`, since
//! an ICD loader does not export it; platforms without the extension (POCL, desktop GPUs)
//! report why, and capture falls through to USERPTR.

use opencl3::memory::Buffer;
use opencl3::platform::Platform;
use opencl3::types::cl_platform_id;

use edgesight_core::cl::{ClError, Gpu, ImportMemoryArm, NoImportFunction};

const EXTENSION: &str = "cl_arm_import_memory_dma_buf";

/// Why the GPU's platform cannot import dma-bufs (capture then tries the next I/O mode).
#[derive(Debug, thiserror::Error)]
pub(crate) enum NoDmabufImport {
    /// The device does not say its platform.
    #[error("clGetDeviceInfo(CL_DEVICE_PLATFORM): {0}")]
    Platform(opencl3::error_codes::ClError),
    /// Neither the platform nor the device lists the extension.
    #[error("the OpenCL platform does not offer {EXTENSION}")]
    NotOffered,
    /// The extension is listed but its function cannot be had.
    #[error(transparent)]
    Function(#[from] NoImportFunction),
}

/// `clImportMemoryARM` of the GPU's platform.
pub(crate) struct DmabufImporter {
    import: ImportMemoryArm,
}

impl DmabufImporter {
    /// The importer, or why the platform cannot import dma-bufs.
    pub(crate) fn for_gpu(gpu: &Gpu) -> Result<DmabufImporter, NoDmabufImport> {
        let platform: cl_platform_id = gpu.device.platform().map_err(NoDmabufImport::Platform)?;
        let platform_ext = Platform::new(platform).extensions().unwrap_or_default();
        let device_ext = gpu.device.extensions().unwrap_or_default();
        let offered = |list: &str| list.split_whitespace().any(|e| e == EXTENSION);
        if !offered(&platform_ext) && !offered(&device_ext) {
            return Err(NoDmabufImport::NotOffered);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// POCL, the CPU device the tests run on, has no Arm import: capture must hear why.
    #[test]
    fn a_platform_without_the_extension_says_so() {
        let gpu = edgesight_core::cl::test_gpu();
        let err = DmabufImporter::for_gpu(&gpu)
            .err()
            .expect("POCL imports no dma-buf");
        assert!(matches!(err, NoDmabufImport::NotOffered), "{err:?}");
        assert_eq!(
            err.to_string(),
            "the OpenCL platform does not offer cl_arm_import_memory_dma_buf"
        );
    }
}
