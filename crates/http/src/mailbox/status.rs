//! What a camera is doing, as `/api/v1/cameras` tells it: delivering frames, waiting for
//! its device, or waiting to be opened again after a failure (why, and when). The camera
//! thread sets it; a change of state takes a lock, a frame in the same state does not.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// [`CameraState::NoUsbBandwidth`]'s code, known without a state to ask.
const NO_USB_BANDWIDTH: u8 = 4;

/// A camera's state, as its thread last set it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CameraState {
    /// Being opened for the first time.
    Starting,
    /// Delivering frames.
    Up,
    /// Opened, but its device is absent (unplugged, not yet plugged in): it is waited for.
    WaitingForDevice,
    /// Failed with `error`; opened again at `retry_at`.
    Restarting {
        /// What the camera failed with: the error and its causes, or the panic's message.
        error: String,
        /// When the camera is opened again, on the monotonic clock.
        retry_at: Instant,
    },
    /// There, but its USB controller has no bandwidth left for its stream (`error`: the
    /// driver's answer and what to do): opened again like an absent device.
    NoUsbBandwidth {
        /// The driver's answer, and what to do to give the camera bandwidth.
        error: String,
    },
}

impl CameraState {
    fn code(&self) -> u8 {
        match self {
            CameraState::Starting => 0,
            CameraState::Up => 1,
            CameraState::WaitingForDevice => 2,
            CameraState::Restarting { .. } => 3,
            CameraState::NoUsbBandwidth { .. } => NO_USB_BANDWIDTH,
        }
    }

    /// Its name in `/api/v1/cameras`.
    pub fn name(&self) -> &'static str {
        match self {
            CameraState::Starting => "starting",
            CameraState::Up => "up",
            CameraState::WaitingForDevice => "waiting_for_device",
            CameraState::Restarting { .. } => "restarting",
            CameraState::NoUsbBandwidth { .. } => "no_usb_bandwidth",
        }
    }
}

/// A camera's state and since when, shared by its thread and the server.
#[derive(Debug)]
pub struct CameraStatus {
    /// The state's code, read without the lock.
    code: AtomicU8,
    state: Mutex<(CameraState, Instant)>,
}

impl Default for CameraStatus {
    fn default() -> Self {
        CameraStatus {
            code: AtomicU8::new(CameraState::Starting.code()),
            state: Mutex::new((CameraState::Starting, Instant::now())),
        }
    }
}

impl CameraStatus {
    /// Delivering frames; nothing is taken or written while it already was.
    pub fn up(&self) {
        self.enter_plain(CameraState::Up);
    }

    /// Waiting for its device; nothing is taken or written while it already was.
    pub fn waiting_for_device(&self) {
        self.enter_plain(CameraState::WaitingForDevice);
    }

    /// Out of USB bandwidth; `error` is asked for only when the camera was not already.
    pub fn no_usb_bandwidth(&self, error: impl FnOnce() -> String) {
        if self.code.load(Ordering::Relaxed) != NO_USB_BANDWIDTH {
            self.set(CameraState::NoUsbBandwidth { error: error() });
        }
    }

    /// Failed with `error`, to be opened again after `delay`.
    pub fn restarting(&self, error: String, delay: Duration) {
        self.set(CameraState::Restarting {
            error,
            retry_at: Instant::now() + delay,
        });
    }

    /// The state and how long it has held.
    pub fn get(&self) -> (CameraState, Duration) {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (state.0.clone(), state.1.elapsed())
    }

    fn enter_plain(&self, state: CameraState) {
        if self.code.load(Ordering::Relaxed) != state.code() {
            self.set(state);
        }
    }

    fn set(&self, new: CameraState) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.code.store(new.code(), Ordering::Relaxed);
        *state = (new, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A camera out of USB bandwidth keeps its state's start and its first error while it
    /// stays so (the error is not even made again), and leaves it like any other state.
    #[test]
    fn out_of_usb_bandwidth_is_a_state_of_its_own() {
        let status = CameraStatus::default();
        status.no_usb_bandwidth(|| "ENOSPC".into());
        let (state, since) = status.get();
        assert_eq!(
            state,
            CameraState::NoUsbBandwidth {
                error: "ENOSPC".into()
            }
        );
        assert_eq!(state.name(), "no_usb_bandwidth");
        std::thread::sleep(Duration::from_millis(30));
        status.no_usb_bandwidth(|| panic!("asked again while the camera stayed so"));
        assert!(status.get().1 >= since + Duration::from_millis(30));
        status.waiting_for_device();
        assert_eq!(status.get().0, CameraState::WaitingForDevice);
        status.no_usb_bandwidth(|| "again".into());
        assert_eq!(status.get().0.name(), "no_usb_bandwidth");
    }

    #[test]
    fn a_state_held_keeps_its_start_and_a_new_one_starts_its_own() {
        let status = CameraStatus::default();
        assert_eq!(status.get().0, CameraState::Starting);
        status.up();
        let (state, since) = status.get();
        assert_eq!(state, CameraState::Up);
        std::thread::sleep(Duration::from_millis(30));
        status.up();
        assert!(
            status.get().1 >= since + Duration::from_millis(30),
            "kept its start"
        );
        status.restarting("gone".into(), Duration::from_secs(4));
        let (state, since) = status.get();
        let CameraState::Restarting { error, retry_at } = state else {
            panic!("{state:?}");
        };
        assert_eq!(error, "gone");
        let left = retry_at.saturating_duration_since(Instant::now());
        assert!(
            left > Duration::from_secs(3) && left <= Duration::from_secs(4),
            "{left:?}"
        );
        assert!(since < Duration::from_millis(30));
        status.waiting_for_device();
        assert_eq!(status.get().0.name(), "waiting_for_device");
    }
}
