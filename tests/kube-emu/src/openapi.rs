//! OpenAPI documents, enough for kubectl: v3 per group-version (explain, field validation and
//! patch-type discovery) and a small v2 document.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Map, Value, json};

use crate::kinds::{Registry, ResourceInfo};
use crate::status::{ApiError, ApiResult};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `reverse.dns.group.version.Kind`, as Kubernetes names its schemas.
pub fn schema_name(info: &ResourceInfo, version: &str) -> String {
    let group = if info.group.is_empty() {
        "io.k8s.api.core".to_string()
    } else {
        info.group.split('.').rev().collect::<Vec<_>>().join(".")
    };
    format!("{group}.{version}.{}", info.kind)
}

fn gv_resources(registry: &Registry) -> BTreeMap<String, Vec<(ResourceInfo, String)>> {
    let mut m: BTreeMap<String, Vec<(ResourceInfo, String)>> = BTreeMap::new();
    for r in registry.all() {
        for v in &r.versions {
            m.entry(gv_path(&r.group, v))
                .or_default()
                .push((r.clone(), v.clone()));
        }
    }
    m
}

fn hash_of(v: &Value) -> String {
    let mut h = DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:016X}", h.finish())
}

/// `/openapi/v3`: where each group-version's document is.
pub fn v3_root(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for (gv, _) in gv_resources(registry) {
        let doc = v3_group_version(registry, &gv).unwrap_or(Value::Null);
        paths.insert(
            gv.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash={}", hash_of(&doc))}),
        );
    }
    json!({"paths": paths})
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

fn object_meta_schema() -> Value {
    json!({
        "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Name must be unique within a namespace."},
            "namespace": {"type": "string", "description": "Namespace defines the space within which each name must be unique."},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Map of string keys and values that can be used to organize and categorize objects."},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Annotations is an unstructured key value map stored with a resource."},
            "finalizers": {"type": "array", "items": {"type": "string"}, "description": "Must be empty before the object is deleted from the registry."},
            "ownerReferences": {"type": "array", "items": {"type": "object"}, "description": "List of objects depended by this object."},
            "generateName": {"type": "string"}, "uid": {"type": "string"}, "resourceVersion": {"type": "string"},
            "generation": {"type": "integer", "format": "int64"}, "creationTimestamp": {"type": "string", "format": "date-time"},
            "deletionTimestamp": {"type": "string", "format": "date-time"},
        },
    })
}

fn kind_schema(info: &ResourceInfo, version: &str) -> Value {
    let gvk = json!([{"group": info.group, "version": version, "kind": info.kind}]);
    let mut schema = info
        .crd
        .as_ref()
        .and_then(|c| c.get(version))
        .and_then(|v| v.schema.clone())
        .unwrap_or_else(|| {
            json!({"type": "object", "description": format!("{} is a built-in kind served by kube-emu.", info.kind), "properties": {
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "data": {"type": "object", "additionalProperties": {"type": "string"}},
            }})
        });
    let props = schema
        .as_object_mut()
        .expect("schemas are objects")
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .expect("properties is an object");
    props.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
    props.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
    props.insert("metadata".into(), json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}], "description": "Standard object's metadata."}));
    schema["x-kubernetes-group-version-kind"] = gvk;
    schema
}

fn params() -> Value {
    json!([
        {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
        {"name": "force", "in": "query", "schema": {"type": "boolean"}},
    ])
}

/// `/openapi/v3/{api/v1 | apis/g/v}`.
pub fn v3_group_version(registry: &Registry, gv: &str) -> ApiResult<Value> {
    let gv = gv.split('?').next().unwrap_or(gv);
    let all = gv_resources(registry);
    let list = all.get(gv).ok_or_else(ApiError::path_not_found)?;
    let mut schemas = Map::new();
    schemas.insert(OBJECT_META.into(), object_meta_schema());
    let mut paths = Map::new();
    for (info, version) in list {
        let name = schema_name(info, version);
        schemas.insert(name.clone(), kind_schema(info, version));
        let gvk = json!({"group": info.group, "version": version, "kind": info.kind});
        let base = if info.namespaced {
            format!("/{gv}/namespaces/{{namespace}}/{}/{{name}}", info.plural)
        } else {
            format!("/{gv}/{}/{{name}}", info.plural)
        };
        let body_ref = json!({"schema": {"$ref": format!("#/components/schemas/{name}")}});
        let patch_content = json!({
            "application/json-patch+json": {"schema": {"type": "object"}},
            "application/merge-patch+json": {"schema": {"type": "object"}},
            "application/apply-patch+yaml": {"schema": {"type": "object"}},
        });
        paths.insert(base, json!({
            "get": {"x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk, "responses": {"200": {"content": {"application/json": body_ref}}}},
            "put": {"x-kubernetes-action": "put", "x-kubernetes-group-version-kind": gvk, "parameters": params(), "requestBody": {"content": {"application/json": body_ref}}, "responses": {"200": {"content": {"application/json": body_ref}}}},
            "patch": {"x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk, "parameters": params(), "requestBody": {"content": patch_content}, "responses": {"200": {"content": {"application/json": body_ref}}}},
            "delete": {"x-kubernetes-action": "delete", "x-kubernetes-group-version-kind": gvk},
        }));
    }
    Ok(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// A small Swagger 2.0 document (kubectl reads v3; this is for other tools).
pub fn v2(registry: &Registry) -> Value {
    let mut defs = Map::new();
    for r in registry.all() {
        for v in &r.versions {
            defs.insert(schema_name(&r, v), kind_schema(&r, v));
        }
    }
    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.33.0"}, "paths": {}, "definitions": defs})
}
