{{- define "uttera.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "uttera.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "uttera.labels" -}}
{{ include "uttera.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
uttera.dev/variant: {{ .Values.variant }}
{{- end -}}

{{/* The values of the chosen variant (cuda or cpu). */}}
{{- define "uttera.variant" -}}
{{- if eq .Values.variant "cuda" -}}
{{- toYaml .Values.cuda -}}
{{- else if eq .Values.variant "cpu" -}}
{{- toYaml .Values.cpu -}}
{{- else -}}
{{- fail (printf "variant must be cuda or cpu, got %q" .Values.variant) -}}
{{- end -}}
{{- end -}}
