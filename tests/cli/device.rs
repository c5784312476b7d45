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
    let o = edgesight(&["selftest"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
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
    let o = crate::edgesight(&[
        "kernels",
        "--tuning",
        "mali",
        "--json",
        &json.display().to_string(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
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
