//! HTTP routing and the verb handlers.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::cluster::{Cluster, DeleteOpts, Deleted, Identity, Propagation, Target, WriteOpts};
use crate::kinds::ResourceInfo;
use crate::patch::PatchType;
use crate::selectors::Selector;
use crate::status::{ApiError, ApiResult, success_status};
use crate::{discovery, kubelet, openapi, rbac, table, watch};

/// Response body: whole or streamed.
pub type Body = BoxBody<Bytes, Infallible>;

/// Server-wide settings the handlers need.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// The admin bearer token.
    pub admin_token: String,
    /// Interval of watch bookmarks.
    pub bookmark_every: Duration,
    /// Enforce RBAC for non-admin tokens.
    pub authorize: bool,
}

/// Decodes `%XX` and `+` in a query component.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match u8::from_str_radix(
                    std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"),
                    16,
                ) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn query_map(q: Option<&str>) -> HashMap<String, String> {
    q.unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn full(code: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, content_type)
        .body(Full::new(body.into()).boxed())
        .expect("valid response")
}

/// A JSON response.
pub fn json_response(code: u16, v: &Value) -> Response<Body> {
    full(
        StatusCode::from_u16(code).unwrap_or(StatusCode::OK),
        "application/json",
        serde_json::to_vec(v).unwrap_or_default(),
    )
}

/// A Status error response.
pub fn error_response(e: &ApiError) -> Response<Body> {
    json_response(e.code, &e.to_status())
}

fn truthy(q: &HashMap<String, String>, k: &str) -> bool {
    matches!(q.get(k).map(String::as_str), Some("true") | Some("1"))
}

/// A parsed resource path.
#[derive(Debug, Clone, Default)]
struct ResourcePath {
    group: String,
    version: String,
    ns: Option<String>,
    plural: String,
    name: Option<String>,
    sub: Option<String>,
    watch: bool,
}

fn parse_resource_path(segs: &[&str]) -> Option<ResourcePath> {
    let (group, version, rest) = match segs {
        ["api", v, rest @ ..] => (String::new(), v.to_string(), rest),
        ["apis", g, v, rest @ ..] => (g.to_string(), v.to_string(), rest),
        _ => return None,
    };
    let (watch, rest) = match rest {
        ["watch", r @ ..] => (true, r),
        r => (false, r),
    };
    let mut p = ResourcePath {
        group,
        version,
        watch,
        ..Default::default()
    };
    match rest {
        [] => return None,
        ["namespaces", ns, plural, tail @ ..]
            if !(group_is_core(&p)
                && (*plural == "status" || *plural == "finalize")
                && tail.is_empty()) =>
        {
            p.ns = Some(ns.to_string());
            p.plural = plural.to_string();
            p.name = tail.first().map(|s| s.to_string());
            p.sub = tail.get(1).map(|s| s.to_string());
            if tail.len() > 2 {
                return None;
            }
        }
        [plural, tail @ ..] => {
            p.plural = plural.to_string();
            p.name = tail.first().map(|s| s.to_string());
            p.sub = tail.get(1).map(|s| s.to_string());
            if tail.len() > 2 {
                return None;
            }
        }
    }
    Some(p)
}

fn group_is_core(p: &ResourcePath) -> bool {
    p.group.is_empty()
}

/// Serves one request.
pub async fn handle(
    cluster: Arc<Cluster>,
    cfg: Arc<ApiConfig>,
    req: Request<Incoming>,
) -> Response<Body> {
    let path = req.uri().path().to_string();
    if matches!(path.as_str(), "/healthz" | "/livez" | "/readyz") {
        return full(StatusCode::OK, "text/plain", "ok");
    }
    let token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
        .unwrap_or_default()
        .to_string();
    let identity = if !token.is_empty() && token == cfg.admin_token {
        Some(Identity {
            user: "kube-emu-admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        })
    } else if token.is_empty() {
        None
    } else {
        cluster.tokens.read().get(&token).cloned()
    };
    let Some(mut identity) = identity else {
        return error_response(&ApiError::unauthorized());
    };
    if let Some(user) = req
        .headers()
        .get("impersonate-user")
        .and_then(|h| h.to_str().ok())
    {
        // Only the admin may impersonate (kubectl --as / --as-group).
        if !identity.groups.iter().any(|g| g == "system:masters") {
            return error_response(&ApiError::forbidden(format!(
                "users \"{user}\" is forbidden: User \"{}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope",
                identity.user
            )));
        }
        let mut groups: Vec<String> = req
            .headers()
            .get_all("impersonate-group")
            .iter()
            .filter_map(|h| h.to_str().ok().map(String::from))
            .collect();
        if let Some(rest) = user.strip_prefix("system:serviceaccount:") {
            groups.push("system:serviceaccounts".into());
            if let Some((ns, _)) = rest.split_once(':') {
                groups.push(format!("system:serviceaccounts:{ns}"));
            }
        }
        identity = Identity {
            user: user.to_string(),
            groups,
        };
    }
    if !identity.groups.iter().any(|g| g == "system:authenticated") {
        identity.groups.push("system:authenticated".into());
    }
    match route(cluster, cfg, identity, req).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

async fn route(
    cluster: Arc<Cluster>,
    cfg: Arc<ApiConfig>,
    identity: Identity,
    req: Request<Incoming>,
) -> ApiResult<Response<Body>> {
    let path = req.uri().path().trim_end_matches('/').to_string();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let q = query_map(req.uri().query());
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if req.method() == Method::GET {
        match segs.as_slice() {
            ["version"] => return Ok(json_response(200, &discovery::version())),
            ["api"] | ["apis"] if discovery::wants_aggregated(&accept) => {
                let doc = discovery::aggregated(&cluster.registry, segs[0] == "api");
                return Ok(full(
                    StatusCode::OK,
                    discovery::AGGREGATED_V2,
                    serde_json::to_vec(&doc).unwrap_or_default(),
                ));
            }
            ["api"] => {
                return Ok(json_response(
                    200,
                    &discovery::core_versions(&cluster.address.read()),
                ));
            }
            ["apis"] => return Ok(json_response(200, &discovery::groups(&cluster.registry))),
            ["api", v] => {
                return discovery::resources(&cluster.registry, "", v)
                    .map(|d| json_response(200, &d));
            }
            ["apis", g] => {
                return discovery::group(&cluster.registry, g).map(|d| json_response(200, &d));
            }
            ["apis", g, v] => {
                return discovery::resources(&cluster.registry, g, v)
                    .map(|d| json_response(200, &d));
            }
            ["openapi", "v3"] => {
                return Ok(json_response(200, &openapi::v3_root(&cluster.registry)));
            }
            ["openapi", "v3", rest @ ..] => {
                return openapi::v3_group_version(&cluster.registry, &rest.join("/"))
                    .map(|d| json_response(200, &d));
            }
            ["openapi", "v2"] | ["swagger-2.0.0.pb-v1"] => {
                // kubectl asks for protobuf here and falls back when told 404.
                if accept.contains("protobuf") {
                    return Err(ApiError::path_not_found());
                }
                return Ok(json_response(200, &openapi::v2(&cluster.registry)));
            }
            _ => {}
        }
    }
    let Some(rp) = parse_resource_path(&segs) else {
        return Err(ApiError::path_not_found());
    };
    let info = cluster
        .registry
        .find(&rp.group, &rp.version, &rp.plural)
        .ok_or_else(ApiError::path_not_found)?;
    if rp.ns.is_some() && !info.namespaced {
        return Err(ApiError::path_not_found());
    }
    let ns = rp.ns.clone().unwrap_or_default();
    if info.namespaced && rp.ns.is_none() && (rp.name.is_some() || req.method() != Method::GET) {
        return Err(ApiError::path_not_found());
    }
    if cfg.authorize {
        let watching = rp.watch || truthy(&q, "watch");
        let verb = match (req.method().as_str(), rp.name.is_some()) {
            ("GET", _) if watching => "watch",
            ("GET", true) => "get",
            ("GET", false) => "list",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) => "patch",
            ("DELETE", true) => "delete",
            ("DELETE", false) => "deletecollection",
            _ => "unknown",
        };
        let resource = match &rp.sub {
            Some(sub) => format!("{}/{sub}", rp.plural),
            None => rp.plural.clone(),
        };
        let attrs = rbac::Attributes {
            verb,
            group: &rp.group,
            resource: &resource,
            namespace: rp.ns.as_deref(),
            name: rp.name.as_deref(),
        };
        if !rbac::allowed(&cluster, &identity, &attrs) {
            return Err(rbac::forbidden(&identity, &attrs));
        }
    }
    match rp.sub.as_deref() {
        None | Some("status") => {}
        Some("log") if info.kind == "Pod" && info.group.is_empty() => {
            let name = rp.name.clone().unwrap_or_default();
            return kubelet::logs(cluster, &ns, &name, &q).await;
        }
        Some("token") if info.kind == "ServiceAccount" && req.method() == Method::POST => {
            let name = rp.name.clone().unwrap_or_default();
            cluster.get(Target {
                info: &info,
                version: &rp.version,
                ns: &ns,
                name: &name,
            })?;
            let token = cluster.service_account_token(&ns, &name);
            let exp = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1))
                .strftime("%Y-%m-%dT%H:%M:%SZ")
                .to_string();
            return Ok(json_response(
                201,
                &json!({"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1", "metadata": {"name": name, "namespace": ns}, "spec": {"audiences": []}, "status": {"token": token, "expirationTimestamp": exp}}),
            ));
        }
        Some("scale") if crate::scale::paths(&info, &rp.version).is_some() && rp.name.is_some() => {
            let name = rp.name.clone().unwrap_or_default();
            let method = req.method().clone();
            let ct = req
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("application/json")
                .to_string();
            let manager = q
                .get("fieldManager")
                .cloned()
                .unwrap_or_else(|| "kubectl".into());
            let body = req
                .into_body()
                .collect()
                .await
                .map_err(|e| ApiError::bad_request(e.to_string()))?
                .to_bytes();
            let opts = WriteOpts {
                manager,
                dry_run: q.get("dryRun").is_some_and(|v| v == "All"),
                ..Default::default()
            };
            let t = Target {
                info: &info,
                version: &rp.version,
                ns: &ns,
                name: &name,
            };
            let (code, v) = crate::scale::handle(&cluster, t, &method, &body, &ct, &opts)?;
            return Ok(json_response(code, &v));
        }
        Some(_) => return Err(ApiError::path_not_found()),
    }
    if rp.sub.as_deref() == Some("status") && !info.has_status(&rp.version) {
        return Err(ApiError::path_not_found());
    }
    let method = req.method().clone();
    let headers = req.headers().clone();
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("unknown")
        .to_string();
    let body = req
        .into_body()
        .collect()
        .await
        .map_err(|e| ApiError::bad_request(e.to_string()))?
        .to_bytes();
    let manager = q.get("fieldManager").cloned().unwrap_or_else(|| {
        user_agent
            .split('/')
            .next()
            .unwrap_or("unknown")
            .to_string()
    });
    let dry_run = q.get("dryRun").is_some_and(|v| v == "All");
    let wopts = WriteOpts {
        manager,
        dry_run,
        subresource: rp.sub.clone(),
        force: truthy(&q, "force"),
        applied: false,
        strict: q.get("fieldValidation").is_some_and(|v| v == "Strict"),
    };
    let version = rp.version.clone();
    match (method, rp.name.as_deref()) {
        (Method::GET, None) => {
            if rp.watch || truthy(&q, "watch") {
                return Ok(start_watch(cluster, cfg, &info, &rp, &q));
            }
            list(&cluster, &info, &version, rp.ns.as_deref(), &q, &accept)
        }
        (Method::GET, Some(name)) => {
            if rp.watch {
                let mut q2 = q.clone();
                q2.insert("fieldSelector".into(), format!("metadata.name={name}"));
                return Ok(start_watch(cluster, cfg, &info, &rp, &q2));
            }
            let obj = cluster.get(Target {
                info: &info,
                version: &version,
                ns: &ns,
                name,
            })?;
            if wants_table(&accept) {
                let rv = obj["metadata"]["resourceVersion"].clone();
                return Ok(json_response(
                    200,
                    &table::render(&info, &version, &[obj], json!({"resourceVersion": rv})),
                ));
            }
            Ok(json_response(200, &obj))
        }
        (Method::POST, None) => {
            let obj = parse_body(&body, headers.get(header::CONTENT_TYPE))?;
            let created = cluster.create(&info, &version, &ns, obj, &wopts)?;
            Ok(json_response(201, &created))
        }
        (Method::PUT, Some(name)) => {
            let obj = parse_body(&body, headers.get(header::CONTENT_TYPE))?;
            let t = Target {
                info: &info,
                version: &version,
                ns: &ns,
                name,
            };
            Ok(json_response(200, &cluster.update(t, obj, &wopts)?))
        }
        (Method::PATCH, Some(name)) => {
            let ct = headers
                .get(header::CONTENT_TYPE)
                .and_then(|h| h.to_str().ok())
                .unwrap_or_default();
            let ty = PatchType::from_content_type(ct)?;
            let patch: Value = if ty == PatchType::Apply {
                serde_yaml::from_slice(&body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
            } else {
                serde_json::from_slice(&body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
            };
            let t = Target {
                info: &info,
                version: &version,
                ns: &ns,
                name,
            };
            let existed = cluster
                .store
                .get(&crate::store::ObjKey::new(info.storage_key(), &ns, name))
                .is_some();
            let out = cluster.patch(t, ty, &patch, &wopts)?;
            Ok(json_response(if existed { 200 } else { 201 }, &out))
        }
        (Method::DELETE, Some(name)) => {
            let opts = delete_opts(&q, &body)?;
            let t = Target {
                info: &info,
                version: &version,
                ns: &ns,
                name,
            };
            match cluster.delete(t, &opts)? {
                Deleted::Pending(o) => Ok(json_response(200, &o)),
                Deleted::Now(o) => {
                    if info.is_custom() || !matches!(info.kind.as_str(), "Pod" | "Namespace") {
                        let uid = o
                            .pointer("/metadata/uid")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        Ok(json_response(
                            200,
                            &success_status(&info.group_resource(), name, uid),
                        ))
                    } else {
                        Ok(json_response(200, &o))
                    }
                }
            }
        }
        (Method::DELETE, None) => {
            let opts = delete_opts(&q, &body)?;
            let labels = Selector::parse(
                q.get("labelSelector")
                    .map(String::as_str)
                    .unwrap_or_default(),
            )?;
            let fields = Selector::parse(
                q.get("fieldSelector")
                    .map(String::as_str)
                    .unwrap_or_default(),
            )?;
            let (items, _) = cluster.store.list(&info.storage_key(), rp.ns.as_deref());
            let mut deleted = Vec::new();
            for (k, o) in items {
                let o = Cluster::present(&info, &version, o);
                if labels.matches_labels(&o) && fields.matches_fields(&o) {
                    let t = Target {
                        info: &info,
                        version: &version,
                        ns: &k.ns,
                        name: &k.name,
                    };
                    match cluster.delete(t, &opts) {
                        Ok(Deleted::Now(o)) | Ok(Deleted::Pending(o)) => deleted.push(o),
                        Err(e) if e.code == 404 => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            Ok(json_response(
                200,
                &json!({"kind": info.kind.clone() + "List", "apiVersion": info.api_version(&version), "metadata": {"resourceVersion": cluster.store.current_rv().to_string()}, "items": deleted}),
            ))
        }
        (m, _) => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({m})"
        ))),
    }
}

fn wants_table(accept: &str) -> bool {
    accept.contains("as=Table")
}

fn parse_body(body: &[u8], ct: Option<&header::HeaderValue>) -> ApiResult<Value> {
    let ct = ct
        .and_then(|h| h.to_str().ok())
        .unwrap_or("application/json");
    if ct.contains("protobuf") {
        return crate::protobuf::decode(body);
    }
    if ct.contains("yaml") {
        return serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding body: {e}")))
}

fn delete_opts(q: &HashMap<String, String>, body: &[u8]) -> ApiResult<DeleteOpts> {
    let b: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(body).unwrap_or(json!({}))
    };
    let policy = q
        .get("propagationPolicy")
        .cloned()
        .or_else(|| b["propagationPolicy"].as_str().map(String::from))
        .or_else(|| match b["orphanDependents"].as_bool() {
            Some(true) => Some("Orphan".into()),
            _ => None,
        });
    let propagation = match policy.as_deref() {
        None | Some("Background") => Propagation::Background,
        Some("Foreground") => Propagation::Foreground,
        Some("Orphan") => Propagation::Orphan,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unsupported propagationPolicy {other:?}"
            )));
        }
    };
    let grace = q
        .get("gracePeriodSeconds")
        .and_then(|g| g.parse().ok())
        .or_else(|| b["gracePeriodSeconds"].as_i64());
    let dry_run = q.get("dryRun").is_some_and(|v| v == "All")
        || b["dryRun"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x == "All"));
    Ok(DeleteOpts {
        propagation,
        grace_seconds: grace,
        uid: b
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(String::from),
        resource_version: b
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(String::from),
        dry_run,
    })
}

fn list(
    cluster: &Cluster,
    info: &ResourceInfo,
    version: &str,
    ns: Option<&str>,
    q: &HashMap<String, String>,
    accept: &str,
) -> ApiResult<Response<Body>> {
    let labels = Selector::parse(
        q.get("labelSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    )?;
    let fields = Selector::parse(
        q.get("fieldSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    )?;
    let limit: usize = q
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let current = cluster.store.current_rv();
    if let Some(rv) = q
        .get("resourceVersion")
        .filter(|r| !r.is_empty() && *r != "0")
    {
        let rv: u64 = rv
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?;
        match q.get("resourceVersionMatch").map(String::as_str) {
            Some("Exact") if rv != current => {
                return Err(ApiError::expired(format!(
                    "too old resource version: {rv} ({current})"
                )));
            }
            _ if rv > current => return Err(ApiError::too_large_rv()),
            _ => {}
        }
    }
    let (start_after, list_rv) = match q.get("continue").filter(|c| !c.is_empty()) {
        Some(c) => {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(c)
                .map_err(|_| ApiError::bad_request("invalid continue token"))?;
            let v: Value = serde_json::from_slice(&raw)
                .map_err(|_| ApiError::bad_request("invalid continue token"))?;
            let rv = v["rv"].as_u64().unwrap_or(0);
            if cluster.store.is_compacted(rv) {
                return Err(ApiError::expired(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                ));
            }
            (
                Some((
                    v["ns"].as_str().unwrap_or_default().to_string(),
                    v["name"].as_str().unwrap_or_default().to_string(),
                )),
                rv,
            )
        }
        None => (None, current),
    };
    // Only objects the label selector keeps are copied out of the store (labels read the same
    // before and after `present`).
    let items = cluster
        .store
        .list_matching(&info.storage_key(), ns, |o| labels.matches_labels(o));
    let mut out = Vec::new();
    let mut next = None;
    for (k, o) in items {
        if let Some((sns, sname)) = &start_after
            && (k.ns.as_str(), k.name.as_str()) <= (sns.as_str(), sname.as_str())
        {
            continue;
        }
        let o = Cluster::present(info, version, o);
        if !fields.matches_fields(&o) {
            continue;
        }
        if out.len() == limit {
            next = Some(true);
            break;
        }
        out.push(o);
    }
    let mut meta = json!({"resourceVersion": list_rv.to_string()});
    if next.is_some() {
        let last = out.last().expect("limit > 0");
        let token = json!({"rv": list_rv, "ns": last["metadata"]["namespace"].as_str().unwrap_or_default(), "name": last["metadata"]["name"]});
        meta["continue"] =
            json!(base64::engine::general_purpose::STANDARD.encode(token.to_string()));
    }
    if wants_table(accept) {
        return Ok(json_response(
            200,
            &table::render(info, version, &out, meta),
        ));
    }
    Ok(json_response(
        200,
        &json!({"kind": format!("{}List", info.kind), "apiVersion": info.api_version(version), "metadata": meta, "items": out}),
    ))
}

fn start_watch(
    cluster: Arc<Cluster>,
    cfg: Arc<ApiConfig>,
    info: &ResourceInfo,
    rp: &ResourcePath,
    q: &HashMap<String, String>,
) -> Response<Body> {
    let parse = |k: &str| Selector::parse(q.get(k).map(String::as_str).unwrap_or_default());
    let (labels, fields) = match (parse("labelSelector"), parse("fieldSelector")) {
        (Ok(l), Ok(f)) => (l, f),
        (Err(e), _) | (_, Err(e)) => return error_response(&e),
    };
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let params = watch::WatchParams {
        info: info.clone(),
        version: rp.version.clone(),
        ns: rp.ns.clone(),
        resource_version: q.get("resourceVersion").cloned(),
        labels,
        fields,
        timeout,
        bookmarks: truthy(q, "allowWatchBookmarks"),
        send_initial_events: truthy(q, "sendInitialEvents"),
        bookmark_every: cfg.bookmark_every,
    };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    tokio::spawn(watch::run(cluster, params, tx));
    stream_response("application/json", rx)
}

/// A streamed response fed by a channel.
pub fn stream_response(content_type: &str, rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    Response::builder()
        .status(200)
        .header(header::CONTENT_TYPE, content_type)
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .expect("valid response")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse() {
        let p = parse_resource_path(&["api", "v1", "namespaces", "a", "pods", "p", "log"]).unwrap();
        assert_eq!(
            (
                p.ns.as_deref(),
                p.plural.as_str(),
                p.name.as_deref(),
                p.sub.as_deref()
            ),
            (Some("a"), "pods", Some("p"), Some("log"))
        );
        let p = parse_resource_path(&["api", "v1", "namespaces", "a"]).unwrap();
        assert_eq!(
            (p.plural.as_str(), p.name.as_deref()),
            ("namespaces", Some("a"))
        );
        let p = parse_resource_path(&["api", "v1", "namespaces", "a", "status"]).unwrap();
        assert_eq!(
            (p.plural.as_str(), p.name.as_deref(), p.sub.as_deref()),
            ("namespaces", Some("a"), Some("status"))
        );
        let p =
            parse_resource_path(&["apis", "g", "v1", "watch", "namespaces", "n", "ws"]).unwrap();
        assert!(p.watch);
        assert_eq!(percent_decode("app%3Dweb+x"), "app=web x");
    }
}
