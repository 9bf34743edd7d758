//! Sizes as people write them in settings: `2G`, `512M`, `64K` or a number of bytes.

/// Reads a size: a number of bytes, or one with a binary suffix `K`, `M`, `G` (`2G`, `512M`).
///
/// ```
/// use attention_lab_io::size::parse_size;
/// assert_eq!(parse_size("2G").unwrap(), 2 << 30);
/// assert_eq!(parse_size("0").unwrap(), 0);
/// assert!(parse_size("2 gigs").is_err());
/// ```
///
/// # Errors
/// Not a number with one of those suffixes, or more than 2^64 bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (digits, shift) = match text.char_indices().last() {
        Some((i, 'K' | 'k')) => (&text[..i], 10),
        Some((i, 'M' | 'm')) => (&text[..i], 20),
        Some((i, 'G' | 'g')) => (&text[..i], 30),
        _ => (text, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a size such as 2G, 512M or 1073741824"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("`{text}` is too large"))
}
