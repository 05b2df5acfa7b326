{{- define "fleet.labels" -}}
app.kubernetes.io/name: fleet
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
