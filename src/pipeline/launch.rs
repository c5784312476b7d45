//! How the stages launch their kernels: work-group geometry fixed per kernel, and the stage
//! name attached to an OpenCL error.

use opencl3::kernel::Kernel;

use super::{PipelineError, Stage};
use crate::cl::{CallContext, ClError, Gpu};

/// Work-group geometry chosen once per kernel from what the device allows, so the global
/// size of a new frame size never changes the local size (POCL compiles per local size).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Launch {
    pub(super) local: [usize; 2],
}

impl Launch {
    /// 2-D groups of up to 16 x 4 work-items.
    pub(super) fn two_d(gpu: &Gpu, kernel: &Kernel) -> Result<Launch, ClError> {
        let max = kernel
            .get_work_group_size(gpu.device.id())
            .call("clGetKernelWorkGroupInfo")?
            .max(1);
        let x = max.min(16);
        let y = (max / x).clamp(1, 4);
        Ok(Launch { local: [x, y] })
    }

    /// 1-D groups of up to `want` work-items.
    pub(super) fn one_d(gpu: &Gpu, kernel: &Kernel, want: usize) -> Result<Launch, ClError> {
        let max = kernel
            .get_work_group_size(gpu.device.id())
            .call("clGetKernelWorkGroupInfo")?
            .max(1);
        Ok(Launch {
            local: [want.min(max), 1],
        })
    }

    /// Global sizes rounded up to whole work-groups (OpenCL 1.2 requires it).
    pub(super) fn global_2d(&self, x: usize, y: usize) -> [usize; 2] {
        [
            x.div_ceil(self.local[0]) * self.local[0],
            y.div_ceil(self.local[1]) * self.local[1],
        ]
    }

    pub(super) fn global_1d(&self, n: usize) -> usize {
        n.div_ceil(self.local[0]) * self.local[0]
    }
}

/// Attaches a stage name to an OpenCL error.
pub(super) trait StageContext<T> {
    fn stage(self, stage: Stage) -> Result<T, PipelineError>;
}

impl<T> StageContext<T> for Result<T, ClError> {
    fn stage(self, stage: Stage) -> Result<T, PipelineError> {
        self.map_err(|source| PipelineError::Stage {
            stage: stage.name(),
            source,
        })
    }
}
