//! Go durations (`45m`, `1h30m`, `300ms`), as OLM's CatalogSource fields and
//! OperatorGroup annotations write them.

use std::time::Duration;

/// Parses a Go duration (`45m`, `1h30m`, `1.5h`, `300ms`, `10s`).
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let invalid = || format!("{text:?} is not a duration such as 10m, 1h30m or 45s");
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(invalid());
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        let (number, tail) = rest.split_at(number_end);
        let number: f64 = number.parse().map_err(|_| invalid())?;
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_end);
        let seconds = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(invalid()),
        };
        total += number * seconds;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_go_duration("45m"), Ok(Duration::from_secs(2700)));
        assert_eq!(parse_go_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        for bad in ["", "10", "10d", "m", "1h30"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?}");
        }
    }
}
