//! The checklist every pipeline stage must meet, enforced: for each of [`Stage::ALL`], its
//! kernel and launcher files, its plain-Rust reference, a selftest case that checks it on
//! the device, the live check (`verify_every`) that covers it, an OpenCV conformance case
//! where OpenCV defines the operation, and its `stage` label in the golden `/metrics`.
//!
//! A new stage fails to compile here until its duties are written down (the match in
//! [`duties`] is exhaustive), and fails at run time until each duty is met. Where a stage
//! is covered under another's name (the mask is checked with Otsu's threshold), or OpenCV
//! has no such operation, the table says so and why: the exception is then visible in
//! review, not silent. ARCHITECTURE.md, "Adding a stage", lists the same steps.

mod common;

use std::path::Path;

use edgesight::daemon::verify::CHECKED_STAGES;
use edgesight::pipeline::Stage;
use edgesight::selftest::{self, Findings, STAGES};

/// How the OpenCV conformance test covers a stage.
enum Conformance {
    /// `tests/conformance.py` compares these outputs (files or report keys) with OpenCV's.
    Compares(&'static [&'static str]),
    /// OpenCV defines no such operation: the reference is the only definition.
    NotInOpenCv(&'static str),
}

/// How the live check (`verify_every`) covers a stage.
enum LiveCheck {
    /// Its own entry of the verifier's checks, under this name.
    Own(&'static str),
    /// Checked through what it feeds, under that stage's name, for this reason.
    Through(&'static str, &'static str),
}

/// What a stage must have.
struct Duties {
    /// Its OpenCL source in `kernels/`, and the kernel functions it runs.
    kernel: (&'static str, &'static [&'static str]),
    /// Its launcher in `crates/core/src/pipeline/`: a file, or a folder for a stage of many passes.
    launcher: &'static str,
    /// The functions of `crates/core/src/reference*` that define what it computes.
    reference: &'static [&'static str],
    /// The name `edgesight selftest` checks it under.
    selftest: &'static str,
    live: LiveCheck,
    conformance: Conformance,
}

fn duties(stage: Stage) -> Duties {
    match stage {
        Stage::Luma => Duties {
            kernel: ("luma.cl", &["luma_grey"]),
            launcher: "luma.rs",
            reference: &["luma", "bayer_to_luma"],
            selftest: "luma",
            live: LiveCheck::Own("luma"),
            conformance: Conformance::Compares(&["luma.u8"]),
        },
        Stage::Sobel => Duties {
            kernel: ("sobel.cl", &["sobel3x3"]),
            launcher: "sobel.rs",
            reference: &["sobel", "sobel_magnitude", "magnitude", "edge_mask"],
            selftest: "sobel",
            live: LiveCheck::Own("sobel"),
            conformance: Conformance::Compares(&["sobel_dx.s16", "sobel_dy.s16"]),
        },
        Stage::Histogram => Duties {
            kernel: ("histogram.cl", &["histogram_count", "histogram_sum"]),
            launcher: "histogram.rs",
            reference: &["histogram"],
            selftest: "histogram",
            live: LiveCheck::Own("histogram"),
            conformance: Conformance::Compares(&["histogram"]),
        },
        Stage::Otsu => Duties {
            kernel: ("otsu.cl", &["otsu_threshold"]),
            launcher: "otsu.rs",
            reference: &["otsu_threshold"],
            selftest: "otsu",
            live: LiveCheck::Own("otsu"),
            conformance: Conformance::Compares(&["otsu_threshold"]),
        },
        Stage::Binarize => Duties {
            kernel: ("otsu.cl", &["binarize"]),
            launcher: "otsu.rs",
            reference: &["binarize"],
            // The mask is Otsu's threshold applied: checked with it.
            selftest: "otsu",
            live: LiveCheck::Through(
                "otsu",
                "the mask is compared with Otsu's threshold, as one result",
            ),
            conformance: Conformance::Compares(&["mask.u8"]),
        },
        Stage::Integral => Duties {
            kernel: ("integral.cl", &["integral_tiles"]),
            launcher: "integral",
            reference: &["integral", "integral_count"],
            selftest: "integral",
            live: LiveCheck::Through(
                "regions",
                "a live frame keeps no integral images: the region and health sums \
                 read from them are checked",
            ),
            conformance: Conformance::Compares(&["integral_sum.u32", "integral_sqsum.u64"]),
        },
        Stage::Regions => Duties {
            kernel: ("regions.cl", &["region_sums_items"]),
            launcher: "regions.rs",
            reference: &["region_sums"],
            selftest: "regions",
            live: LiveCheck::Own("regions"),
            conformance: Conformance::NotInOpenCv(
                "sums over a rectangle are integral-image arithmetic, no OpenCV function",
            ),
        },
        Stage::Health => Duties {
            // The luma histogram's kernel, run over the gradient magnitude.
            kernel: ("histogram.cl", &["histogram_count"]),
            launcher: "histogram.rs",
            reference: &["histogram", "magnitude"],
            selftest: "histogram",
            live: LiveCheck::Own("histogram"),
            conformance: Conformance::NotInOpenCv(
                "the histogram of edgesight's own magnitude (OpenCV's calcHist is the \
                 histogram stage's case)",
            ),
        },
    }
}

/// Everything the duties are checked against, read once.
#[derive(Clone)]
struct Project {
    kernels: Vec<(String, String)>,
    launchers: Vec<String>,
    reference: String,
    conformance: String,
    golden: String,
}

impl Project {
    fn read() -> Project {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let read = |p: &Path| {
            std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        };
        let names = |dir: &str| -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(root.join(dir))
                .unwrap_or_else(|e| panic!("{dir}: {e}"))
                .map(|e| e.expect("a directory entry").file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        let kernels = names("kernels")
            .into_iter()
            .filter(|n| n.ends_with(".cl"))
            .map(|n| {
                let text = read(&root.join("kernels").join(&n));
                (n, text)
            })
            .collect();
        let mut reference = read(&root.join("crates/core/src/reference.rs"));
        for n in names("crates/core/src/reference") {
            reference.push_str(&read(&root.join("crates/core/src/reference").join(n)));
        }
        Project {
            kernels,
            launchers: names("crates/core/src/pipeline"),
            reference,
            conformance: read(&root.join("tests/conformance.py")),
            golden: read(&root.join("tests/fixtures/metrics.detail.golden")),
        }
    }
}

/// What `stage` lacks of its duties, each said in a line.
fn lacks(stage: Stage, project: &Project, selftest: &Findings) -> Vec<String> {
    let d = duties(stage);
    let name = stage.name();
    let mut out = Vec::new();
    let (file, functions) = d.kernel;
    match project.kernels.iter().find(|(n, _)| n == file) {
        None => out.push(format!("{name}: no kernel source kernels/{file}")),
        Some((_, text)) => {
            for f in functions {
                if !text.contains(&format!("__kernel void {f}(")) {
                    out.push(format!("{name}: kernels/{file} has no kernel {f}"));
                }
            }
        }
    }
    if !project.launchers.iter().any(|n| n == d.launcher) {
        out.push(format!(
            "{name}: no launcher crates/core/src/pipeline/{}",
            d.launcher
        ));
    }
    for f in d.reference {
        // Otsu's host path runs OpenCV's exact threshold in production: the reference
        // names that one function rather than keep a second copy of it.
        let exported = project.reference.lines().any(|l| {
            l.starts_with("pub use ") && l.trim_end_matches(';').ends_with(&format!("::{f}"))
        });
        if !project.reference.contains(&format!("pub fn {f}(")) && !exported {
            out.push(format!("{name}: no reference function reference::{f}"));
        }
    }
    if !STAGES.contains(&d.selftest) {
        out.push(format!("{name}: selftest has no stage {}", d.selftest));
    } else if selftest
        .stages
        .get(d.selftest)
        .is_none_or(|s| s.checks == 0)
    {
        out.push(format!(
            "{name}: selftest checked nothing as {}",
            d.selftest
        ));
    }
    let live = match d.live {
        LiveCheck::Own(n) => n,
        LiveCheck::Through(n, why) => {
            assert!(!why.is_empty(), "{name}: say why it is checked through {n}");
            n
        }
    };
    if !CHECKED_STAGES.contains(&live) {
        out.push(format!("{name}: the live check covers nothing as {live}"));
    }
    match d.conformance {
        Conformance::Compares(outputs) => {
            for o in outputs {
                if !project.conformance.contains(&format!("\"{o}\"")) {
                    out.push(format!("{name}: tests/conformance.py does not compare {o}"));
                }
            }
        }
        Conformance::NotInOpenCv(why) => {
            assert!(!why.is_empty(), "{name}: say why OpenCV has no such case")
        }
    }
    if !project.golden.contains(&format!("stage=\"{name}\"")) {
        out.push(format!(
            "{name}: no stage=\"{name}\" label in the golden /metrics"
        ));
    }
    out
}

/// One small case through selftest with the device's own tuning: enough for every stage
/// to be checked at least once.
fn selftest_findings() -> Findings {
    let gpu = common::gpu();
    let cases = selftest::cases();
    let tuning = edgesight::pipeline::Tuning::FOR_CPU;
    selftest::run(&gpu, &cases[..2], &[tuning], |_, _, _| {}).expect("selftest runs")
}

#[test]
fn every_stage_meets_its_checklist() {
    let project = Project::read();
    let findings = selftest_findings();
    assert!(findings.passed(), "{findings:?}");
    let missing: Vec<String> = Stage::ALL
        .iter()
        .flat_map(|&s| lacks(s, &project, &findings))
        .collect();
    assert!(
        missing.is_empty(),
        "stages short of their checklist:\n  {}",
        missing.join("\n  ")
    );
}

/// The checklist is not a formality: a stage whose reference, golden label, conformance
/// case or selftest checks go missing is named with what it lacks.
#[test]
fn the_checklist_names_what_a_stage_lacks() {
    let project = Project::read();
    let findings = selftest_findings();
    let mut without = project.clone();
    without.reference = project.reference.replace("pub fn binarize(", "fn gone(");
    assert_eq!(
        lacks(Stage::Binarize, &without, &findings),
        ["binarize: no reference function reference::binarize"]
    );

    let mut without = project.clone();
    without.golden = project
        .golden
        .replace("stage=\"health\"", "stage=\"other\"");
    assert_eq!(
        lacks(Stage::Health, &without, &findings),
        ["health: no stage=\"health\" label in the golden /metrics"]
    );

    let mut without = project.clone();
    without.conformance = project.conformance.replace("\"mask.u8\"", "\"m.u8\"");
    assert_eq!(
        lacks(Stage::Binarize, &without, &findings),
        ["binarize: tests/conformance.py does not compare mask.u8"]
    );

    let mut without = project.clone();
    without.kernels.retain(|(n, _)| n != "regions.cl");
    without.launchers.retain(|n| n != "integral");
    assert_eq!(
        lacks(Stage::Regions, &without, &findings),
        ["regions: no kernel source kernels/regions.cl"]
    );
    assert_eq!(
        lacks(Stage::Integral, &without, &findings),
        ["integral: no launcher crates/core/src/pipeline/integral"]
    );

    let mut unchecked = findings.clone();
    unchecked.stages.remove("integral");
    assert_eq!(
        lacks(Stage::Integral, &project, &unchecked),
        ["integral: selftest checked nothing as integral"]
    );
}
