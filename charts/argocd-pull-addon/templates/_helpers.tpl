{{/* The chart name, or nameOverride. */}}
{{- define "argocd-pull-addon.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every name: fullnameOverride, else the release name, plus the chart
name unless the release name already contains it. */}}
{{- define "argocd-pull-addon.fullname" -}}
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

{{/* The manager's name: its ServiceAccount, Deployment, ClusterRole and bindings. */}}
{{- define "argocd-pull-addon.manager" -}}
{{- printf "%s-manager" (include "argocd-pull-addon.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end -}}

{{- define "argocd-pull-addon.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "argocd-pull-addon.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: {{ .Values.manager.addonName }}
{{- end -}}

{{- define "argocd-pull-addon.selectorLabels" -}}
app.kubernetes.io/name: {{ include "argocd-pull-addon.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{/* The image: repository@digest when a digest is set, else repository:tag, the tag
defaulting to the chart's appVersion. */}}
{{- define "argocd-pull-addon.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "argocd-pull-addon.agentImage" -}}
{{- default (include "argocd-pull-addon.image" .) .Values.agent.image -}}
{{- end -}}

{{/* The Lease of the manager's leader election; cmd/manager names it
"<addon name>-addon-manager". */}}
{{- define "argocd-pull-addon.leaseName" -}}
{{- printf "%s-addon-manager" .Values.manager.addonName -}}
{{- end -}}

{{- define "argocd-pull-addon.placementName" -}}
{{- default .Values.manager.addonName .Values.installStrategy.placement.name -}}
{{- end -}}

{{- define "argocd-pull-addon.placementNamespace" -}}
{{- default .Release.Namespace .Values.installStrategy.placement.namespace -}}
{{- end -}}

{{- define "argocd-pull-addon.adcName" -}}
{{- default (printf "%s-default" .Values.manager.addonName) .Values.addOnDeploymentConfig.name -}}
{{- end -}}

{{/* The resource proxy's Service, client service account and its token Secret. */}}
{{- define "argocd-pull-addon.resourceProxy" -}}
{{ .Values.manager.addonName }}-resource-proxy
{{- end }}
