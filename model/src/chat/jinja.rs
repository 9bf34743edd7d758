//! The chat template's Jinja, rendered by minijinja as jinja2 renders it: Python's dict order,
//! string methods, numbers, `tojson` and `strftime_now`.

use std::sync::Arc;

use super::TEMPLATE_NAME;
use minijinja::value::{from_args, Enumerator, Kwargs, Object, ObjectRepr, Value, ValueKind};
use minijinja::{AutoEscape, Environment, Error as JinjaError, ErrorKind};

/// A minijinja map that keeps its keys in order, as a Python dict does (minijinja's own maps
/// are sorted), for `message.items()` and `{% for key in message %}`.
#[derive(Debug)]
pub(super) struct OrderedMap(Vec<(String, Value)>);

impl OrderedMap {
    pub(super) fn value(entries: Vec<(String, Value)>) -> Value {
        Value::from_object(OrderedMap(entries))
    }
}

impl Object for OrderedMap {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let key = key.as_str()?;
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(
            self.0
                .iter()
                .map(|(k, _)| Value::from(k.as_str()))
                .collect(),
        )
    }
}

/// A minijinja error as one line: its kind and detail, then its causes.
pub(super) fn jinja_problem(error: &JinjaError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The environment transformers renders chat templates in (jinja2's
/// `ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`), holding `source`.
pub(super) fn chat_environment(source: String) -> Result<Environment<'static>, JinjaError> {
    let mut env = Environment::new();
    let syntax = minijinja::syntax::SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .keep_trailing_newline(false)
        .build()?;
    env.set_syntax(syntax);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.add_function(
        "raise_exception",
        |message: String| -> Result<Value, JinjaError> {
            Err(JinjaError::new(ErrorKind::InvalidOperation, message))
        },
    );
    env.add_filter("tojson", tojson);
    env.add_function("strftime_now", |format: String| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        strftime(i64::try_from(now).unwrap_or(0), &format)
    });
    env.set_unknown_method_callback(|_state, value, method, args| {
        python_method(value, method, args)
    });
    env.add_template_owned(TEMPLATE_NAME, source)?;
    Ok(env)
}

/// Python's `time.strftime(format)` for a time in seconds since 1970, in UTC: `%Y %m %d %H %M
/// %S %y %j %b %B %a %A %p %I %e %%`, glibc's `%-d` (no zero) for the numbers; any other code
/// is written as it is.
fn strftime(seconds: i64, format: &str) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
    ];
    let days = seconds.div_euclid(86_400);
    let second_of_day = seconds.rem_euclid(86_400);
    let (hour, minute, second) = (
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60,
    );
    // The civil date of a day count, in the proleptic Gregorian calendar, with years
    // starting on 1 March so that the leap day comes last.
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_march_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let march_month = (5 * day_of_march_year + 2) / 153;
    let day = day_of_march_year - (153 * march_month + 2) / 5 + 1;
    let month = if march_month < 10 {
        march_month + 3
    } else {
        march_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let before_month = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334][month as usize - 1];
    let day_of_year = before_month + day + i64::from(leap && month > 2);
    let weekday = (days + 4).rem_euclid(7) as usize; // 1970-01-01 was a Thursday
    let hour12 = if hour % 12 == 0 { 12 } else { hour % 12 };

    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut code = chars.next();
        let unpadded = code == Some('-');
        if unpadded {
            code = chars.next();
        }
        let number = |value: i64, width: usize| {
            if unpadded {
                value.to_string()
            } else {
                format!("{value:0width$}")
            }
        };
        match code {
            Some('Y') => out.push_str(&year.to_string()),
            Some('y') => out.push_str(&number(year.rem_euclid(100), 2)),
            Some('m') => out.push_str(&number(month, 2)),
            Some('d') => out.push_str(&number(day, 2)),
            Some('e') => out.push_str(&format!("{day:2}")),
            Some('j') => out.push_str(&number(day_of_year, 3)),
            Some('H') => out.push_str(&number(hour, 2)),
            Some('I') => out.push_str(&number(hour12, 2)),
            Some('M') => out.push_str(&number(minute, 2)),
            Some('S') => out.push_str(&number(second, 2)),
            Some('p') => out.push_str(if hour < 12 { "AM" } else { "PM" }),
            Some('B') => out.push_str(MONTHS[month as usize - 1]),
            Some('b') => out.push_str(&MONTHS[month as usize - 1][..3]),
            Some('A') => out.push_str(DAYS[weekday]),
            Some('a') => out.push_str(&DAYS[weekday][..3]),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                if unpadded {
                    out.push('-');
                }
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Python's `json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=sort_keys)`,
/// transformers' `tojson`: `", "` and `": "` between items on one line, `","` and `": "`
/// with an indent.
fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, JinjaError> {
    let indent: Option<Value> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let separators: Option<Value> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => Some(match v.as_str() {
            Some(s) => s.to_owned(),
            None => " ".repeat(v.as_i64().unwrap_or(0).max(0) as usize),
        }),
    };
    let (item, key) = match separators {
        Some(v) if !v.is_none() => {
            let item = v.get_item_by_index(0)?;
            let key = v.get_item_by_index(1)?;
            (item.to_string(), key.to_string())
        }
        _ if indent.is_some() => (",".to_owned(), ": ".to_owned()),
        _ => (", ".to_owned(), ": ".to_owned()),
    };
    let style = JsonStyle {
        indent,
        item,
        key,
        sort_keys: sort_keys.unwrap_or(false),
        ensure_ascii: ensure_ascii.unwrap_or(false),
    };
    let mut out = String::new();
    style.write(value, 0, &mut out)?;
    Ok(Value::from(out))
}

struct JsonStyle {
    indent: Option<String>,
    item: String,
    key: String,
    sort_keys: bool,
    ensure_ascii: bool,
}

impl JsonStyle {
    fn write(&self, value: &Value, depth: usize, out: &mut String) -> Result<(), JinjaError> {
        match value.kind() {
            ValueKind::None => out.push_str("null"),
            ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
            ValueKind::Number => out.push_str(&python_number(value)),
            ValueKind::String => self.string(value.as_str().unwrap_or_default(), out),
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = value.try_iter()?.collect();
                self.container('[', ']', items.len(), depth, out, |i, out| {
                    self.write(&items[i], depth + 1, out)
                })?;
            }
            ValueKind::Map => {
                let mut entries = Vec::new();
                for key in value.try_iter()? {
                    let item = value.get_item(&key)?;
                    entries.push((json_key(&key)?, item));
                }
                if self.sort_keys {
                    entries.sort_by(|a, b| a.0.cmp(&b.0));
                }
                self.container('{', '}', entries.len(), depth, out, |i, out| {
                    self.string(&entries[i].0, out);
                    out.push_str(&self.key);
                    self.write(&entries[i].1, depth + 1, out)
                })?;
            }
            kind => {
                return Err(JinjaError::new(
                    ErrorKind::InvalidOperation,
                    format!("Object of type {kind} is not JSON serializable"),
                ))
            }
        }
        Ok(())
    }

    fn container(
        &self,
        open: char,
        close: char,
        len: usize,
        depth: usize,
        out: &mut String,
        mut item: impl FnMut(usize, &mut String) -> Result<(), JinjaError>,
    ) -> Result<(), JinjaError> {
        out.push(open);
        if len == 0 {
            out.push(close);
            return Ok(());
        }
        for i in 0..len {
            if i > 0 {
                out.push_str(&self.item);
            }
            if let Some(indent) = &self.indent {
                out.push('\n');
                out.push_str(&indent.repeat(depth + 1));
            }
            item(i, out)?;
        }
        if let Some(indent) = &self.indent {
            out.push('\n');
            out.push_str(&indent.repeat(depth));
        }
        out.push(close);
        Ok(())
    }

    fn string(&self, s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 || (self.ensure_ascii && (c as u32) > 0x7E) => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
}

/// A dict key as `json.dumps` writes it: strings as they are, numbers, booleans and None as
/// their JSON.
fn json_key(key: &Value) -> Result<String, JinjaError> {
    match key.kind() {
        ValueKind::String => Ok(key.as_str().unwrap_or_default().to_owned()),
        ValueKind::Number => Ok(python_number(key)),
        ValueKind::Bool => Ok(if key.is_true() { "true" } else { "false" }.to_owned()),
        ValueKind::None => Ok("null".to_owned()),
        kind => Err(JinjaError::new(
            ErrorKind::InvalidOperation,
            format!("keys must be str, int, float, bool or None, not {kind}"),
        )),
    }
}

/// A number as Python's `repr` (which `json.dumps` uses) writes it: integers as they are,
/// floats with their shortest digits, `1.0` not `1`, an exponent from 1e16 and below 1e-4.
fn python_number(value: &Value) -> String {
    if value.is_integer() {
        return value.to_string();
    }
    let Ok(x) = f64::try_from(value.clone()) else {
        return value.to_string();
    };
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest digits that read back: "1.5e-7", "-1e16".
    let scientific = format!("{x:e}");
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} has an e");
    let exponent: i32 = exponent.parse().expect("an integer exponent");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if (-4..16).contains(&exponent) {
        let point = exponent + 1;
        let body = if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        format!("{sign}{body}")
    } else {
        let mantissa = if digits.len() == 1 {
            digits
        } else {
            format!("{}.{}", &digits[..1], &digits[1..])
        };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exponent_sign}{:02}", exponent.abs())
    }
}

/// Python's whitespace (`str.isspace`): Unicode's, and the separators U+001C..U+001F.
fn python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The Python methods chat templates call on strings and dicts, which jinja2 lets through
/// and minijinja does not have.
fn python_method(value: &Value, method: &str, args: &[Value]) -> Result<Value, JinjaError> {
    if let Some(s) = value.as_str().filter(|_| value.kind() == ValueKind::String) {
        return string_method(s, method, args);
    }
    if value.kind() == ValueKind::Map {
        match method {
            "items" => {
                let () = from_args(args)?;
                let mut items = Vec::new();
                for key in value.try_iter()? {
                    let item = value.get_item(&key)?;
                    items.push(Value::from(vec![key, item]));
                }
                return Ok(Value::from(items));
            }
            "keys" => {
                let () = from_args(args)?;
                return Ok(Value::from(value.try_iter()?.collect::<Vec<_>>()));
            }
            "values" => {
                let () = from_args(args)?;
                let mut values = Vec::new();
                for key in value.try_iter()? {
                    values.push(value.get_item(&key)?);
                }
                return Ok(Value::from(values));
            }
            "get" => {
                let (key, default): (Value, Option<Value>) = from_args(args)?;
                let item = value.get_item(&key)?;
                return Ok(if item.is_undefined() {
                    default.unwrap_or(Value::from(()))
                } else {
                    item
                });
            }
            _ => {}
        }
    }
    Err(JinjaError::from(ErrorKind::UnknownMethod))
}

fn string_method(s: &str, method: &str, args: &[Value]) -> Result<Value, JinjaError> {
    let strip_set = |chars: Option<&str>| {
        let chars: Option<Vec<char>> = chars.map(|c| c.chars().collect());
        move |c: char| match &chars {
            Some(set) => set.contains(&c),
            None => python_space(c),
        }
    };
    Ok(match method {
        "strip" | "lstrip" | "rstrip" => {
            let (chars,): (Option<&str>,) = from_args(args)?;
            let strip = strip_set(chars);
            Value::from(match method {
                "strip" => s.trim_matches(strip),
                "lstrip" => s.trim_start_matches(strip),
                _ => s.trim_end_matches(strip),
            })
        }
        "startswith" | "endswith" => {
            let (affix,): (Value,) = from_args(args)?;
            let affixes: Vec<Value> = if affix.kind() == ValueKind::String {
                vec![affix]
            } else {
                affix.try_iter()?.collect()
            };
            Value::from(affixes.iter().any(|a| {
                let a = a.as_str().unwrap_or_default();
                if method == "startswith" {
                    s.starts_with(a)
                } else {
                    s.ends_with(a)
                }
            }))
        }
        "split" => {
            let (sep, maxsplit): (Option<Value>, Option<i64>) = from_args(args)?;
            let limit = maxsplit.filter(|&n| n >= 0).map(|n| n as usize);
            let sep = sep.filter(|v| !v.is_none());
            let parts: Vec<Value> = match sep {
                Some(sep) => {
                    let sep = sep.as_str().unwrap_or_default();
                    if sep.is_empty() {
                        return Err(JinjaError::new(
                            ErrorKind::InvalidOperation,
                            "empty separator",
                        ));
                    }
                    match limit {
                        Some(n) => s.splitn(n + 1, sep).map(Value::from).collect(),
                        None => s.split(sep).map(Value::from).collect(),
                    }
                }
                None => python_split_whitespace(s, limit)
                    .into_iter()
                    .map(Value::from)
                    .collect(),
            };
            Value::from(parts)
        }
        "lower" => {
            let () = from_args(args)?;
            Value::from(s.to_lowercase())
        }
        "upper" => {
            let () = from_args(args)?;
            Value::from(s.to_uppercase())
        }
        "replace" => {
            let (old, new, count): (&str, &str, Option<i64>) = from_args(args)?;
            Value::from(match count.filter(|&n| n >= 0) {
                Some(n) => s.replacen(old, new, n as usize),
                None => s.replace(old, new),
            })
        }
        "join" => {
            let (items,): (Value,) = from_args(args)?;
            let parts: Vec<String> = items.try_iter()?.map(|v| v.to_string()).collect();
            Value::from(parts.join(s))
        }
        _ => return Err(JinjaError::from(ErrorKind::UnknownMethod)),
    })
}

/// Python's `str.split()` without a separator: runs of whitespace split, none kept empty;
/// after `limit` splits the rest is one part, its leading whitespace dropped.
fn python_split_whitespace(s: &str, limit: Option<usize>) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = s.trim_start_matches(python_space);
    while !rest.is_empty() {
        if limit.is_some_and(|n| parts.len() == n) {
            parts.push(rest);
            break;
        }
        let end = rest.find(python_space).unwrap_or(rest.len());
        parts.push(&rest[..end]);
        rest = rest[end..].trim_start_matches(python_space);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::strftime;

    #[test]
    fn strftime_writes_utc_as_python_does() {
        // Each expected text is Python's time.strftime(FORMAT, time.gmtime(seconds)).
        const FORMAT: &str = "%Y-%m-%d %H:%M:%S %y %j %b %B %a %A %p %I %e|%-d %-m %-H %% %Q";
        let cases = [
            (
                0,
                "1970-01-01 00:00:00 70 001 Jan January Thu Thursday AM 12  1|1 1 0 % %Q",
            ),
            (
                951_782_400,
                "2000-02-29 00:00:00 00 060 Feb February Tue Tuesday AM 12 29|29 2 0 % %Q",
            ),
            (
                1_709_251_199,
                "2024-02-29 23:59:59 24 060 Feb February Thu Thursday PM 11 29|29 2 23 % %Q",
            ),
            (
                -86_400,
                "1969-12-31 00:00:00 69 365 Dec December Wed Wednesday AM 12 31|31 12 0 % %Q",
            ),
            (
                4_102_444_800,
                "2100-01-01 00:00:00 00 001 Jan January Fri Friday AM 12  1|1 1 0 % %Q",
            ),
            (
                1_735_779_661,
                "2025-01-02 01:01:01 25 002 Jan January Thu Thursday AM 01  2|2 1 1 % %Q",
            ),
            (
                253_402_300_799,
                "9999-12-31 23:59:59 99 365 Dec December Fri Friday PM 11 31|31 12 23 % %Q",
            ),
        ];
        for (seconds, expected) in cases {
            assert_eq!(strftime(seconds, FORMAT), expected, "{seconds}");
        }
    }
}
