//! The pure build: the Kubernetes objects that run one sync's runner.
//!
//! Credentials only ever appear as `secretKeyRef`s, CA bundles as volumes of the Secret or
//! ConfigMap key they are in; no secret value passes through here.

use std::collections::BTreeMap;

use dcs_crds::{Credentials, DorisChangelogSync, DorisChangelogSyncSpec, StartupMode};
use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy},
        batch::v1::{Job, JobSpec},
        core::v1::{
            Capabilities, ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar,
            EnvVarSource, HTTPGetAction, KeyToPath, ObjectFieldSelector, PodSecurityContext,
            PodSpec, PodTemplateSpec, Probe, ResourceRequirements, SeccompProfile,
            SecretKeySelector, SecretVolumeSource, SecurityContext, ServiceAccount, Volume,
            VolumeMount,
        },
        rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
    },
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{LabelSelector, ObjectMeta},
        util::intstr::IntOrString,
    },
};
use kube::{Resource, ResourceExt};

use dcs_crds::shard::shard_configmap;

use super::names::{self, CONFIG_KEY};
use super::plan::Run;
use super::shards::{BACKOFF_LIMIT_PER_INDEX, ShardRun};

/// Where the config ConfigMap is mounted in the runner container.
pub const CONFIG_DIR: &str = "/etc/dcs";
/// Pod-template annotation with the hash of the effective config: a change rolls the runner.
pub const CONFIG_HASH_ANNOTATION: &str = "dcs.dev/config-hash";
/// Config ConfigMap annotation with the reinitNonce the config was built for.
pub const NONCE_ANNOTATION: &str = "dcs.dev/reinit-nonce";
/// Label naming the sync an object belongs to.
pub const SYNC_LABEL: &str = "dcs.dev/sync";

/// The default runner image: `dcs-runner:<crate version>`.
pub fn default_runner_image() -> String {
    format!("dcs-runner:{}", env!("CARGO_PKG_VERSION"))
}

/// What the operator's flags say about runners, for what a sync's `spec.runner` leaves unset.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunnerDefaults {
    /// `--runner-image`.
    pub image: Option<String>,
    /// `--runner-resources` (the chart's `runner.resources`).
    pub resources: Option<ResourceRequirements>,
    /// `--runner-metrics-addr` (the chart's `runner.metricsAddr`).
    pub metrics_addr: RunnerMetricsAddr,
    /// `--allowed-runner-images` and `--allowed-runner-service-accounts` (the chart's
    /// `runner.allowedImages`, `runner.allowedServiceAccounts`).
    pub policy: dcs_crds::access::RunnerPolicy,
}

impl RunnerDefaults {
    /// The image a sync's runner gets when its spec names none.
    pub fn default_image(&self) -> String {
        self.image.clone().unwrap_or_else(default_runner_image)
    }

    /// Whether the operator lets `spec.runner` have its image and service account.
    ///
    /// # Errors
    /// The message to block the sync with, naming the field and the setting.
    pub fn allows(&self, spec: &dcs_crds::DorisChangelogSyncSpec) -> Result<(), String> {
        self.policy.check(spec, &self.default_image())
    }
}

/// The port runners serve `/metrics`, `/healthz` and `/readyz` on unless `--runner-metrics-addr`
/// says otherwise.
pub const RUNNER_METRICS_PORT: u16 = 9464;
/// The name of that container port: the probes and a PodMonitor refer to it.
pub const RUNNER_METRICS_PORT_NAME: &str = "metrics";
/// The host part of `--runner-metrics-addr` that binds each runner to its pod's address.
pub const POD_IP_HOST: &str = "$(POD_IP)";

/// Where a runner container serves its metrics and probes: `DCS_METRICS_ADDR` in its environment
/// and its `metrics` container port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunnerMetricsAddr {
    /// An IP address (IPv6 in brackets), or [`POD_IP_HOST`], which Kubernetes expands from the
    /// container's `POD_IP`.
    pub host: String,
    /// The port.
    pub port: u16,
}

impl Default for RunnerMetricsAddr {
    fn default() -> Self {
        Self {
            host: "0.0.0.0".to_owned(),
            port: RUNNER_METRICS_PORT,
        }
    }
}

impl std::fmt::Display for RunnerMetricsAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// The built-in requests and limits of a runner container (BENCHMARKS.md, "Runner memory"): the
/// runner peaked at 37–41 MiB in a 1M-row snapshot, a changelog window of 800 000 changes and a
/// sink outage, whatever the table size, because its batches and channels are bounded (73–78 MiB
/// with 64 MiB batches). The memory request is about three times that; the limit leaves room for
/// larger `batch.maxBytes`, wider rows and the allocator's slack before an OOM kill (a restart,
/// not data loss). No CPU limit: CPU is compressible, and a throttled runner answers its probes
/// late and runs fewer async workers.
pub fn default_runner_resources() -> ResourceRequirements {
    let quantities = |pairs: &[(&str, &str)]| {
        Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
                .collect(),
        )
    };
    ResourceRequirements {
        requests: quantities(&[("cpu", "100m"), ("memory", "128Mi")]),
        limits: quantities(&[("memory", "512Mi")]),
        claims: None,
    }
}

/// The runner container's resources: the sync's `spec.runner.resources`, else the operator's
/// default, else [`default_runner_resources`]. The first that is set is taken whole (fields are
/// not mixed across levels, so a request never meets a limit it was not chosen with); an empty
/// `resources: {}` in a sync asks for none.
pub fn runner_resources(
    sync: Option<&ResourceRequirements>,
    operator_default: Option<&ResourceRequirements>,
) -> ResourceRequirements {
    sync.or(operator_default)
        .cloned()
        .unwrap_or_else(default_runner_resources)
}

fn http_probe(path: &str, failure_threshold: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            port: IntOrString::String(RUNNER_METRICS_PORT_NAME.to_owned()),
            ..Default::default()
        }),
        period_seconds: Some(10),
        // A loaded node answers late; a probe's timeout is not the runner's health.
        timeout_seconds: Some(5),
        success_threshold: Some(1),
        failure_threshold: Some(failure_threshold),
        ..Default::default()
    }
}

/// Liveness on `/healthz`, which the runner's metrics server answers from its own task whatever
/// the pipeline is doing: a long snapshot split, a visibility wait or Stream Load retries never
/// fail it. It fails only when the process cannot answer at all (a starved or wedged runtime, a
/// metrics port it could not bind), and six misses in a row (a minute) are needed before the
/// kubelet restarts the container, so a slow node or a garbage-collecting API server never does.
/// No `initialDelaySeconds`: the server is up before the runner first reaches out to Doris.
pub fn liveness_probe() -> Probe {
    http_probe("/healthz", 6)
}

/// Readiness on `/readyz`: 503 until the start point is resolved and the first read from the
/// source succeeded, and after a fatal error. Readiness never restarts anything; it is what
/// `kubectl rollout status`, `kubectl wait --for=condition=Ready` and PodDisruptionBudgets read.
/// Three misses (30 s) keep one late answer from flapping it.
pub fn readiness_probe() -> Probe {
    http_probe("/readyz", 3)
}

/// The runner workload: a Deployment for incremental syncs, a Job for `startup.mode: snapshot`.
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    /// One replica, Recreate.
    Deployment(Box<Deployment>),
    /// A bounded snapshot.
    Job(Box<Job>),
}

/// Everything that runs one sync.
#[derive(Clone, Debug, PartialEq)]
pub struct RunnerObjects {
    /// The effective manifest.
    pub config: ConfigMap,
    /// The empty checkpoint ConfigMap (created once, never overwritten).
    pub checkpoint: ConfigMap,
    /// Identity and least privilege for the runner, unless spec.runner.serviceAccountName is set.
    pub rbac: Option<(ServiceAccount, Role, RoleBinding)>,
    /// The Deployment or Job.
    pub workload: Workload,
}

/// Labels on every object of a sync.
pub fn labels(sync: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "dcs-runner".to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            "dcs-operator".to_owned(),
        ),
        (SYNC_LABEL.to_owned(), sync.to_owned()),
    ])
}

/// The manifest the runner reads with `-f`: the sync with the active consumer and startup mode,
/// and after a re-initialisation the annotation naming the consumer it replaces (the runner's
/// directive to rebuild the sink, `dcs_crds::checkpoint::REINITIALIZED_FROM_ANNOTATION`).
///
/// Without an offset table the runner's consumer id is the manifest's name, so the name carries the
/// active consumer id there; with one, `offsets.consumerId` does.
pub fn effective_manifest(sync: &DorisChangelogSync, run: &Run) -> String {
    let mut spec = sync.spec.clone();
    spec.startup.mode = run.startup_mode;
    if run.startup_mode != StartupMode::FromTimestamp {
        spec.startup.timestamp = None;
    }
    let name = match spec.offsets.as_mut() {
        Some(offsets) => {
            offsets.consumer_id = Some(run.consumer_id.clone());
            sync.name_any()
        }
        None => run.consumer_id.clone(),
    };
    spec.runner = Default::default();
    let mut metadata = serde_json::json!({"name": name, "namespace": sync.namespace()});
    let mut annotations = serde_json::Map::new();
    if let Some(previous) = &run.previous_consumer_id {
        // A re-initialised consumer: its runner rebuilds the sink when it starts afresh.
        annotations.insert(
            dcs_crds::checkpoint::REINITIALIZED_FROM_ANNOTATION.to_owned(),
            previous.clone().into(),
        );
    }
    // A snapshot read by shards: their T0 (docs/ARCHITECTURE.md §4.8); else one runner reads it.
    match &run.shards {
        Some(shards) => {
            // The parallelism the snapshot started with (docs/ARCHITECTURE.md §4.8).
            spec.snapshot.parallelism = i32::try_from(shards.count).unwrap_or(1);
            if let Some(t0) = shards.t0_tso {
                annotations.insert(
                    dcs_crds::shard::SNAPSHOT_T0_ANNOTATION.to_owned(),
                    t0.to_string().into(),
                );
            }
        }
        None => spec.snapshot = Default::default(),
    }
    if !annotations.is_empty() {
        metadata["annotations"] = annotations.into();
    }
    let manifest = serde_json::json!({
        "apiVersion": "dcs.dev/v1alpha1",
        "kind": "DorisChangelogSync",
        "metadata": metadata,
        "spec": spec,
    });
    serde_yaml::to_string(&manifest).expect("a manifest always serializes")
}

/// A stable content hash (FNV-1a; `DefaultHasher` may change between Rust versions).
pub fn content_hash(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

fn meta(sync: &DorisChangelogSync, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: sync.namespace(),
        labels: Some(labels(&sync.name_any())),
        owner_references: sync.controller_owner_ref(&()).map(|o| vec![o]),
        ..Default::default()
    }
}

fn secret_env(name: &str, credentials: &Credentials, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: credentials.secret_name.clone(),
                key: key.to_owned(),
                optional: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The runner image's user (distroless `nonroot`, `USER 65532:65532` in docker/runner.Dockerfile),
/// numeric so the kubelet can check `runAsNonRoot` without reading the image.
pub const RUNNER_UID: i64 = 65532;

/// The runner container's securityContext: what Pod Security's `restricted` level demands
/// (the runner keeps its checkpoint in a ConfigMap and writes nothing to disk, so its root
/// filesystem can be read-only).
fn restricted_container() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            add: None,
        }),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        ..Default::default()
    }
}

fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_owned(),
                api_version: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Where the runner pod finds a side's CA bundle: `{TLS_DIR}/{side}/{CA_FILE}`.
pub const TLS_DIR: &str = "/etc/dcs-tls";
/// The file name a CA bundle's key is mounted as.
pub const CA_FILE: &str = "ca.crt";

/// The CA bundle a side's `tls` names (when TLS is on), as the runner pod gets it: a read-only
/// volume of just that key of the Secret or ConfigMap, mounted at `{TLS_DIR}/{side}`, and the
/// variable naming the file (`DCS_SOURCE_TLS_CA_FILE`, `DCS_SINK_TLS_CA_FILE`). The Secret is
/// referenced only after the operator checked it allows the sync (the plan blocks otherwise).
fn ca_bundle_mount(
    tls: Option<&dcs_crds::TlsSpec>,
    side: &str,
    env: &str,
) -> Option<(Volume, VolumeMount, EnvVar)> {
    let bundle = tls.filter(|t| t.enabled)?.ca_bundle.as_ref()?;
    let name = format!("{side}-ca");
    let items = |key: &str| {
        Some(vec![KeyToPath {
            key: key.to_owned(),
            path: CA_FILE.to_owned(),
            mode: None,
        }])
    };
    let volume = match (&bundle.secret_key_ref, &bundle.config_map_key_ref) {
        (Some(r), _) => Volume {
            name: name.clone(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(r.name.clone()),
                items: items(&r.key),
                ..Default::default()
            }),
            ..Default::default()
        },
        (None, Some(r)) => Volume {
            name: name.clone(),
            config_map: Some(ConfigMapVolumeSource {
                name: r.name.clone(),
                items: items(&r.key),
                ..Default::default()
            }),
            ..Default::default()
        },
        (None, None) => return None,
    };
    let dir = format!("{TLS_DIR}/{side}");
    let mount = VolumeMount {
        name,
        mount_path: dir.clone(),
        read_only: Some(true),
        ..Default::default()
    };
    let var = EnvVar {
        name: env.to_owned(),
        value: Some(format!("{dir}/{CA_FILE}")),
        ..Default::default()
    };
    Some((volume, mount, var))
}

/// Builds every object of the runner for `run`; `defaults` are the operator's runner flags.
pub fn build(sync: &DorisChangelogSync, run: &Run, defaults: &RunnerDefaults) -> RunnerObjects {
    let manifest = effective_manifest(sync, run);
    let hash = content_hash(&manifest);
    let ca_bundles = ca_bundles(&sync.spec);
    let container = runner_container(sync, defaults, &ca_bundles);
    let template =
        |restart_policy: &str| pod_template(sync, &container, &hash, &ca_bundles, restart_policy);
    RunnerObjects {
        config: config_configmap(sync, manifest),
        checkpoint: checkpoint_configmap(sync),
        rbac: rbac(sync),
        workload: workload(sync, run, template),
    }
}

/// The config ConfigMap: the effective manifest, and the reinitNonce it was built for.
fn config_configmap(sync: &DorisChangelogSync, manifest: String) -> ConfigMap {
    let mut config_meta = meta(sync, names::config(&sync.name_any()));
    config_meta.annotations = Some(BTreeMap::from([(
        NONCE_ANNOTATION.to_owned(),
        sync.spec.reinit_nonce.clone(),
    )]));
    ConfigMap {
        metadata: config_meta,
        data: Some(BTreeMap::from([(CONFIG_KEY.to_owned(), manifest)])),
        ..Default::default()
    }
}

/// The checkpoint ConfigMap, empty: the runner writes it.
fn checkpoint_configmap(sync: &DorisChangelogSync) -> ConfigMap {
    ConfigMap {
        metadata: meta(sync, names::checkpoint(&sync.name_any())),
        ..Default::default()
    }
}

/// The runner's ServiceAccount, and a Role and RoleBinding that let it reach its checkpoint
/// ConfigMap only; none when `spec.runner.serviceAccountName` names an account of the user's.
fn rbac(sync: &DorisChangelogSync) -> Option<(ServiceAccount, Role, RoleBinding)> {
    let name = sync.name_any();
    sync.spec.runner.service_account_name.is_none().then(|| {
        let sa = ServiceAccount {
            metadata: meta(sync, names::runner(&name)),
            ..Default::default()
        };
        let role = Role {
            metadata: meta(sync, names::runner(&name)),
            rules: Some(vec![PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["configmaps".to_owned()]),
                resource_names: Some(vec![names::checkpoint(&name)]),
                verbs: vec!["get".to_owned(), "update".to_owned(), "patch".to_owned()],
                ..Default::default()
            }]),
        };
        let binding = RoleBinding {
            metadata: meta(sync, names::runner(&name)),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".to_owned(),
                kind: "Role".to_owned(),
                name: names::runner(&name),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".to_owned(),
                name: names::runner(&name),
                namespace: sync.namespace(),
                ..Default::default()
            }]),
        };
        (sa, role, binding)
    })
}

/// The CA bundles of the source and the sink: each a volume, its mount and the variable naming
/// the file.
fn ca_bundles(spec: &DorisChangelogSyncSpec) -> Vec<(Volume, VolumeMount, EnvVar)> {
    [
        ca_bundle_mount(
            spec.source.tls.as_ref(),
            "source",
            dcs_crds::spec::SOURCE_CA_FILE_ENV,
        ),
        ca_bundle_mount(
            spec.sink.doris.as_ref().and_then(|d| d.tls.as_ref()),
            "sink",
            dcs_crds::spec::SINK_CA_FILE_ENV,
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The runner container's environment: credentials as Secret references, the CA bundles'
/// files, the checkpoint ConfigMap, the pod's namespace and address, the metrics address, then
/// `spec.runner.env`.
fn runner_env(
    sync: &DorisChangelogSync,
    defaults: &RunnerDefaults,
    ca_bundles: &[(Volume, VolumeMount, EnvVar)],
) -> Vec<EnvVar> {
    let spec = &sync.spec;
    let mut env = vec![
        secret_env(
            "DCS_SOURCE_USERNAME",
            &spec.source.credentials,
            &spec.source.credentials.username_key,
        ),
        secret_env(
            "DCS_SOURCE_PASSWORD",
            &spec.source.credentials,
            &spec.source.credentials.password_key,
        ),
    ];
    if let Some(doris) = &spec.sink.doris {
        env.push(secret_env(
            "DCS_SINK_USERNAME",
            &doris.credentials,
            &doris.credentials.username_key,
        ));
        env.push(secret_env(
            "DCS_SINK_PASSWORD",
            &doris.credentials,
            &doris.credentials.password_key,
        ));
    }
    env.extend(ca_bundles.iter().map(|(_, _, var)| var.clone()));
    env.push(EnvVar {
        name: "DCS_CHECKPOINT_CONFIGMAP".to_owned(),
        value: Some(names::checkpoint(&sync.name_any())),
        ..Default::default()
    });
    env.push(field_env("POD_NAMESPACE", "metadata.namespace"));
    env.push(field_env("POD_IP", "status.podIP"));
    // After POD_IP, which it may name; validation keeps spec.runner.env from setting it again.
    env.push(EnvVar {
        name: dcs_crds::validate::METRICS_ADDR_ENV.to_owned(),
        value: Some(defaults.metrics_addr.to_string()),
        ..Default::default()
    });
    env.extend(spec.runner.env.clone().unwrap_or_default());
    env
}

/// The runner container: its image, `run -f` the mounted manifest, its environment, its
/// metrics port and probes, its resources, restricted.
fn runner_container(
    sync: &DorisChangelogSync,
    defaults: &RunnerDefaults,
    ca_bundles: &[(Volume, VolumeMount, EnvVar)],
) -> Container {
    let spec = &sync.spec;
    let image = spec
        .runner
        .image
        .clone()
        .or_else(|| defaults.image.clone())
        .unwrap_or_else(default_runner_image);
    Container {
        name: "runner".to_owned(),
        image: Some(image),
        args: Some(vec![
            "run".to_owned(),
            "-f".to_owned(),
            format!("{CONFIG_DIR}/{CONFIG_KEY}"),
        ]),
        env: Some(runner_env(sync, defaults, ca_bundles)),
        ports: Some(vec![ContainerPort {
            name: Some(RUNNER_METRICS_PORT_NAME.to_owned()),
            container_port: i32::from(defaults.metrics_addr.port),
            protocol: Some("TCP".to_owned()),
            ..Default::default()
        }]),
        liveness_probe: Some(liveness_probe()),
        readiness_probe: Some(readiness_probe()),
        resources: Some(runner_resources(
            spec.runner.resources.as_ref(),
            defaults.resources.as_ref(),
        )),
        security_context: Some(restricted_container()),
        volume_mounts: Some(
            std::iter::once(VolumeMount {
                name: "config".to_owned(),
                mount_path: CONFIG_DIR.to_owned(),
                read_only: Some(true),
                ..Default::default()
            })
            .chain(ca_bundles.iter().map(|(_, mount, _)| mount.clone()))
            .collect(),
        ),
        ..Default::default()
    }
}

/// The runner's pod: `container`, the config hash that rolls it when the manifest changes, its
/// service account, placement, a restricted security context, the config and CA volumes.
fn pod_template(
    sync: &DorisChangelogSync,
    container: &Container,
    config_hash: &str,
    ca_bundles: &[(Volume, VolumeMount, EnvVar)],
    restart_policy: &str,
) -> PodTemplateSpec {
    let name = sync.name_any();
    let spec = &sync.spec;
    let mut annotations = spec.runner.pod_annotations.clone().unwrap_or_default();
    annotations.insert(CONFIG_HASH_ANNOTATION.to_owned(), config_hash.to_owned());
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels(&name)),
            annotations: Some(annotations),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![container.clone()],
            restart_policy: Some(restart_policy.to_owned()),
            service_account_name: Some(
                spec.runner
                    .service_account_name
                    .clone()
                    .unwrap_or_else(|| names::runner(&name)),
            ),
            node_selector: spec.runner.node_selector.clone(),
            tolerations: spec.runner.tolerations.clone(),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(RUNNER_UID),
                run_as_group: Some(RUNNER_UID),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".to_owned(),
                    localhost_profile: None,
                }),
                ..Default::default()
            }),
            volumes: Some(
                std::iter::once(Volume {
                    name: "config".to_owned(),
                    config_map: Some(ConfigMapVolumeSource {
                        name: names::config(&name),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .chain(ca_bundles.iter().map(|(volume, _, _)| volume.clone()))
                .collect(),
            ),
            ..Default::default()
        }),
    }
}

/// The workload: a Job for a bounded run (one runner at a time), else a Deployment of one
/// replica that never runs two (Recreate); `template` gives the pod for a restart policy.
fn workload(
    sync: &DorisChangelogSync,
    run: &Run,
    template: impl Fn(&str) -> PodTemplateSpec,
) -> Workload {
    let name = sync.name_any();
    if run.bounded {
        Workload::Job(Box::new(Job {
            metadata: meta(sync, names::runner(&name)),
            spec: Some(JobSpec {
                backoff_limit: Some(6),
                // One runner at a time: a Job's pods never overlap with parallelism 1.
                parallelism: Some(1),
                completions: Some(1),
                template: template("OnFailure"),
                ..Default::default()
            }),
            ..Default::default()
        }))
    } else {
        Workload::Deployment(Box::new(Deployment {
            metadata: meta(sync, names::runner(&name)),
            spec: Some(DeploymentSpec {
                replicas: Some(1),
                // Never two runners: the old pod is gone before the new one starts.
                strategy: Some(DeploymentStrategy {
                    type_: Some("Recreate".to_owned()),
                    rolling_update: None,
                }),
                selector: LabelSelector {
                    match_labels: Some(labels(&name)),
                    match_expressions: None,
                },
                template: template("Always"),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }
}

/// The Indexed Job of the shards and the Role that reaches their ConfigMaps (pure): the built
/// Job becomes `completionMode: Indexed` with `completions` and `parallelism` N and a back-off
/// per index (a shard restarts alone; the others run on); the runner's Role gets the shards'
/// ConfigMaps, which the shards write and the changelog runner reads.
pub fn adapt(objects: &mut RunnerObjects, sync_name: &str, run: Option<&ShardRun>) {
    let Some(run) = run else {
        return;
    };
    let n = i32::try_from(run.count).unwrap_or(1);
    if let Some((_, role, _)) = objects.rbac.as_mut()
        && let Some(rule) = role.rules.as_mut().and_then(|r| r.first_mut())
    {
        let checkpoint = names::checkpoint(sync_name);
        rule.resource_names
            .get_or_insert_default()
            .extend((0..run.count).map(|i| shard_configmap(&checkpoint, i)));
    }
    if let Workload::Job(job) = &mut objects.workload
        && let Some(spec) = job.spec.as_mut()
    {
        spec.completion_mode = Some("Indexed".to_owned());
        spec.completions = Some(n);
        spec.parallelism = Some(n);
        spec.backoff_limit = None;
        spec.backoff_limit_per_index = Some(BACKOFF_LIMIT_PER_INDEX);
    }
}

/// The shards' checkpoint ConfigMaps, empty, as the checkpoint ConfigMap is built (pure).
pub fn shard_configmaps(objects: &RunnerObjects, count: u32) -> Vec<ConfigMap> {
    let base = objects.checkpoint.name_any();
    (0..count)
        .map(|i| {
            let mut cm = objects.checkpoint.clone();
            cm.metadata.name = Some(shard_configmap(&base, i));
            cm
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dcs_crds::testing::SyncBuilder;

    use crate::reconcile::{plan::Plan, plan::plan, testing::observed};

    fn sync() -> DorisChangelogSync {
        SyncBuilder::new().namespace("team").uid("uid-1").build()
    }

    fn run_for(sync: &DorisChangelogSync, generation: i64) -> Run {
        let mut o = observed();
        o.spec = sync.spec.clone();
        o.status.consumer_generation = Some(generation);
        match plan(&o) {
            Plan::Run(run) => run,
            other => panic!("{other:?}"),
        }
    }

    fn rr(yaml: &str) -> ResourceRequirements {
        serde_yaml::from_str(yaml).unwrap()
    }

    /// The operator's flags as the chart passes them.
    fn ops_defaults() -> RunnerDefaults {
        RunnerDefaults {
            image: Some("ops/runner:2".into()),
            resources: Some(rr(
                "{requests: {cpu: 1, memory: 1Gi}, limits: {memory: 2Gi}}",
            )),
            ..RunnerDefaults::default()
        }
    }

    fn runner_container(objects: &RunnerObjects) -> Container {
        let template = match &objects.workload {
            Workload::Deployment(d) => &d.spec.as_ref().unwrap().template,
            Workload::Job(j) => &j.spec.as_ref().unwrap().template,
        };
        template.spec.as_ref().unwrap().containers[0].clone()
    }

    fn deployment(objects: &RunnerObjects) -> &Deployment {
        match &objects.workload {
            Workload::Deployment(d) => d,
            Workload::Job(_) => panic!("expected a Deployment"),
        }
    }

    /// `text` as a Kubernetes object.
    fn object<T: serde::de::DeserializeOwned>(text: &str) -> T {
        serde_yaml::from_str(text).unwrap()
    }

    /// The metadata of every object of [`sync`] named `name`: its labels, and the sync as its
    /// controlling owner.
    fn metadata(name: &str) -> String {
        format!(
            "metadata:\n  name: {name}\n  namespace: team\n  labels: {{app.kubernetes.io/managed-by: dcs-operator, app.kubernetes.io/name: dcs-runner, dcs.dev/sync: orders}}\n  ownerReferences: [{{apiVersion: dcs.dev/v1alpha1, kind: DorisChangelogSync, name: orders, uid: uid-1, controller: true}}]\n"
        )
    }

    /// Every object of [`sync`]'s `run` with the built-in runner defaults, written out: the
    /// effective manifest (its text tested on its own) in the config ConfigMap and its hash on
    /// the pod; an empty checkpoint ConfigMap; a ServiceAccount whose Role reaches that ConfigMap
    /// only (get, update, patch); one replica, Recreate, so never two runners; a pod that meets
    /// Pod Security `restricted` (non-root user 65532, RuntimeDefault seccomp, no privilege
    /// escalation, every capability dropped, read-only root, only ConfigMap volumes); the
    /// credentials only as Secret references; the metrics port 9464 named `metrics`, probed by
    /// liveness (`/healthz`, 6 failures) and readiness (`/readyz`, 3 failures), no startup probe.
    fn expected_objects(s: &DorisChangelogSync, run: &Run) -> RunnerObjects {
        let manifest = effective_manifest(s, run);
        let hash = content_hash(&manifest);
        let version = env!("CARGO_PKG_VERSION");
        let mut config: ConfigMap = object(&format!(
            "{}  annotations: {{dcs.dev/reinit-nonce: ''}}\n",
            metadata("orders-runner-config")
        ));
        config.data = Some(BTreeMap::from([(CONFIG_KEY.to_owned(), manifest)]));
        let role = format!(
            "{}rules:\n- apiGroups: ['']\n  resources: [configmaps]\n  resourceNames: [orders-checkpoint]\n  verbs: [get, update, patch]\n",
            metadata("orders-runner")
        );
        let binding = format!(
            "{}roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: orders-runner}}\nsubjects: [{{kind: ServiceAccount, name: orders-runner, namespace: team}}]\n",
            metadata("orders-runner")
        );
        let deployment = format!(
            r#"{}spec:
  replicas: 1
  selector:
    matchLabels: {{app.kubernetes.io/managed-by: dcs-operator, app.kubernetes.io/name: dcs-runner, dcs.dev/sync: orders}}
  strategy: {{type: Recreate}}
  template:
    metadata:
      annotations: {{dcs.dev/config-hash: "{hash}"}}
      labels: {{app.kubernetes.io/managed-by: dcs-operator, app.kubernetes.io/name: dcs-runner, dcs.dev/sync: orders}}
    spec:
      containers:
      - name: runner
        image: dcs-runner:{version}
        args: [run, -f, /etc/dcs/sync.yaml]
        env:
        - {{name: DCS_SOURCE_USERNAME, valueFrom: {{secretKeyRef: {{name: src-creds, key: username}}}}}}
        - {{name: DCS_SOURCE_PASSWORD, valueFrom: {{secretKeyRef: {{name: src-creds, key: password}}}}}}
        - {{name: DCS_SINK_USERNAME, valueFrom: {{secretKeyRef: {{name: sink-creds, key: username}}}}}}
        - {{name: DCS_SINK_PASSWORD, valueFrom: {{secretKeyRef: {{name: sink-creds, key: password}}}}}}
        - {{name: DCS_CHECKPOINT_CONFIGMAP, value: orders-checkpoint}}
        - {{name: POD_NAMESPACE, valueFrom: {{fieldRef: {{fieldPath: metadata.namespace}}}}}}
        - {{name: POD_IP, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}
        - {{name: DCS_METRICS_ADDR, value: "0.0.0.0:9464"}}
        ports: [{{name: metrics, containerPort: 9464, protocol: TCP}}]
        livenessProbe:
          httpGet: {{path: /healthz, port: metrics}}
          periodSeconds: 10
          timeoutSeconds: 5
          successThreshold: 1
          failureThreshold: 6
        readinessProbe:
          httpGet: {{path: /readyz, port: metrics}}
          periodSeconds: 10
          timeoutSeconds: 5
          successThreshold: 1
          failureThreshold: 3
        resources:
          requests: {{cpu: 100m, memory: 128Mi}}
          limits: {{memory: 512Mi}}
        securityContext:
          allowPrivilegeEscalation: false
          capabilities: {{drop: [ALL]}}
          readOnlyRootFilesystem: true
          runAsNonRoot: true
        volumeMounts: [{{name: config, mountPath: /etc/dcs, readOnly: true}}]
      restartPolicy: Always
      serviceAccountName: orders-runner
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile: {{type: RuntimeDefault}}
      volumes: [{{name: config, configMap: {{name: orders-runner-config}}}}]
"#,
            metadata("orders-runner")
        );
        RunnerObjects {
            config,
            checkpoint: object(&metadata("orders-checkpoint")),
            rbac: Some((
                object(&metadata("orders-runner")),
                object(&role),
                object(&binding),
            )),
            workload: Workload::Deployment(Box::new(object(&deployment))),
        }
    }

    /// `objects` with the runner's pod template changed by `change`.
    fn with_pod(
        mut objects: RunnerObjects,
        change: impl FnOnce(&mut PodTemplateSpec),
    ) -> RunnerObjects {
        match &mut objects.workload {
            Workload::Deployment(d) => change(&mut d.spec.as_mut().unwrap().template),
            Workload::Job(j) => change(&mut j.spec.as_mut().unwrap().template),
        }
        objects
    }

    #[test]
    fn the_first_run_builds_exactly_these_objects() {
        let s = sync();
        let run = run_for(&s, 0);
        assert_eq!(
            build(&s, &run, &RunnerDefaults::default()),
            expected_objects(&s, &run)
        );
    }

    #[test]
    fn resources_come_from_the_sync_then_the_operator_then_the_built_in_default() {
        let own = rr("{limits: {memory: 3Gi}}");
        let chart = rr("{requests: {cpu: 1, memory: 1Gi}, limits: {memory: 2Gi}}");
        assert_eq!(runner_resources(Some(&own), Some(&chart)), own);
        assert_eq!(runner_resources(Some(&own), None), own);
        assert_eq!(runner_resources(None, Some(&chart)), chart);
        assert_eq!(runner_resources(None, None), default_runner_resources());
        // Taken whole: the chart's requests do not join a sync's own limits.
        assert_eq!(runner_resources(Some(&own), Some(&chart)).requests, None);
        // `resources: {}` in a sync asks for none.
        let none = rr("{}");
        assert_eq!(runner_resources(Some(&none), Some(&chart)), none);
        assert_eq!(
            default_runner_resources(),
            rr("{requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 512Mi}}")
        );
        assert_eq!(
            dcs_crds::validate::validate_resources("default", &default_runner_resources()),
            vec![]
        );
    }

    #[test]
    fn the_built_pod_carries_the_chosen_resources() {
        let mut s = sync();
        let run = run_for(&s, 0);
        // The built-in default, then the operator's image and resources, then the sync's own
        // resources; nothing else changes.
        assert_eq!(
            runner_container(&build(&s, &run, &RunnerDefaults::default())).resources,
            Some(default_runner_resources())
        );
        let expected = expected_objects(&s, &run);
        let with_ops = |resources: Option<ResourceRequirements>| {
            with_pod(expected.clone(), |pod| {
                let c = &mut pod.spec.as_mut().unwrap().containers[0];
                c.image = Some("ops/runner:2".into());
                c.resources = resources;
            })
        };
        assert_eq!(
            build(&s, &run, &ops_defaults()),
            with_ops(ops_defaults().resources)
        );
        s.spec.runner.resources = Some(rr("{requests: {memory: 300Mi}}"));
        assert_eq!(
            build(&s, &run, &ops_defaults()),
            with_ops(Some(rr("{requests: {memory: 300Mi}}")))
        );
        s.spec.startup.mode = StartupMode::Snapshot;
        let job = build(&s, &run_for(&s, 0), &ops_defaults());
        assert!(matches!(job.workload, Workload::Job(_)));
        assert_eq!(
            runner_container(&job).resources,
            Some(rr("{requests: {memory: 300Mi}}"))
        );
    }

    #[test]
    fn the_metrics_address_sets_the_env_and_the_container_port() {
        let s = sync();
        let defaults = RunnerDefaults {
            metrics_addr: RunnerMetricsAddr {
                host: "$(POD_IP)".into(),
                port: 19464,
            },
            ..RunnerDefaults::default()
        };
        let c = runner_container(&build(&s, &run_for(&s, 0), &defaults));
        let env = c.env.unwrap();
        let at = |name: &str| env.iter().position(|e| e.name == name).unwrap();
        assert_eq!(
            env[at("DCS_METRICS_ADDR")].value.as_deref(),
            Some("$(POD_IP):19464")
        );
        // Kubernetes expands $(POD_IP) only from variables defined before it.
        assert!(at("POD_IP") < at("DCS_METRICS_ADDR"));
        let ports = c.ports.unwrap();
        assert_eq!(
            (ports[0].name.as_deref(), ports[0].container_port),
            (Some("metrics"), 19464)
        );
        // The probes name the port, so they follow it.
        assert_eq!(
            c.liveness_probe.unwrap().http_get.unwrap().port,
            IntOrString::String("metrics".into())
        );
        // Whole: the objects with the default address, but for that variable and that port.
        let mut want = build(&s, &run_for(&s, 0), &RunnerDefaults::default());
        let Workload::Deployment(d) = &mut want.workload else {
            panic!("expected a Deployment")
        };
        let container = &mut d
            .spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0];
        for var in container.env.as_mut().unwrap() {
            if var.name == "DCS_METRICS_ADDR" {
                var.value = Some("$(POD_IP):19464".into());
            }
        }
        container.ports.as_mut().unwrap()[0].container_port = 19464;
        assert_eq!(build(&s, &run_for(&s, 0), &defaults), want);
    }

    #[test]
    fn runner_overrides_are_applied() {
        let mut s = sync();
        s.spec.runner = serde_yaml::from_str(
            r#"
image: my/runner:1
serviceAccountName: custom
nodeSelector: {pool: data}
podAnnotations: {a: b}
env: [{name: RUST_LOG, value: debug}]
resources: {limits: {memory: 512Mi}}
"#,
        )
        .unwrap();
        let run = run_for(&s, 0);
        // Whole: the objects without overrides, the sync's account in place of the runner's own
        // (none is made), and the pod as the overrides say.
        let expected = expected_objects(&s, &run);
        let overridden = |image: &str| {
            let mut want = with_pod(expected.clone(), |template| {
                template
                    .metadata
                    .as_mut()
                    .unwrap()
                    .annotations
                    .as_mut()
                    .unwrap()
                    .insert("a".into(), "b".into());
                let pod = template.spec.as_mut().unwrap();
                pod.service_account_name = Some("custom".into());
                pod.node_selector = Some(BTreeMap::from([("pool".into(), "data".into())]));
                let c = &mut pod.containers[0];
                c.image = Some(image.into());
                c.env.as_mut().unwrap().push(EnvVar {
                    name: "RUST_LOG".into(),
                    value: Some("debug".into()),
                    ..EnvVar::default()
                });
                c.resources = Some(rr("{limits: {memory: 512Mi}}"));
            });
            want.rbac = None;
            want
        };
        assert_eq!(build(&s, &run, &ops_defaults()), overridden("my/runner:1"));
        // Without its own image, the operator's.
        s.spec.runner.image = None;
        assert_eq!(build(&s, &run, &ops_defaults()), overridden("ops/runner:2"));
    }

    #[test]
    fn the_manifest_carries_the_active_consumer_and_a_change_rolls_the_runner() {
        let s = sync();
        let first = build(&s, &run_for(&s, 0), &RunnerDefaults::default());
        let manifest = &first.config.data.as_ref().unwrap()[CONFIG_KEY];
        let parsed = dcs_crds::from_manifest(manifest).unwrap();
        assert_eq!(parsed.consumer_id(), "orders");
        assert_eq!(parsed.spec.startup.mode, StartupMode::Initial);
        assert_eq!(parsed.metadata.annotations, None);
        let mut later = s.clone();
        later.spec.startup.mode = StartupMode::Latest;
        let reinit = build(&later, &run_for(&later, 1), &RunnerDefaults::default());
        let parsed =
            dcs_crds::from_manifest(&reinit.config.data.as_ref().unwrap()[CONFIG_KEY]).unwrap();
        assert_eq!(parsed.consumer_id(), "orders-r1");
        assert_eq!(parsed.spec.startup.mode, StartupMode::Initial);
        // The runner's directive to rebuild the sink, naming the consumer it replaces.
        assert_eq!(
            parsed.metadata.annotations,
            Some(std::collections::BTreeMap::from([(
                "dcs.dev/reinitialized-from".to_owned(),
                "orders".to_owned()
            )]))
        );
        let hash = |o: &RunnerObjects| {
            deployment(o)
                .spec
                .as_ref()
                .unwrap()
                .template
                .metadata
                .as_ref()
                .unwrap()
                .annotations
                .as_ref()
                .unwrap()[CONFIG_HASH_ANNOTATION]
                .clone()
        };
        assert_ne!(hash(&first), hash(&reinit));
        assert_eq!(
            hash(&first),
            hash(&build(&s, &run_for(&s, 0), &RunnerDefaults::default()))
        );
        // No secret name's value, only its name, anywhere in the config.
        assert!(!manifest.contains("password:"), "{manifest}");
    }

    #[test]
    fn offsets_consumer_id_is_rewritten_when_an_offset_table_is_used() {
        let mut s = sync();
        s.spec.offsets = Some(dcs_crds::OffsetsSpec {
            table: Some("ops.offsets".into()),
            consumer_id: Some("student".into()),
        });
        let o = build(&s, &run_for(&s, 2), &RunnerDefaults::default());
        let parsed = dcs_crds::from_manifest(&o.config.data.as_ref().unwrap()[CONFIG_KEY]).unwrap();
        assert_eq!(parsed.consumer_id(), "student-r2");
        assert_eq!(parsed.metadata.name.as_deref(), Some("orders"));
    }

    #[test]
    fn snapshot_mode_is_a_job() {
        let mut s = sync();
        s.spec.startup.mode = StartupMode::Snapshot;
        let o = build(&s, &run_for(&s, 0), &RunnerDefaults::default());
        let Workload::Job(job) = &o.workload else {
            panic!("expected a Job")
        };
        let spec = job.spec.as_ref().unwrap();
        assert_eq!(spec.parallelism, Some(1));
        assert_eq!(
            spec.template
                .spec
                .as_ref()
                .unwrap()
                .restart_policy
                .as_deref(),
            Some("OnFailure")
        );
        // Whole: the objects of the same run unbounded, with a Job of their pod (restarted on
        // failure) in place of the Deployment; nothing else differs.
        let unbounded = build(
            &s,
            &Run {
                bounded: false,
                ..run_for(&s, 0)
            },
            &RunnerDefaults::default(),
        );
        let Workload::Deployment(d) = &unbounded.workload else {
            panic!("expected a Deployment")
        };
        let mut template = d.spec.as_ref().unwrap().template.clone();
        template.spec.as_mut().unwrap().restart_policy = Some("OnFailure".into());
        let want = RunnerObjects {
            workload: Workload::Job(Box::new(Job {
                metadata: d.metadata.clone(),
                spec: Some(JobSpec {
                    backoff_limit: Some(6),
                    parallelism: Some(1),
                    completions: Some(1),
                    template,
                    ..Default::default()
                }),
                ..Default::default()
            })),
            ..unbounded.clone()
        };
        assert_eq!(o, want);
    }
}
