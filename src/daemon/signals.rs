//! SIGTERM, SIGINT and SIGHUP, taken with `sigwait` on a thread of their own.
//!
//! Handlers are process-wide, and libraries loaded into the process may install their own
//! for these signals (LLVM, which CPU OpenCL drivers such as POCL embed, registers
//! SIGINT/SIGTERM handlers that end the process). Blocking the signals in every thread
//! (the mask is inherited by the threads OpenCL drivers start) and waiting for them
//! synchronously does not depend on who owns the handlers.

use std::io;

use tokio::sync::mpsc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signal {
    Terminate,
    Interrupt,
    Hangup,
}

fn set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset only write the set they are given.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Blocks the three signals in the calling thread and so in every thread it starts
/// afterwards. Call it first, before any other thread exists.
pub fn block() -> io::Result<()> {
    mask(libc::SIG_BLOCK)
}

/// Unblocks the three signals in the calling thread.
pub(crate) fn unblock() -> io::Result<()> {
    mask(libc::SIG_UNBLOCK)
}

fn mask(how: libc::c_int) -> io::Result<()> {
    let set = set();
    // SAFETY: the set is initialised; a null old-set pointer is allowed.
    let rc = unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// Starts the thread that waits for the signals and forwards them; it ends when the
/// receiver is dropped and the next signal arrives, or with the process.
pub(crate) fn forward() -> io::Result<mpsc::UnboundedReceiver<Signal>> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("es-signals".into())
        .spawn(move || {
            let set = set();
            loop {
                let mut sig: libc::c_int = 0;
                // SAFETY: both pointers are valid for the call.
                if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                    continue;
                }
                let signal = match sig {
                    libc::SIGTERM => Signal::Terminate,
                    libc::SIGINT => Signal::Interrupt,
                    libc::SIGHUP => Signal::Hangup,
                    _ => continue,
                };
                if tx.send(signal).is_err() {
                    return;
                }
            }
        })?;
    Ok(rx)
}
