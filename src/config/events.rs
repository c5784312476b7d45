//! The `[events]` table's checks: the directory each event's picture and JSON go to, and
//! its limits.

use std::time::Duration;

use super::schema::EventsConfig;
use super::{ConfigError, Doc};
use crate::events::{EventsSettings, DEFAULT_MAX_AGE_DAYS, DEFAULT_MAX_FILES};

/// The most of either limit: beyond them a directory is an archive, not a record.
const MOST_FILES: i64 = 1_000_000;
const MOST_DAYS: i64 = 3650;

pub(super) fn check_events(
    doc: &Doc,
    e: &EventsConfig,
) -> Result<Option<EventsSettings>, ConfigError> {
    let Some(dir) = &e.dir else {
        if let Some(key) = e.max_files.as_ref().or(e.max_age_days.as_ref()) {
            return Err(doc.at(
                key.span(),
                "events.dir",
                "the limits of [events] need dir = \"/var/lib/edgesight/events\"",
            ));
        }
        return Ok(None);
    };
    if !dir.get_ref().is_absolute() {
        return Err(doc.at(dir.span(), "events.dir", "not an absolute path"));
    }
    let limit = |value: &Option<toml::Spanned<i64>>, key: &str, most: i64, default: i64| {
        let Some(v) = value else { return Ok(default) };
        let n = *v.get_ref();
        if (1..=most).contains(&n) {
            Ok(n)
        } else {
            Err(doc.at(v.span(), key, format!("{n} is not from 1 to {most}")))
        }
    };
    let max_files = limit(
        &e.max_files,
        "events.max_files",
        MOST_FILES,
        DEFAULT_MAX_FILES as i64,
    )?;
    let days = limit(
        &e.max_age_days,
        "events.max_age_days",
        MOST_DAYS,
        DEFAULT_MAX_AGE_DAYS as i64,
    )?;
    Ok(Some(EventsSettings {
        dir: dir.get_ref().clone(),
        max_files: max_files as usize,
        max_age: Duration::from_secs(days as u64 * 86_400),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::check_text;

    const MQTT: &str = "[mqtt]\nurl = \"mqtt://h\"\nboard = \"b\"\n";

    fn load(text: &str) -> Result<crate::config::Settings, String> {
        check_text(std::path::Path::new("e.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn limits_default_and_bad_values_name_their_line_and_key() {
        let s = load(&format!("{MQTT}[events]\ndir = \"/var/e\"\n")).unwrap();
        assert_eq!(
            s.events,
            Some(EventsSettings {
                dir: "/var/e".into(),
                max_files: DEFAULT_MAX_FILES,
                max_age: Duration::from_secs(DEFAULT_MAX_AGE_DAYS * 86_400),
            })
        );
        assert_eq!(load(MQTT).unwrap().events, None);
        let s = load(&format!(
            "{MQTT}[events]\ndir = \"/var/e\"\nmax_files = 2\nmax_age_days = 3\n"
        ))
        .unwrap();
        assert_eq!(
            load(&s.to_toml()).unwrap(),
            s,
            "printed, read back the same"
        );
        let refused = [
            (
                "max_files = 0\n",
                "e.toml:6:13: events.max_files: 0 is not from 1 to 1000000",
            ),
            (
                "max_age_days = 4000\n",
                "e.toml:6:16: events.max_age_days: 4000 is not from 1 to 3650",
            ),
        ];
        for (line, said) in refused {
            let e = load(&format!("{MQTT}[events]\ndir = \"/var/e\"\n{line}")).unwrap_err();
            assert!(e.contains(said), "{e}");
        }
        let e = load(&format!("{MQTT}[events]\ndir = \"e\"\n")).unwrap_err();
        assert!(
            e.contains("e.toml:5:7: events.dir: not an absolute path"),
            "{e}"
        );
        // Without a broker: the events are kept all the same.
        let s = load("[events]\ndir = \"/var/e\"\nmax_files = 7\n").unwrap();
        assert_eq!((s.mqtt, s.events.map(|e| e.max_files)), (None, Some(7)));
        let e = load(&format!("{MQTT}[events]\nmax_files = 3\n")).unwrap_err();
        assert!(
            e.contains("e.toml:5:13: events.dir: the limits of [events] need dir"),
            "{e}"
        );
    }
}
