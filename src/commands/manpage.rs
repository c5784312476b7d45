//! `edgesight manpage`: edgesight(1) and a page per command, from clap's help plus the
//! sections clap cannot know.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::cli::Cli;

/// What edgesight(1) says before the list of commands; `--help` keeps its one-line about.
const MAN_DESCRIPTION: &str = "\
edgesight reads camera frames into host-mapped OpenCL buffers, runs a chain of OpenCL \
kernels on every frame (luma extraction, Sobel 3x3, a 256-bin histogram, Otsu \
segmentation, integral images for region features) and reports the results and each \
stage's device time. It needs OpenCL 1.2 and no double precision on the device.

edgesight run is the daemon: one capture thread per camera (V4L2 cameras, recordings or \
the built-in test pattern), Prometheus metrics on /metrics, /healthz and a small HTTP API. \
The other commands run the pipeline on single images (process), on frames from a camera \
(capture), measure it (bench), list devices (devices) and check the daemon's config \
(check-config). Each command has its own page, named below.";

/// Writes edgesight(1) to stdout, or it and edgesight-COMMAND(1) for each visible command
/// into `dir`. The sections clap cannot know (exit status, environment, signals, files)
/// are added here, so the pages need no hand-kept roff beside the code.
pub(crate) fn manpage(dir: Option<&Path>, date: Option<&str>) -> Result<()> {
    use clap_mangen::roff::{bold, italic, roman, Roff};
    use clap_mangen::Man;

    fn item(roff: &mut Roff, term: &str, text: &str) {
        roff.control("TP", []);
        roff.text([bold(term)]);
        roff.text([roman(text)]);
    }
    // Every piece clap_mangen and roff render starts with the same two-line preamble
    // (apostrophe handling); a page needs it once.
    let preamble = Roff::new().render();
    let mut page = preamble.clone();
    let mut add = |render: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>| -> Result<()> {
        let mut buf = Vec::new();
        render(&mut buf)?;
        let text = String::from_utf8(buf)?;
        page.push_str(text.strip_prefix(&preamble).unwrap_or(&text));
        Ok(())
    };
    // .TH takes its arguments by position: a missing date must still be there, as "".
    let date = date.unwrap_or("\"\"");
    let source = format!("edgesight {}", env!("CARGO_PKG_VERSION"));
    let man = |cmd: clap::Command| {
        let title = cmd
            .get_display_name()
            .unwrap_or(cmd.get_name())
            .to_uppercase();
        Man::new(cmd)
            .title(title)
            .date(date)
            .source(&source)
            .manual("User Commands")
    };

    let mut cmd = Cli::command()
        .long_about(MAN_DESCRIPTION)
        .subcommand_help_heading("COMMANDS")
        .subcommand_value_name("COMMAND")
        .disable_help_subcommand(true);
    cmd.build();
    let main = man(cmd.clone());
    add(&|w| main.render_title(w))?;
    add(&|w| main.render_name_section(w))?;
    add(&|w| main.render_synopsis_section(w))?;
    add(&|w| main.render_description_section(w))?;
    add(&|w| main.render_options_section(w))?;
    add(&|w| main.render_subcommands_section(w))?;
    let mut extra = Roff::default();
    extra.control("SH", ["EXIT STATUS"]);
    item(&mut extra, "0", "Success.");
    item(
        &mut extra,
        "2",
        "Bad input: a missing or unreadable file, an unknown format, a size that does not \
         match the bytes, a ROI outside the frame, no such OpenCL device, a config file \
         that fails its checks. One line on standard error names it.",
    );
    item(&mut extra, "1", "Any other failure (an OpenCL error, say).");
    extra.control("SH", ["ENVIRONMENT"]);
    item(
        &mut extra,
        "OPENCL_DYLIB_PATH",
        "OpenCL libraries to load instead of libOpenCL.so.1 (the ICD loader), separated by \
         ';' and tried in order, e.g. /usr/lib/aarch64-linux-gnu/libmali.so to use a Mali \
         driver directly.",
    );
    item(
        &mut extra,
        "POCL_CACHE_DIR",
        "A writable directory for POCL's kernel cache. The systemd unit sets it to \
         /var/cache/edgesight.",
    );
    item(
        &mut extra,
        "RUST_LOG",
        "error, warn, info, debug or trace: the daemon's log level, overriding the config's \
         [log] level.",
    );
    extra.control("SH", ["SIGNALS"]);
    extra.text([roman("For "), bold("edgesight run"), roman(":")]);
    item(
        &mut extra,
        "SIGTERM, SIGINT",
        "Stop cleanly, within about 0.1 s, with exit status 0.",
    );
    item(
        &mut extra,
        "SIGHUP",
        "Read the config again and give each camera its new ROIs and pipeline options \
         without reopening it (systemctl reload edgesight). A config that fails the checks \
         is refused whole and the running one kept.",
    );
    extra.control("SH", ["FILES"]);
    item(
        &mut extra,
        "/etc/edgesight/edgesight.toml",
        "The daemon's config as the systemd unit runs it; it documents every key. Check an \
         edited copy with edgesight check-config FILE.",
    );
    item(
        &mut extra,
        "/lib/systemd/system/edgesight.service",
        "The hardened systemd unit (Type=notify, watchdog, DynamicUser).",
    );
    item(
        &mut extra,
        "/var/cache/edgesight",
        "The service's OpenCL kernel cache.",
    );
    item(
        &mut extra,
        "/usr/share/doc/edgesight/examples/",
        "Prometheus scrape config, alert rules and their tests, Grafana dashboard.",
    );
    extra.control("SH", ["SEE ALSO"]);
    extra.text([
        bold("systemctl"),
        roman("(1), "),
        bold("clinfo"),
        roman("(1), "),
        italic("/usr/share/doc/edgesight/README.md.gz"),
        roman(", the guide in "),
        italic("/usr/share/doc/edgesight/guide/"),
    ]);
    add(&|w| extra.to_writer(w))?;
    add(&|w| main.render_version_section(w))?;

    let Some(dir) = dir else {
        std::io::stdout().write_all(page.as_bytes())?;
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write =
        |name: String, text: &str| edgesight::files::write_file(&dir.join(name), text.as_bytes());
    write(main.get_filename(), &page)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let sub = man(sub.clone());
        let mut page = Vec::new();
        sub.render(&mut page)?;
        let mut see_also = Roff::default();
        see_also.control("SH", ["SEE ALSO"]);
        see_also.text([bold("edgesight"), roman("(1)")]);
        page.extend(
            see_also
                .render()
                .strip_prefix(&preamble)
                .unwrap_or_default()
                .bytes(),
        );
        write(sub.get_filename(), &String::from_utf8(page)?)?;
    }
    Ok(())
}
