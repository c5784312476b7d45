//! A strict logfmt parser, for the tests that read the daemon's logfmt lines.

/// A strict logfmt parser (go-logfmt's grammar): `key=value` pairs one space apart, a
/// key of visible characters but `=` and `"`, a value bare (no space, `=`, `"` or
/// control character) or quoted with `\"`, `\\`, `\n`, `\r`, `\t` and `\uXXXX`
/// escapes, no key twice; anything else is an error.
pub fn parse_logfmt(line: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        let end = rest.find('=').ok_or(format!("no '=' in {rest:?}"))?;
        let key = &rest[..end];
        if key.is_empty() || key.chars().any(|c| c <= ' ' || c == '"' || c.is_control()) {
            return Err(format!("bad key {key:?}"));
        }
        rest = &rest[end + 1..];
        let value = if let Some(quoted) = rest.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let close = loop {
                match chars.next().ok_or("unclosed quote")? {
                    (i, '"') => break i,
                    (_, '\\') => match chars.next().ok_or("lone backslash")?.1 {
                        '"' => value.push('"'),
                        '\\' => value.push('\\'),
                        'n' => value.push('\n'),
                        'r' => value.push('\r'),
                        't' => value.push('\t'),
                        'u' => {
                            let hex: String =
                                (0..4).filter_map(|_| chars.next().map(|c| c.1)).collect();
                            let code = u32::from_str_radix(&hex, 16).map_err(|_| "bad \\u")?;
                            value.push(char::from_u32(code).ok_or("bad \\u")?);
                        }
                        c => return Err(format!("unknown escape \\{c}")),
                    },
                    (_, c) if c.is_control() => return Err(format!("raw control {c:?}")),
                    (_, c) => value.push(c),
                }
            };
            rest = &quoted[close + 1..];
            value
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            let value = &rest[..end];
            if value
                .chars()
                .any(|c| c < ' ' || c == '=' || c == '"' || c.is_control())
            {
                return Err(format!("bad bare value {value:?}"));
            }
            rest = &rest[end..];
            value.to_string()
        };
        if pairs.iter().any(|(k, _)| k == key) {
            return Err(format!("key {key} twice"));
        }
        pairs.push((key.to_string(), value));
        if let Some(after) = rest.strip_prefix(' ') {
            if after.is_empty() || after.starts_with(' ') {
                return Err("stray space".into());
            }
            rest = after;
        } else if !rest.is_empty() {
            return Err(format!("no space before {rest:?}"));
        }
    }
    Ok(pairs)
}
