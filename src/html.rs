//! HTML text for notebook outputs and figures: the one escaping function every writer of HTML
//! or SVG text in the workspace uses.

/// Escapes `&`, `<` and `>` so `text` shows as itself inside an HTML or SVG element.
///
/// Quotes are left alone: the result is for element content, not for attribute values.
///
/// ```
/// use attention_lab::html;
/// // html.escape("a < b & c", quote=False) in Python
/// assert_eq!(html::escape("a < b & c > d"), "a &lt; b &amp; c &gt; d");
/// assert_eq!(html::escape("\"x\""), "\"x\"");
/// ```
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escaping_then_unescaping_gives_the_text_back() {
        for text in ["", "plain", "&amp;", "<<>>&", "é < ü", "a&b<c>d\"e'f"] {
            let escaped = escape(text);
            assert!(!escaped.contains('<') && !escaped.contains('>'));
            let back = escaped
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&");
            assert_eq!(back, text);
        }
    }
}
