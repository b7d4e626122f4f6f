//! Which CRD changes wake the CSVs that name them.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::{Resource, ResourceExt};
use olm_runtime::Reflector;

use crate::controllers::csv::crd_summary::CrdSummary;

/// The changes of CRDs a CSV can see, as summaries ([`CrdSummary`]): a
/// write that changed only a CRD's labels or annotations is left out
/// ([`labels_only`]). Each install
/// of an operator labels the CRDs it shares with the installs in other
/// namespaces, and hearing it woke every CSV naming them, all at once, ahead
/// of the new install's CSVs. A CSV reads of a CRD only its spec (versions,
/// conversion: a change moves its generation), conditions and uid.
pub(super) fn crd_changes(
    crds: &Reflector<CrdSummary>,
) -> impl Stream<Item = Arc<CrdSummary>> + Send + 'static {
    let mut seen = std::collections::HashMap::new();
    crds.subscribe().filter(move |crd| {
        let key = (crd.name_any(), crd.uid());
        let now = CrdLook::of(crd.meta());
        let keep = !seen
            .insert(key, now)
            .is_some_and(|before| labels_only(&before, &now));
        std::future::ready(keep)
    })
}

/// What a CRD change is told apart by: its generation (its spec) and a hash
/// of its labels and annotations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CrdLook {
    generation: Option<i64>,
    marks: u64,
    deleting: bool,
}

impl CrdLook {
    fn of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> CrdLook {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (&meta.labels, &meta.annotations).hash(&mut hasher);
        CrdLook {
            generation: meta.generation,
            marks: hasher.finish(),
            deleting: meta.deletion_timestamp.is_some(),
        }
    }
}

/// Whether a CRD seen as `before`, then as `now`, changed only its labels or
/// annotations: the same spec and deletion, other marks. A change with the
/// same marks too is of its status (Established) or is a relist: kept.
fn labels_only(before: &CrdLook, now: &CrdLook) -> bool {
    before.generation == now.generation && before.deleting == now.deleting && before.marks != now.marks
}

#[cfg(test)]
mod crd_change_tests {
    use super::*;

    #[test]
    fn a_crd_change_of_only_its_labels_wakes_no_csv() {
        let look = |generation, marks, deleting| CrdLook {
            generation: Some(generation),
            marks,
            deleting,
        };
        let before = look(1, 7, false);
        assert!(labels_only(&before, &look(1, 8, false)), "labels only");
        assert!(!labels_only(&before, &look(1, 7, false)), "status or relist");
        assert!(!labels_only(&before, &look(2, 8, false)), "spec and labels");
        assert!(!labels_only(&before, &look(1, 8, true)), "being deleted");
    }
}
