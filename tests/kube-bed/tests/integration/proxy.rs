//! The fault-injecting proxy: a request it dooms is applied by the API server, and the client
//! never hears so (the ambiguous answer).

use anyhow::Result;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

#[tokio::test]
async fn a_dropped_response_leaves_the_write_applied_and_the_client_in_the_dark() -> Result<()> {
    let ns = dcs_kube_bed::namespace("proxy").await?;
    let proxy = dcs_kube_bed::FaultProxy::start(ns.cp.address).await?;
    let via = dcs_kube_bed::control_plane::client_from_kubeconfig(
        &ns.cp.kubeconfig_via(&ns.name, proxy.address),
    )
    .await?;
    let through: Api<ConfigMap> = Api::default_namespaced(via);
    let direct: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    let cm = |name: &str| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
    };

    // Untouched, the proxy is transparent (TLS verifies against the cluster CA through it).
    through
        .create(&PostParams::default(), &cm("before"))
        .await?;
    assert!(direct.get_opt("before").await?.is_some());

    proxy.drop_next_response();
    let lost = through
        .create(&PostParams::default(), &cm("ambiguous"))
        .await;
    assert!(lost.is_err(), "the client got an answer: {lost:?}");
    assert!(!proxy.armed());
    assert_eq!(proxy.dropped(), 1);
    // ... and yet the server applied it: a retry of the same create is a conflict.
    assert!(direct.get_opt("ambiguous").await?.is_some());
    match through
        .create(&PostParams::default(), &cm("ambiguous"))
        .await
    {
        Err(kube::Error::Api(e)) => assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists")),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    Ok(())
}
