//! RFC 3339 UTC timestamps (`2026-02-16T12:00:00Z`) without a date library.

use std::time::{SystemTime, UNIX_EPOCH};

/// Formats a time as RFC 3339 UTC with millisecond precision.
pub fn format(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, day) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return format!(
            "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60,
            d.subsec_millis()
        );
    }
    // Written digit by digit: several stamps go with every job, and `format!` costs more
    // than the rest of making one.
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut v: u64| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, y as u64);
    put(5, 2, m as u64);
    put(8, 2, day as u64);
    put(11, 2, (rem / 3600) as u64);
    put(14, 2, (rem % 3600 / 60) as u64);
    put(17, 2, (rem % 60) as u64);
    put(20, 3, u64::from(d.subsec_millis()));
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses an RFC 3339 timestamp (`2026-02-16T12:00:00Z`, with optional fractions and a
/// `Z` or `±HH:MM` offset); `None` when it is not one.
pub fn parse(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos: u64 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 9 {
                nanos = nanos * 10 + u64::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start).min(9)..9 {
            nanos *= 10;
        }
    }
    let offset = match &s[i..] {
        "Z" | "z" => 0,
        o if o.len() == 6
            && (o.starts_with('+') || o.starts_with('-'))
            && o.as_bytes()[3] == b':' =>
        {
            let v = num(i + 1..i + 3)? * 3600 + num(i + 4..i + 6)? * 60;
            if o.starts_with('-') { -v } else { v }
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo as u32, d as u32);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec.min(59) - offset;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + std::time::Duration::from_secs(secs) + std::time::Duration::from_nanos(nanos))
}

/// (year, month, day) to days since 1970-01-01.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn known_dates() {
        assert_eq!(format(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_771_243_200_123);
        assert_eq!(format(t), "2026-02-16T12:00:00.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_825_600); // 2000-02-29T12:00:00Z
        assert_eq!(format(leap), "2000-02-29T12:00:00.000Z");
    }

    #[test]
    fn parse_round_trips_and_refuses_junk() {
        for t in [
            "2026-02-16T12:00:00.123Z",
            "2000-02-29T12:00:00.000Z",
            "1970-01-01T00:00:00.000Z",
        ] {
            assert_eq!(format(parse(t).unwrap()), t);
        }
        assert_eq!(
            format(parse("2026-02-16T14:00:00+02:00").unwrap()),
            "2026-02-16T12:00:00.000Z"
        );
        assert_eq!(
            format(parse("2026-02-16T12:00:00.5Z").unwrap()),
            "2026-02-16T12:00:00.500Z"
        );
        for bad in [
            "",
            "2026-02-16",
            "2026-13-01T00:00:00Z",
            "2026-02-16T12:00:00",
            "x026-02-16T12:00:00Z",
            "2026-02-16T12:00:00.Z",
            // A character of several bytes where the offset's colon would be.
            "2026-02-16T12:00:00+0\u{e9}00",
            "2026-02-16T12:00:00+\u{e9}:0",
            "2026-02-16T12:00:0\u{e9}Z",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }
}
