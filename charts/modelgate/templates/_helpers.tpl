{{/*
Names, labels and the image, shared by every template.
Labels follow the Kubernetes recommended labels; selectors use only name,
instance and component, since a Deployment's selector is immutable and a
label whose value changes (version, chart) must never be part of it.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "modelgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object name: fullnameOverride, else the release name,
plus the chart name unless the release name already contains it. Cut to 45
characters so that "-operator-leader-election" still fits in 63.
*/}}
{{- define "modelgate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 45 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 45 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 45 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* chart-version for the helm.sh/chart label. */}}
{{- define "modelgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object names of the two components. */}}
{{- define "modelgate.operator.fullname" -}}
{{- printf "%s-operator" (include "modelgate.fullname" .) }}
{{- end }}

{{- define "modelgate.gateway.fullname" -}}
{{- printf "%s-gateway" (include "modelgate.fullname" .) }}
{{- end }}

{{/*
Selector labels: name, instance, component only.
Call with (dict "ctx" $ "component" "gateway").
*/}}
{{- define "modelgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "modelgate.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/*
Every label of an object: the selector labels plus version, part-of,
managed-by, helm.sh/chart and commonLabels.
Call with (dict "ctx" $ "component" "gateway").
*/}}
{{- define "modelgate.labels" -}}
{{ include "modelgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: modelgate
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ include "modelgate.chart" .ctx }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* ServiceAccount names. */}}
{{- define "modelgate.operator.serviceAccountName" -}}
{{- default (include "modelgate.operator.fullname" .) .Values.operator.serviceAccount.name }}
{{- end }}

{{- define "modelgate.gateway.serviceAccountName" -}}
{{- default (include "modelgate.gateway.fullname" .) .Values.gateway.serviceAccount.name }}
{{- end }}

{{/*
An image reference from {repository, tag, digest}: repository@digest when a
digest is given, else repository:tag, the tag defaulting to appVersion.
Call with (dict "image" .Values.image "ctx" $).
*/}}
{{- define "modelgate.imageRef" -}}
{{- if .image.digest }}
{{- printf "%s@%s" .image.repository .image.digest }}
{{- else }}
{{- printf "%s:%s" .image.repository (default .ctx.Chart.AppVersion .image.tag) }}
{{- end }}
{{- end }}

{{/* The image of the operator and the gateway. */}}
{{- define "modelgate.image" -}}
{{- include "modelgate.imageRef" (dict "image" .Values.image "ctx" .) }}
{{- end }}

{{/*
The image of the model pods: operator.runtimeImage where set, else the
chart's image (its tag and digest too, when runtimeImage names no repository).
*/}}
{{- define "modelgate.runtimeImage" -}}
{{- $r := .Values.operator.runtimeImage }}
{{- if $r.repository }}
{{- include "modelgate.imageRef" (dict "image" (dict "repository" $r.repository "tag" (default .Values.image.tag $r.tag) "digest" $r.digest) "ctx" .) }}
{{- else }}
{{- include "modelgate.image" . }}
{{- end }}
{{- end }}

{{/* Where the leader-election Lease lives and what it is called. */}}
{{- define "modelgate.operator.leaseName" -}}
{{- default (include "modelgate.operator.fullname" .) .Values.operator.leaderElection.leaseName }}
{{- end }}

{{/* Secret names: the user's existing Secret, or the one the chart creates. */}}
{{- define "modelgate.gateway.keysSecretName" -}}
{{- default (printf "%s-keys" (include "modelgate.gateway.fullname" .)) .Values.gateway.apiKeys.existingSecret }}
{{- end }}

{{- define "modelgate.gateway.paySecretName" -}}
{{- default (printf "%s-pay" (include "modelgate.gateway.fullname" .)) .Values.gateway.pay.existingSecret }}
{{- end }}

{{- define "modelgate.gateway.usageSinkSecretName" -}}
{{- default (printf "%s-usage-sink" (include "modelgate.gateway.fullname" .)) .Values.gateway.usageSink.existingSecret }}
{{- end }}

{{/* Whether the gateway reads a usage-sink token at all. */}}
{{- define "modelgate.gateway.usageSinkToken" -}}
{{- if and .Values.gateway.usageSink.url (or .Values.gateway.usageSink.existingSecret .Values.gateway.usageSink.token) }}true{{ end }}
{{- end }}

{{/*
The RBAC rules the operator needs, nothing more; the same rules go into a
ClusterRole, or into a Role when watchNamespace is set.
*/}}
{{- define "modelgate.operator.rules" -}}
- apiGroups: ["serving.modelgate.dev"]
  resources: ["inferencemodels"]
  verbs: ["get", "list", "watch", "patch", "update"]
- apiGroups: ["serving.modelgate.dev"]
  resources: ["inferencemodels/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["discovery.k8s.io"]
  resources: ["endpointslices"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/* The gateway only reads models and their endpoints. */}}
{{- define "modelgate.gateway.rules" -}}
- apiGroups: ["serving.modelgate.dev"]
  resources: ["inferencemodels"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["discovery.k8s.io"]
  resources: ["endpointslices"]
  verbs: ["get", "list", "watch"]
{{- end }}

{{/*
Checks across fields that values.schema.json cannot express, each failing
with a message that names the fields.
*/}}
{{- define "modelgate.validate" -}}
{{- $g := .Values.gateway }}
{{- if and $g.persistence.enabled (or $g.autoscaling.enabled (gt (int $g.replicaCount) 1)) }}
{{- fail "gateway.persistence.enabled needs gateway.replicaCount: 1 and gateway.autoscaling.enabled: false (a journal folder belongs to one gateway process)" }}
{{- end }}
{{- if and $g.autoscaling.enabled (gt (int $g.autoscaling.minReplicas) (int $g.autoscaling.maxReplicas)) }}
{{- fail "gateway.autoscaling.minReplicas must not exceed gateway.autoscaling.maxReplicas" }}
{{- end }}
{{- if and (or $g.autoscaling.enabled (gt (int $g.replicaCount) 1)) (not (and $g.database.existingSecret $g.valkey.existingSecret)) }}
{{- fail "gateway.replicaCount above 1, or gateway.autoscaling.enabled, needs both gateway.database.existingSecret (PostgreSQL, such as a CloudNativePG cluster) and gateway.valkey.existingSecret (Valkey): without them each replica keeps its own usage ledger and rate limits (docs/state.md)" }}
{{- end }}
{{- if and $g.database.caSecret (not $g.database.existingSecret) }}
{{- fail "gateway.database.caSecret is set but gateway.database.existingSecret is empty" }}
{{- end }}
{{- if and $g.pay.enabled (not $g.pay.providerUrl) (not (and $g.pay.existingSecret $g.pay.providerUrlKey)) }}
{{- fail "gateway.pay.enabled needs gateway.pay.providerUrl (or gateway.pay.existingSecret with gateway.pay.providerUrlKey)" }}
{{- end }}
{{- if and $g.pay.enabled (not $g.pay.existingSecret) (or (empty $g.pay.signingSecrets) (not $g.pay.providerCredential)) }}
{{- fail "gateway.pay.enabled needs gateway.pay.existingSecret, or both gateway.pay.signingSecrets and gateway.pay.providerCredential" }}
{{- end }}
{{- if and $g.usageSink.token (not $g.usageSink.url) }}
{{- fail "gateway.usageSink.token is set but gateway.usageSink.url is empty" }}
{{- end }}
{{- if and $g.httpRoute.enabled (empty $g.httpRoute.parentRefs) }}
{{- fail "gateway.httpRoute.enabled needs at least one entry in gateway.httpRoute.parentRefs (the Gateway to attach to)" }}
{{- end }}
{{- if and (gt (int .Values.operator.replicaCount) 1) (not .Values.operator.leaderElection.enabled) }}
{{- fail "operator.replicaCount above 1 needs operator.leaderElection.enabled: two operators without a leader would fight over every model" }}
{{- end }}
{{- end }}
