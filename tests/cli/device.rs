//! The OpenCL device: what `devices` lists, the tuning `check-config` prints, and
//! `selftest` passing on it and naming a wrong result where it finds one.

use edgesight::pipeline::Tuning;

use crate::{assert_bad_input, common, edgesight, out_dir};

#[test]
fn devices_lists_the_opencl_devices() {
    let o = edgesight(&["devices"]);
    assert!(o.status.success());
    let stdout = String::from_utf8_lossy(&o.stdout);
    let gpu = common::gpu();
    assert!(stdout.contains(&gpu.info.name), "{stdout}");
    for field in [
        "OpenCL C:",
        "compute units:",
        "local memory:",
        "max work-group:",
        "unified memory:",
        "fp64:",
        "[default]",
    ] {
        assert!(stdout.contains(field), "missing {field}: {stdout}");
    }
    // Each device says which tuning `auto` gives it.
    let tuning = Tuning::for_info(&gpu.info).name();
    assert!(
        stdout.contains(&format!("tuning (auto):      {tuning}\n")),
        "{stdout}"
    );
}

/// `check-config` prints each camera's tuning, and refuses an unknown one at its key.
#[test]
fn check_config_prints_the_tuning_and_refuses_unknown_ones() {
    let dir = out_dir("cli-check-config-tuning");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tuning.toml");
    std::fs::write(
        &path,
        "[opencl]\ntuning = \"mali\"\n\
         [[camera]]\nname = \"a\"\n[camera.source]\nkind = \"pattern\"\n\
         [[camera]]\nname = \"b\"\nopencl_tuning = \"cpu\"\n[camera.source]\nkind = \"pattern\"\n",
    )
    .unwrap();
    let o = edgesight(&["check-config", path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tunings: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("opencl_tuning = "))
        .collect();
    assert_eq!(
        tunings,
        ["opencl_tuning = \"mali\"", "opencl_tuning = \"cpu\""],
        "{stdout}"
    );

    std::fs::write(
        &path,
        "[opencl]\ndevice = \"default\"\ntuning = \"turbo\"\n",
    )
    .unwrap();
    assert_bad_input(
        &["check-config", path.to_str().unwrap()],
        &format!(
            "{}:3:10: opencl.tuning: unknown tuning 'turbo' (expected auto, gpu, cpu, mali or midgard)",
            path.display()
        ),
    );
}

/// `selftest` passes on this device with every tuning: a table of the seven stages, each
/// with its checks and "pass", and exit 0.
#[test]
fn selftest_passes_every_stage_with_every_tuning() {
    let stdout = crate::edgesight_ok(&["selftest"]);
    assert!(
        stdout.contains("with the gpu, cpu, mali, midgard tunings"),
        "{stdout}"
    );
    for stage in edgesight::selftest::STAGES {
        let row = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(stage))
            .unwrap_or_else(|| panic!("no row for {stage}:\n{stdout}"));
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert!(
            fields.len() == 3
                && fields[1].parse::<u32>().is_ok_and(|n| n > 0)
                && fields[2] == "pass",
            "{row}"
        );
    }
}

/// A device result off in one pixel, one histogram bin or one region's sum is what
/// `selftest` (and `verify_every`) exists to catch: each is reported at its stage, with
/// the place and both values.
#[test]
fn selftest_names_the_first_wrong_pixel_bin_and_region() {
    use edgesight::pipeline::{FullImages, Pipeline, Setup};
    use edgesight::selftest::{self, Findings};

    let gpu = common::gpu();
    let case = &selftest::cases()[0];
    let setup = Setup {
        tuning: edgesight::pipeline::TuningChoice::Auto.resolve(&gpu),
        images: FullImages::Discarded,
    };
    let mut pipeline = Pipeline::with_setup(&gpu, case.layout, case.options, &case.regions, setup)
        .expect("pipeline");
    let mut slot = pipeline.new_slot(&gpu).expect("slot");
    slot.write_bytes(&gpu, &case.frame).expect("write");
    let processed = pipeline.process(&gpu, &slot).expect("process");
    let mut pictures = processed.read_pictures(&gpu).expect("pictures");
    let mut result = (*processed).clone();
    drop(processed);
    let expected = selftest::Expected::of(&case.layout, case.options, &case.frame);
    let compare = |result: &_, pictures: &_| {
        let mut findings = Findings::default();
        selftest::compare_frame(
            &mut findings,
            &"case 0",
            &expected,
            result,
            pictures,
            &case.regions,
        );
        findings
    };
    assert!(compare(&result, &pictures).passed());

    let w = case.layout.width as usize;
    let at = 2 * w + 5;
    let was = pictures.luma[at];
    pictures.luma[at] = was.wrapping_add(1);
    result.histogram[200] += 1;
    result.regions[1].1.sum += 3;
    let findings = compare(&result, &pictures);
    assert!(!findings.passed());
    let first = |stage: &str| {
        findings.stages[stage]
            .first_mismatch
            .clone()
            .unwrap_or_default()
    };
    assert_eq!(
        first("luma"),
        format!(
            "luma, case 0: first difference at (x 5, y 2): device {}, reference {was} \
             (1 of {} values differ)",
            was.wrapping_add(1),
            case.layout.pixels()
        )
    );
    assert!(
        first("histogram").starts_with("luma histogram, case 0: first difference in bin 200"),
        "{}",
        first("histogram")
    );
    assert!(
        first("regions").starts_with("region 'r1' sums, case 0"),
        "{}",
        first("regions")
    );
    assert_eq!(findings.stages["sobel"].mismatches, 0);
}

/// `kernels` builds every program a tuning's pipelines build, each cold, and says of every
/// kernel whether the tuning launches it, with the driver's work-group size and memory:
/// the table on stdout and the same as JSON, the Mali tuning's own kernels launched and
/// Midgard's not.
#[test]
fn kernels_lists_every_program_of_a_tuning_and_what_it_launches() {
    let dir = crate::out_dir("cli-kernels");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let json = dir.join("kernels.json");
    let stdout = crate::edgesight_ok(&[
        "kernels",
        "--tuning",
        "mali",
        "--json",
        &json.display().to_string(),
    ]);
    assert!(stdout.contains("tuning mali: "), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    let tunings = report["tunings"].as_array().expect("tunings");
    assert_eq!(tunings.len(), 1);
    assert_eq!(tunings[0]["tuning"], "mali");
    let launched = |name: &str| -> Vec<bool> {
        tunings[0]["programs"]
            .as_array()
            .expect("programs")
            .iter()
            .flat_map(|p| p["kernels"].as_array().expect("kernels").iter())
            .filter(|k| k["name"] == name)
            .map(|k| k["launched"] == true)
            .collect()
    };
    // The daemon's Sobel and the --raw one, each four pixels a work-item.
    assert_eq!(launched("sobel3x3_quad"), [true, true]);
    assert!(
        launched("sobel3x3").iter().all(|l| !l),
        "Midgard's Sobel is not launched"
    );
    assert_eq!(launched("histogram_count"), [true]);
    assert!(
        launched("histogram_sum").is_empty(),
        "local atomics need no sum"
    );
    // Otsu is worked out on the host: its kernel is not launched (binarize is, --raw).
    assert!(launched("otsu_threshold").iter().all(|l| !l));
    assert!(launched("binarize").contains(&true));
    for p in tunings[0]["programs"].as_array().expect("programs") {
        assert!(p["build_seconds"].as_f64().is_some_and(|s| s > 0.0), "{p}");
        for k in p["kernels"].as_array().expect("kernels") {
            assert!(k["work_group_size"].as_u64().is_some_and(|w| w > 0), "{k}");
        }
        let file = p["file"].as_str().unwrap_or_default();
        assert!(
            stdout.contains(&format!("kernels/{file} ")),
            "{file} not in:\n{stdout}"
        );
    }
}

/// `kernels --launches` runs the daemon's pipeline (grey frames, the health grid, motion)
/// at each size and lists every kernel a frame launched with its work sizes, the first
/// frame's with the health stage's gradient histogram, the second's without; and the bytes
/// a frame moves. The sizes follow the stages' own rules for a 64x48 frame of the mali
/// tuning, on a device that allows groups of 64.
#[test]
fn kernels_lists_the_launches_of_a_frame_with_their_work_sizes() {
    let dir = crate::out_dir("cli-kernels-launches");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let json = dir.join("kernels.json");
    let stdout = crate::edgesight_ok(&[
        "kernels",
        "--tuning",
        "mali",
        "--launches",
        "64x48",
        "--json",
        &json.display().to_string(),
    ]);
    assert!(
        stdout.contains("launches at 64x48 (grey frames, the health grid, motion): 14064 bytes"),
        "{stdout}"
    );
    assert!(
        stdout.contains("    sobel3x3_quad                     16x48     16x4         768"),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    let frame = &report["tunings"][0]["launches"][0];
    assert_eq!(
        (&frame["width"], &frame["height"]),
        (&64.into(), &48.into())
    );
    // The magnitude written and read again (2 bytes a pixel; a grey frame is its own luma)
    // and the compact integrals: 20 bytes for each of 48 rows of 4 tiles, 64 columns of 3
    // bands and the 4 x 3 corners.
    let n = 64 * 48;
    assert_eq!(frame["bytes_moved"], 2 * n + 20 * (4 * 48 + 64 * 3 + 4 * 3));
    let launches = |i: usize| -> Vec<(String, Vec<u64>, Vec<u64>)> {
        frame["frames"][i]["launches"]
            .as_array()
            .expect("launches")
            .iter()
            .map(|l| {
                let sizes = |key: &str| {
                    l[key]
                        .as_array()
                        .expect("sizes")
                        .iter()
                        .map(|v| v.as_u64().expect("a size"))
                        .collect()
                };
                (
                    l["kernel"].as_str().expect("kernel").to_string(),
                    sizes("global"),
                    sizes("local"),
                )
            })
            .collect()
    };
    // The histogram: 4 groups of 64 a compute unit (histogram.rs).
    let units = common::gpu().info.compute_units as u64;
    let histogram = (
        "histogram_count".to_string(),
        vec![(units * 4).clamp(1, 1024) * 64],
        vec![64],
    );
    let k = |name: &str, global: &[u64], local: &[u64]| {
        (name.to_string(), global.to_vec(), local.to_vec())
    };
    let rest = [
        // Four pixels a work-item, one row, in 16 x 4 groups.
        k("sobel3x3_quad", &[64 / 4, 48], &[16, 4]),
        // Four work-items a 16 x 16 tile (a part each), 16 across the 4 tiles rounded up
        // to a group of 64, 3 bands.
        k("integral_tile_parts", &[64, 3], &[64, 1]),
        // Left's 48 rows and top's 64 / 4 column quads, each rounded up to 64, in 4 parts
        // (sum, squared sum, edges, foreground).
        k("integral_left_rows", &[64, 4], &[64, 1]),
        k("integral_tops", &[64, 4], &[64, 1]),
        // The 4 tile columns' corners in 4 parts and motion's fifth.
        k("integral_corners", &[64, 5], &[64, 1]),
        // A work-item a region: the 16 x 12 health cells and the whole frame, 193, in
        // groups of 64.
        k("region_sums_items", &[256], &[64]),
    ];
    let mut first = vec![histogram.clone(), rest[0].clone(), histogram.clone()];
    first.extend_from_slice(&rest[1..]);
    let mut second = vec![histogram];
    second.extend_from_slice(&rest);
    assert_eq!(frame["frames"][0]["gradient_sampled"], true);
    assert_eq!(launches(0), first);
    assert_eq!(frame["frames"][1]["gradient_sampled"], false);
    assert_eq!(launches(1), second);
    let sobel = &frame["frames"][1]["launches"][1];
    assert_eq!(sobel["file"], "sobel.cl");
    assert_eq!(
        sobel["defines"],
        "-DNO_GRADIENTS -DNO_EDGE_MASK -DQUAD_ROWS=1"
    );
    assert_eq!(frame["frames"][1]["refused"], serde_json::Value::Null);
}

/// The programs' binaries are kept where `EDGESIGHT_KERNEL_CACHE` says and taken from
/// there by the next start; `capture` says how long building took, before its frames'
/// time starts.
#[test]
fn program_binaries_are_kept_and_taken_by_the_next_start() {
    let dir = crate::out_dir("cli-kernel-cache");
    let cache = dir.join("kernels");
    let run = || {
        common::gpu();
        std::process::Command::new(env!("CARGO_BIN_EXE_edgesight"))
            .args(["capture", "pattern:64x48@30", "--frames", "2", "--out"])
            .arg(dir.join("out"))
            .env("EDGESIGHT_KERNEL_CACHE", &cache)
            .env("RUST_LOG", "debug")
            .output()
            .expect("run edgesight")
    };
    let first = run();
    let err = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{err}");
    let out = String::from_utf8_lossy(&first.stdout);
    assert!(out.contains("kernels built and run once in "), "{out}");
    let kept = std::fs::read_dir(&cache).expect("the cache").count();
    assert!(kept >= 4, "{kept} files");
    assert!(!err.contains("from_cache=true"), "{err}");
    let second = run();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{err}");
    assert!(err.contains("from_cache=true"), "{err}");
    assert!(!err.contains("from_cache=false"), "{err}");
    assert_eq!(std::fs::read_dir(&cache).expect("the cache").count(), kept);
}

/// `selftest --json` writes the board's report beside the table: every stage as the table
/// counts it, none differing; the board and driver as the library reads them (nothing on
/// a machine without the files); every kernel of the device's tuning; every stage timed
/// at 720p, 1080p and 4K; the coherency run's frames all matching; the USERPTR check not
/// tried without a camera.
#[test]
fn selftest_json_reports_the_board_and_every_check() {
    use edgesight::board::{versions::DriverVersions, Board};

    let dir = out_dir("cli-selftest-json");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let json = dir.join("board.json");
    let stdout = crate::edgesight_ok(&[
        "selftest",
        "--tuning",
        "auto",
        "--json",
        &json.display().to_string(),
    ]);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    let gpu = common::gpu();
    let tuning = Tuning::for_info(&gpu.info).name();
    assert_eq!(r["passed"], true);

    // The checks: the table's rows, each stage checked and none differing.
    let checks = &r["checks"];
    assert_eq!(checks["tunings"], serde_json::json!([tuning]));
    assert_eq!(checks["frames"], edgesight::selftest::cases().len());
    assert_eq!(checks["motion_scenes"], edgesight::selftest::MOTION_SCENES);
    let stages = checks["stages"].as_object().expect("stages");
    assert_eq!(stages.len(), edgesight::selftest::STAGES.len());
    for stage in edgesight::selftest::STAGES {
        let row = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(stage))
            .unwrap_or_else(|| panic!("no row for {stage}:\n{stdout}"));
        let table: u64 = row.split_whitespace().nth(1).unwrap().parse().unwrap();
        let s = &stages[stage];
        assert!(table > 0, "{row}");
        assert_eq!(
            s,
            &serde_json::json!({"checks": table, "mismatches": 0, "first_mismatch": null}),
            "{stage}"
        );
    }

    // The coherency run: every frame compared, none differing.
    let c = &r["coherency"];
    assert_eq!(c["frames"], edgesight::selftest::coherency::FRAMES);
    assert_eq!(c["slots"], edgesight::selftest::coherency::SLOTS);
    assert_eq!(c["tuning"], tuning);
    assert_eq!(
        (
            &c["frames_mismatched"],
            &c["mismatches"],
            &c["first_mismatch"]
        ),
        (&0.into(), &0.into(), &serde_json::Value::Null)
    );
    for stage in ["luma", "sobel"] {
        assert_eq!(
            c["stages"][stage]["checks"],
            edgesight::selftest::coherency::FRAMES,
            "{stage}"
        );
    }
    assert!(
        stdout.contains("coherency: 200 frames of 480x270 through 3 slots in turn, each matches")
    );

    // The board, as the library reads it here; the driver as it describes itself.
    let board = serde_json::to_value(Board::probe()).expect("board");
    for field in [
        "model",
        "compatible",
        "kernel_driver",
        "mali0",
        "render_nodes",
    ] {
        assert_eq!(r["board"][field], board[field], "{field}");
    }
    let cl = &r["opencl"];
    assert_eq!(cl["name"], gpu.info.name);
    assert_eq!(cl["platform"], gpu.info.platform);
    assert_eq!(cl["driver_version"], gpu.info.driver_version);
    assert_eq!(cl["tuning_auto"], tuning);
    let versions = DriverVersions::parse(
        &gpu.info.platform,
        &[
            &gpu.info.platform_version,
            &gpu.info.version,
            &gpu.info.driver_version,
        ],
    );
    assert_eq!(
        cl["arm_release_ver"],
        serde_json::json!(versions.arm_release_ver)
    );
    assert_eq!(cl["mesa_version"], serde_json::json!(versions.mesa_version));
    let profiling = edgesight::cl::offers_profiling(&gpu.device).expect("profiling");
    assert_eq!(cl["profiling"], profiling);
    let extensions = gpu.device.extensions().expect("extensions");
    let has = |e: &str| extensions.split_whitespace().any(|x| x == e);
    assert_eq!(cl["cl_arm_import_memory"], has("cl_arm_import_memory"));
    assert_eq!(
        cl["extensions"].as_array().map(Vec::len),
        Some(extensions.split_whitespace().count())
    );
    let pocl = gpu.info.platform == "Portable Computing Language";
    if pocl {
        assert_eq!(
            (
                &cl["arm_release_ver"],
                &cl["mesa_version"],
                &cl["cl_arm_import_memory"]
            ),
            (
                &serde_json::Value::Null,
                &serde_json::Value::Null,
                &false.into()
            )
        );
    }
    assert_eq!(
        r["userptr"],
        serde_json::json!({
            "camera": null, "tried": false, "taken": null,
            "detail": "not tried: it needs a V4L2 camera (selftest --camera /dev/videoN)",
        })
    );

    // Every kernel of the tuning, the launched ones marked, each program's cold build.
    let kernels = &r["kernels"];
    assert_eq!(kernels["tuning"], tuning);
    let programs = kernels["programs"].as_array().expect("programs");
    let sum: f64 = programs
        .iter()
        .map(|p| p["build_seconds"].as_f64().expect("build seconds"))
        .sum();
    assert!(sum > 0.0);
    assert!((kernels["build_seconds"].as_f64().unwrap() - sum).abs() < 1e-9);
    let all: Vec<&serde_json::Value> = programs
        .iter()
        .flat_map(|p| p["kernels"].as_array().expect("kernels"))
        .collect();
    let launched = |name: &str| {
        all.iter()
            .any(|k| k["name"] == name && k["launched"] == true)
    };
    // As every tuning's pipelines launch: Bayer's luma, one of the two region sums.
    assert!(launched("luma_bayer"));
    assert!(launched("region_sums_items") != launched("region_sums"));
    assert!(
        all.iter().any(|k| k["launched"] == false),
        "kernels of other tunings listed"
    );
    for k in &all {
        let wg = k["work_group_size"].as_u64().expect("work-group size");
        assert!(
            (1..=gpu.info.max_work_group_size as u64).contains(&wg),
            "{k}"
        );
        assert!(
            k["private_bytes"].is_u64() && k["local_bytes"].is_u64(),
            "{k}"
        );
    }

    // Every stage's device time at each size, the run count said.
    let times = &r["stage_times"];
    assert_eq!((&times["runs"], &times["warmup"]), (&5.into(), &2.into()));
    if profiling {
        let device = &times["device"];
        assert_eq!(device["tuning"], tuning);
        let sizes: Vec<(u64, u64)> = device["sizes"]
            .as_array()
            .expect("sizes")
            .iter()
            .map(|s| (s["width"].as_u64().unwrap(), s["height"].as_u64().unwrap()))
            .collect();
        assert_eq!(sizes, [(1280, 720), (1920, 1080), (3840, 2160)]);
        for s in device["sizes"].as_array().unwrap() {
            assert!(
                s["pipeline_device_ms"].as_f64().is_some_and(|ms| ms > 0.0),
                "{s}"
            );
            for stage in ["sobel", "histogram", "integral"] {
                assert!(
                    s["stages"][stage].as_f64().is_some_and(|ms| ms > 0.0),
                    "{stage}: {s}"
                );
            }
        }
    }
    if pocl {
        assert_eq!(
            times["pocl_cpu"],
            serde_json::json!({
                "not_timed": "the chosen device is POCL's CPU device: its times are the device's"
            })
        );
    }
}

/// `check-config` says, after the settings, the series each camera and the board will
/// export in either tier (a pattern camera: the detail tier counts a JPEG decode's stage
/// too); the whole output is a config `check-config` takes again, the same.
#[test]
fn check_config_prints_the_series_a_scrape_will_hold() {
    let dir = out_dir("cli-check-config-series");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("series.toml");
    std::fs::write(
        &path,
        "[metrics]\ntier = \"detail\"\n\
         [[camera]]\nname = \"front\"\n[camera.source]\nkind = \"pattern\"\n\
         [[camera.roi]]\nname = \"door\"\nx = 0\ny = 0\nw = 8\nh = 8\n\
         [[camera.roi]]\nname = \"gate\"\nx = 8\ny = 8\nw = 8\nh = 8\n\
         [[camera]]\nname = \"rear\"\n[camera.source]\nkind = \"pattern\"\n",
    )
    .unwrap();
    let o = edgesight(&["check-config", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    let (settings, series) = stdout.split_once("\n# Series").expect("the series");
    assert!(settings.contains("tier = \"detail\""), "{settings}");
    assert_eq!(
        series,
        " a scrape holds, default tier / detail tier ([metrics] tier = \"detail\"; \
         /metrics?collect[]=detail):\n\
         #   camera front: 63 / 257\n\
         #   camera rear: 51 / 245\n\
         #   board: 14 / 14, and in the detail tier one for each HTTP handler and status \
         answered\n"
    );
    let again = dir.join("again.toml");
    std::fs::write(&again, &stdout).unwrap();
    let o = edgesight(&["check-config", again.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), stdout);
}
