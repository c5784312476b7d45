//! The picture of each event: when an event begins, the events task asks the camera for
//! the picture of its next frame (as a status page's snapshot is asked for: the camera
//! thread answers between frames, once per request, and never waits for the reader). A
//! camera whose frames arrive as JPEG images (MJPEG) answers with that frame's image,
//! which is the picture as it came, in colour, with nothing read back or encoded; any
//! other with the frame's luma alone, encoded as a JPEG here on tokio's blocking pool,
//! off the camera thread and the async workers. The picture is thus of the frame after
//! the one the round saw the event begin in: within a quarter second and a frame of it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use edgesight_frame::frame::Size;
use edgesight_http::mailbox::Snapshot;

/// The JPEG quality of an event's picture. Measured on a real scene's luma (the decoder
/// tests' scene, off its 8x8 grid): 80 gives a mean error of 1.5 levels (99 % of pixels
/// within 7) at 0.19 bytes a pixel; 90 costs 36 % more bytes to take 0.4 levels off the
/// mean, 70 saves 15 % for a visibly blockier picture.
pub const PICTURE_QUALITY: u8 = 80;

/// How long the camera may take to answer: its next frame, on a slow or loaded camera.
const WAIT: Duration = Duration::from_secs(3);

/// The JPEG of the frame `answer` brings; `None` (logged) when none came or it did not
/// encode.
pub(super) async fn take(
    camera: String,
    answer: oneshot::Receiver<Arc<Snapshot>>,
) -> Option<Vec<u8>> {
    let snapshot = match tokio::time::timeout(WAIT, answer).await {
        Ok(Ok(snapshot)) => snapshot,
        Ok(Err(_)) | Err(_) => {
            tracing::warn!(camera = %camera, "events: no frame for the event's picture");
            return None;
        }
    };
    if let Some(jpeg) = &snapshot.jpeg {
        return Some(jpeg.clone());
    }
    let size = Size {
        width: snapshot.width,
        height: snapshot.height,
    };
    let encoded = tokio::task::spawn_blocking(move || {
        edgesight_capture::jpeg::encode_luma(&snapshot.luma, size, PICTURE_QUALITY)
    })
    .await;
    match encoded {
        Ok(Ok(jpeg)) => Some(jpeg),
        Ok(Err(e)) => {
            tracing::warn!(camera = %camera, "events: the event's picture: {e}");
            None
        }
        Err(e) => {
            tracing::warn!(camera = %camera, "events: the event's picture: {e}");
            None
        }
    }
}
