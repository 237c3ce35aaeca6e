//! The object store: every object of every kind, one global resourceVersion, and the event
//! history watches resume from.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::status::{ApiError, ApiResult};

/// Where an object lives: its group-resource (`pods`, `widgets.example.com`), namespace ("" when
/// cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjKey {
    /// `plural` or `plural.group`.
    pub gr: String,
    /// Namespace, empty for cluster-scoped objects.
    pub ns: String,
    /// `metadata.name`.
    pub name: String,
}

impl ObjKey {
    /// Builds a key.
    pub fn new(gr: impl Into<String>, ns: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            gr: gr.into(),
            ns: ns.into(),
            name: name.into(),
        }
    }
}

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed.
    Deleted,
}

impl EventType {
    /// The watch event type string.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as watches see it.
#[derive(Debug, Clone)]
pub struct Event {
    /// The resourceVersion this change produced.
    pub rv: u64,
    /// Added, modified or deleted.
    pub kind: EventType,
    /// Where the object lives.
    pub key: ObjKey,
    /// The object after the change (before it, for deletions).
    pub object: Value,
    /// The object before the change, if any.
    pub previous: Option<Value>,
}

/// Events retained after a resourceVersion, and a receiver of every later one.
pub type WatchStart = (Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>);

/// What a mutation decides to do with the object it looked at.
pub enum Write {
    /// Store this object (create or replace).
    Put(Value),
    /// Remove the object.
    Delete,
    /// Leave it as it is.
    Keep,
}

struct Inner {
    rv: u64,
    objects: BTreeMap<ObjKey, Value>,
    history: VecDeque<Arc<Event>>,
    /// Watches from a resourceVersion below this one get 410 Expired.
    oldest_watchable: u64,
}

/// The object store.
pub struct Store {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<Event>>,
    history_limit: usize,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("rv", &self.inner.lock().rv)
            .finish()
    }
}

/// Reads `metadata.resourceVersion` as a number.
pub fn rv_of(obj: &Value) -> Option<u64> {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
}

impl Store {
    /// A store that keeps `history_limit` events for watches to resume from.
    pub fn new(history_limit: usize) -> Self {
        let (tx, _) = broadcast::channel(16384);
        Self {
            inner: Mutex::new(Inner {
                rv: 1,
                objects: BTreeMap::new(),
                history: VecDeque::new(),
                oldest_watchable: 1,
            }),
            tx,
            history_limit: history_limit.max(1),
        }
    }

    /// The current resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.inner.lock().rv
    }

    /// One object.
    pub fn get(&self, key: &ObjKey) -> Option<Value> {
        self.inner.lock().objects.get(key).cloned()
    }

    /// Objects of a group-resource (in one namespace, or all), ordered by namespace and name, and
    /// the resourceVersion they were read at.
    pub fn list(&self, gr: &str, ns: Option<&str>) -> (Vec<(ObjKey, Value)>, u64) {
        let inner = self.inner.lock();
        let start = ObjKey::new(gr, ns.unwrap_or(""), "");
        let items = inner
            .objects
            .range(start..)
            .take_while(|(k, _)| k.gr == gr && ns.is_none_or(|n| k.ns == n))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        (items, inner.rv)
    }

    /// The objects of a group-resource (in one namespace, or all) that `keep` accepts; only
    /// those are copied.
    pub fn list_matching(
        &self,
        gr: &str,
        ns: Option<&str>,
        mut keep: impl FnMut(&Value) -> bool,
    ) -> Vec<(ObjKey, Value)> {
        let inner = self.inner.lock();
        let start = ObjKey::new(gr, ns.unwrap_or(""), "");
        inner
            .objects
            .range(start..)
            .take_while(|(k, _)| k.gr == gr && ns.is_none_or(|n| k.ns == n))
            .filter(|(_, v)| keep(v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Runs `f` over every stored object without copying them (for the garbage collector).
    pub fn inspect_all<T>(&self, f: impl FnOnce(&BTreeMap<ObjKey, Value>) -> T) -> T {
        f(&self.inner.lock().objects)
    }

    /// Every key in the store (for the garbage collector).
    pub fn all(&self) -> Vec<(ObjKey, Value)> {
        self.inner
            .lock()
            .objects
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Atomically reads an object, lets `f` decide, and applies the decision; stored objects get
    /// the next resourceVersion. Returns what is stored afterwards (the deleted object for
    /// deletions, with a fresh resourceVersion, as Kubernetes returns it).
    pub fn mutate<F>(&self, key: &ObjKey, f: F) -> ApiResult<Option<Value>>
    where
        F: FnOnce(Option<&Value>) -> ApiResult<Write>,
    {
        let mut inner = self.inner.lock();
        let current = inner.objects.get(key).cloned();
        let decision = f(current.as_ref())?;
        let (kind, object) = match decision {
            Write::Keep => return Ok(current),
            Write::Put(mut obj) => {
                inner.rv += 1;
                let rv = inner.rv;
                obj["metadata"]["resourceVersion"] = json!(rv.to_string());
                inner.objects.insert(key.clone(), obj.clone());
                (
                    if current.is_some() {
                        EventType::Modified
                    } else {
                        EventType::Added
                    },
                    obj,
                )
            }
            Write::Delete => {
                let Some(mut obj) = inner.objects.remove(key) else {
                    return Err(ApiError::not_found(&key.gr, &key.name));
                };
                inner.rv += 1;
                obj["metadata"]["resourceVersion"] = json!(inner.rv.to_string());
                (EventType::Deleted, obj)
            }
        };
        let event = Arc::new(Event {
            rv: inner.rv,
            kind,
            key: key.clone(),
            object: object.clone(),
            previous: current,
        });
        inner.history.push_back(event.clone());
        while inner.history.len() > self.history_limit {
            if let Some(old) = inner.history.pop_front() {
                inner.oldest_watchable = old.rv;
            }
        }
        // Sending under the lock keeps the broadcast in resourceVersion order.
        let _ = self.tx.send(event);
        Ok(Some(object))
    }

    /// Starts a watch: the retained events after `from_rv`, then a receiver of every later event.
    /// `Err` (410 Expired) when events after `from_rv` were already dropped from history.
    pub fn watch_from(&self, from_rv: u64) -> ApiResult<WatchStart> {
        let inner = self.inner.lock();
        if from_rv < inner.oldest_watchable {
            return Err(ApiError::expired(format!(
                "too old resource version: {from_rv} ({})",
                inner.oldest_watchable
            )));
        }
        let past = inner
            .history
            .iter()
            .filter(|e| e.rv > from_rv)
            .cloned()
            .collect();
        Ok((past, self.tx.subscribe()))
    }

    /// Starts a watch from now: a snapshot of a group-resource plus a receiver of later events.
    pub fn snapshot_and_subscribe(
        &self,
        gr: &str,
        ns: Option<&str>,
    ) -> (Vec<Value>, u64, broadcast::Receiver<Arc<Event>>) {
        let inner = self.inner.lock();
        let start = ObjKey::new(gr, ns.unwrap_or(""), "");
        let items = inner
            .objects
            .range(start..)
            .take_while(|(k, _)| k.gr == gr && ns.is_none_or(|n| k.ns == n))
            .map(|(_, v)| v.clone())
            .collect();
        (items, inner.rv, self.tx.subscribe())
    }

    /// A receiver of every future event (controllers use it as a wake-up).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    /// Whether a resourceVersion is still inside the retained history.
    pub fn is_compacted(&self, rv: u64) -> bool {
        rv < self.inner.lock().oldest_watchable
    }

    /// Exports every object (for `--data-dir`).
    pub fn export(&self) -> Value {
        let inner = self.inner.lock();
        json!({
            "rv": inner.rv,
            "objects": inner.objects.iter().map(|(k, v)| json!({"gr": k.gr, "ns": k.ns, "name": k.name, "object": v})).collect::<Vec<_>>(),
        })
    }

    /// Loads objects exported by [`Store::export`].
    pub fn import(&self, data: &Value) {
        let mut inner = self.inner.lock();
        inner.rv = data["rv"].as_u64().unwrap_or(1);
        inner.oldest_watchable = inner.rv;
        for o in data["objects"].as_array().into_iter().flatten() {
            let key = ObjKey::new(
                o["gr"].as_str().unwrap_or_default(),
                o["ns"].as_str().unwrap_or_default(),
                o["name"].as_str().unwrap_or_default(),
            );
            inner.objects.insert(key, o["object"].clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_versions_are_global_and_monotonic() {
        let s = Store::new(10);
        let a = s
            .mutate(&ObjKey::new("configmaps", "d", "a"), |_| {
                Ok(Write::Put(json!({"metadata": {}})))
            })
            .unwrap();
        let b = s
            .mutate(&ObjKey::new("secrets", "d", "b"), |_| {
                Ok(Write::Put(json!({"metadata": {}})))
            })
            .unwrap();
        assert!(rv_of(&a.unwrap()).unwrap() < rv_of(&b.unwrap()).unwrap());
    }

    #[test]
    fn watch_from_compacted_history_expires() {
        let s = Store::new(2);
        for i in 0..5 {
            s.mutate(&ObjKey::new("configmaps", "d", format!("c{i}")), |_| {
                Ok(Write::Put(json!({"metadata": {}})))
            })
            .unwrap();
        }
        let err = s.watch_from(2).unwrap_err();
        assert_eq!((err.code, err.reason), (410, "Expired"));
        let (past, _) = s.watch_from(s.current_rv() - 1).unwrap();
        assert_eq!(past.len(), 1);
    }
}
