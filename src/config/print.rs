//! [`Settings`] written back as TOML in the file's schema (what `check-config` prints).

use super::schema::Settings;
use crate::capture::SourceSpec;
use crate::pipeline::Magnitude;

impl Settings {
    /// The effective settings as TOML, in the file's schema (what `check-config` prints).
    /// Password hashes are shown as "(bcrypt hash)".
    pub fn to_toml(&self) -> String {
        self.print(false)
    }

    /// [`Settings::to_toml`] with the password hashes: text that reads back as the same
    /// settings.
    pub fn to_toml_with_hashes(&self) -> String {
        self.print(true)
    }

    fn print(&self, hashes: bool) -> String {
        let mut out = String::new();
        let q = |s: &str| toml::Value::String(s.to_string()).to_string();
        out.push_str(&format!("[log]\nlevel = {}\n\n", q(&self.log_level)));
        let w = &self.web;
        out.push_str(&format!(
            "[web]\nlisten_address = {}\nsnapshots = {}\nstale_after_seconds = {}\nmax_connections = {}\n",
            q(&w.listen.to_string()),
            w.snapshots,
            w.stale_after.as_secs_f64(),
            w.max_connections
        ));
        if let Some((cert, key)) = &w.tls {
            out.push_str(&format!(
                "tls_cert_file = {}\ntls_key_file = {}\n",
                q(&cert.display().to_string()),
                q(&key.display().to_string())
            ));
        }
        if !w.users.is_empty() {
            out.push_str("[web.basic_auth_users]\n");
            for (user, hash) in &w.users {
                let hash = if hashes { q(hash) } else { q("(bcrypt hash)") };
                out.push_str(&format!("{} = {hash}\n", q(user)));
            }
        }
        out.push_str(&format!(
            "\n[metrics]\nhistogram_bins = {}\n",
            self.histogram_bins
        ));
        for c in &self.cameras {
            out.push_str(&format!(
                "\n[[camera]]\nname = {}\nopencl_device = {}\n",
                q(&c.name),
                q(&c.device.to_string())
            ));
            out.push_str("[camera.source]\n");
            match &c.source {
                SourceSpec::Pattern { size, format, fps } => out.push_str(&format!(
                    "kind = \"pattern\"\nsize = \"{size}\"\nformat = \"{format}\"\nfps = {fps:?}\n"
                )),
                SourceSpec::V4l2 {
                    device,
                    format,
                    size,
                    fps,
                    io,
                } => {
                    out.push_str(&format!(
                        "kind = \"v4l2\"\ndevice = {}\n",
                        q(&device.display().to_string())
                    ));
                    if let Some(f) = format {
                        out.push_str(&format!("format = \"{f}\"\n"));
                    }
                    if let Some(s) = size {
                        out.push_str(&format!("size = \"{s}\"\n"));
                    }
                    if let Some(f) = fps {
                        out.push_str(&format!("fps = {f:?}\n"));
                    }
                    if let Some(io) = io {
                        out.push_str(&format!("io = \"{io}\"\n"));
                    }
                }
                SourceSpec::Replay { path, raw, fps } => {
                    out.push_str(&format!(
                        "kind = \"replay\"\npath = {}\n",
                        q(&path.display().to_string())
                    ));
                    if let Some((size, format)) = raw {
                        out.push_str(&format!("size = \"{size}\"\nformat = \"{format}\"\n"));
                    }
                    out.push_str(&format!("fps = {fps:?}\n"));
                }
            }
            let o = &c.options;
            out.push_str(&format!(
                "[camera.pipeline]\nborder = \"{}\"\nmagnitude = \"{}\"\nedge_threshold = {}\n",
                o.border,
                match o.magnitude {
                    Magnitude::L1 => "l1",
                    Magnitude::L2 => "l2",
                },
                o.edge_threshold
            ));
            for r in &c.regions {
                out.push_str(&format!(
                    "[[camera.roi]]\nname = {}\nx = {}\ny = {}\nw = {}\nh = {}\n",
                    q(&r.name),
                    r.x,
                    r.y,
                    r.width,
                    r.height
                ));
            }
        }
        out
    }
}
