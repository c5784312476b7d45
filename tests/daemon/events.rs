//! `[events] dir` on its own, with no broker: each event's JSON and picture written there,
//! and what an earlier run left pruned to the limits at start.

use std::time::Duration;

use crate::common::daemon::*;

/// Without `[mqtt]`, a replay of one image (frozen) has its tamper event kept in
/// `[events] dir`: the JSON of its start and its picture, a JPEG of the image.
#[test]
fn events_dir_without_mqtt_keeps_each_events_json_and_picture() {
    let dir = tmp_dir("daemon-events-alone");
    let images = dir.join("images");
    std::fs::create_dir_all(&images).expect("mkdir");
    std::fs::write(images.join("still.pgm"), textured_pgm(64, 48)).expect("write an image");
    let kept = dir.join("kept");
    let config = format!(
        "[events]\ndir = \"{}\"\n[[camera]]\nname = \"still\"\n[camera.source]\n\
         kind = \"replay\"\npath = \"{}\"\nfps = 30\n[camera.health]\nlearning_seconds = 0.5\n",
        kept.display(),
        images.display()
    );
    let d = Daemon::start(&dir, &config);
    let still = kept.join("still");
    let stem = wait_until("the frozen event's files", Duration::from_secs(60), || {
        let names = file_names(&still);
        let json = names.iter().find(|n| n.ends_with("-tamper_frozen.json"))?;
        let stem = json.trim_end_matches(".json").to_string();
        names.contains(&format!("{stem}.jpg")).then_some(stem)
    });
    let event: serde_json::Value =
        serde_json::from_slice(&std::fs::read(still.join(format!("{stem}.json"))).unwrap())
            .expect("JSON");
    assert_eq!(
        (&event["camera"], &event["kind"], &event["ended"]),
        (
            &"still".into(),
            &"tamper_frozen".into(),
            &serde_json::Value::Null
        ),
        "{event}"
    );
    let started = event["started"].as_str().expect("started");
    assert_eq!(
        stem,
        format!("{}-tamper_frozen", started.replace([':', '-'], ""))
    );
    let jpeg = std::fs::read(still.join(format!("{stem}.jpg"))).expect("the picture");
    let mut decoder = edgesight::jpeg::LumaDecoder::new().expect("libturbojpeg");
    let size = decoder.size(&jpeg).expect("a JPEG");
    let mut luma = vec![0; 64 * 48];
    decoder
        .decode(&jpeg, size, edgesight::jpeg::Scale::Full, &mut luma, 64)
        .expect("a whole JPEG");
    assert_eq!((size.width, size.height), (64, 48));
    let source = textured_pgm(64, 48);
    let source = &source[source.len() - 64 * 48..];
    let mean = luma
        .iter()
        .zip(source)
        .map(|(a, b)| f64::from(a.abs_diff(*b)))
        .sum::<f64>()
        / luma.len() as f64;
    // As the MQTT test measured for this image: a mean error of 4.4 levels.
    assert!(
        mean <= 6.0,
        "the picture is not the image: mean error {mean}"
    );
    assert_eq!(sample(&d.metrics(), "edgesight_mqtt_connected"), None);
    d.stop();
}

/// What an earlier run left in `[events] dir` is pruned at start, before any event: each
/// camera's directory, a camera no longer configured's too, keeps its newest `max_files`
/// events and none last written more than `max_age_days` ago; other files stay.
#[test]
fn events_dir_is_pruned_to_its_limits_at_start() {
    let dir = tmp_dir("daemon-events-pruned");
    let kept = dir.join("kept");
    let day = Duration::from_secs(86_400);
    let now = std::time::SystemTime::now();
    let put = |camera: &str, name: &str, age: Duration| {
        let path = kept.join(camera).join(name);
        std::fs::create_dir_all(path.parent().unwrap()).expect("mkdir");
        let file = std::fs::File::create(&path).expect("create");
        file.set_modified(now - age).expect("set its time");
    };
    let stem = |n: u32| format!("20261101T00000{n}.000Z-motion-lane");
    for n in 1..=5 {
        // The fourth, among the newest three by name, was last written 12 days ago.
        let age = if n == 4 { 12 * day } else { Duration::ZERO };
        put("front", &format!("{}.json", stem(n)), age);
        put("front", &format!("{}.jpg", stem(n)), age);
    }
    put("front", "notes.txt", 40 * day);
    // An event counts as written when its newest file was: the third stays.
    put("retired", "20261001T000000.000Z-camera_back.json", 12 * day);
    put(
        "retired",
        "20261002T000000.000Z-camera_back.json",
        Duration::ZERO,
    );
    put("retired", "20261003T000000.000Z-camera_back.json", 12 * day);
    put("retired", "20261003T000000.000Z-camera_back.jpg", day);
    let config = format!(
        "[events]\ndir = \"{}\"\nmax_files = 3\nmax_age_days = 10\n\
         [[camera]]\nname = \"front\"\n[camera.source]\nkind = \"pattern\"\nsize = \"64x48\"\n\
         fps = 10\n[camera.health]\nenabled = false\n",
        kept.display()
    );
    let d = Daemon::start(&dir, &config);
    let want_front = [
        format!("{}.jpg", stem(3)),
        format!("{}.json", stem(3)),
        format!("{}.jpg", stem(5)),
        format!("{}.json", stem(5)),
        "notes.txt".to_string(),
    ];
    let want_retired = [
        "20261002T000000.000Z-camera_back.json",
        "20261003T000000.000Z-camera_back.jpg",
        "20261003T000000.000Z-camera_back.json",
    ];
    wait_until("the pruning at start", Duration::from_secs(20), || {
        (file_names(&kept.join("front")) == want_front
            && file_names(&kept.join("retired")) == want_retired)
            .then_some(())
    });
    // Nothing more goes: the camera has no event to write.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(file_names(&kept.join("front")), want_front);
    assert_eq!(file_names(&kept.join("retired")), want_retired);
    assert_eq!(file_names(&kept), ["front", "retired"]);
    d.stop();
}
