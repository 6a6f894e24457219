{{/*
The prefix of every object's name: fullnameOverride, else the release name when it contains the
chart's name (release "detour" gives detour-controller-manager, the names config/default
renders), else <release>-detour. The longest name built on it,
<prefix>-controller-manager-metrics-service, must fit a Service name's 63 characters, so a
longer prefix is refused rather than cut (cut names of two releases could collide).
*/}}
{{- define "detour.fullname" -}}
{{- $name := .Values.fullnameOverride -}}
{{- if not $name -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- $name = .Release.Name -}}
{{- else -}}
{{- $name = printf "%s-%s" .Release.Name .Chart.Name -}}
{{- end -}}
{{- end -}}
{{- if gt (len $name) 28 -}}
{{- fail (printf "the name prefix %q is %d characters; at most 28 leave room for %s-controller-manager-metrics-service in 63: use a shorter release name or set fullnameOverride" $name (len $name) $name) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{/* The manager's ServiceAccount, which every binding names. */}}
{{- define "detour.serviceAccountName" -}}
{{- include "detour.fullname" . }}-controller-manager
{{- end -}}

{{/* The Secret the gateway's certificate comes from. */}}
{{- define "detour.gatewayTLSSecret" -}}
{{- .Values.gateway.tlsSecretName | default (printf "%s-gateway-tls" (include "detour.fullname" .)) -}}
{{- end -}}

{{/*
The labels that select the manager's pods: config/default's control-plane label, and the
release, so two releases in one namespace never select each other's pods.
*/}}
{{- define "detour.selectorLabels" -}}
control-plane: controller-manager
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of every object. */}}
{{- define "detour.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The labels of the manager's pods and of the objects that belong to them. */}}
{{- define "detour.managerLabels" -}}
{{ include "detour.labels" . }}
control-plane: controller-manager
{{- end -}}

{{/* The manager's image: repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "detour.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
