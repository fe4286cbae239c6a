{{/* Names, labels and the two container argument lists (the only place flags are spelled). */}}

{{- define "model-manager.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "model-manager.fullname" -}}
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

{{- define "model-manager.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "model-manager.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "model-manager.selector" -}}
app.kubernetes.io/name: {{ include "model-manager.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "model-manager.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "model-manager.workerServiceAccount" -}}
{{- default (printf "%s-worker" (include "model-manager.fullname" .)) .Values.serviceAccount.worker.name -}}
{{- end -}}

{{- define "model-manager.pluginServiceAccount" -}}
{{- default (printf "%s-plugin" (include "model-manager.fullname" .)) .Values.serviceAccount.plugin.name -}}
{{- end -}}

{{- define "model-manager.workerUser" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "model-manager.workerServiceAccount" .) -}}
{{- end -}}

{{- define "model-manager.settingsName" -}}
{{- printf "%s-settings" (include "model-manager.fullname" .) -}}
{{- end -}}

{{- define "model-manager.tlsSecretName" -}}
{{- if eq .Values.apiserver.tls.mode "secret" -}}
{{- .Values.apiserver.tls.secretName -}}
{{- else -}}
{{- printf "%s-tls" (include "model-manager.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "model-manager.serviceName" -}}
{{- include "model-manager.fullname" . -}}
{{- end -}}

{{/* Where files live inside the API server container. */}}
{{- define "model-manager.paths" -}}
tls: /etc/model-manager/tls
etcd: /etc/model-manager/etcd
data: /var/lib/model-manager
{{- end -}}

{{/*
The API server's flags. Every flag the chart passes is spelled here and only here.
*/}}
{{- define "model-manager.apiserverArgs" -}}
{{- $paths := include "model-manager.paths" . | fromYaml -}}
{{- $api := .Values.apiserver -}}
- --bind={{ $api.bindAddress }}
- --port={{ $api.port }}
- --data-dir={{ $paths.data }}
- --tls-cert-file={{ $paths.tls }}/tls.crt
- --tls-private-key-file={{ $paths.tls }}/tls.key
- --namespace=$(POD_NAMESPACE)
- --worker-user={{ include "model-manager.workerUser" . }}
- --plugin-service-account={{ include "model-manager.pluginServiceAccount" . }}
- --plugin-namespace={{ .Release.Namespace }}
- --settings-configmap={{ include "model-manager.settingsName" . }}
- --storage={{ $api.storage.backend }}
{{- if eq $api.storage.backend "etcd" }}
- --etcd-servers={{ join "," $api.storage.etcd.servers }}
- --etcd-prefix={{ $api.storage.etcd.prefix }}
{{- if $api.storage.etcd.tlsSecret }}
- --etcd-cafile={{ $paths.etcd }}/ca.crt
- --etcd-certfile={{ $paths.etcd }}/tls.crt
- --etcd-keyfile={{ $paths.etcd }}/tls.key
{{- end }}
- --workers={{ $api.storage.workers }}
{{- end }}
- --controllers={{ $api.controllers.mode }}
{{- if and (eq $api.controllers.mode "embedded") $api.controllers.leaderElect }}
- --leader-elect
{{- end }}
{{- with $api.authentication.apiAudiences }}
- --api-audiences={{ join "," . }}
{{- end }}
{{- with $api.authentication.requestheaderAllowedNames }}
- --requestheader-allowed-names={{ join "," . }}
{{- end }}
{{- with $api.authorizationAlwaysAllowPaths }}
- --authorization-always-allow-paths={{ join "," . }}
{{- end }}
- --log-level={{ $api.logLevel }}
{{- range $api.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
The node plugin's flags (in-cluster identity: no --kubeconfig).
*/}}
{{- define "model-manager.pluginArgs" -}}
{{- $mm := .Values.modelManager -}}
- --node-name=$(NODE_NAME)
- --endpoint=unix:///csi/csi.sock
- --root={{ $mm.rootPath }}
- --kubelet-dir={{ $mm.kubeletDir }}
- --secure-port={{ $mm.securePort }}
- --namespace=$(POD_NAMESPACE)
- --worker-user={{ include "model-manager.workerUser" . }}
{{- with $mm.scrub.interval }}
- --scrub-interval={{ . }}
{{- end }}
{{- if gt (int64 $mm.scrub.bytesPerSecond) 0 }}
- --scrub-bytes-per-second={{ int64 $mm.scrub.bytesPerSecond }}
{{- end }}
{{- if gt (int $mm.port) 0 }}
- --peer-port={{ $mm.port }}
- --peer-max-serving-streams={{ $mm.peerSync.maxServingStreams }}
- --peer-streams-per-source={{ $mm.peerSync.streamsPerSource }}
- --peer-token-file=/var/run/secrets/gpustack/peer/token
{{- end }}
- --log-level={{ $mm.logLevel }}
{{- range $mm.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/* The node-driver-registrar's flags. */}}
{{- define "model-manager.registrarArgs" -}}
{{- $mm := .Values.modelManager -}}
- --csi-address=/csi/csi.sock
- --kubelet-registration-path={{ $mm.kubeletDir }}/plugins/model.csi.gpustack.ai/csi.sock
- --http-endpoint=:{{ $mm.registrar.healthPort }}
- --v=2
{{- end -}}

{{/* Cross-field rules the schema cannot say, failing with a message naming the values. */}}
{{- define "model-manager.validate" -}}
{{- $api := .Values.apiserver -}}
{{- if and (gt (int $api.replicas) 1) (eq $api.storage.backend "sqlite") -}}
{{- fail "apiserver.replicas > 1 needs apiserver.storage.backend=etcd: SQLite serves one replica" -}}
{{- end -}}
{{- if and (gt (int $api.storage.workers) 1) (eq $api.storage.backend "sqlite") -}}
{{- fail "apiserver.storage.workers > 1 needs apiserver.storage.backend=etcd" -}}
{{- end -}}
{{- if and (eq $api.storage.backend "etcd") (empty $api.storage.etcd.servers) -}}
{{- fail "apiserver.storage.backend=etcd needs apiserver.storage.etcd.servers (client URLs)" -}}
{{- end -}}
{{- if and (eq $api.tls.mode "secret") (empty $api.tls.secretName) -}}
{{- fail "apiserver.tls.mode=secret needs apiserver.tls.secretName (python -m certs generate --secret-manifest makes one)" -}}
{{- end -}}
{{- $high := int (index .Values.settings "model-store-high-watermark") -}}
{{- $low := int (index .Values.settings "model-store-low-watermark") -}}
{{- if ge $low $high -}}
{{- fail (printf "settings.model-store-low-watermark (%d) must be below settings.model-store-high-watermark (%d)" $low $high) -}}
{{- end -}}
{{- if and .Values.modelManager.enabled (eq (int .Values.modelManager.port) (int .Values.modelManager.securePort)) -}}
{{- fail "modelManager.port (peer sync) must differ from modelManager.securePort" -}}
{{- end -}}
{{- end -}}
