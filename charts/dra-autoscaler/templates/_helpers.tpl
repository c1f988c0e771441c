{{/* Names, labels and the image, shared by every template. */}}

{{- define "dra-autoscaler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dra-autoscaler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "dra-autoscaler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dra-autoscaler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "dra-autoscaler.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "dra-autoscaler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "dra-autoscaler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "dra-autoscaler.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "dra-autoscaler.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "dra-autoscaler.fakeProviderName" -}}
{{- printf "%s-fake-provider" (include "dra-autoscaler.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dra-autoscaler.awsProviderName" -}}
{{- printf "%s-aws-provider" (include "dra-autoscaler.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* NAME=URL pairs for DRA_AUTOSCALER_PROVIDERS. */}}
{{- define "dra-autoscaler.providers" -}}
{{- $list := list -}}
{{- range .Values.providers -}}
{{- $list = append $list (printf "%s=%s" .name .endpoint) -}}
{{- end -}}
{{- if .Values.fakeProvider.enabled -}}
{{- $list = append $list (printf "fake=http://%s.%s.svc:%v" (include "dra-autoscaler.fakeProviderName" .) .Release.Namespace .Values.fakeProvider.port) -}}
{{- end -}}
{{- if .Values.awsProvider.enabled -}}
{{- $list = append $list (printf "aws=http://%s.%s.svc:%v" (include "dra-autoscaler.awsProviderName" .) .Release.Namespace .Values.awsProvider.port) -}}
{{- end -}}
{{- join "," $list -}}
{{- end -}}

{{/*
controller.logFormat, checked at render time: the binaries refuse any other
value at start, and a typo would leave every pod crash-looping.
*/}}
{{- define "dra-autoscaler.logFormat" -}}
{{- $format := .Values.controller.logFormat | default "text" -}}
{{- if not (has $format (list "text" "json")) -}}
{{- fail (printf "controller.logFormat must be text or json, not %q" $format) -}}
{{- end -}}
{{- $format -}}
{{- end -}}
