//! Lowering a thread's CPU priority: threads whose work can wait (the HTTP side, the
//! verification of live frames) give way to the camera threads, which keep nice 0.

/// Sets the calling thread's nice value to `nice` (Linux nice values are per thread).
/// Raising one's own nice value needs no privilege; it fails only where a seccomp filter
/// forbids setpriority.
// One of the crate's named exceptions to `deny(unsafe_code)`: std has no setpriority.
#[allow(unsafe_code)]
pub fn lower_calling_thread(nice: libc::c_int) -> std::io::Result<()> {
    // SAFETY: gettid has no preconditions, and setpriority on the calling thread's own id
    // changes only that thread's nice value.
    let rc = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
