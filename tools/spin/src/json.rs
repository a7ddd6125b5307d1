// SPDX-License-Identifier: GPL-2.0

//! A minimal JSON writer (the tool has no dependencies beyond the host crate).

use std::fmt::Write;

/// A JSON value.
pub enum Json {
    Null,
    Bool(bool),
    Num(i64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(&'static str, Json)>),
}

impl Json {
    /// Serialises the value, pretty-printed with two-space indentation.
    pub fn render(&self) -> String {
        let mut s = String::new();
        self.write(&mut s, 0);
        s.push('\n');
        s
    }

    fn write(&self, s: &mut String, depth: usize) {
        let pad = |s: &mut String, d: usize| s.extend(std::iter::repeat_n("  ", d));
        match self {
            Json::Null => s.push_str("null"),
            Json::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
            Json::Num(n) => {
                let _ = write!(s, "{n}");
            }
            Json::Str(v) => quote(s, v),
            Json::Arr(v) if v.is_empty() => s.push_str("[]"),
            Json::Arr(v) => {
                s.push_str("[\n");
                for (i, e) in v.iter().enumerate() {
                    pad(s, depth + 1);
                    e.write(s, depth + 1);
                    s.push_str(if i + 1 < v.len() { ",\n" } else { "\n" });
                }
                pad(s, depth);
                s.push(']');
            }
            Json::Obj(v) if v.is_empty() => s.push_str("{}"),
            Json::Obj(v) => {
                s.push_str("{\n");
                for (i, (k, e)) in v.iter().enumerate() {
                    pad(s, depth + 1);
                    quote(s, k);
                    s.push_str(": ");
                    e.write(s, depth + 1);
                    s.push_str(if i + 1 < v.len() { ",\n" } else { "\n" });
                }
                pad(s, depth);
                s.push('}');
            }
        }
    }
}

fn quote(s: &mut String, v: &str) {
    s.push('"');
    for c in v.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
}

#[cfg(test)]
mod tests {
    use super::Json;

    #[test]
    fn renders_nested_values_and_escapes() {
        let v = Json::Obj(vec![
            (
                "a",
                Json::Arr(vec![Json::Num(-1), Json::Bool(true), Json::Null]),
            ),
            ("b", Json::Str("x\"y\\\n".into())),
            ("c", Json::Obj(vec![])),
        ]);
        assert_eq!(
            v.render(),
            "{\n  \"a\": [\n    -1,\n    true,\n    null\n  ],\n  \"b\": \"x\\\"y\\\\\\n\",\n  \"c\": {}\n}\n"
        );
    }
}
