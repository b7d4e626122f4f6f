//! Closest names, for "did you mean" in errors.

/// The edit distance (insertions, deletions, substitutions) between `a` and `b`.
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// Up to three of `names` close to `wanted`: those that contain it or that it
/// contains, and those within a third of its length in edits, closest first.
pub fn closest<'a>(wanted: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let wanted_lower = wanted.to_lowercase();
    let limit = (wanted.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, &str)> = names
        .into_iter()
        .filter_map(|name| {
            let lower = name.to_lowercase();
            let d = distance(&wanted_lower, &lower);
            let contains = lower.contains(&wanted_lower) || wanted_lower.contains(&lower);
            (d <= limit || contains).then_some((if contains { d.min(limit) } else { d }, name))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(3).map(|(_, n)| n.to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("demo-db", "demo-db"), 0);
    }

    #[test]
    fn typos_and_fragments_are_suggested_closest_first() {
        let names = ["demo-app", "demo-db", "demo-machine", "etcd", "prometheus"];
        assert_eq!(closest("demo-ap", names), ["demo-app", "demo-db"]);
        assert_eq!(closest("prometeus", names), ["prometheus"]);
        assert_eq!(closest("machine", names), ["demo-machine"]);
        assert!(closest("kafka", names).is_empty());
    }
}
