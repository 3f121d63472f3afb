//! Human-readable units: durations, byte sizes, rates.

/// `1.23ms`, `45.0µs`, `2.00s`, `3m05s`.
pub fn dur(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        format!("{:.1}µs", f / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2}ms", f / 1e6)
    } else if ns < 60_000_000_000 {
        format!("{:.2}s", f / 1e9)
    } else {
        let s = ns / 1_000_000_000;
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// `512B`, `4.0KiB`, `1.5MiB`, `2.00GiB`.
pub fn bytes(b: u64) -> String {
    let f = b as f64;
    if b < 1024 {
        format!("{b}B")
    } else if b < 1 << 20 {
        format!("{:.1}KiB", f / 1024.0)
    } else if b < 1 << 30 {
        format!("{:.1}MiB", f / (1u64 << 20) as f64)
    } else {
        format!("{:.2}GiB", f / (1u64 << 30) as f64)
    }
}

/// Compact count: `950`, `12.3k`, `4.56M`.
pub fn count(n: f64) -> String {
    // A sum over nothing is -0.0 (f64's `Sum` starts there): not "-0".
    let n = if n == 0.0 { 0.0 } else { n };
    if n < 1e3 {
        format!("{n:.0}")
    } else if n < 1e6 {
        format!("{:.1}k", n / 1e3)
    } else if n < 1e9 {
        format!("{:.2}M", n / 1e6)
    } else {
        format!("{:.2}G", n / 1e9)
    }
}

/// Parse `10s`, `500ms`, `2m`, `1h`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (num, mult) = if let Some(v) = t.strip_suffix("ms") {
        (v, 1e-3)
    } else if let Some(v) = t.strip_suffix('s') {
        (v, 1.0)
    } else if let Some(v) = t.strip_suffix('m') {
        (v, 60.0)
    } else if let Some(v) = t.strip_suffix('h') {
        (v, 3600.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("bad duration {s:?}: use e.g. 10s, 500ms, 2m"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("bad duration {s:?}: must be a non-negative number"));
    }
    Ok(std::time::Duration::from_secs_f64(v * mult))
}

/// Parse `1GiB`, `512MiB`, `2G`, `100M`, or a bare number of bytes.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let units: [(&str, u64); 8] = [
        ("gib", 1 << 30),
        ("mib", 1 << 20),
        ("kib", 1 << 10),
        ("gb", 1_000_000_000),
        ("mb", 1_000_000),
        ("g", 1 << 30),
        ("m", 1 << 20),
        ("k", 1 << 10),
    ];
    for (suf, mult) in units {
        if let Some(v) = lower.strip_suffix(suf) {
            let v: f64 = v
                .trim()
                .parse()
                .map_err(|_| format!("bad size {s:?}: use e.g. 1GiB, 512MiB"))?;
            return Ok((v * mult as f64) as u64);
        }
    }
    lower
        .trim_end_matches('b')
        .parse()
        .map_err(|_| format!("bad size {s:?}: use e.g. 1GiB, 512MiB"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(dur(999), "999ns");
        assert_eq!(dur(1_500), "1.5µs");
        assert_eq!(dur(2_345_000), "2.35ms");
        assert_eq!(dur(3_000_000_000), "3.00s");
        assert_eq!(dur(185_000_000_000), "3m05s");
        assert_eq!(bytes(1536), "1.5KiB");
        assert_eq!(count(12_345.0), "12.3k");
        assert_eq!(count(std::iter::empty::<f64>().sum()), "0");
    }

    #[test]
    fn parses() {
        assert_eq!(parse_duration("10s").unwrap().as_secs(), 10);
        assert_eq!(parse_duration("500ms").unwrap().as_millis(), 500);
        assert_eq!(parse_duration("2m").unwrap().as_secs(), 120);
        assert!(parse_duration("abc").is_err());
        assert_eq!(parse_bytes("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_bytes("512M").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("1000").unwrap(), 1000);
        assert!(parse_bytes("lots").is_err());
    }
}
