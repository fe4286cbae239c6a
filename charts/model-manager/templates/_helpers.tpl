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

{{/* The same labels as a label selector string (the API server's --plugin-pod-selector). */}}
{{- define "model-manager.selectorString" -}}
{{- $labels := include "model-manager.selector" . | fromYaml -}}
{{- $pairs := list -}}
{{- range $key := keys $labels | sortAlpha -}}
{{- $pairs = append $pairs (printf "%s=%s" $key (index $labels $key)) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{- define "model-manager.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "model-manager.workerServiceAccount" -}}
{{- default (printf "%s-worker" (include "model-manager.fullname" .)) .Values.serviceAccount.worker.name -}}
{{- end -}}

{{- define "model-manager.pluginServiceAccount" -}}
{{- default (printf "%s-node" (include "model-manager.fullname" .)) .Values.serviceAccount.plugin.name -}}
{{- end -}}

{{- define "model-manager.pluginUser" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "model-manager.pluginServiceAccount" .) -}}
{{- end -}}

{{/* Where the plugin's projected token for the peer audience is mounted (nodeplugin/peer/assembly.py TOKEN_FILE). */}}
{{- define "model-manager.peerTokenDir" -}}
/var/run/secrets/model.csi.gpustack.ai/peer
{{- end -}}

{{/* Where the API server's projected token for the plugins' audience is mounted (openapi/plugin.py TOKEN_FILE). */}}
{{- define "model-manager.pluginTokenDir" -}}
/var/run/secrets/model.csi.gpustack.ai/plugin
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
The API server's flags. Every flag the chart passes is spelled here and only here; the lists
are rendered with toYaml, so a value never changes the YAML structure. tests/unit/charts/
test_args_parse.py feeds every rendering to the real parsers of python -m apiserver and
python -m nodeplugin, so a renamed or removed flag fails there.
*/}}
{{- define "model-manager.apiserverArgs" -}}
{{- $paths := include "model-manager.paths" . | fromYaml -}}
{{- $api := .Values.apiserver -}}
{{- $mm := .Values.modelManager -}}
{{- $args := list
  (printf "--bind=%s" $api.bindAddress)
  (printf "--port=%d" (int $api.port))
  (printf "--data-dir=%s" $paths.data)
  (printf "--tls-cert-file=%s/tls.crt" $paths.tls)
  (printf "--tls-private-key-file=%s/tls.key" $paths.tls)
  "--namespace=$(POD_NAMESPACE)"
  (printf "--worker-user=%s" (include "model-manager.workerUser" .))
  (printf "--plugin-service-account=%s" (include "model-manager.pluginServiceAccount" .))
  (printf "--plugin-token-file=%s/token" (include "model-manager.pluginTokenDir" .))
  (printf "--plugin-namespace=%s" .Release.Namespace)
  (printf "--plugin-secure-port=%d" (int $mm.securePort))
  (printf "--plugin-pod-selector=%s" (include "model-manager.selectorString" (dict "root" . "component" "node-plugin")))
  (printf "--settings-configmap=%s" (include "model-manager.settingsName" .))
  (printf "--storage=%s" $api.storage.backend) -}}
{{- if eq $api.storage.backend "etcd" -}}
{{- $args = concat $args (list
  (printf "--etcd-servers=%s" (join "," $api.storage.etcd.servers))
  (printf "--etcd-prefix=%s" $api.storage.etcd.prefix)) -}}
{{- if $api.storage.etcd.tlsSecret -}}
{{- $args = concat $args (list
  (printf "--etcd-cafile=%s/ca.crt" $paths.etcd)
  (printf "--etcd-certfile=%s/tls.crt" $paths.etcd)
  (printf "--etcd-keyfile=%s/tls.key" $paths.etcd)) -}}
{{- end -}}
{{- end -}}
{{- /* SQLite's server processes share the one store.db in the Pod's volume (one replica, see validate) */ -}}
{{- $args = append $args (printf "--processes=%d" (int $api.processes)) -}}
{{- $args = append $args (printf "--controllers=%s" $api.controllers.mode) -}}
{{- if and (eq $api.controllers.mode "embedded") $api.controllers.leaderElect -}}
{{- $args = append $args "--leader-elect" -}}
{{- end -}}
{{- $args = concat $args (list
  (printf "--prefetch-warmup-image=%s" $api.controllers.prefetchWarmupImage)
  (printf "--prefetch-warmup-retry-interval=%s" $api.controllers.prefetchWarmupRetryInterval)) -}}
{{- with $api.authentication.apiAudiences -}}
{{- $args = append $args (printf "--api-audiences=%s" (join "," .)) -}}
{{- end -}}
{{- with $api.authentication.requestheaderAllowedNames -}}
{{- $args = append $args (printf "--requestheader-allowed-names=%s" (join "," .)) -}}
{{- end -}}
{{- with $api.authorizationAlwaysAllowPaths -}}
{{- $args = append $args (printf "--authorization-always-allow-paths=%s" (join "," .)) -}}
{{- end -}}
{{- $args = append $args (printf "--log-level=%s" $api.logLevel) -}}
{{- toYaml (concat $args $api.extraArgs) -}}
{{- end -}}

{{/*
The node plugin's flags (in-cluster identity: no --kubeconfig; its hub settings come from its
NodeModelStore's spec, which the worker writes from the settings ConfigMap).
*/}}
{{- define "model-manager.pluginArgs" -}}
{{- $mm := .Values.modelManager -}}
{{- $args := list
  "--node-name=$(NODE_NAME)"
  "--endpoint=unix:///csi/csi.sock"
  (printf "--root=%s" $mm.rootPath)
  (printf "--kubelet-dir=%s" $mm.kubeletDir)
  (printf "--secure-port=%d" (int $mm.securePort))
  "--namespace=$(POD_NAMESPACE)"
  (printf "--worker-user=%s" (include "model-manager.workerUser" .)) -}}
{{- with $mm.scrub.interval -}}
{{- $args = append $args (printf "--scrub-interval=%s" .) -}}
{{- end -}}
{{- if gt (int64 $mm.scrub.bytesPerSecond) 0 -}}
{{- $args = append $args (printf "--scrub-bytes-per-second=%d" (int64 $mm.scrub.bytesPerSecond)) -}}
{{- end -}}
{{- if $mm.peerSync.enabled -}}
{{- /* the Pod's IP (env POD_IP) is what the plugin publishes in its NodeModelStore status */ -}}
{{- $args = concat $args (list
  (printf "--peer-port=%d" (int $mm.port))
  (printf "--peer-user=%s" (include "model-manager.pluginUser" .))
  (printf "--peer-token-file=%s/token" (include "model-manager.peerTokenDir" .))
  "--peer-advertise-address=$(POD_IP)"
  (printf "--peer-max-streams=%d" (int $mm.peerSync.maxServingStreams))
  (printf "--peer-send-timeout=%s" $mm.peerSync.sendTimeout)) -}}
{{- if gt (int $mm.peerSync.maxServingStreamsPerPeer) 0 -}}
{{- $args = append $args (printf "--peer-max-streams-per-peer=%d" (int $mm.peerSync.maxServingStreamsPerPeer)) -}}
{{- end -}}
{{- if not $mm.peerSync.followFetching -}}
{{- $args = append $args "--peer-follow-fetching=false" -}}
{{- end -}}
{{- end -}}
{{- $args = append $args (printf "--log-level=%s" $mm.logLevel) -}}
{{- toYaml (concat $args $mm.extraArgs) -}}
{{- end -}}

{{/* The node-driver-registrar's flags. */}}
{{- define "model-manager.registrarArgs" -}}
{{- $mm := .Values.modelManager -}}
{{- toYaml (list
  "--csi-address=/csi/csi.sock"
  (printf "--kubelet-registration-path=%s/plugins/model.csi.gpustack.ai/csi.sock" $mm.kubeletDir)
  (printf "--http-endpoint=:%d" (int $mm.registrar.healthPort))
  "--v=2") -}}
{{- end -}}

{{/* Cross-field rules the schema cannot say, failing with a message naming the values. */}}
{{- define "model-manager.validate" -}}
{{- $api := .Values.apiserver -}}
{{- if and (gt (int $api.replicas) 1) (eq $api.storage.backend "sqlite") -}}
{{- fail "apiserver.replicas > 1 needs apiserver.storage.backend=etcd: SQLite serves one replica" -}}
{{- end -}}
{{- if and (eq $api.storage.backend "etcd") (empty $api.storage.etcd.servers) -}}
{{- fail "apiserver.storage.backend=etcd needs apiserver.storage.etcd.servers (client URLs)" -}}
{{- end -}}
{{- if and (eq $api.tls.mode "secret") (empty $api.tls.secretName) -}}
{{- fail "apiserver.tls.mode=secret needs apiserver.tls.secretName (python -m certs generate --secret-manifest makes one)" -}}
{{- end -}}
{{- /* the controllers' duration: a sum of <number><ms|s|m|h>, at least a minute */ -}}
{{- $interval := index .Values.settings "model-artifact-revalidate-interval" -}}
{{- $seconds := 0.0 -}}
{{- $scale := dict "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ms|s|m|h)" $interval -1 -}}
{{- $unit := regexFind "(ms|s|m|h)$" . -}}
{{- $seconds = addf $seconds (mulf (float64 (trimSuffix $unit .)) (get $scale $unit)) -}}
{{- end -}}
{{- if lt $seconds 60.0 -}}
{{- fail (printf "settings.model-artifact-revalidate-interval (%s) must be at least 1m" $interval) -}}
{{- end -}}
{{- $high := int (index .Values.settings "model-store-high-watermark") -}}
{{- $low := int (index .Values.settings "model-store-low-watermark") -}}
{{- if ge $low $high -}}
{{- fail (printf "settings.model-store-low-watermark (%d) must be below settings.model-store-high-watermark (%d)" $low $high) -}}
{{- end -}}
{{- $mm := .Values.modelManager -}}
{{- /* the settings key reports the switch (templates/settings.yaml writes it from it) */ -}}
{{- $said := index .Values.settings "model-store-peer-sync" -}}
{{- $runs := and $mm.enabled $mm.peerSync.enabled -}}
{{- if and (not (kindIs "invalid" $said)) (ne $said $runs) -}}
{{- fail (printf "settings.model-store-peer-sync (%v) contradicts modelManager.peerSync.enabled (%v, with modelManager.enabled %v): the key reports whether node-to-node sync runs and the chart writes it from the switch; leave it unset and set modelManager.peerSync.enabled" $said $mm.peerSync.enabled $mm.enabled) -}}
{{- end -}}
{{- if $mm.peerSync.enabled -}}
{{- if eq (int $mm.port) 0 -}}
{{- fail "modelManager.peerSync.enabled needs a peer port: set modelManager.port (32445 by default)" -}}
{{- end -}}
{{- /* the plugin's containers share one network namespace */ -}}
{{- if or (eq (int $mm.port) (int $mm.securePort)) (eq (int $mm.port) (int $mm.registrar.healthPort)) -}}
{{- fail (printf "modelManager.port (%d) must differ from modelManager.securePort (%d) and modelManager.registrar.healthPort (%d): the plugin Pod's containers share its ports" (int $mm.port) (int $mm.securePort) (int $mm.registrar.healthPort)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
