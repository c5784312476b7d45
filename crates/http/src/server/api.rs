//! The JSON API: `/api/v1/cameras` (each camera's state) and `/api/v1/latest` (a
//! camera's last frame: its report, health and motion), the bodies built from what the
//! cameras hand the server (`mailbox`).

use std::collections::BTreeMap;

use hyper::{Response, StatusCode};
use serde::Serialize;

use super::reply::{response, text, Body};
use super::view::{find, CameraView};
use crate::mailbox::CameraState;
use crate::report::Report;
use edgesight_core::health::HealthReport;
use edgesight_core::motion_events::{MotionReport, RegionMotion};
use edgesight_frame::region::{Region, RegionStats};

/// One camera in `/api/v1/cameras`: its name, what it is doing and since when, why it
/// failed and when it is opened again (while restarting; the driver's answer and what to
/// do while out of USB bandwidth), and its newest frame's age and
/// the frame rate (null before its first frame).
#[derive(Serialize)]
struct CameraJson<'a> {
    name: &'a str,
    state: &'static str,
    since_seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_in_seconds: Option<f64>,
    last_frame_age_seconds: Option<f64>,
    fps: Option<f64>,
}

pub(super) fn cameras(cameras: &[CameraView]) -> Response<Body> {
    let list: Vec<CameraJson> = cameras
        .iter()
        .map(|c| {
            let (camera_state, since) = c.status();
            let latest = c.latest();
            let (error, retry_in_seconds) = match &camera_state {
                CameraState::Restarting { error, retry_at } => (
                    Some(error.clone()),
                    Some(
                        retry_at
                            .saturating_duration_since(std::time::Instant::now())
                            .as_secs_f64(),
                    ),
                ),
                CameraState::NoUsbBandwidth { error } => (Some(error.clone()), None),
                _ => (None, None),
            };
            CameraJson {
                name: &c.name,
                state: camera_state.name(),
                since_seconds: since.as_secs_f64(),
                error,
                retry_in_seconds,
                last_frame_age_seconds: latest
                    .as_ref()
                    .map(|l| l.published.elapsed().as_secs_f64()),
                fps: latest.as_ref().map(|l| l.activity.fps),
            }
        })
        .collect();
    match serde_json::to_vec_pretty(&list) {
        Ok(json) => response(StatusCode::OK, "application/json", json),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
    }
}

/// `report.json`'s fields, plus which camera and frame they come from, and how the camera
/// keeps up: `fps` and `dropped` (by reason, and `total`) are the values of
/// `edgesight_frame_rate` and `edgesight_frames_dropped_total`.
#[derive(Serialize)]
struct LatestJson<'a> {
    camera: &'a str,
    sequence: u64,
    age_seconds: f64,
    fps: f64,
    dropped: BTreeMap<&'static str, u64>,
    /// Null when the camera's health detectors are off.
    health: Option<HealthReport>,
    motion: MotionJson<'a>,
    #[serde(flatten)]
    report: Report,
}

/// The frame's motion, each region's under its name.
#[derive(Serialize)]
struct MotionJson<'a> {
    state: &'static str,
    ratio: f64,
    threshold: f64,
    noise: f64,
    gain: f64,
    regions: BTreeMap<&'a str, RegionMotion>,
}

impl<'a> MotionJson<'a> {
    fn new(m: &'a MotionReport, regions: &'a [(Region, RegionStats)]) -> MotionJson<'a> {
        MotionJson {
            state: m.state,
            ratio: m.ratio,
            threshold: m.threshold,
            noise: m.noise,
            gain: m.gain,
            regions: regions
                .iter()
                .zip(&m.regions)
                .map(|((r, _), motion)| (r.name.as_str(), *motion))
                .collect(),
        }
    }
}

pub(super) fn latest(cameras: &[CameraView], query: Option<&str>) -> Response<Body> {
    let camera = match find(cameras, query) {
        Ok(c) => c,
        Err(e) => return text(StatusCode::NOT_FOUND, format!("{e}\n")),
    };
    let Some(l) = camera.latest() else {
        return text(StatusCode::SERVICE_UNAVAILABLE, "no frame yet\n");
    };
    let body = LatestJson {
        camera: &camera.name,
        sequence: l.sequence,
        age_seconds: l.published.elapsed().as_secs_f64(),
        fps: l.activity.fps,
        dropped: l
            .activity
            .dropped_by_reason()
            .chain([("total", l.activity.dropped_total())])
            .collect(),
        health: l.health,
        motion: MotionJson::new(&l.motion, &l.result.regions),
        report: Report::new(&l.result, l.source.format, &l.source.device, l.options),
    };
    match serde_json::to_vec_pretty(&body) {
        Ok(json) => response(StatusCode::OK, "application/json", json),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
    }
}
