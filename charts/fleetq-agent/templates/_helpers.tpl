{{/* Name of the chart, overridable. */}}
{{- define "fleetq-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified name: the release name when it already contains the chart name. */}}
{{- define "fleetq-agent.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "fleetq-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetq-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "fleetq-agent.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "fleetq-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fleetq
{{- end }}

{{- define "fleetq-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fleetq-agent.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "fleetq-agent.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The agent's configuration file (config.fleetq.dev/v1alpha1 AgentConfiguration): cluster name,
namespace and ports the chart wires, then .Values.config over them.
*/}}
{{- define "fleetq-agent.config" -}}
{{- $cfg := dict "apiVersion" "config.fleetq.dev/v1alpha1" "kind" "AgentConfiguration" "namespace" .Release.Namespace "clusterName" .Values.clusterName }}
{{- $_ := set $cfg "metrics" (dict "bindAddress" (printf ":%d" (int .Values.metrics.port))) }}
{{- $_ := set $cfg "health" (dict "bindAddress" (printf ":%d" (int .Values.health.port))) }}
{{- toYaml (mustMergeOverwrite $cfg (deepCopy (default dict .Values.config))) }}
{{- end }}

{{- define "fleetq-agent.managerAccessName" -}}
{{- .Values.managerAccess.serviceAccountName }}
{{- end }}
