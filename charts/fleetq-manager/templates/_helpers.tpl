{{/* Name of the chart, overridable. */}}
{{- define "fleetq-manager.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified name: the release name when it already contains the chart name. */}}
{{- define "fleetq-manager.fullname" -}}
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

{{- define "fleetq-manager.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetq-manager.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "fleetq-manager.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "fleetq-manager.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fleetq
{{- end }}

{{- define "fleetq-manager.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fleetq-manager.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "fleetq-manager.webhookServiceName" -}}
{{- printf "%s-webhook" (include "fleetq-manager.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "fleetq-manager.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The manager's configuration file (config.fleetq.dev/v1alpha1 Configuration): the namespace, ports
and webhook Service the chart wires, then .Values.config over them.
*/}}
{{- define "fleetq-manager.config" -}}
{{- $cfg := dict "apiVersion" "config.fleetq.dev/v1alpha1" "kind" "Configuration" "namespace" .Release.Namespace }}
{{- $_ := set $cfg "metrics" (dict "bindAddress" (printf ":%d" (int .Values.metrics.port))) }}
{{- $_ := set $cfg "health" (dict "bindAddress" (printf ":%d" (int .Values.health.port))) }}
{{- $webhook := dict "port" (int .Values.webhook.port) "certDir" "/tmp/k8s-webhook-server/serving-certs" }}
{{- /* A webhook URL (the manager runs outside the cluster) replaces the Service. */}}
{{- if not (dig "webhook" "url" "" (default dict .Values.config)) }}
{{- $_ := set $webhook "serviceName" (include "fleetq-manager.webhookServiceName" .) }}
{{- end }}
{{- $_ := set $cfg "webhook" $webhook }}
{{- if .Values.clusterAPI.enabled }}
{{- $_ := set $cfg "multiCluster" (dict "clusterAPISelector" .Values.clusterAPI.selector "clusterAPINamespace" (default .Release.Namespace .Values.clusterAPI.namespace)) }}
{{- end }}
{{- toYaml (mustMergeOverwrite $cfg (deepCopy (default dict .Values.config))) }}
{{- end }}
