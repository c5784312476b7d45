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
            "{}:3:10: opencl.tuning: unknown tuning 'turbo' (expected auto, gpu, cpu or mali)",
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
        stdout.contains("with the gpu, cpu, mali tunings"),
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
