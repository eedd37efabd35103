{{- define "turnstile.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "turnstile.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* selector labels of one component: (list $ "worker") */}}
{{- define "turnstile.selector" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ $.Chart.Name }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "turnstile.image" -}}
{{- $ := index . 0 -}}
{{- printf "%s/turnstile-%s:%s" $.Values.image.repository (index . 1) (default $.Chart.AppVersion $.Values.image.tag) -}}
{{- end -}}

{{- define "turnstile.secretName" -}}
{{- default (printf "%s-secrets" (include "turnstile.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* The worker's minimum grace period: preStop sleep + longest turn + drain. */}}
{{- define "turnstile.workerMinGrace" -}}
{{- add .Values.worker.preStopSleepSeconds .Values.worker.longestTurnSeconds .Values.worker.drainSeconds -}}
{{- end -}}

{{- define "turnstile.workerGrace" -}}
{{- $min := include "turnstile.workerMinGrace" . | int -}}
{{- if kindIs "invalid" .Values.worker.terminationGracePeriodSeconds -}}
{{- $min -}}
{{- else -}}
{{- $set := .Values.worker.terminationGracePeriodSeconds | int -}}
{{- if lt $set $min -}}
{{- fail (printf "worker.terminationGracePeriodSeconds (%d) must be at least preStopSleepSeconds + longestTurnSeconds + drainSeconds (%d)" $set $min) -}}
{{- end -}}
{{- $set -}}
{{- end -}}
{{- end -}}

{{- define "turnstile.workerMax" -}}
{{- $p := .Values.kafka.partitions | int -}}
{{- $max := $p -}}
{{- if not (kindIs "invalid" .Values.worker.autoscaling.maxReplicas) -}}
{{- $max = .Values.worker.autoscaling.maxReplicas | int -}}
{{- end -}}
{{- if gt $max $p -}}
{{- fail (printf "worker.autoscaling.maxReplicas (%d) must not exceed kafka.partitions (%d): a worker without a partition idles" $max $p) -}}
{{- end -}}
{{- if lt $max (.Values.worker.autoscaling.minReplicas | int) -}}
{{- fail "worker.autoscaling.maxReplicas must not be below minReplicas" -}}
{{- end -}}
{{- $max -}}
{{- end -}}
