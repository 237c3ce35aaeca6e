//! A Kubernetes client whose requests can be made to fail ambiguously: the API server applies a
//! write and the answer is lost on the way back (a timeout, a reset connection), or the request
//! never arrives. It sits in the client (a `tower` layer), so it works against any API server.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::{Method, Request};

/// What happens to a matching request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Sent to the server (and applied), then its answer is lost.
    LoseAnswer,
    /// Never sent: lost on the way there.
    Drop,
}

/// Faults armed for the next requests of one method on a path containing `path`.
#[derive(Debug, Default, Clone)]
pub struct FaultPlan(Arc<Mutex<Plan>>);

#[derive(Debug, Default)]
struct Plan {
    armed: VecDeque<(Method, String, Fault)>,
    /// Requests seen, by method.
    seen: Vec<(Method, u64)>,
}

impl FaultPlan {
    /// Arm `fault` for the next request with `method` whose path contains `path` (faults queue up
    /// in order; each is used once).
    pub fn arm(&self, method: Method, path: &str, fault: Fault) {
        self.0
            .lock()
            .unwrap()
            .armed
            .push_back((method, path.to_owned(), fault));
    }

    /// Arm `faults` only if exactly `seen` requests with `method` went through so far (atomically
    /// with the requests): false, arming nothing, when another one came first.
    pub fn arm_if_seen(
        &self,
        method: &Method,
        seen: u64,
        faults: &[(Method, &str, Fault)],
    ) -> bool {
        let mut plan = self.0.lock().unwrap();
        if plan.seen_of(method) != seen {
            return false;
        }
        for (m, p, f) in faults {
            plan.armed.push_back((m.clone(), (*p).to_owned(), *f));
        }
        true
    }

    /// Requests with `method` that went through so far.
    pub fn seen(&self, method: &Method) -> u64 {
        self.0.lock().unwrap().seen_of(method)
    }

    /// Faults not used yet.
    pub fn pending(&self) -> usize {
        self.0.lock().unwrap().armed.len()
    }

    fn take(&self, method: &Method, path: &str) -> Option<Fault> {
        let mut plan = self.0.lock().unwrap();
        match plan.seen.iter_mut().find(|(m, _)| m == method) {
            Some((_, n)) => *n += 1,
            None => plan.seen.push((method.clone(), 1)),
        }
        let i = plan
            .armed
            .iter()
            .position(|(m, p, _)| m == method && path.contains(p.as_str()))?;
        plan.armed.remove(i).map(|(_, _, f)| f)
    }
}

impl Plan {
    fn seen_of(&self, method: &Method) -> u64 {
        self.seen
            .iter()
            .find(|(m, _)| m == method)
            .map_or(0, |(_, n)| *n)
    }
}

/// The layer.
#[derive(Clone)]
pub struct FaultLayer(pub FaultPlan);

impl<S> tower::Layer<S> for FaultLayer {
    type Service = FaultService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        FaultService {
            inner,
            plan: self.0.clone(),
        }
    }
}

/// The service.
pub struct FaultService<S> {
    inner: S,
    plan: FaultPlan,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, B> tower::Service<Request<B>> for FaultService<S>
where
    S: tower::Service<Request<B>>,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let fault = self.plan.take(req.method(), req.uri().path());
        if fault == Some(Fault::Drop) {
            return Box::pin(async {
                Err::<S::Response, BoxError>(
                    "connection reset by peer (injected, request not sent)".into(),
                )
            });
        }
        let answer = self.inner.call(req);
        Box::pin(async move {
            let response = answer.await.map_err(Into::into)?;
            if fault == Some(Fault::LoseAnswer) {
                drop(response);
                return Err(
                    "connection reset by peer (injected, after the server answered)".into(),
                );
            }
            Ok(response)
        })
    }
}

/// A client for `kubeconfig` (YAML) whose requests go through `plan`.
pub async fn client_with_faults(kubeconfig: &str) -> (kube::Client, FaultPlan) {
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    let plan = FaultPlan::default();
    let client = kube::client::ClientBuilder::try_from(config)
        .unwrap()
        .with_layer(&FaultLayer(plan.clone()))
        .build();
    (client, plan)
}
