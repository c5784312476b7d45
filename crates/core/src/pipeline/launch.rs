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

    /// 1-D groups of up to `want` work-items; where the kernel allows fewer, as many as
    /// it allows rounded down to a multiple of 4 (Mali runs threads in groups of 4 or
    /// more, and Arm's guides ask for groups a multiple of 4).
    pub(super) fn one_d(gpu: &Gpu, kernel: &Kernel, want: usize) -> Result<Launch, ClError> {
        let max = kernel
            .get_work_group_size(gpu.device.id())
            .call("clGetKernelWorkGroupInfo")?
            .max(1);
        Ok(Launch {
            local: [one_d_size(want, max), 1],
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

/// `want` work-items, or where the kernel allows only `max` < `want`, `max` rounded down
/// to a multiple of 4 (`max` itself below 4).
fn one_d_size(want: usize, max: usize) -> usize {
    if want <= max {
        want
    } else if max >= 4 {
        max - max % 4
    } else {
        max
    }
}

/// Attaches a stage name to an OpenCL error.
pub(super) trait StageContext<T> {
    fn stage(self, stage: Stage) -> Result<T, PipelineError>;
}

impl<T> StageContext<T> for Result<T, ClError> {
    fn stage(self, stage: Stage) -> Result<T, PipelineError> {
        self.map_err(|source| PipelineError::Stage { stage, source })
    }
}

#[cfg(test)]
mod tests {
    use super::one_d_size;

    #[test]
    fn a_kernel_allowing_fewer_gets_a_multiple_of_4() {
        assert_eq!(one_d_size(64, 1024), 64);
        assert_eq!(one_d_size(1, 1024), 1);
        assert_eq!(one_d_size(256, 192), 192);
        assert_eq!(one_d_size(256, 150), 148);
        assert_eq!(one_d_size(64, 3), 3);
        assert_eq!(one_d_size(64, 1), 1);
    }
}
