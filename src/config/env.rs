//! `${VAR}` and `${VAR:-default}` in a config's double-quoted strings, taken from the
//! environment before the file is parsed, so that one file serves every board and a unit
//! drop-in or a DaemonSet sets what differs (`SITE`, `BOARD`).
//!
//! Only basic ("double-quoted") strings are expanded: a literal ('single-quoted') string
//! stays as written, as `'$HOME'` does in a shell, and comments and bare values are never
//! touched. `$$` is one dollar; a `$` before anything else stays as it is. The value is
//! written into the string escaped, so that the string holds exactly the variable's value
//! (quotes, backslashes and newlines included). The text is expanded once when the file
//! is read: a reload reads the file again, but against the daemon's environment, which
//! only a restart changes.

use std::ops::Range;

/// Where one substitution went: `expanded` in the expanded text stands for `written` in
/// the file, so that errors found in the expanded text are placed in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Edit {
    expanded: Range<usize>,
    written: Range<usize>,
}

/// A config's text with its variables expanded, and the map back to the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Expanded {
    pub text: String,
    edits: Vec<Edit>,
}

impl Expanded {
    /// Text that has nothing to expand.
    #[cfg(test)]
    pub(crate) fn verbatim(text: &str) -> Expanded {
        Expanded {
            text: text.to_string(),
            edits: Vec::new(),
        }
    }

    /// The offset in the file of `offset` in the expanded text: an offset inside a
    /// substituted value is placed at its `${`.
    pub(crate) fn written_offset(&self, offset: usize) -> usize {
        match self.edits.iter().rev().find(|e| e.expanded.start <= offset) {
            None => offset,
            Some(e) if offset < e.expanded.end => e.written.start,
            Some(e) => e.written.end + (offset - e.expanded.end),
        }
    }
}

/// Why a variable could not be expanded, at byte `offset` of the file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Unexpanded {
    pub offset: usize,
    pub message: String,
}

/// `text` with every `${VAR}`, `${VAR:-default}` and `$$` of its basic strings expanded,
/// variables looked up with `lookup`. As in a shell, the default stands for an unset and
/// for an empty variable.
pub(crate) fn expand(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Expanded, Unexpanded> {
    let mut out = Expanded::default();
    let mut copied = 0;
    for string in basic_strings(text) {
        let mut at = string.start;
        while let Some(found) = text[at..string.end].find('$') {
            let start = at + found;
            let rest = &text[start..string.end];
            let (written_len, value) = if rest.starts_with("$$") {
                (2, "$".to_string())
            } else if rest.starts_with("${") {
                let Some(close) = rest.find('}') else {
                    return Err(Unexpanded {
                        offset: start,
                        message: "'${' without its '}' in the same string".into(),
                    });
                };
                let inner = &rest[2..close];
                let (name, default) = match inner.split_once(":-") {
                    Some((name, default)) => (name, Some(default)),
                    None => (inner, None),
                };
                check_name(name).map_err(|e| Unexpanded {
                    offset: start,
                    message: e.to_string(),
                })?;
                let value = match (lookup(name).filter(|v| !v.is_empty()), default) {
                    (Some(value), _) => value,
                    (None, Some(default)) => default.to_string(),
                    (None, None) => {
                        return Err(Unexpanded {
                            offset: start,
                            message: format!(
                                "${{{name}}}: {name} is not set in the environment (give it, \
                                 or a default: ${{{name}:-...}})"
                            ),
                        })
                    }
                };
                (close + 1, escape(&value))
            } else {
                at = start + 1;
                continue;
            };
            out.text.push_str(&text[copied..start]);
            let expanded_start = out.text.len();
            out.text.push_str(&value);
            out.edits.push(Edit {
                expanded: expanded_start..out.text.len(),
                written: start..start + written_len,
            });
            copied = start + written_len;
            at = copied;
        }
    }
    out.text.push_str(&text[copied..]);
    Ok(out)
}

/// `text` (TOML, such as the printed settings) with each `$` of its basic strings
/// doubled, so that [`expand`] reads it back as it is.
pub(crate) fn escape_dollars(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for string in basic_strings(text) {
        for (i, _) in text[string.clone()].match_indices('$') {
            let at = string.start + i;
            out.push_str(&text[copied..=at]);
            out.push('$');
            copied = at + 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// A `${NAME}` whose name a shell would not take.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a variable name (letters, digits and '_', not starting with a digit)")]
struct BadVariableName(String);

/// Names as a shell takes them: a letter or '_', then letters, digits and '_'.
fn check_name(name: &str) -> Result<(), BadVariableName> {
    let mut chars = name.chars();
    let good = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if good {
        Ok(())
    } else {
        Err(BadVariableName(name.to_string()))
    }
}

/// `value` as it is written inside a basic string.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// The byte ranges between the quotes of each basic string (`"..."` and `"""..."""`) of
/// `text`, skipping literal strings and comments. Text that is not TOML still yields
/// ranges: the parser refuses it afterwards.
fn basic_strings(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut strings = Vec::new();
    let mut i = 0;
    let starts = |i: usize, with: &str| bytes[i..].starts_with(with.as_bytes());
    while i < bytes.len() {
        match bytes[i] {
            b'#' => i = text[i..].find('\n').map_or(bytes.len(), |n| i + n),
            b'"' => {
                let (open, multiline) = if starts(i, "\"\"\"") {
                    (3, true)
                } else {
                    (1, false)
                };
                let start = i + open;
                let mut j = start;
                let end = loop {
                    match bytes.get(j) {
                        None => break bytes.len(),
                        Some(b'\\') => j += 2,
                        Some(b'\n') if !multiline => break j,
                        Some(b'"') if !multiline => break j,
                        Some(b'"') if starts(j, "\"\"\"") => {
                            // A closing `"""` may follow up to two quotes of the string.
                            let mut k = j;
                            while bytes.get(k + 3) == Some(&b'"') && k < j + 2 {
                                k += 1;
                            }
                            break k;
                        }
                        Some(_) => j += 1,
                    }
                };
                let end = end.min(bytes.len());
                strings.push(start..end);
                i = (end + if multiline { 3 } else { 1 }).min(bytes.len());
            }
            b'\'' => {
                let close = if starts(i, "'''") { "'''" } else { "'" };
                let start = i + close.len();
                i = text[start..]
                    .find(close)
                    .map_or(bytes.len(), |n| start + n + close.len());
            }
            _ => i += 1,
        }
    }
    strings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "SITE" => Some("lyon".into()),
            "EMPTY" => Some(String::new()),
            "ODD" => Some("a\"b\\c\nd".into()),
            _ => None,
        }
    }

    fn expanded(text: &str) -> Result<String, (usize, String)> {
        expand(text, env)
            .map(|e| e.text)
            .map_err(|e| (e.offset, e.message))
    }

    #[test]
    fn variables_defaults_and_dollars_in_basic_strings() {
        assert_eq!(
            expanded("a = \"${SITE}-${BOARD:-b1}\"\n").unwrap(),
            "a = \"lyon-b1\"\n"
        );
        assert_eq!(expanded("a = \"${EMPTY:-x}\"").unwrap(), "a = \"x\"");
        assert_eq!(expanded("a = \"${SITE:-}\"").unwrap(), "a = \"lyon\"");
        assert_eq!(expanded("a = \"${NONE:-}\"").unwrap(), "a = \"\"");
        assert_eq!(
            expanded("a = \"$$${SITE} $x $$$\"").unwrap(),
            "a = \"$lyon $x $$\""
        );
        assert_eq!(
            expanded("a = \"\"\"\n${SITE}\"\"\"").unwrap(),
            "a = \"\"\"\nlyon\"\"\""
        );
    }

    #[test]
    fn values_are_escaped_into_the_string() {
        let text = expanded("a = \"${ODD}\"").unwrap();
        assert_eq!(text, r#"a = "a\"b\\c\nd""#);
        let read: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(read["a"].as_str(), Some("a\"b\\c\nd"));
    }

    #[test]
    fn literal_strings_comments_and_escaped_quotes_stay() {
        for text in [
            "a = '${NONE}'\n",
            "a = '''${NONE}'''\n",
            "# ${NONE}\n",
            "a = 1 # \"${NONE}\"\n",
        ] {
            assert_eq!(expanded(text).unwrap(), text);
        }
        assert_eq!(
            expanded(r#"a = "\"${SITE}\"" # "${NONE}""#).unwrap(),
            r#"a = "\"lyon\"" # "${NONE}""#
        );
    }

    #[test]
    fn refusals_are_placed_at_their_dollar() {
        assert_eq!(
            expanded("a = \"x\"\nb = \"-${BOARD}\"\n"),
            Err((
                14,
                "${BOARD}: BOARD is not set in the environment (give it, or a default: \
                 ${BOARD:-...})"
                    .into()
            ))
        );
        assert_eq!(
            expanded("b = \"${BOARD\"\n"),
            Err((5, "'${' without its '}' in the same string".into()))
        );
        assert_eq!(
            expanded("b = \"${1X}\""),
            Err((
                5,
                "'1X' is not a variable name (letters, digits and '_', not starting with a \
                 digit)"
                    .into()
            ))
        );
    }

    #[test]
    fn offsets_map_back_to_the_file() {
        let e = expand("a = \"${SITE}\" # x\nb = \"$$\"", env).unwrap();
        assert_eq!(e.text, "a = \"lyon\" # x\nb = \"$\"");
        assert_eq!(e.written_offset(2), 2);
        assert_eq!(e.written_offset(6), 5);
        assert_eq!(e.written_offset(9), 12);
        assert_eq!(e.written_offset(11), 14);
        assert_eq!(e.written_offset(20), 23);
        assert_eq!(e.written_offset(21), 25);
    }

    #[test]
    fn escaped_dollars_read_back() {
        let text = "a = \"${X} $$ $\" # $\nb = '$'\n";
        let escaped = escape_dollars(text);
        assert_eq!(escaped, "a = \"$${X} $$$$ $$\" # $\nb = '$'\n");
        assert_eq!(expanded(&escaped).unwrap(), text);
    }
}
