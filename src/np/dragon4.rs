//! Float-to-decimal digit generation with NumPy's Dragon4 semantics.
//!
//! Rust's own shortest-digit printer breaks exact ties differently from NumPy, so the digits
//! are generated here with exact big-integer arithmetic (Steele & White / Dragon4).

use std::cmp::Ordering;

/// Enough 32-bit limbs for every f64 (about 1100 bits at the extremes) plus headroom.
const LIMBS: usize = 40;

/// NumPy's Dragon4 output buffer size; bounds the number of digits ever produced.
const BUFFER_SIZE: i32 = 16383;

/// Fixed-capacity unsigned big integer, little-endian limbs.
#[derive(Clone, Copy)]
struct Big {
    len: usize,
    d: [u32; LIMBS],
}

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big {
            len: 0,
            d: [0; LIMBS],
        };
        b.d[0] = v as u32;
        b.d[1] = (v >> 32) as u32;
        b.len = 2;
        b.trim();
        b
    }

    fn pow2(n: u32) -> Big {
        let mut b = Big {
            len: 0,
            d: [0; LIMBS],
        };
        let limb = (n / 32) as usize;
        b.d[limb] = 1 << (n % 32);
        b.len = limb + 1;
        b
    }

    fn trim(&mut self) {
        while self.len > 0 && self.d[self.len - 1] == 0 {
            self.len -= 1;
        }
    }

    fn shl(&mut self, n: u32) {
        if self.len == 0 {
            return;
        }
        let limbs = (n / 32) as usize;
        let bits = n % 32;
        let old = self.len;
        let mut out = [0u32; LIMBS];
        for i in 0..old {
            let v = (self.d[i] as u64) << bits;
            out[i + limbs] |= v as u32;
            if i + limbs + 1 < LIMBS {
                out[i + limbs + 1] |= (v >> 32) as u32;
            }
        }
        self.d = out;
        self.len = (old + limbs + 1).min(LIMBS);
        self.trim();
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for i in 0..self.len {
            let v = self.d[i] as u64 * m as u64 + carry;
            self.d[i] = v as u32;
            carry = v >> 32;
        }
        if carry != 0 && self.len < LIMBS {
            self.d[self.len] = carry as u32;
            self.len += 1;
        }
    }

    fn mul_pow10(&mut self, mut n: u32) {
        while n >= 9 {
            self.mul_small(1_000_000_000);
            n -= 9;
        }
        if n > 0 {
            self.mul_small(10u32.pow(n));
        }
    }

    fn add(&self, o: &Big) -> Big {
        let mut r = Big {
            len: 0,
            d: [0; LIMBS],
        };
        let n = self.len.max(o.len);
        let mut carry = 0u64;
        for i in 0..n {
            let v = self.d[i] as u64 + o.d[i] as u64 + carry;
            r.d[i] = v as u32;
            carry = v >> 32;
        }
        r.len = n;
        if carry != 0 && n < LIMBS {
            r.d[n] = carry as u32;
            r.len += 1;
        }
        r
    }

    fn cmp(&self, o: &Big) -> Ordering {
        if self.len != o.len {
            return self.len.cmp(&o.len);
        }
        for i in (0..self.len).rev() {
            if self.d[i] != o.d[i] {
                return self.d[i].cmp(&o.d[i]);
            }
        }
        Ordering::Equal
    }

    /// self -= q * o; the caller guarantees the result is not negative.
    fn sub_mul(&mut self, o: &Big, q: u32) {
        let mut borrow = 0i64;
        let mut carry = 0u64;
        for i in 0..self.len {
            let p = if i < o.len {
                o.d[i] as u64 * q as u64 + carry
            } else {
                carry
            };
            carry = p >> 32;
            let v = self.d[i] as i64 - (p as u32) as i64 - borrow;
            if v < 0 {
                self.d[i] = (v + (1i64 << 32)) as u32;
                borrow = 1;
            } else {
                self.d[i] = v as u32;
                borrow = 0;
            }
        }
        self.trim();
    }

    /// Divides self by `s` where the quotient is known to be below 10; keeps the remainder.
    fn div_rem_small(&mut self, s: &Big) -> u32 {
        if self.cmp(s) == Ordering::Less {
            return 0;
        }
        let n = s.len;
        let limb = |b: &Big, i: usize| if i < b.len { b.d[i] as u128 } else { 0 };
        // Estimate from the top limbs; it undershoots by at most a little, fixed below.
        let (s_top, v_top) = if n >= 2 {
            (
                (limb(s, n - 1) << 32) | limb(s, n - 2),
                (limb(self, n) << 64) | (limb(self, n - 1) << 32) | limb(self, n - 2),
            )
        } else {
            (limb(s, 0), (limb(self, 1) << 32) | limb(self, 0))
        };
        let mut q = (v_top / (s_top + 1)).min(9) as u32;
        if q > 0 {
            self.sub_mul(s, q);
        }
        while self.cmp(s) != Ordering::Less {
            self.sub_mul(s, 1);
            q += 1;
        }
        q
    }
}

/// A finite float split into integer mantissa and binary exponent, as Dragon4 wants it.
#[derive(Clone, Copy, Debug)]
pub struct Decomposed {
    pub mantissa: u64,
    pub exponent: i32,
    pub mantissa_bit: i32,
    pub unequal_margins: bool,
}

/// Splits IEEE bits with `frac_bits` fraction bits and exponent `bias`.
fn decompose(bits: u64, frac_bits: u32, exp_mask: u64, bias: i32) -> Decomposed {
    let e = ((bits >> frac_bits) & exp_mask) as i32;
    let m = bits & ((1u64 << frac_bits) - 1);
    if e != 0 {
        Decomposed {
            mantissa: m | (1u64 << frac_bits),
            exponent: e - bias - frac_bits as i32,
            mantissa_bit: frac_bits as i32,
            // The gap below a power of two is half the gap above it.
            unequal_margins: e != 1 && m == 0,
        }
    } else {
        Decomposed {
            mantissa: m,
            exponent: 1 - bias - frac_bits as i32,
            mantissa_bit: 63 - m.max(1).leading_zeros() as i32,
            unequal_margins: false,
        }
    }
}

pub fn decompose_f64(x: f64) -> Decomposed {
    decompose(x.to_bits(), 52, 0x7ff, 1023)
}

pub fn decompose_f32(x: f32) -> Decomposed {
    decompose(x.to_bits() as u64, 23, 0xff, 127)
}

/// Where digit generation must stop.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Cutoff {
    /// Count digits after the decimal point (positional notation).
    Fraction,
    /// Count all significant digits (scientific notation).
    Total,
}

/// Shortest-unique digits, limited to `cutoff_max` digits and extended to `cutoff_min` digits
/// (counted as `mode` says; `None`: no limit, no extension).
/// Returns ASCII digits and the decimal exponent of the first digit.
#[allow(
    clippy::too_many_lines,
    reason = "Steele and White's algorithm step by step, as NumPy's dragon4.c writes it, so the two can be read side by side"
)]
pub fn dragon4(
    v: Decomposed,
    mode: Cutoff,
    cutoff_max: Option<i32>,
    cutoff_min: Option<i32>,
) -> (Vec<u8>, i32) {
    if v.mantissa == 0 {
        return (vec![b'0'], 0);
    }
    let e = v.exponent;
    let mut value = Big::from_u64(v.mantissa);
    let mut scale;
    let mut margin_low;
    // Scale everything by 2 (or 4 for unequal margins) so margins stay integral.
    let extra = if v.unequal_margins { 2 } else { 1 };
    if e > 0 {
        value.shl((e + extra) as u32);
        scale = Big::pow2(extra as u32);
        margin_low = Big::pow2(e as u32);
    } else {
        value.shl(extra as u32);
        scale = Big::pow2((-e + extra) as u32);
        margin_low = Big::from_u64(1);
    }
    let high_of = |low: &Big| {
        let mut h = *low;
        if v.unequal_margins {
            h.mul_small(2);
        }
        h
    };

    let log10_2 = std::f64::consts::LOG10_2;
    let mut digit_exp = (((v.mantissa_bit + e) as f64) * log10_2 - 0.69).ceil() as i32;
    // Numbers far below the fraction cutoff only need the cutoff digit.
    if let (Some(cutoff_max), Cutoff::Fraction) = (cutoff_max, mode) {
        if digit_exp <= -cutoff_max {
            digit_exp = -cutoff_max + 1;
        }
    }
    if digit_exp > 0 {
        scale.mul_pow10(digit_exp as u32);
    } else if digit_exp < 0 {
        value.mul_pow10((-digit_exp) as u32);
        margin_low.mul_pow10((-digit_exp) as u32);
    }
    if value.cmp(&scale) != Ordering::Less {
        digit_exp += 1;
    } else {
        value.mul_small(10);
        margin_low.mul_small(10);
    }

    let mut cutoff_max_exp = digit_exp - BUFFER_SIZE;
    if let Some(cutoff_max) = cutoff_max {
        let want = match mode {
            Cutoff::Total => digit_exp - cutoff_max,
            Cutoff::Fraction => -cutoff_max,
        };
        cutoff_max_exp = cutoff_max_exp.max(want);
    }
    let mut cutoff_min_exp = digit_exp;
    if let Some(cutoff_min) = cutoff_min {
        let want = match mode {
            Cutoff::Total => digit_exp - cutoff_min,
            Cutoff::Fraction => -cutoff_min,
        };
        cutoff_min_exp = cutoff_min_exp.min(want);
    }
    let mut out_exp = digit_exp - 1;

    let mut digits = Vec::with_capacity(20);
    let mut low;
    let mut high;
    let mut digit;
    loop {
        digit_exp -= 1;
        digit = value.div_rem_small(&scale);
        let value_high = value.add(&high_of(&margin_low));
        low = value.cmp(&margin_low) == Ordering::Less;
        high = value_high.cmp(&scale) == Ordering::Greater;
        if ((low || high) && digit_exp <= cutoff_min_exp) || digit_exp <= cutoff_max_exp {
            break;
        }
        digits.push(b'0' + digit as u8);
        value.mul_small(10);
        margin_low.mul_small(10);
    }

    // Round the last digit: forced by the margins, else to nearest with ties to even.
    let mut round_down = low;
    if low == high {
        value.mul_small(2);
        round_down = match value.cmp(&scale) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => digit & 1 == 0,
        };
    }
    if round_down {
        digits.push(b'0' + digit as u8);
    } else if digit == 9 {
        loop {
            match digits.pop() {
                None => {
                    digits.push(b'1');
                    out_exp += 1;
                    break;
                }
                Some(b'9') => continue,
                Some(d) => {
                    digits.push(d + 1);
                    break;
                }
            }
        }
    } else {
        digits.push(b'0' + digit as u8 + 1);
    }
    (digits, out_exp)
}

/// How trailing zeros are treated, as NumPy's `trim` argument.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Trim {
    /// 'k': keep, pad zeros up to the precision (NumPy's default).
    #[default]
    Keep,
    /// '.': trim zeros, keep the point.
    Zeros,
    /// '0': trim zeros but leave one after the point.
    LeaveOneZero,
    /// '-': trim zeros and the point.
    DptZeros,
}

fn trim_fraction(out: &mut String, frac_digits: &mut usize, trim: Trim) {
    if trim == Trim::Keep || *frac_digits == 0 {
        return;
    }
    while out.ends_with('0') && *frac_digits > 0 {
        out.pop();
        *frac_digits -= 1;
    }
    if out.ends_with('.') {
        match trim {
            Trim::LeaveOneZero => {
                out.push('0');
                *frac_digits += 1;
            }
            Trim::DptZeros => {
                out.pop();
            }
            _ => {}
        }
    }
}

/// The end of the digits after the point, shared by both notations: the point itself unless
/// trimmed away, `0` after a bare point (`LeaveOneZero`), or zeros up to `precision` (`Keep`).
/// Returns the new number of fraction digits.
fn finish_fraction(out: &mut String, mut frac: usize, trim: Trim, precision: Option<i32>) -> usize {
    if trim != Trim::DptZeros && frac == 0 {
        out.push('.');
    }
    if trim == Trim::LeaveOneZero && frac == 0 {
        out.push('0');
        frac = 1;
    } else if trim == Trim::Keep {
        if let Some(precision) = precision.filter(|&p| p > frac as i32) {
            out.extend(std::iter::repeat_n('0', precision as usize - frac));
            frac = precision as usize;
        }
    }
    frac
}

/// The keyword arguments of NumPy's `format_float_positional` and `format_float_scientific`
/// (unique=True, sign='-'); `None` is NumPy's `None`, and `Default` gives NumPy's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FloatOptions {
    /// At most this many digits after the point (`None`: as many as the shortest repr needs).
    pub precision: Option<usize>,
    /// At least this many digits after the point, beyond the shortest repr.
    pub min_digits: Option<usize>,
    /// What happens to trailing zeros and the point.
    pub trim: Trim,
    /// Spaces on the left up to this many characters before the point.
    pub pad_left: Option<usize>,
    /// Spaces on the right up to this many characters after the point (positional only).
    pub pad_right: Option<usize>,
    /// At least this many exponent digits, at most 5 (scientific only; `None`: 2).
    pub exp_digits: Option<usize>,
}

/// A digit count in the i32 arithmetic of [`dragon4`]; beyond a quarter of i32 every count
/// means the same (far more digits than any float has).
fn count(n: usize) -> i32 {
    n.min(i32::MAX as usize / 4) as i32
}

/// Left-pads `out` with spaces so that `left` characters before the point become `pad_left`.
fn pad_to_left(out: String, left: i32, pad_left: Option<usize>) -> String {
    match pad_left.map(count) {
        Some(pad_left) if pad_left > left => {
            let mut s = " ".repeat((pad_left - left) as usize);
            s.push_str(&out);
            s
        }
        _ => out,
    }
}

/// NumPy's `format_float_positional` (unique=True, fractional=True, sign='-').
pub fn positional(v: Decomposed, negative: bool, opts: &FloatOptions) -> String {
    let precision = opts.precision.map(count);
    let trim = opts.trim;
    let (digits, exp) = dragon4(v, Cutoff::Fraction, precision, opts.min_digits.map(count));
    let mut out = String::with_capacity(digits.len() + 8);
    if negative {
        out.push('-');
    }
    let n = digits.len() as i32;
    let whole;
    let mut frac: usize;
    if exp >= 0 {
        whole = exp + 1;
        if n <= whole {
            out.extend(digits.iter().map(|&d| d as char));
            out.extend(std::iter::repeat_n('0', (whole - n) as usize));
            frac = 0;
        } else {
            let w = whole as usize;
            out.extend(digits[..w].iter().map(|&d| d as char));
            out.push('.');
            out.extend(digits[w..].iter().map(|&d| d as char));
            frac = digits.len() - w;
        }
    } else {
        whole = 1;
        let zeros = (-(exp + 1)) as usize;
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', zeros));
        out.extend(digits.iter().map(|&d| d as char));
        frac = digits.len() + zeros;
    }
    frac = finish_fraction(&mut out, frac, trim, precision);
    if precision.is_some() {
        trim_fraction(&mut out, &mut frac, trim);
    }
    if let Some(pad_right) = opts.pad_right.filter(|&p| p >= frac) {
        if trim == Trim::DptZeros && frac == 0 {
            out.push(' ');
        }
        out.extend(std::iter::repeat_n(' ', pad_right - frac));
    }
    pad_to_left(out, whole + negative as i32, opts.pad_left)
}

/// NumPy's `format_float_scientific` (unique=True, sign='-').
pub fn scientific(v: Decomposed, negative: bool, opts: &FloatOptions) -> String {
    let precision = opts.precision.map(count);
    let trim = opts.trim;
    // Scientific notation counts the digit before the point too.
    let total = |p: Option<usize>| p.map(|p| count(p).saturating_add(1));
    let (digits, exp) = dragon4(
        v,
        Cutoff::Total,
        total(opts.precision),
        total(opts.min_digits),
    );
    let mut out = String::with_capacity(digits.len() + 10);
    if negative {
        out.push('-');
    }
    out.push(digits[0] as char);
    let mut frac = digits.len() - 1;
    if frac > 0 {
        out.push('.');
        out.extend(digits[1..].iter().map(|&d| d as char));
    }
    frac = finish_fraction(&mut out, frac, trim, precision);
    if precision.is_some() {
        trim_fraction(&mut out, &mut frac, trim);
    }
    let mut out = pad_to_left(out, 1 + negative as i32, opts.pad_left);
    let exp_digits = opts.exp_digits.map_or(2, |d| d.min(5));
    out.push('e');
    out.push(if exp < 0 { '-' } else { '+' });
    let e = exp.unsigned_abs().to_string();
    out.extend(std::iter::repeat_n('0', exp_digits.saturating_sub(e.len())));
    out.push_str(&e);
    out
}
