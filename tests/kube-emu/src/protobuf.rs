//! Just enough of the Kubernetes protobuf encoding to accept what kubectl's imperative commands
//! send (`kubectl create namespace|configmap|secret|serviceaccount`): the `k8s\0` envelope
//! and the few messages those objects are made of. Everything else must be sent as JSON.

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::status::{ApiError, ApiResult};

/// One decoded field: number and value.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn fields(b: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < b.len() {
        let key = varint(b, &mut pos)?;
        let (num, wire) = (key >> 3, key & 7);
        let f = match wire {
            0 => Field::Varint(varint(b, &mut pos)?),
            2 => {
                let len = varint(b, &mut pos)? as usize;
                let s = b.get(pos..pos + len)?;
                pos += len;
                Field::Bytes(s)
            }
            1 => {
                pos += 8;
                Field::Varint(0)
            }
            5 => {
                pos += 4;
                Field::Varint(0)
            }
            _ => return None,
        };
        out.push((num, f));
    }
    Some(out)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A `map<string, string|bytes>` entry.
fn map_entry(b: &[u8], bytes_value: bool) -> Option<(String, Value)> {
    let mut key = String::new();
    let mut value = Value::String(String::new());
    for (n, f) in fields(b)? {
        if let Field::Bytes(v) = f {
            match n {
                1 => key = text(v),
                2 if bytes_value => {
                    value = json!(base64::engine::general_purpose::STANDARD.encode(v))
                }
                2 => value = json!(text(v)),
                _ => {}
            }
        }
    }
    Some((key, value))
}

fn object_meta(b: &[u8]) -> Option<Value> {
    let mut m = Map::new();
    let (mut labels, mut annotations, mut finalizers) = (Map::new(), Map::new(), Vec::new());
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(v)) => drop(m.insert("name".into(), json!(text(v)))),
            (2, Field::Bytes(v)) => drop(m.insert("generateName".into(), json!(text(v)))),
            (3, Field::Bytes(v)) => drop(m.insert("namespace".into(), json!(text(v)))),
            (6, Field::Bytes(v)) => drop(m.insert("resourceVersion".into(), json!(text(v)))),
            (11, Field::Bytes(v)) => {
                let (k, val) = map_entry(v, false)?;
                labels.insert(k, val);
            }
            (12, Field::Bytes(v)) => {
                let (k, val) = map_entry(v, false)?;
                annotations.insert(k, val);
            }
            (14, Field::Bytes(v)) => finalizers.push(json!(text(v))),
            _ => {}
        }
    }
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        m.insert("annotations".into(), Value::Object(annotations));
    }
    if !finalizers.is_empty() {
        m.insert("finalizers".into(), Value::Array(finalizers));
    }
    Some(Value::Object(m))
}

fn decode_kind(kind: &str, raw: &[u8]) -> Option<Value> {
    let mut obj = json!({});
    let (mut data, mut binary, mut string_data) = (Map::new(), Map::new(), Map::new());
    for (n, f) in fields(raw)? {
        match (kind, n, f) {
            (_, 1, Field::Bytes(v)) => obj["metadata"] = object_meta(v)?,
            ("ConfigMap", 2, Field::Bytes(v)) => {
                let (k, val) = map_entry(v, false)?;
                data.insert(k, val);
            }
            ("ConfigMap", 3, Field::Bytes(v)) => {
                let (k, val) = map_entry(v, true)?;
                binary.insert(k, val);
            }
            ("ConfigMap", 4, Field::Varint(b)) | ("Secret", 5, Field::Varint(b)) => {
                obj["immutable"] = json!(b != 0)
            }
            ("Secret", 2, Field::Bytes(v)) => {
                let (k, val) = map_entry(v, true)?;
                data.insert(k, val);
            }
            ("Secret", 3, Field::Bytes(v)) => obj["type"] = json!(text(v)),
            ("Secret", 4, Field::Bytes(v)) => {
                let (k, val) = map_entry(v, false)?;
                string_data.insert(k, val);
            }
            ("ServiceAccount", 4, Field::Varint(b)) => {
                obj["automountServiceAccountToken"] = json!(b != 0)
            }
            _ => {}
        }
    }
    if !data.is_empty() {
        obj["data"] = Value::Object(data);
    }
    if !binary.is_empty() {
        obj["binaryData"] = Value::Object(binary);
    }
    if !string_data.is_empty() {
        obj["stringData"] = Value::Object(string_data);
    }
    Some(obj)
}

/// Decodes a protobuf-encoded Namespace, ConfigMap, Secret or ServiceAccount into JSON.
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let unsupported = |what: &str| {
        ApiError::unsupported_media_type(format!(
            "kube-emu decodes protobuf only for Namespace, ConfigMap, Secret and ServiceAccount ({what}); send application/json (for example kubectl apply -f)"
        ))
    };
    let payload = body
        .strip_prefix(b"k8s\0")
        .ok_or_else(|| unsupported("no k8s envelope"))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(payload).ok_or_else(|| unsupported("malformed"))? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (tn, tf) in fields(tm).ok_or_else(|| unsupported("malformed type meta"))? {
                    match (tn, tf) {
                        (1, Field::Bytes(v)) => api_version = text(v),
                        (2, Field::Bytes(v)) => kind = text(v),
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(v)) => raw = v,
            _ => {}
        }
    }
    if api_version != "v1"
        || !["Namespace", "ConfigMap", "Secret", "ServiceAccount"].contains(&kind.as_str())
    {
        return Err(unsupported(&format!("{api_version} {kind}")));
    }
    let mut obj = decode_kind(&kind, raw).ok_or_else(|| unsupported("malformed object"))?;
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(num: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![((num << 3) | 2) as u8, payload.len() as u8];
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn decodes_a_configmap_envelope() {
        let meta = [ld(1, b"c1"), ld(11, &[ld(1, b"app"), ld(2, b"x")].concat())].concat();
        let cm = [ld(1, &meta), ld(2, &[ld(1, b"k"), ld(2, b"v")].concat())].concat();
        let unknown = [
            ld(1, &[ld(1, b"v1"), ld(2, b"ConfigMap")].concat()),
            ld(2, &cm),
        ]
        .concat();
        let body = [b"k8s\0".to_vec(), unknown].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1", "labels": {"app": "x"}}, "data": {"k": "v"}})
        );
    }
}
