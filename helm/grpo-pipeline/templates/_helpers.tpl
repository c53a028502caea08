{{/*
Shared names, labels and the workload list every per-kind template ranges over.
*/}}

{{/* Chart name (nameOverride wins). */}}
{{- define "grpo.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Resource-name prefix: fullnameOverride, else <release>-<chart> (or <release> if it
     already contains the chart name). Kept short so "<prefix>-verifier-<name>" fits 63 (38 + "-verifier-" + 15). */}}
{{- define "grpo.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 38 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "grpo.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 38 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 38 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels that select the pods of this release. */}}
{{- define "grpo.selectorLabels" -}}
app.kubernetes.io/name: {{ include "grpo.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels on every object of this release. */}}
{{- define "grpo.labels" -}}
{{ include "grpo.selectorLabels" . }}
app.kubernetes.io/part-of: grpo-pipeline
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Name of one component's objects: (dict "root" $ "component" "verifier-math"). */}}
{{- define "grpo.componentName" -}}
{{- printf "%s-%s" (include "grpo.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels of one component. */}}
{{- define "grpo.componentSelector" -}}
{{ include "grpo.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
Every enabled workload as YAML: component name (a `services` key in kebab-case, e.g.
rolloutWorker -> rollout-worker, or verifier-<key>) -> its block merged over `defaults`, plus
  role: rollout-worker | assembler | learner | driver | verifier
  workloadKind: StatefulSet (the learner: stable pod names, one checkpoint claim per pod) |
    Job (the driver: runs to completion, restarted on failure) | Deployment
  verifierName: the key under `verifiers` (verifiers only; an `external` verifier is no
    workload: it runs elsewhere and is only routed to, grpo.routing / grpo.externalVerifiers)
  redisClient: true for the pipeline services that use Redis (never for verifiers)
Templates read it with: include "grpo.workloads" . | fromYaml
*/}}
{{- define "grpo.workloads" -}}
{{- $out := dict -}}
{{- range $key, $svc := .Values.services -}}
{{- if or (not (hasKey $svc "enabled")) $svc.enabled -}}
{{- $name := kebabcase $key -}}
{{- $w := mergeOverwrite (deepCopy $.Values.defaults) (deepCopy $svc) -}}
{{- $_ := set $w "role" $name -}}
{{- $_ := set $w "redisClient" true -}}
{{- $kind := "Deployment" -}}
{{- if eq $name "learner" }}{{ $kind = "StatefulSet" }}{{ end -}}
{{- if eq $name "driver" }}{{ $kind = "Job" }}{{ end -}}
{{- $_ := set $w "workloadKind" $kind -}}
{{- $_ := set $out $name $w -}}
{{- end -}}
{{- end -}}
{{- range $name, $v := .Values.verifiers -}}
{{- if and (or (not (hasKey $v "enabled")) $v.enabled) (not $v.external) -}}
{{- $w := mergeOverwrite (deepCopy $.Values.defaults) (dict "grpcService" "grpo.v1.Verifier") (deepCopy $v) -}}
{{- $_ := set $w "role" "verifier" -}}
{{- $_ := set $w "verifierName" $name -}}
{{- $_ := set $w "redisClient" false -}}
{{- $_ := set $w "workloadKind" "Deployment" -}}
{{- $_ := set $out (printf "verifier-%s" $name) $w -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* Image reference of a workload: (dict "root" $ "image" $w.image). */}}
{{- define "grpo.image" -}}
{{- $img := .image -}}
{{- $repo := $img.repository -}}
{{- if not (contains "/" $repo) -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" .root.Values.image.registry) $repo -}}
{{- end -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $repo $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default (default .root.Chart.AppVersion .root.Values.image.tag) $img.tag) -}}
{{- end -}}
{{- end -}}

{{/* gRPC target of a verifier. Headless Services (verifierRouting.headless): a dns:/// target
     on the fully qualified name, which resolves to every ready pod address so the assembler's
     client-side round-robin spreads calls over all replicas; else the ClusterIP Service as
     <service>.<namespace>.svc:<port> (the form discovery also produces).
     (dict "root" $ "component" "verifier-math") */}}
{{- define "grpo.verifierAddress" -}}
{{- $name := include "grpo.componentName" . -}}
{{- $port := int .root.Values.grpc.port -}}
{{- if .root.Values.verifierRouting.headless -}}
{{- printf "dns:///%s.%s.svc.%s:%d" $name .root.Release.Namespace .root.Values.clusterDomain $port -}}
{{- else -}}
{{- printf "%s.%s.svc:%d" $name .root.Release.Namespace $port -}}
{{- end -}}
{{- end -}}

{{/* DNS name of learner pod <ordinal> behind the learner's headless Service:
     <prefix>-learner-<i>.<prefix>-learner.<namespace>.svc.<clusterDomain>. (dict "root" $ "ordinal" 0) */}}
{{- define "grpo.learnerPodHost" -}}
{{- $svc := include "grpo.componentName" (dict "root" .root "component" "learner") -}}
{{- printf "%s-%d.%s.%s.svc.%s" $svc (int .ordinal) $svc .root.Release.Namespace .root.Values.clusterDomain -}}
{{- end -}}

{{/* The initial policy the learner loads and publishes as version 0: run.model.path, else
     weights.modelPath. */}}
{{- define "grpo.modelPath" -}}
{{- default .Values.weights.modelPath (dig "model" "path" "" (default (dict) .Values.run)) -}}
{{- end -}}

{{/* Published weights travel over gRPC from the learner (weights.transfer: grpc)? */}}
{{- define "grpo.weights.grpc" -}}
{{- if eq .Values.weights.transfer "grpc" -}}true{{- end -}}
{{- end -}}

{{/* Each task type's primary outcome verifier (task type -> verifier name): its only outcome
     verifier, or, when several are enabled for it, the one with `primary: true` (the render
     fails unless exactly one is marked). The others are weighted rewards of the route. */}}
{{- define "grpo.primaryVerifiers" -}}
{{- $outcomes := dict -}}
{{- range $name, $v := .Values.verifiers -}}
{{- if and (or (not (hasKey $v "enabled")) $v.enabled) (ne (default "outcome" $v.kind) "process") -}}
{{- range $t := $v.taskTypes -}}
{{- $_ := set $outcomes $t (append (get $outcomes $t | default (list)) $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $primaries := dict -}}
{{- range $t, $names := $outcomes -}}
{{- $marked := list -}}
{{- range $n := $names -}}
{{- if (get $.Values.verifiers $n).primary -}}{{- $marked = append $marked $n -}}{{- end -}}
{{- end -}}
{{- if eq (len $names) 1 -}}
{{- $_ := set $primaries $t (first $names) -}}
{{- else if eq (len $marked) 1 -}}
{{- $_ := set $primaries $t (first $marked) -}}
{{- else -}}
{{- fail (printf "task type %s has %d outcome verifiers (%s) and %d marked primary: set primary: true on exactly one (its reward is the primary one: held-out accuracy, correct counts); the others are weighted rewards (weight, rewardName)" $t (len $names) (join ", " $names) (len $marked)) -}}
{{- end -}}
{{- end -}}
{{- toYaml $primaries -}}
{{- end -}}

{{/* The routing table (RoutingTable.from_config form) built from `verifiers`: per task type the
     primary outcome verifier (`outcome`, named `rewardName` or "outcome", weighted `weight`),
     every other outcome verifier of that task type as a weighted reward (`rewards`: name
     `rewardName` or the verifier's key, `weight`, default 1) and the process verifiers. A
     deployed verifier is at its Service, an `external` one at its address. */}}
{{- define "grpo.routing" -}}
{{- $routes := dict -}}
{{- $primaries := include "grpo.primaryVerifiers" . | fromYaml -}}
{{- range $name, $v := .Values.verifiers -}}
{{- if or (not (hasKey $v "enabled")) $v.enabled -}}
{{- $addr := include "grpo.verifierAddress" (dict "root" $ "component" (printf "verifier-%s" $name)) -}}
{{- if $v.external }}{{ $addr = $v.external.address }}{{ end -}}
{{- $kind := default "outcome" $v.kind -}}
{{- if and (eq $kind "process") (or (hasKey $v "weight") (hasKey $v "primary") (hasKey $v "rewardName")) -}}
{{- fail (printf "verifiers.%s: weight, primary and rewardName apply to outcome verifiers; a process verifier's weight is the run's learner.algo.process_weight" $name) -}}
{{- end -}}
{{- range $t := $v.taskTypes -}}
{{- $r := get $routes $t | default (dict "outcome" (list) "process" (list)) -}}
{{- if eq $kind "process" -}}
{{- $_ := set $r "process" (append $r.process $addr) -}}
{{- else if eq (get $primaries $t) $name -}}
{{- $_ := set $r "outcome" (list $addr) -}}
{{- if $v.rewardName }}{{ $_ := set $r "name" $v.rewardName }}{{ end -}}
{{- if hasKey $v "weight" }}{{ $_ := set $r "weight" $v.weight }}{{ end -}}
{{- else -}}
{{- $term := dict "name" (default $name $v.rewardName) "weight" (ternary $v.weight 1 (hasKey $v "weight")) "addresses" (list $addr) -}}
{{- $_ := set $r "rewards" (append (get $r "rewards" | default (list)) $term) -}}
{{- end -}}
{{- $_ := set $routes $t $r -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $routes -}}
{{- end -}}

{{/* Enabled `external` verifiers (name -> their `external` block): verifiers running
     elsewhere, any language, reached at external.address (docs/add-a-verifier.md). */}}
{{- define "grpo.externalVerifiers" -}}
{{- $out := dict -}}
{{- range $name, $v := .Values.verifiers -}}
{{- if and (or (not (hasKey $v "enabled")) $v.enabled) $v.external -}}
{{- $_ := set $out $name $v.external -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* Bundled Redis in use? */}}
{{- define "grpo.redis.bundled" -}}
{{- if not (or .Values.redis.external.url .Values.redis.external.existingSecret) -}}true{{- end -}}
{{- end -}}

{{/* Name of the Secret and key holding REDIS_URL (external) or the password (bundled). */}}
{{- define "grpo.redis.secretName" -}}
{{- if include "grpo.redis.bundled" . -}}
{{- default (printf "%s-redis" (include "grpo.fullname" .)) .Values.redis.auth.existingSecret -}}
{{- else -}}
{{- default (printf "%s-redis" (include "grpo.fullname" .)) .Values.redis.external.existingSecret -}}
{{- end -}}
{{- end -}}

{{/* Name of the TLS Secret. */}}
{{- define "grpo.tls.secretName" -}}
{{- default (printf "%s-tls" (include "grpo.fullname" .)) .Values.tls.existingSecret -}}
{{- end -}}

{{/* Name of the shared weights claim (weights.transfer: sharedVolume). */}}
{{- define "grpo.weights.claimName" -}}
{{- default (printf "%s-weights" (include "grpo.fullname" .)) .Values.weights.sharedVolume.existingClaim -}}
{{- end -}}

{{/* Does a workload request GPUs? (dict "root" $ "w" $w) */}}
{{- define "grpo.usesGpu" -}}
{{- if and .root.Values.gpu.enabled (gt (int (default 0 .w.gpus)) 0) -}}true{{- end -}}
{{- end -}}

{{/* Environment of a pipeline container: (dict "root" $ "w" $w). */}}
{{- define "grpo.env" -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: HOME
  value: /tmp
- name: PYTHONDONTWRITEBYTECODE
  value: "1"
{{- if .w.redisClient }}
{{- if include "grpo.redis.bundled" .root }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "grpo.redis.secretName" .root }}
      key: {{ .root.Values.redis.auth.existingSecretKey }}
- name: REDIS_URL
  value: {{ printf "redis://:$(REDIS_PASSWORD)@%s-redis:6379/0" (include "grpo.fullname" .root) | quote }}
{{- else }}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "grpo.redis.secretName" .root }}
      key: {{ .root.Values.redis.external.existingSecretKey }}
{{- end }}
{{- if ne .w.role "driver" }}{{/* the driver's Redis is run.redis_url, unset = $REDIS_URL */}}
- name: GRPO_REDIS_URL
  value: $(REDIS_URL)
{{- end }}
{{- end }}
{{- if and (eq .w.role "driver") .w.dataset .w.dataset.volume }}
- name: GRPO_DATA_DIR
  value: {{ .w.dataset.mountPath | quote }}
{{- end }}
{{- if and .w.dataParallel .w.dataParallel.enabled }}
- name: RANK
  valueFrom:
    fieldRef:
      fieldPath: metadata.labels['apps.kubernetes.io/pod-index']
- name: WORLD_SIZE
  value: {{ .w.replicas | quote }}
- name: MASTER_ADDR
  value: {{ include "grpo.learnerPodHost" (dict "root" .root "ordinal" 0) | quote }}
- name: MASTER_PORT
  value: {{ .w.dataParallel.port | quote }}
{{- end }}
{{- with .w.nccl }}
{{- if .socketIfname }}
- name: NCCL_SOCKET_IFNAME
  value: {{ .socketIfname | quote }}
- name: GLOO_SOCKET_IFNAME
  value: {{ .socketIfname | quote }}
{{- end }}
{{- if .ibHca }}
- name: NCCL_IB_HCA
  value: {{ .ibHca | quote }}
{{- end }}
{{- if .debug }}
- name: NCCL_DEBUG
  value: {{ .debug | quote }}
{{- end }}
{{- end }}
{{- with .w.env }}
{{ toYaml . }}
{{- end }}
{{- with .w.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* One probe of a workload: (dict "root" $ "w" $w "component" $name "service" "..." "kind" "startup|readiness|liveness").
     Native gRPC probes on grpc.health.v1; with TLS (which kubelet probes cannot speak) an exec
     check over TLS for the pipeline's own images and a TCP check for other images. */}}
{{- define "grpo.probe" -}}
{{- $p := .w.probes -}}
{{- $port := int .root.Values.grpc.port -}}
{{- if not .root.Values.tls.enabled }}
grpc:
  port: {{ $port }}
  service: {{ .service | quote }}
{{- else if .w.serve }}
exec:
  command:
    - python
    - -c
    - {{ include "grpo.tlsHealthScript" . | quote }}
    - {{ printf "127.0.0.1:%d" $port | quote }}
    - {{ .service | quote }}
    - {{ printf "%s.%s.svc" (include "grpo.componentName" (dict "root" .root "component" .component)) .root.Release.Namespace | quote }}
    - /etc/grpo/tls
{{- else }}
tcpSocket:
  port: {{ $port }}
{{- end }}
periodSeconds: {{ $p.periodSeconds }}
timeoutSeconds: {{ $p.timeoutSeconds }}
{{- if eq .kind "startup" }}
failureThreshold: {{ $p.startupFailureThreshold }}
{{- else }}
failureThreshold: {{ $p.failureThreshold }}
{{- end }}
{{- end -}}

{{/* A grpc.health.v1 Check over TLS; argv: target, service, TLS server name, directory with
     ca.crt, tls.crt and tls.key (the pod's own pair doubles as client certificate for mutual
     TLS). Exit 0 = SERVING. */}}
{{- define "grpo.tlsHealthScript" -}}
import sys, grpc; from grpc_health.v1 import health_pb2 as h, health_pb2_grpc as g; r = lambda n: open(sys.argv[4] + '/' + n, 'rb').read(); c = grpc.ssl_channel_credentials(r('ca.crt'), r('tls.key'), r('tls.crt')); ch = grpc.secure_channel(sys.argv[1], c, options=[('grpc.ssl_target_name_override', sys.argv[3])]); s = g.HealthStub(ch).Check(h.HealthCheckRequest(service=sys.argv[2]), timeout=4).status; sys.exit(0 if s == h.HealthCheckResponse.SERVING else 1)
{{- end -}}


{{/* The driver's release targets as YAML (a list of {kind, name}), empty when the driver or
     releaseOnComplete is off; fails on a component that is no Deployment or StatefulSet of
     this release. */}}
{{- define "grpo.releaseTargets" -}}
{{- $workloads := include "grpo.workloads" . | fromYaml -}}
{{- $out := list -}}
{{- $driver := get $workloads "driver" -}}
{{- if and $driver $driver.releaseOnComplete $driver.releaseOnComplete.enabled -}}
{{- range $component := $driver.releaseOnComplete.workloads -}}
{{- $w := get $workloads $component -}}
{{- if not (and $w (has $w.workloadKind (list "Deployment" "StatefulSet"))) -}}
{{- fail (printf "services.driver.releaseOnComplete.workloads: %s is no Deployment or StatefulSet of this release" $component) -}}
{{- end -}}
{{- $out = append $out (dict "kind" $w.workloadKind "name" (include "grpo.componentName" (dict "root" $ "component" $component))) -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "targets" $out) -}}
{{- end -}}
