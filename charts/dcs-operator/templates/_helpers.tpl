{{/* The chart name, overridable by nothing: the chart has no nameOverride. */}}
{{- define "dcs-operator.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The objects' name: the release name when it already holds the chart name. */}}
{{- define "dcs-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "dcs-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dcs-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dcs-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "dcs-operator.labels" -}}
helm.sh/chart: {{ include "dcs-operator.chart" . }}
{{ include "dcs-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dcs
{{- end -}}

{{- define "dcs-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "dcs-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "dcs-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The labels the operator puts on every runner pod (operator/src/reconcile/build.rs, labels()). */}}
{{- define "dcs-operator.runnerSelectorLabels" -}}
app.kubernetes.io/name: dcs-runner
app.kubernetes.io/managed-by: dcs-operator
{{- end -}}

{{/* The namespaces whose runners get a NetworkPolicy, as a JSON list. */}}
{{- define "dcs-operator.runnerNamespaces" -}}
{{- toJson (default .Values.watchNamespaces .Values.networkPolicy.runnerNamespaces) -}}
{{- end -}}

{{/* Egress rules both NetworkPolicies share: the API server and DNS. */}}
{{- define "dcs-operator.egressApiServerDns" -}}
{{- $np := .Values.networkPolicy -}}
- to:
    {{- range $np.apiServer.cidrs }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  ports:
    {{- range $np.apiServer.ports }}
    - {port: {{ . }}, protocol: TCP}
    {{- end }}
{{- if $np.dns.enabled }}
- to:
    {{- toYaml $np.dns.to | nindent 4 }}
  ports:
    - {port: {{ $np.dns.port }}, protocol: UDP}
    - {port: {{ $np.dns.port }}, protocol: TCP}
{{- end }}
{{- end -}}

{{/* The Doris FEs and BEs as NetworkPolicy peers. */}}
{{- define "dcs-operator.dorisPeers" -}}
{{- range .Values.networkPolicy.doris.cidrs }}
- ipBlock:
    cidr: {{ . }}
{{- end }}
{{- end -}}

{{- define "dcs-operator.runnerImage" -}}
{{- printf "%s:%s" .Values.runnerImage.repository (default .Chart.AppVersion .Values.runnerImage.tag) -}}
{{- end -}}

{{/*
Checks of value combinations the schema cannot express; included by every template that
depends on them so that any render fails with the message.
*/}}
{{- define "dcs-operator.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) -}}
{{- fail (printf "replicaCount is %d but leaderElection.enabled is false: more than one replica needs leader election (set leaderElection.enabled=true), or several operators would reconcile the same syncs" (int .Values.replicaCount)) -}}
{{- end -}}
{{- if and .Values.rbac.create .Values.rbac.namespaced (empty .Values.watchNamespaces) -}}
{{- fail "rbac.namespaced=true needs watchNamespaces (e.g. --set 'watchNamespaces={team-a,team-b}'): a namespaced install grants access only in the namespaces it watches" -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.service.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled=true needs metrics.service.enabled=true: the ServiceMonitor selects the metrics Service" -}}
{{- end -}}
{{- if and .Values.leaderElection.enabled (not .Values.leaderElection.leaseName) -}}
{{- fail "leaderElection.enabled=true needs leaderElection.leaseName" -}}
{{- end -}}
{{- if .Values.networkPolicy.enabled -}}
{{- if empty .Values.networkPolicy.apiServer.cidrs -}}
{{- fail "networkPolicy.enabled=true needs networkPolicy.apiServer.cidrs: the API server's addresses (kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes), or the operator and the runners could not reach it" -}}
{{- end -}}
{{- if empty .Values.networkPolicy.doris.cidrs -}}
{{- fail "networkPolicy.enabled=true needs networkPolicy.doris.cidrs: the addresses of the Doris FEs and BEs the syncs read from and write to" -}}
{{- end -}}
{{- if and (empty .Values.networkPolicy.runnerNamespaces) (empty .Values.watchNamespaces) -}}
{{- fail "networkPolicy.enabled=true needs networkPolicy.runnerNamespaces or watchNamespaces: a NetworkPolicy only selects pods of its own namespace, so the chart must know where the runners run" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The namespaced rules the operator needs wherever it watches syncs (a ClusterRole's rules, or
each watched namespace's Role). Derived from operator/src (controller.rs, reconcile/shell.rs,
reconcile/build.rs, main.rs); keep in step with the code.
*/}}
{{- define "dcs-operator.rules" -}}
# The watched resource: the controller lists and watches syncs (main.rs checks the CRD with a
# list), reads one before acting, and patches metadata.finalizers (dcs.dev/cleanup; merge patch to
# add and to remove, each guarded by resourceVersion). The operator never writes spec (no update).
- apiGroups: ["dcs.dev"]
  resources: ["dorischangelogsyncs"]
  verbs: ["get", "list", "watch", "patch"]
# Status is written with server-side apply (patch_status).
- apiGroups: ["dcs.dev"]
  resources: ["dorischangelogsyncs/status"]
  verbs: ["patch"]
# Runner objects carry a controller owner reference with blockOwnerDeletion, which the API server
# (OwnerReferencesPermissionEnforcement) allows only to those who may update the owner's finalizers.
- apiGroups: ["dcs.dev"]
  resources: ["dorischangelogsyncs/finalizers"]
  verbs: ["update"]
# The runner workload: a Deployment (streaming) or a Job (startup.mode snapshot). The controller
# watches the ones it owns, reads them, writes them by server-side apply (which creates them) and
# deletes them on suspend/block/reinitialize or when switching between Deployment and Job.
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# Per sync: <name>-runner-config (server-side apply; nonce annotation by merge patch) and
# <name>-checkpoint (created empty; the checkpoint key is cleared by merge patch on reinit); both
# watched as owned objects. update is not used by the operator itself but the per-sync runner Role
# grants get/update/patch on the checkpoint ConfigMap, and RBAC only lets the operator grant
# permissions it holds.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "update", "patch"]
# Per sync runner identity: ServiceAccount, Role and RoleBinding <name>-runner, written with
# server-side apply (skipped when spec.runner.serviceAccountName is set). Removed by garbage
# collection through owner references, never by the operator.
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["create", "patch"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["create", "patch"]
# Source credentials: the operator reads the one Secret named in spec.source.credentials to probe
# Doris. get only: it never lists, watches or writes Secrets (runners get them as secretKeyRefs).
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
# Runner pods (label dcs.dev/sync): listed and watched to see crash loops and exits (code 3, the
# offset expired); deleted with gracePeriodSeconds 0 when a stopping runner outlives its grace
# period and a margin (re-initialisation, deletion).
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch", "delete"]
# Events (events.k8s.io/v1) on phase transitions; kube's Recorder creates them and patches a
# repeated event's series.
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{/* runbook_url for alert (index . 1) when prometheusRule (index . 0) has a runbookBaseUrl. */}}
{{- define "dcs-operator.runbook" -}}
{{- $pr := index . 0 -}}
{{- with $pr.runbookBaseUrl -}}
runbook_url: {{ printf "%s#%s" . (lower (index $ 1)) }}
{{- end -}}
{{- end -}}
