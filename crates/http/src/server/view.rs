//! What the server knows of each camera ([`CameraView`]: its latest frame, its pictures
//! and its state, as the camera thread hands them over in `mailbox`), and the camera a
//! request's `camera=NAME` names. The routes, the JSON API and the status page read
//! cameras through it.

use std::sync::{mpsc, Arc};

use tokio::sync::watch;

use super::snapshots::CameraSnapshots;
use crate::mailbox::{CameraState, CameraStatus, Latest, Snapshot, SnapshotReply};

/// What the server knows of one camera.
pub struct CameraView {
    /// The camera's name, as its `[[camera]]` table gives it and `camera=NAME` names it.
    pub name: String,
    latest: watch::Receiver<Option<Arc<Latest>>>,
    snapshots: CameraSnapshots,
    status: Arc<CameraStatus>,
}

impl CameraView {
    /// The view of camera `name`: its published frames come on `latest`, its snapshot
    /// requests go on `snapshots`, and its state reads `starting` until
    /// [`CameraView::with_status`] gives it the camera thread's.
    pub fn new(
        name: String,
        latest: watch::Receiver<Option<Arc<Latest>>>,
        snapshots: mpsc::Sender<SnapshotReply>,
    ) -> CameraView {
        CameraView {
            snapshots: CameraSnapshots::new(name.clone(), snapshots),
            name,
            latest,
            status: Arc::default(),
        }
    }

    /// The view whose pictures are kept `keep` after their read-back.
    #[cfg(test)]
    pub(super) fn keeping_pictures(self, keep: std::time::Duration) -> CameraView {
        CameraView {
            snapshots: self.snapshots.keeping(keep),
            ..self
        }
    }

    /// The view with the camera thread's own status, which it sets.
    pub fn with_status(self, status: Arc<CameraStatus>) -> CameraView {
        CameraView { status, ..self }
    }

    /// The picture of the camera's next frame for an event (its JPEG, or its luma),
    /// read back by the camera thread between frames as a snapshot is; `None` when the
    /// camera thread is not running.
    pub fn next_pictures(&self) -> Option<tokio::sync::oneshot::Receiver<Arc<Snapshot>>> {
        self.snapshots.next_frame()
    }

    /// The camera's last published frame; `None` before its first.
    pub fn latest(&self) -> Option<Arc<Latest>> {
        self.latest.borrow().clone()
    }

    /// Its snapshots, as the snapshot route reads them.
    pub(super) fn snapshots(&self) -> &CameraSnapshots {
        &self.snapshots
    }

    /// What the camera is doing, and for how long it has.
    pub fn status(&self) -> (CameraState, std::time::Duration) {
        self.status.get()
    }
}

/// The `camera=NAME` query parameter, if any.
fn camera_param(query: Option<&str>) -> Option<&str> {
    query?.split('&').find_map(|kv| kv.strip_prefix("camera="))
}

/// Why a request has no camera to answer for: a 404.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum NoCamera {
    /// The daemon runs no camera.
    #[error("no cameras")]
    NoneRun,
    /// `camera=NAME` names none of the cameras.
    #[error("no camera '{0}'")]
    Unknown(String),
}

/// The camera a `camera=NAME` parameter names, else the first.
pub(super) fn find<'a>(
    cameras: &'a [CameraView],
    query: Option<&str>,
) -> Result<&'a CameraView, NoCamera> {
    match camera_param(query) {
        None => cameras.first().ok_or(NoCamera::NoneRun),
        Some(name) => cameras
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| NoCamera::Unknown(name.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_camera_to_answer_for_is_said_as_a_404_says_it() {
        let none = find(&[], None).err();
        assert_eq!(none, Some(NoCamera::NoneRun));
        assert_eq!(none.unwrap().to_string(), "no cameras");
        let unknown = find(&[], Some("x=1&camera=back")).err();
        assert_eq!(unknown, Some(NoCamera::Unknown("back".into())));
        assert_eq!(unknown.unwrap().to_string(), "no camera 'back'");
    }

    #[test]
    fn camera_parameter() {
        assert_eq!(camera_param(Some("camera=front")), Some("front"));
        assert_eq!(camera_param(Some("x=1&camera=back")), Some("back"));
        assert_eq!(camera_param(Some("x=1")), None);
        assert_eq!(camera_param(None), None);
    }
}
