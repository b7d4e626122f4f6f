//! Stores for the tests of reconciles that run without a cluster.

use kube::{
    Resource,
    runtime::{
        reflector::{Store, store::Writer},
        watcher::Event,
    },
};

/// A reflector's store as it is once its first list, `objects`, has arrived.
pub fn listed<K>(objects: impl IntoIterator<Item = K>) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let mut writer = Writer::default();
    let store = writer.as_reader();
    writer.apply_watcher_event(&Event::Init);
    for object in objects {
        writer.apply_watcher_event(&Event::InitApply(object));
    }
    writer.apply_watcher_event(&Event::InitDone);
    store
}
