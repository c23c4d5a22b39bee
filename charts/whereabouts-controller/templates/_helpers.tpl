{{/*
Names, labels and the option table. Labels and selectors are deploy/'s (name + component), so an
install moved from `kubectl apply -k deploy/` to this chart keeps its Deployment selector (which is
immutable); the helm labels are added to metadata only.
*/}}

{{/*
The objects' base name is whereabouts-gc, not the chart's name: upstream whereabouts' optional
node-slice controller is the Deployment whereabouts-controller, which a release of that name
would collide with. Release whereabouts-gc: every name is deploy/'s.
*/}}
{{- define "wac.name" -}}
{{- default "whereabouts-gc" .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "wac.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "wac.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The namespace of every namespaced object (the ServiceAccount's, the Lease's by default). */}}
{{- define "wac.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/* Where the IPPools, reservations and the schedule ConfigMap are: --namespace. */}}
{{- define "wac.poolNamespace" -}}
{{- default (include "wac.namespace" .) .Values.config.namespace -}}
{{- end -}}

{{/* Where the Lease is: the pod's namespace (POD_NAMESPACE), as the controller decides. */}}
{{- define "wac.leaseNamespace" -}}
{{- include "wac.namespace" . -}}
{{- end -}}

{{/* The names RBAC grants by resourceNames: the controller's defaults unless configured. */}}
{{- define "wac.leaseName" -}}
{{- default "whereabouts-gc" .Values.config.leaseName -}}
{{- end -}}

{{- define "wac.scheduleConfigMap" -}}
{{- if kindIs "invalid" .Values.config.reconcileScheduleConfigmap -}}
whereabouts-config
{{- else -}}
{{- .Values.config.reconcileScheduleConfigmap -}}
{{- end -}}
{{- end -}}

{{/* A port option: the controller's default when unset (0 is a value: it disables). */}}
{{- define "wac.port" -}}
{{- $v := index .values .key -}}
{{- if kindIs "invalid" $v -}}{{ .default }}{{- else -}}{{ int64 $v }}{{- end -}}
{{- end -}}

{{- define "wac.selectorLabels" -}}
app.kubernetes.io/name: {{ include "wac.name" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{/* Every object's metadata labels: deploy/'s, helm's own, then .Values.labels. */}}
{{- define "wac.labels" -}}
{{ include "wac.selectorLabels" . }}
{{ include "wac.commonLabels" . }}
{{- end -}}

{{/* What kustomize's `labels:` adds in deploy/ (part-of), and helm's. CRDs carry only these. */}}
{{- define "wac.commonLabels" -}}
app.kubernetes.io/part-of: whereabouts-controller
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metadata.annotations from .Values.annotations, or nothing; placed right after the labels. */}}
{{- define "wac.annotations" -}}
{{- with .Values.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
{{- end }}
{{- end -}}

{{/*
The controller's options of `run`, in src/programs/cli.ts's order: [values key, environment
variable]. test/deploy/chart.test.ts checks this list against cli.ts's OPTIONS.
WHEREABOUTS_NAMESPACE is written by the Deployment itself (it defaults to the release's namespace).
*/}}
{{- define "wac.options" -}}
{{- list
  (list "kubeconfig" "KUBECONFIG")
  (list "concurrentBatches" "CONCURRENT_BATCHES")
  (list "apiQps" "API_QPS")
  (list "reconcileSchedule" "RECONCILE_SCHEDULE")
  (list "reconcileScheduleConfigmap" "RECONCILE_SCHEDULE_CONFIGMAP")
  (list "dryRun" "DRY_RUN")
  (list "leaderElect" "LEADER_ELECT")
  (list "leaseName" "LEASE_NAME")
  (list "metricsPort" "METRICS_PORT")
  (list "healthPort" "HEALTH_PORT")
  (list "shutdownTimeout" "SHUTDOWN_TIMEOUT")
  (list "poolUsageThreshold" "POOL_USAGE_THRESHOLD")
  (list "invariantInterval" "INVARIANT_INTERVAL")
  (list "invariantGrace" "INVARIANT_GRACE")
  (list "pruneSlicePools" "PRUNE_SLICE_POOLS")
  (list "freeTerminalPods" "FREE_TERMINAL_PODS")
  (list "freeEvictedPods" "FREE_EVICTED_PODS")
  (list "freeOnOutOfService" "FREE_ON_OUT_OF_SERVICE")
  (list "terminatingGrace" "TERMINATING_GRACE")
  (list "freeOnNotreadyAfter" "FREE_ON_NOTREADY_AFTER")
  (list "flatConfig" "FLAT_CONFIG_PATH")
  (list "logLevel" "LOG_LEVEL")
  (list "logFormat" "LOG_FORMAT")
  | toJson -}}
{{- end -}}

{{/*
An option's value as an environment variable's string. Numbers arrive from YAML as floats: a whole
one is written as an integer (500, not 500.0 or 5e+02), so Config.integer reads it.
*/}}
{{- define "wac.envValue" -}}
{{- if kindIs "float64" . -}}
{{- if eq (float64 (int64 .)) . -}}{{ int64 . }}{{- else -}}{{ . }}{{- end -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}
