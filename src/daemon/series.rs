//! The series a config makes the daemon export, counted from the families themselves
//! (a registry fed one frame of each camera's regions) so that `check-config` says what
//! a scrape will hold, not what a table in the docs once said.

use std::collections::BTreeSet;
use std::time::Duration;

use super::camera;
use super::camera_metrics::CameraFamilies;
use super::reload::ReloadMetrics;
use crate::config::Settings;
use edgesight_core::pipeline::FrameResult;
use edgesight_frame::region::RegionStats;
use edgesight_http::metrics::{Metrics, Tier};

/// Series in one tier's scrape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeriesCount {
    /// Each camera's name and its series.
    pub cameras: Vec<(String, usize)>,
    /// The series of no camera: the process, build, reload, MQTT and OpenCL device families
    /// (and in the detail tier the HTTP family, one for each handler and status answered,
    /// not counted here).
    pub board: usize,
}

/// What `settings` export in `tier` once every camera has published a frame and the
/// driver has named its rate.
pub fn count(settings: &Settings, tier: Tier) -> SeriesCount {
    let metrics = Metrics::new();
    let families = CameraFamilies::new(&metrics, settings.histogram_bins);
    let _reloads = ReloadMetrics::new(&metrics);
    let _mqtt = settings
        .mqtt
        .is_some()
        .then(|| crate::mqtt::MqttMetrics::new(&metrics));
    let cameras: Vec<_> = settings
        .cameras
        .iter()
        .map(|c| {
            let m = families.camera(&c.name, camera::target_fps(c).or(Some(0.0)));
            let mut frame = FrameResult::empty();
            frame.timed = true;
            frame.regions = c
                .regions
                .iter()
                .map(|r| (r.clone(), RegionStats::default()))
                .collect();
            m.frame(&frame, Duration::ZERO, Some(Duration::ZERO));
            m
        })
        .collect();
    let text = String::from_utf8(metrics.encode_tier(tier)).expect("the exposition is UTF-8");
    let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    let of = |name: &str| {
        let label = format!("camera=\"{name}\"");
        samples.iter().filter(|l| l.contains(&label)).count()
    };
    let per_camera: Vec<(String, usize)> = cameras
        .iter()
        .map(|m| (m.name.clone(), of(&m.name)))
        .collect();
    let devices: BTreeSet<String> = settings
        .cameras
        .iter()
        .map(|c| format!("{:?}", c.device))
        .collect();
    let board = samples.len() - per_camera.iter().map(|(_, n)| n).sum::<usize>() + devices.len();
    SeriesCount {
        cameras: per_camera,
        board,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgesight_frame::region::Region;

    /// A pattern camera (its rate known) with two regions and one without any: the default
    /// tier's 51 series a camera and 6 a region; the detail tier's stage buckets (eight
    /// stages, the pipeline and a JPEG source's decode, 15 each), bins and per-stage
    /// counters on top; the board's process, build and reload families and one device.
    #[test]
    fn the_series_of_a_config_are_counted_per_camera_and_board() {
        let mut settings = crate::config::test_support::load_text("").expect("the defaults");
        let mut two = settings.cameras[0].clone();
        two.name = "two".into();
        two.regions = ["door", "gate"]
            .map(|name| Region {
                name: name.into(),
                x: 0,
                y: 0,
                width: 2,
                height: 2,
            })
            .to_vec();
        settings.cameras.push(two);
        let default = count(&settings, Tier::Default);
        assert_eq!(
            default,
            SeriesCount {
                cameras: vec![("default".into(), 51), ("two".into(), 63)],
                board: 14,
            }
        );
        let detail = count(&settings, Tier::Detail);
        let extra = 10 * 15 - 2 + 32 + 8 + 6;
        assert_eq!(
            detail,
            SeriesCount {
                cameras: vec![("default".into(), 51 + extra), ("two".into(), 63 + extra)],
                board: 14,
            }
        );
        // `[mqtt]` adds three board series: connected, published, dropped.
        let mqtt = "[mqtt]\nurl = \"mqtt://h\"\nboard = \"b\"\n";
        settings.mqtt = crate::config::test_support::load_text(mqtt).unwrap().mqtt;
        assert_eq!(count(&settings, Tier::Default).board, 17);
    }
}
