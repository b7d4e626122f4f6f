//! Typed maintenance of `metav1.Condition` lists, and the kstatus conditions
//! (`Ready`, `Reconciling`, `Stalled`) that Flux and other kstatus readers wait on.
//!
//! Callers name condition types and reasons with their own enums, through the
//! [`ConditionType`] and [`ConditionReason`] traits, so no raw string reaches a status.
//! [`set_condition`] is the one way to change a condition: it keeps
//! `lastTransitionTime` unless the status flips, always sets `observedGeneration`, and
//! truncates the message to what the API server accepts.
//!
//! The kstatus rules (shared/research/gitops.md): the first match wins among
//! being deleted → Terminating; `generation` ≠ `status.observedGeneration` → InProgress;
//! `Reconciling=True` → InProgress; `Stalled=True` → Failed; `Ready=True` → Current;
//! `Ready` False/Unknown → InProgress; otherwise Current. [`set_kstatus_conditions`]
//! writes the three conditions from a typed [`Outcome`], and [`kstatus`] evaluates an
//! object the way kstatus does, so tests can assert what Flux will see.
//!
//! These conditions belong on objects whose `status.conditions` is a list of
//! `metav1.Condition` (CatalogSource, OperatorGroup, MachinePool, Machine). OLM's own
//! condition shapes (Subscription, InstallPlan) and the CSV's phase history are not
//! `metav1.Condition` and are not handled here.

use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};

/// The longest message the API server accepts in a `metav1.Condition` (characters).
pub const MAX_MESSAGE_CHARS: usize = 32768;

/// What ends a message that [`set_condition`] had to shorten.
const TRUNCATION_MARK: &str = "...";

/// A condition type, named by a caller's enum.
///
/// `as_str` must return a valid condition type: a CamelCase word, optionally
/// qualified by a DNS subdomain prefix (`example.com/Word`); see
/// [`is_valid_condition_type`], which callers use to test every variant.
pub trait ConditionType {
    /// The `type` string written to the API.
    fn as_str(&self) -> &'static str;
}

/// A condition reason, named by a caller's enum.
///
/// `as_str` must return a valid reason: a CamelCase word (`[A-Za-z][A-Za-z0-9_,:]*`,
/// not ending in `,` or `:`); see [`is_valid_reason`], which callers use to test every
/// variant.
pub trait ConditionReason {
    /// The `reason` string written to the API.
    fn as_str(&self) -> &'static str;
}

impl<T: ConditionType + ?Sized> ConditionType for &T {
    fn as_str(&self) -> &'static str {
        (**self).as_str()
    }
}

impl<R: ConditionReason + ?Sized> ConditionReason for &R {
    fn as_str(&self) -> &'static str {
        (**self).as_str()
    }
}

/// The status of a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// It is not known whether the condition holds.
    Unknown,
}

impl Status {
    /// The string written to the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }
}

impl From<bool> for Status {
    fn from(value: bool) -> Self {
        if value { Status::True } else { Status::False }
    }
}

/// The current time, as conditions store it (whole seconds, as `metav1.Time` is
/// serialized, so that a condition read back from the API compares equal).
pub fn now() -> Time {
    truncate_to_seconds(&Time(Timestamp::now()))
}

fn truncate_to_seconds(time: &Time) -> Time {
    Time(Timestamp::from_second(time.0.as_second()).unwrap_or(time.0))
}

/// Sets the condition `type_` in `conditions`.
///
/// - A new condition is appended, with `lastTransitionTime = now`.
/// - An existing one gets the new reason, message and `observedGeneration`; its
///   `lastTransitionTime` is kept unless `status` differs from the old status.
/// - The message is cut to [`MAX_MESSAGE_CHARS`] characters, ending in `...` when cut.
///
/// Returns whether anything changed, so that the caller writes the status only then.
pub fn set_condition<T: ConditionType, R: ConditionReason>(
    conditions: &mut Vec<Condition>,
    type_: T,
    status: Status,
    reason: R,
    message: &str,
    observed_generation: Option<i64>,
    now: &Time,
) -> bool {
    let message = truncate_message(message);
    let type_ = type_.as_str();
    let status = status.as_str();
    let reason = reason.as_str();
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            let before = existing.clone();
            if existing.status != status {
                existing.status = status.to_owned();
                existing.last_transition_time = truncate_to_seconds(now);
            }
            existing.reason = reason.to_owned();
            existing.message = message;
            existing.observed_generation = observed_generation;
            *existing != before
        }
        None => {
            conditions.push(Condition {
                type_: type_.to_owned(),
                status: status.to_owned(),
                reason: reason.to_owned(),
                message,
                observed_generation,
                last_transition_time: truncate_to_seconds(now),
            });
            true
        }
    }
}

/// Removes the condition `type_`; returns whether it was there.
pub fn remove_condition<T: ConditionType>(conditions: &mut Vec<Condition>, type_: T) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_.as_str());
    conditions.len() != before
}

/// The condition `type_`, if present.
pub fn find_condition<T: ConditionType>(conditions: &[Condition], type_: T) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == type_.as_str())
}

/// Whether the condition `type_` is present with status True.
pub fn is_condition_true<T: ConditionType>(conditions: &[Condition], type_: T) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == Status::True.as_str())
}

/// `message`, cut to at most [`MAX_MESSAGE_CHARS`] characters.
pub fn truncate_message(message: &str) -> String {
    match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        None => message.to_owned(),
        Some(_) => {
            let keep = MAX_MESSAGE_CHARS - TRUNCATION_MARK.chars().count();
            let end = message.char_indices().nth(keep).map_or(message.len(), |(i, _)| i);
            format!("{}{TRUNCATION_MARK}", &message[..end])
        }
    }
}

/// Whether `reason` is accepted by the API server as a condition reason
/// (`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`, at most 1024 characters).
pub fn is_valid_reason(reason: &str) -> bool {
    let bytes = reason.as_bytes();
    let Some((first, rest)) = bytes.split_first() else {
        return false;
    };
    reason.len() <= 1024
        && first.is_ascii_alphabetic()
        && rest
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':'))
        && !matches!(bytes.last(), Some(b',' | b':'))
}

/// Whether `type_` is accepted by the API server as a condition type: an optional
/// DNS-subdomain prefix and `/`, then a name of at most 63 characters made of
/// alphanumerics, `-`, `_` and `.`, starting and ending with an alphanumeric.
pub fn is_valid_condition_type(type_: &str) -> bool {
    let (prefix, name) = match type_.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, type_),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && label.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    type_.len() <= 316 && name_ok && prefix_ok
}

// === kstatus ===

/// The three condition types kstatus reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KstatusType {
    /// True once the object is where its spec says; False while it is not.
    Ready,
    /// Present (True) only while the controller is working towards the spec.
    Reconciling,
    /// Present (True) only while the controller cannot progress without a change.
    Stalled,
}

impl ConditionType for KstatusType {
    fn as_str(&self) -> &'static str {
        match self {
            KstatusType::Ready => "Ready",
            KstatusType::Reconciling => "Reconciling",
            KstatusType::Stalled => "Stalled",
        }
    }
}

/// Where a reconcile left an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Progress {
    /// The object is where its spec says (Argo's Healthy).
    Done,
    /// Work is under way or being retried: a transient error, a wait on another object.
    Working,
    /// No progress is possible until something changes: bad input, a terminal error
    /// (Argo's Degraded).
    Stalled,
}

/// The typed outcome of a reconcile, from which the kstatus conditions follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome<R> {
    /// Where the object stands.
    pub progress: Progress,
    /// Why, one CamelCase word (the reason of every kstatus condition written).
    pub reason: R,
    /// Why, in words.
    pub message: String,
}

impl<R> Outcome<R> {
    /// The object is where its spec says.
    pub fn done(reason: R, message: impl Into<String>) -> Self {
        Outcome {
            progress: Progress::Done,
            reason,
            message: message.into(),
        }
    }

    /// Work is under way or being retried.
    pub fn working(reason: R, message: impl Into<String>) -> Self {
        Outcome {
            progress: Progress::Working,
            reason,
            message: message.into(),
        }
    }

    /// No progress is possible until something changes.
    pub fn stalled(reason: R, message: impl Into<String>) -> Self {
        Outcome {
            progress: Progress::Stalled,
            reason,
            message: message.into(),
        }
    }
}

/// What the kstatus conditions should be for `progress`: the status of `Ready`, and
/// whether `Reconciling` and `Stalled` are present (they are abnormal-true: present
/// only as True, removed otherwise).
pub fn kstatus_for(progress: Progress) -> (Status, bool, bool) {
    match progress {
        Progress::Done => (Status::True, false, false),
        Progress::Working => (Status::False, true, false),
        Progress::Stalled => (Status::False, false, true),
    }
}

/// Writes `Ready`, `Reconciling` and `Stalled` for `outcome` (see [`kstatus_for`]),
/// each with `observed_generation`. Returns whether anything changed.
///
/// The caller also sets `status.observedGeneration` to the same generation on the
/// same write: kstatus checks that field first.
pub fn set_kstatus_conditions<R: ConditionReason>(
    conditions: &mut Vec<Condition>,
    outcome: &Outcome<R>,
    observed_generation: Option<i64>,
    now: &Time,
) -> bool {
    let (ready, reconciling, stalled) = kstatus_for(outcome.progress);
    let mut changed = set_condition(
        conditions,
        KstatusType::Ready,
        ready,
        &outcome.reason,
        &outcome.message,
        observed_generation,
        now,
    );
    for (type_, present) in [
        (KstatusType::Reconciling, reconciling),
        (KstatusType::Stalled, stalled),
    ] {
        changed |= if present {
            set_condition(
                conditions,
                type_,
                Status::True,
                &outcome.reason,
                &outcome.message,
                observed_generation,
                now,
            )
        } else {
            remove_condition(conditions, type_)
        };
    }
    changed
}

/// What kstatus computes for an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KstatusResult {
    /// Being deleted.
    Terminating,
    /// Not yet where its spec says, or the status is older than the spec.
    InProgress,
    /// Stalled.
    Failed,
    /// Where its spec says.
    Current,
}

/// Evaluates an object as kstatus does (first match wins; see the module docs).
///
/// `observed_generation` is `status.observedGeneration`; kstatus compares it with
/// `metadata.generation` only when it is present.
pub fn kstatus(
    deleting: bool,
    generation: Option<i64>,
    observed_generation: Option<i64>,
    conditions: &[Condition],
) -> KstatusResult {
    if deleting {
        return KstatusResult::Terminating;
    }
    if observed_generation.is_some() && observed_generation != generation {
        return KstatusResult::InProgress;
    }
    if is_condition_true(conditions, KstatusType::Reconciling) {
        return KstatusResult::InProgress;
    }
    if is_condition_true(conditions, KstatusType::Stalled) {
        return KstatusResult::Failed;
    }
    match find_condition(conditions, KstatusType::Ready) {
        Some(ready) if ready.status == Status::True.as_str() => KstatusResult::Current,
        Some(_) => KstatusResult::InProgress,
        None => KstatusResult::Current,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug)]
    enum Type {
        Healthy,
        Qualified,
    }

    impl ConditionType for Type {
        fn as_str(&self) -> &'static str {
            match self {
                Type::Healthy => "Healthy",
                Type::Qualified => "example.com/Healthy",
            }
        }
    }

    #[derive(Clone, Copy, Debug)]
    enum Reason {
        AllGood,
        Broken,
        Retrying,
    }

    impl ConditionReason for Reason {
        fn as_str(&self) -> &'static str {
            match self {
                Reason::AllGood => "AllGood",
                Reason::Broken => "Broken",
                Reason::Retrying => "Retrying",
            }
        }
    }

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(1_700_000_000 + second).unwrap())
    }

    #[test]
    fn a_new_condition_is_appended_with_all_fields() {
        let mut conditions = Vec::new();
        assert!(set_condition(
            &mut conditions,
            Type::Healthy,
            Status::True,
            Reason::AllGood,
            "fine",
            Some(3),
            &at(0)
        ));
        assert_eq!(
            conditions,
            vec![Condition {
                type_: "Healthy".into(),
                status: "True".into(),
                reason: "AllGood".into(),
                message: "fine".into(),
                observed_generation: Some(3),
                last_transition_time: at(0),
            }]
        );
    }

    #[test]
    fn transition_time_is_kept_while_the_status_holds() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            Type::Healthy,
            Status::False,
            Reason::Broken,
            "a",
            Some(1),
            &at(0),
        );
        let changed = set_condition(
            &mut conditions,
            Type::Healthy,
            Status::False,
            Reason::Retrying,
            "b",
            Some(2),
            &at(60),
        );
        assert!(changed);
        let c = &conditions[0];
        assert_eq!(c.last_transition_time, at(0));
        assert_eq!((c.reason.as_str(), c.message.as_str()), ("Retrying", "b"));
        assert_eq!(c.observed_generation, Some(2));
    }

    #[test]
    fn the_same_input_twice_changes_nothing() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            Type::Healthy,
            Status::True,
            Reason::AllGood,
            "ok",
            Some(1),
            &at(0),
        );
        let before = conditions.clone();
        let changed = set_condition(
            &mut conditions,
            Type::Healthy,
            Status::True,
            Reason::AllGood,
            "ok",
            Some(1),
            &at(9),
        );
        assert!(!changed);
        assert_eq!(conditions, before);
    }

    #[test]
    fn a_status_flip_moves_the_transition_time() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            Type::Healthy,
            Status::True,
            Reason::AllGood,
            "",
            Some(1),
            &at(0),
        );
        set_condition(
            &mut conditions,
            Type::Healthy,
            Status::False,
            Reason::Broken,
            "",
            Some(1),
            &at(30),
        );
        assert_eq!(conditions[0].status, "False");
        assert_eq!(conditions[0].last_transition_time, at(30));
        set_condition(
            &mut conditions,
            Type::Healthy,
            Status::Unknown,
            Reason::Broken,
            "",
            Some(1),
            &at(45),
        );
        assert_eq!(conditions[0].last_transition_time, at(45));
    }

    #[test]
    fn transition_times_are_whole_seconds() {
        let mut conditions = Vec::new();
        let precise = Time(Timestamp::from_millisecond(1_700_000_000_250).unwrap());
        set_condition(
            &mut conditions,
            Type::Healthy,
            Status::True,
            Reason::AllGood,
            "",
            None,
            &precise,
        );
        assert_eq!(
            conditions[0].last_transition_time,
            Time(Timestamp::from_second(1_700_000_000).unwrap())
        );
        assert_eq!(now().0.subsec_nanosecond(), 0);
    }

    #[test]
    fn observed_generation_is_always_overwritten() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            Type::Healthy,
            Status::True,
            Reason::AllGood,
            "",
            Some(4),
            &at(0),
        );
        set_condition(
            &mut conditions,
            Type::Healthy,
            Status::True,
            Reason::AllGood,
            "",
            Some(5),
            &at(0),
        );
        assert_eq!(conditions[0].observed_generation, Some(5));
        set_condition(
            &mut conditions,
            Type::Healthy,
            Status::True,
            Reason::AllGood,
            "",
            None,
            &at(0),
        );
        assert_eq!(conditions[0].observed_generation, None);
    }

    #[test]
    fn other_conditions_and_their_order_are_untouched() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            Type::Healthy,
            Status::True,
            Reason::AllGood,
            "",
            Some(1),
            &at(0),
        );
        set_condition(
            &mut conditions,
            Type::Qualified,
            Status::False,
            Reason::Broken,
            "",
            Some(1),
            &at(0),
        );
        set_condition(
            &mut conditions,
            Type::Healthy,
            Status::False,
            Reason::Broken,
            "",
            Some(2),
            &at(5),
        );
        let types: Vec<_> = conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Healthy", "example.com/Healthy"]);
        assert_eq!(conditions[1].observed_generation, Some(1));
        assert_eq!(conditions[1].last_transition_time, at(0));
    }

    #[test]
    fn long_messages_are_cut_at_the_limit_on_a_char_boundary() {
        let short = "é".repeat(MAX_MESSAGE_CHARS);
        assert_eq!(
            truncate_message(&short),
            short,
            "a message at the limit is kept whole"
        );

        let long = "é".repeat(MAX_MESSAGE_CHARS + 10);
        let cut = truncate_message(&long);
        assert_eq!(cut.chars().count(), MAX_MESSAGE_CHARS);
        assert!(cut.ends_with("..."));
        assert!(cut.starts_with("éé"));

        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            Type::Healthy,
            Status::True,
            Reason::AllGood,
            &long,
            None,
            &at(0),
        );
        assert_eq!(conditions[0].message.chars().count(), MAX_MESSAGE_CHARS);
    }

    #[test]
    fn remove_and_find() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            Type::Healthy,
            Status::True,
            Reason::AllGood,
            "",
            None,
            &at(0),
        );
        assert!(is_condition_true(&conditions, Type::Healthy));
        assert!(find_condition(&conditions, Type::Qualified).is_none());
        assert!(remove_condition(&mut conditions, Type::Healthy));
        assert!(!remove_condition(&mut conditions, Type::Healthy));
        assert!(conditions.is_empty());
    }

    #[test]
    fn reason_and_type_validation_follow_the_api_server() {
        for ok in ["AllGood", "A", "Has_Underscore", "a:b,c_1"] {
            assert!(is_valid_reason(ok), "{ok}");
        }
        for bad in [
            "",
            "1Starts",
            "Ends:",
            "Ends,",
            "Has Space",
            "Has-Dash",
            &"A".repeat(1025),
        ] {
            assert!(!is_valid_reason(bad), "{bad}");
        }
        for ok in ["Ready", "example.com/Ready", "a-b.c_d", "Ready2"] {
            assert!(is_valid_condition_type(ok), "{ok}");
        }
        for bad in [
            "",
            "-Ready",
            "Ready-",
            "Example.com/Ready",
            "/Ready",
            "a/",
            &"A".repeat(64),
        ] {
            assert!(!is_valid_condition_type(bad), "{bad}");
        }
        for t in [KstatusType::Ready, KstatusType::Reconciling, KstatusType::Stalled] {
            assert!(is_valid_condition_type(t.as_str()));
        }
    }

    fn kstatus_after(outcome: &Outcome<Reason>) -> (Vec<Condition>, KstatusResult) {
        let mut conditions = Vec::new();
        set_kstatus_conditions(&mut conditions, outcome, Some(7), &at(0));
        let result = kstatus(false, Some(7), Some(7), &conditions);
        (conditions, result)
    }

    fn summary(conditions: &[Condition]) -> Vec<(&str, &str)> {
        conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect()
    }

    #[test]
    fn done_is_ready_and_current() {
        let (conditions, result) = kstatus_after(&Outcome::done(Reason::AllGood, "installed"));
        assert_eq!(summary(&conditions), [("Ready", "True")]);
        assert_eq!(result, KstatusResult::Current);
        assert!(conditions.iter().all(|c| c.observed_generation == Some(7)));
    }

    #[test]
    fn working_is_reconciling_and_in_progress() {
        let (conditions, result) = kstatus_after(&Outcome::working(Reason::Retrying, "waiting"));
        assert_eq!(
            summary(&conditions),
            [("Ready", "False"), ("Reconciling", "True")]
        );
        assert_eq!(result, KstatusResult::InProgress);
        assert_eq!(conditions[1].reason, "Retrying");
        assert_eq!(conditions[1].message, "waiting");
    }

    #[test]
    fn stalled_is_failed() {
        let (conditions, result) = kstatus_after(&Outcome::stalled(Reason::Broken, "bad spec"));
        assert_eq!(summary(&conditions), [("Ready", "False"), ("Stalled", "True")]);
        assert_eq!(result, KstatusResult::Failed);
    }

    #[test]
    fn moving_between_outcomes_removes_stale_abnormal_conditions() {
        let mut conditions = Vec::new();
        set_kstatus_conditions(
            &mut conditions,
            &Outcome::stalled(Reason::Broken, "x"),
            Some(1),
            &at(0),
        );
        set_kstatus_conditions(
            &mut conditions,
            &Outcome::working(Reason::Retrying, "y"),
            Some(2),
            &at(10),
        );
        assert_eq!(
            summary(&conditions),
            [("Ready", "False"), ("Reconciling", "True")]
        );
        // Ready stayed False throughout: its transition time is kept.
        assert_eq!(conditions[0].last_transition_time, at(0));
        let changed = set_kstatus_conditions(
            &mut conditions,
            &Outcome::done(Reason::AllGood, "z"),
            Some(2),
            &at(20),
        );
        assert!(changed);
        assert_eq!(summary(&conditions), [("Ready", "True")]);
        assert_eq!(conditions[0].last_transition_time, at(20));
        let again = set_kstatus_conditions(
            &mut conditions,
            &Outcome::done(Reason::AllGood, "z"),
            Some(2),
            &at(30),
        );
        assert!(!again, "an unchanged outcome must not cause a status write");
    }

    #[test]
    fn kstatus_checks_in_order() {
        let mut conditions = Vec::new();
        set_kstatus_conditions(
            &mut conditions,
            &Outcome::done(Reason::AllGood, ""),
            Some(1),
            &at(0),
        );
        assert_eq!(
            kstatus(true, Some(1), Some(1), &conditions),
            KstatusResult::Terminating
        );
        assert_eq!(
            kstatus(false, Some(2), Some(1), &conditions),
            KstatusResult::InProgress,
            "stale status"
        );
        assert_eq!(
            kstatus(false, Some(2), None, &conditions),
            KstatusResult::Current,
            "no observedGeneration"
        );
        assert_eq!(
            kstatus(false, Some(1), Some(1), &[]),
            KstatusResult::Current,
            "no conditions at all"
        );

        // Reconciling=True wins over Stalled=True.
        let mut both = Vec::new();
        set_condition(
            &mut both,
            KstatusType::Stalled,
            Status::True,
            Reason::Broken,
            "",
            None,
            &at(0),
        );
        set_condition(
            &mut both,
            KstatusType::Reconciling,
            Status::True,
            Reason::Retrying,
            "",
            None,
            &at(0),
        );
        assert_eq!(kstatus(false, None, None, &both), KstatusResult::InProgress);

        let mut unknown = Vec::new();
        set_condition(
            &mut unknown,
            KstatusType::Ready,
            Status::Unknown,
            Reason::Retrying,
            "",
            None,
            &at(0),
        );
        assert_eq!(kstatus(false, None, None, &unknown), KstatusResult::InProgress);
    }
}
