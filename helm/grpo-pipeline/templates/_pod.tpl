{{/*
The pod template of one workload, shared by the Deployments and the learner's StatefulSet:
(dict "root" $ "w" $w "component" $name). Volumes besides config, /tmp and TLS:
  weights.transfer grpc: the learner mounts its own ReadWriteOnce claim "weights" (a
    volumeClaimTemplate of its StatefulSet) read-write; the rollout worker gets an emptyDir
    "weights-cache" for the versions it pulls (the driver too, for the versions it
    evaluates); nobody else mounts weights.
  the driver (a Job, restartPolicy OnFailure): "output" (its out_dir: an emptyDir or
    output.existingClaim) and, when dataset.volume is set, "dataset" read-only.
  weights.transfer sharedVolume: the shared claim, as each workload's `weights` says
    (learner readWrite, rollout worker readOnly).
*/}}
{{- define "grpo.podTemplate" -}}
{{- $root := .root -}}
{{- $w := .w -}}
{{- $component := .component -}}
{{- $ctx := dict "root" $root "component" $component -}}
{{- $gpu := include "grpo.usesGpu" (dict "root" $root "w" $w) -}}
{{- $weights := default "none" $w.weights -}}
{{- /* learner ranks > 0 serve only health: data-parallel pods probe the whole server */ -}}
{{- $probeService := $w.grpcService -}}
{{- if and $w.dataParallel $w.dataParallel.enabled }}{{ $probeService = "" }}{{ end -}}
{{- if include "grpo.weights.grpc" $root -}}
{{- $weights = "none" -}}
{{- if eq $w.role "learner" }}{{ $weights = "claimTemplate" }}{{ end -}}
{{- if or (eq $w.role "rollout-worker") (eq $w.role "driver") }}{{ $weights = "cache" }}{{ end -}}
{{- end -}}
{{- /* the workload's podLabels (Kueue queue names, cost centres), under the chart's own */ -}}
{{- $labels := deepCopy (default (dict) $w.podLabels) -}}
{{- $_ := mergeOverwrite $labels (include "grpo.labels" $root | fromYaml) (dict "app.kubernetes.io/component" $component "grpo.dev/role" $w.role) -}}
{{- if $w.redisClient }}{{ $_ := set $labels "grpo.dev/redis-client" "true" }}{{ end -}}
metadata:
  labels:
    {{- toYaml $labels | nindent 4 }}
  annotations:
    checksum/config: {{ include "grpo.configInputs" (dict "root" $root "w" $w "component" $component "workloads" (include "grpo.workloads" $root | fromYaml)) | sha256sum }}
    {{- if $root.Values.metrics.podAnnotations }}
    prometheus.io/scrape: "true"
    prometheus.io/port: {{ $root.Values.metrics.port | quote }}
    prometheus.io/path: /metrics
    {{- end }}
    {{- with $w.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  {{- if and (eq $w.role "assembler") $root.Values.discovery.enabled }}
  serviceAccountName: {{ include "grpo.fullname" $root }}-discovery
  automountServiceAccountToken: true
  {{- else if and (eq $w.role "driver") (include "grpo.releaseTargets" $root | fromYaml).targets }}
  serviceAccountName: {{ include "grpo.fullname" $root }}-driver
  automountServiceAccountToken: true
  {{- else }}
  serviceAccountName: {{ include "grpo.fullname" $root }}
  automountServiceAccountToken: false
  {{- end }}
  {{- with $root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $w.runtimeClassName }}
  runtimeClassName: {{ . }}
  {{- end }}
  {{- with $w.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with $w.schedulerName }}
  schedulerName: {{ . }}
  {{- end }}
  {{- if kindIs "bool" $w.hostUsers }}
  hostUsers: {{ $w.hostUsers }}
  {{- end }}
  enableServiceLinks: false
  {{- if eq $w.workloadKind "Job" }}
  restartPolicy: OnFailure
  {{- end }}
  terminationGracePeriodSeconds: {{ $w.terminationGracePeriodSeconds }}
  securityContext:
    {{- $psc := deepCopy $w.podSecurityContext }}
    {{- with $w.seccompProfile }}
    {{- $sp := deepCopy . }}
    {{- if and (eq $sp.type "Localhost") (not $sp.localhostProfile) }}
    {{- if not (and $w.seccompOperator $w.seccompOperator.enabled) }}
    {{- fail (printf "%s: seccompProfile Localhost needs localhostProfile, or seccompOperator.enabled" $component) }}
    {{- end }}
    {{- $_ := set $sp "localhostProfile" (printf "operator/%s/%s.json" $root.Release.Namespace $w.seccompOperator.name) }}
    {{- end }}
    {{- $_ := set $psc "seccompProfile" $sp }}
    {{- end }}
    {{- toYaml $psc | nindent 4 }}
  {{- $nodeSelector := default (dict) $w.nodeSelector }}
  {{- if $gpu }}
  {{- $nodeSelector = merge (deepCopy $nodeSelector) $root.Values.gpu.nodeSelector }}
  {{- end }}
  {{- with $nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- $tolerations := default (list) $w.tolerations }}
  {{- if $gpu }}
  {{- $tolerations = concat $tolerations $root.Values.gpu.tolerations }}
  {{- end }}
  {{- with $tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $w.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if and (eq $w.role "learner") (ne $root.Values.initialModel.source "none") }}
  initContainers:
    {{- include "grpo.fetchModelContainer" (dict "root" $root "w" $w) | nindent 4 }}
  {{- end }}
  containers:
    - name: {{ $component }}
      image: {{ include "grpo.image" (dict "root" $root "image" $w.image) | quote }}
      imagePullPolicy: {{ default $root.Values.image.pullPolicy $w.image.pullPolicy }}
      {{- if $w.serve }}
      command: [grpo, serve, {{ $w.serve | quote }}, --run-config, /etc/grpo/run.yaml, --placement, /etc/grpo/placement.yaml, --config, /etc/grpo/config.yaml]
      {{- else }}
      {{- with $w.command }}
      command:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $w.args }}
      args:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- end }}
      ports:
        - name: grpc
          containerPort: {{ $root.Values.grpc.port }}
          protocol: TCP
        - name: metrics
          containerPort: {{ $root.Values.metrics.port }}
          protocol: TCP
      env:
        {{- include "grpo.env" (dict "root" $root "w" $w) | nindent 8 }}
        {{- if $w.compileCacheSizeLimit }}
        {{- /* compile caches (Triton, TorchInductor, vLLM) on their own volume, not /tmp */}}
        {{- range $name, $sub := dict "XDG_CACHE_HOME" "" "TRITON_CACHE_DIR" "/triton" "TORCHINDUCTOR_CACHE_DIR" "/inductor" "VLLM_CACHE_ROOT" "/vllm" }}
        - name: {{ $name }}
          value: {{ printf "/var/cache/grpo%s" $sub | quote }}
        {{- end }}
        {{- end }}
      startupProbe:
        {{- include "grpo.probe" (dict "root" $root "w" $w "component" $component "service" $probeService "kind" "startup") | trim | nindent 8 }}
      readinessProbe:
        {{- include "grpo.probe" (dict "root" $root "w" $w "component" $component "service" $probeService "kind" "readiness") | trim | nindent 8 }}
      livenessProbe:
        {{- include "grpo.probe" (dict "root" $root "w" $w "component" $component "service" "" "kind" "liveness") | trim | nindent 8 }}
      resources:
        {{- $res := deepCopy $w.resources }}
        {{- if $gpu }}
        {{- $limits := default (dict) $res.limits }}
        {{- $_ := set $limits $root.Values.gpu.resourceName (int $w.gpus) }}
        {{- $_ := set $res "limits" $limits }}
        {{- end }}
        {{- toYaml $res | nindent 8 }}
      securityContext:
        {{- $sc := deepCopy $w.securityContext }}
        {{- with $w.appArmorProfile }}
        {{- $_ := set $sc "appArmorProfile" . }}
        {{- end }}
        {{- with $w.procMount }}
        {{- $_ := set $sc "procMount" . }}
        {{- end }}
        {{- toYaml $sc | nindent 8 }}
      volumeMounts:
        {{- if $w.serve }}
        - name: config
          mountPath: /etc/grpo/run.yaml
          subPath: run.yaml
          readOnly: true
        - name: config
          mountPath: /etc/grpo/placement.yaml
          subPath: placement.yaml
          readOnly: true
        {{- end }}
        - name: config
          mountPath: /etc/grpo/config.yaml
          subPath: config.yaml
          readOnly: true
        - name: tmp
          mountPath: /tmp
        {{- if $w.shmSizeLimit }}
        - name: shm
          mountPath: /dev/shm
        {{- end }}
        {{- if $w.compileCacheSizeLimit }}
        - name: compile-cache
          mountPath: /var/cache/grpo
        {{- end }}
        {{- with $w.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- if $root.Values.tls.enabled }}
        - name: tls
          mountPath: /etc/grpo/tls
          readOnly: true
        {{- end }}
        {{- if eq $w.role "driver" }}
        - name: output
          mountPath: {{ $w.output.mountPath }}
        {{- if $w.dataset.volume }}
        - name: dataset
          mountPath: {{ $w.dataset.mountPath }}
          readOnly: true
        {{- end }}
        {{- end }}
        {{- if eq $weights "cache" }}
        - name: weights-cache
          mountPath: {{ $root.Values.weights.cacheDir }}
        {{- else if ne $weights "none" }}
        - name: weights
          mountPath: {{ $root.Values.weights.mountPath }}
          readOnly: {{ eq $weights "readOnly" }}
        {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "grpo.fullname" $root }}-config
        items:
          - key: {{ $component }}.yaml
            path: config.yaml
          {{- if $w.serve }}
          - key: run.yaml
            path: run.yaml
          - key: {{ $component }}.placement.yaml
            path: placement.yaml
          {{- end }}
    - name: tmp
      emptyDir:
        sizeLimit: {{ $w.tmpSizeLimit }}
    {{- if and (eq $w.role "learner") (eq $root.Values.initialModel.source "claim") }}
    - name: model-source
      persistentVolumeClaim:
        claimName: {{ required "initialModel.claim.claimName is required with initialModel.source claim" $root.Values.initialModel.claim.claimName }}
        readOnly: true
    {{- end }}
    {{- with $w.shmSizeLimit }}
    - name: shm
      emptyDir:
        medium: Memory
        sizeLimit: {{ . }}
    {{- end }}
    {{- with $w.compileCacheSizeLimit }}
    - name: compile-cache
      emptyDir:
        sizeLimit: {{ . }}
    {{- end }}
    {{- with $w.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- if $root.Values.tls.enabled }}
    - name: tls
      secret:
        secretName: {{ include "grpo.tls.secretName" $root }}
        defaultMode: 0440
    {{- end }}
    {{- if eq $w.role "driver" }}
    - name: output
      {{- if $w.output.existingClaim }}
      persistentVolumeClaim:
        claimName: {{ $w.output.existingClaim }}
      {{- else }}
      emptyDir: {}
      {{- end }}
    {{- with $w.dataset.volume }}
    - name: dataset
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- end }}
    {{- if eq $weights "cache" }}
    - name: weights-cache
      emptyDir:
        sizeLimit: {{ $root.Values.weights.cacheSizeLimit }}
    {{- else if or (eq $weights "readOnly") (eq $weights "readWrite") }}
    - name: weights
      persistentVolumeClaim:
        claimName: {{ include "grpo.weights.claimName" $root }}
        readOnly: {{ eq $weights "readOnly" }}
    {{- end }}
{{- end -}}


{{/* The learner's init container that puts the initial policy at the model path on its
     claim (grpo model fetch; initialModel): (dict "root" $ "w" $w). Rank > 0 pods skip it. */}}
{{- define "grpo.fetchModelContainer" -}}
{{- $root := .root -}}
{{- $w := .w -}}
{{- $m := $root.Values.initialModel -}}
{{- $modelPath := include "grpo.modelPath" $root -}}
{{- $mount := trimSuffix "/" $root.Values.weights.mountPath -}}
{{- if not (hasPrefix (printf "%s/" $mount) $modelPath) -}}
{{- fail (printf "initialModel.source %s puts the model at %s, which is not on the learner's claim (weights.mountPath %s): set run.model.path under it" $m.source $modelPath $mount) -}}
{{- end -}}
{{- $from := "" -}}
{{- if eq $m.source "claim" -}}
{{- $from = trimSuffix "/" (printf "/var/lib/grpo-model-source/%s" (trimPrefix "/" $m.claim.path)) -}}
{{- else if eq $m.source "hub" -}}
{{- $from = printf "hf://%s" (required "initialModel.hub.id is required with initialModel.source hub" $m.hub.id) -}}
{{- with $m.hub.revision }}{{ $from = printf "%s@%s" $from . }}{{ end -}}
{{- else if eq $m.source "objectStorage" -}}
{{- $from = required "initialModel.objectStorage.url is required with initialModel.source objectStorage" $m.objectStorage.url -}}
{{- end -}}
- name: fetch-model
  image: {{ include "grpo.image" (dict "root" $root "image" $w.image) | quote }}
  imagePullPolicy: {{ default $root.Values.image.pullPolicy $w.image.pullPolicy }}
  command: [grpo, model, fetch, --from, {{ $from | quote }}, --dest, {{ $modelPath | quote }}, --only-rank0]
  env:
    - name: HOME
      value: /tmp
    {{- if and $w.dataParallel $w.dataParallel.enabled }}
    - name: RANK
      valueFrom:
        fieldRef:
          fieldPath: metadata.labels['apps.kubernetes.io/pod-index']
    {{- end }}
    {{- if eq $m.source "hub" }}
    - name: HF_HUB_OFFLINE
      value: "0"
    {{- with $m.hub.endpoint }}
    - name: HF_ENDPOINT
      value: {{ . | quote }}
    {{- end }}
    {{- if $m.hub.tokenSecret.name }}
    - name: HF_TOKEN
      valueFrom:
        secretKeyRef:
          name: {{ $m.hub.tokenSecret.name }}
          key: {{ $m.hub.tokenSecret.key }}
    {{- end }}
    {{- end }}
    {{- if eq $m.source "objectStorage" }}
    {{- with $m.objectStorage.endpoint }}
    - name: AWS_ENDPOINT_URL
      value: {{ . | quote }}
    {{- end }}
    {{- with $m.objectStorage.region }}
    - name: AWS_DEFAULT_REGION
      value: {{ . | quote }}
    {{- end }}
    {{- with $m.objectStorage.credentialsSecret }}
    {{- if .name }}
    - name: AWS_ACCESS_KEY_ID
      valueFrom:
        secretKeyRef:
          name: {{ .name }}
          key: {{ .accessKeyIdKey }}
    - name: AWS_SECRET_ACCESS_KEY
      valueFrom:
        secretKeyRef:
          name: {{ .name }}
          key: {{ .secretAccessKeyKey }}
    {{- end }}
    {{- end }}
    {{- end }}
  resources:
    {{- toYaml $m.resources | nindent 4 }}
  securityContext:
    {{- toYaml $w.securityContext | nindent 4 }}
  volumeMounts:
    - name: weights
      mountPath: {{ $root.Values.weights.mountPath }}
    - name: tmp
      mountPath: /tmp
    {{- if eq $m.source "claim" }}
    - name: model-source
      mountPath: /var/lib/grpo-model-source
      readOnly: true
    {{- end }}
{{- end -}}
