{{/*
The three files a pipeline pod derives its settings from (grpo.services.settings.services:
the one derivation, the same as `grpo run`'s):
  run.yaml        the run (top-level `run`, a RunConfig) with the chart's stream namespace and
                  model path; every `grpo serve` pod mounts it;
  placement.yaml  what the chart decides for the workload (its placement: gRPC server block,
                  paths, addresses, weight transfer, routing); never a key the run decides
                  (`grpo serve` refuses one);
  config.yaml     the workload's own `config:` values, laid over everything.
`grpo serve NAME --run-config /etc/grpo/run.yaml --placement /etc/grpo/placement.yaml
--config /etc/grpo/config.yaml` derives the effective settings at start. The chart derives
nothing itself. The Redis URL comes from the environment (GRPO_REDIS_URL / REDIS_URL).
*/}}

{{/* The run as every pod reads it: `run` with namespace = streamNamespace and model.path = the
     initial policy (grpo.modelPath). redis_url stays unset (the pods' REDIS_URL). */}}
{{- define "grpo.runConfig" -}}
{{- $run := deepCopy (default (dict) .Values.run) -}}
{{- if not $run -}}
{{- fail "run is required: the run config (a RunConfig, e.g. the content of configs/arith-cpu.yaml; docs/kubernetes.md, Install)" -}}
{{- end -}}
{{- if $run.namespace -}}
{{- fail "run.namespace is the chart's: set streamNamespace instead" -}}
{{- end -}}
{{- if $run.redis_url -}}
{{- fail "run.redis_url is the chart's: set redis.external.url (or use the bundled Redis) instead" -}}
{{- end -}}
{{- $_ := unset $run "redis_url" -}}
{{- $_ := set $run "namespace" .Values.streamNamespace -}}
{{- $_ := set $run "model" (mergeOverwrite (deepCopy (default (dict) $run.model)) (dict "path" (include "grpo.modelPath" .))) -}}
{{- toYaml $run -}}
{{- end -}}

{{/* The gRPC server block of a workload's placement: (dict "root" $ "w" $w). The driver's
     grace_s is the run's (its final evaluation, grpo.services.settings.services.DRIVER_GRACE_S). */}}
{{- define "grpo.serverBlock" -}}
{{- $v := .root.Values -}}
{{- $server := dict "host" $v.grpc.bindHost "port" (int $v.grpc.port) "metrics_port" (int $v.metrics.port) "max_message_bytes" (int $v.grpc.maxMessageBytes) "drain_delay_s" $v.grpc.drainDelaySeconds -}}
{{- if ne .w.role "driver" -}}
{{- $_ := set $server "grace_s" $v.grpc.graceSeconds -}}
{{- end -}}
{{- if $v.tls.enabled -}}
{{- $_ := set $server "tls_cert_file" "/etc/grpo/tls/tls.crt" -}}
{{- $_ := set $server "tls_key_file" "/etc/grpo/tls/tls.key" -}}
{{- if $v.tls.requireClientCert -}}
{{- $_ := set $server "tls_client_ca_file" "/etc/grpo/tls/ca.crt" -}}
{{- end -}}
{{- end -}}
{{- toYaml $server -}}
{{- end -}}

{{/* A workload's placement (PLACEMENT_KEYS of grpo.services.settings.services):
     (dict "root" $ "w" $w "component" $name "workloads" $workloads). */}}
{{- define "grpo.placement" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $w := .w -}}
{{- $cfg := dict "server" (include "grpo.serverBlock" (dict "root" $root "w" $w) | fromYaml) -}}
{{- $modelPath := include "grpo.modelPath" $root -}}
{{- $grpcPort := int $v.grpc.port -}}
{{- $learnerAddress := printf "%s:%d" (include "grpo.learnerPodHost" (dict "root" $root "ordinal" 0)) $grpcPort -}}
{{- /* grpc transfer: rollout workers and the driver pull versions from learner rank 0 */ -}}
{{- $pull := dict "mode" "grpc" "address" $learnerAddress "cache_dir" $v.weights.cacheDir -}}
{{- if $v.tls.enabled -}}
{{- $_ := set $pull "tls_ca_file" "/etc/grpo/tls/ca.crt" -}}
{{- if $v.tls.requireClientCert -}}
{{- $_ := set $pull "tls_cert_file" "/etc/grpo/tls/tls.crt" -}}
{{- $_ := set $pull "tls_key_file" "/etc/grpo/tls/tls.key" -}}
{{- end -}}
{{- end -}}
{{- if eq $w.role "rollout-worker" -}}
{{- $device := ternary "cuda" "cpu" (eq (include "grpo.usesGpu" (dict "root" $root "w" $w)) "true") -}}
{{- $_ := set $cfg "backend" (dict "model_path" $modelPath "device" $device) -}}
{{- if include "grpo.weights.grpc" $root -}}
{{- $_ := set $cfg "weights" $pull -}}
{{- end -}}
{{- else if eq $w.role "learner" -}}
{{- $_ := set $cfg "model_path" $modelPath -}}
{{- $_ := set $cfg "run_dir" $v.weights.runDir -}}
{{- if and $w.dataParallel $w.dataParallel.enabled -}}
{{- $_ := set $cfg "world_size" (int $w.replicas) -}}
{{- $_ := set $cfg "dist_init" "env://" -}}
{{- end -}}
{{- else if eq $w.role "assembler" -}}
{{- $_ := set $cfg "routing" (include "grpo.routing" $root | fromYaml) -}}
{{- if $v.tls.enabled -}}
{{- $client := dict "tls_ca_file" "/etc/grpo/tls/ca.crt" -}}
{{- if $v.tls.requireClientCert -}}
{{- $_ := set $client "tls_cert_file" "/etc/grpo/tls/tls.crt" -}}
{{- $_ := set $client "tls_key_file" "/etc/grpo/tls/tls.key" -}}
{{- end -}}
{{- $_ := set $cfg "assembler" (dict "verifier" $client) -}}
{{- end -}}
{{- /* an external verifier's own TLS (default plaintext, never the release's CA) */ -}}
{{- $endpointTls := dict -}}
{{- range $vname, $ext := (include "grpo.externalVerifiers" $root | fromYaml) -}}
{{- $_ := set $endpointTls $ext.address (default (dict "enabled" false) $ext.tls) -}}
{{- end -}}
{{- if $endpointTls -}}
{{- $verifierCfg := default (dict) (get (default (dict) (get $cfg "assembler")) "verifier") -}}
{{- $_ := set $verifierCfg "endpoint_tls" $endpointTls -}}
{{- $_ := set $cfg "assembler" (mergeOverwrite (default (dict) (get $cfg "assembler")) (dict "verifier" $verifierCfg)) -}}
{{- end -}}
{{- if $v.discovery.enabled -}}
{{- $_ := set $cfg "discovery" (dict "enabled" true "namespace" $root.Release.Namespace "label_selector" $v.discovery.labelSelector "port_name" "grpc" "watch_timeout_s" (int $v.discovery.watchTimeoutSeconds)) -}}
{{- end -}}
{{- else if eq $w.role "driver" -}}
{{- $verifiers := dict -}}
{{- range $vc, $vw := .workloads -}}
{{- if and (eq $vw.role "verifier") $vw.serve -}}
{{- $_ := set $verifiers $vw.serve (include "grpo.verifierAddress" (dict "root" $root "component" $vc)) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $cfg "out_dir" $w.output.mountPath -}}
{{- $_ := set $cfg "learner_address" $learnerAddress -}}
{{- $_ := set $cfg "assembler_address" (printf "%s.%s.svc:%d" (include "grpo.componentName" (dict "root" $root "component" "assembler")) $root.Release.Namespace $grpcPort) -}}
{{- $_ := set $cfg "verifier_addresses" $verifiers -}}
{{- if include "grpo.weights.grpc" $root -}}
{{- $_ := set $cfg "weights" $pull -}}
{{- end -}}
{{- /* SIGTERM (an upgrade replacing the Job, a drain): leave the run to the next driver */ -}}
{{- $_ := set $cfg "on_stop" "yield" -}}
{{- $targets := (include "grpo.releaseTargets" $root | fromYaml).targets -}}
{{- if $targets -}}
{{- $_ := set $cfg "release" (dict "workloads" $targets "service_account_dir" "/var/run/secrets/kubernetes.io/serviceaccount") -}}
{{- end -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* What a workload's pods derive their settings from, as one text: its checksum annotation
     (checksum/config) is its SHA-256, so editing one workload's files restarts that workload
     only. A verifier depends on its own entry of run.verifiers.extra, not on the whole run;
     the learner, rollout worker and assembler on the run but verifiers.extra (their
     derivation never reads it: tests/helm/test_chart.py).
     (dict "root" $ "w" $w "component" $name "workloads" $workloads) */}}
{{- define "grpo.configInputs" -}}
workload: {{ .component }}
{{ if .w.serve -}}
{{- if eq .w.role "verifier" -}}
run.verifiers.extra: {{ get (default (dict) (default (dict) .root.Values.run).verifiers) "extra" | default (dict) | dig .w.serve (dict) | toJson }}
{{- else if eq .w.role "driver" -}}
run: {{ include "grpo.runConfig" .root | fromYaml | toJson }}
{{- else -}}
{{- /* no derivation of the learner, rollout worker or assembler reads verifiers.extra */ -}}
{{- $run := include "grpo.runConfig" .root | fromYaml -}}
{{- if $run.verifiers }}{{ $_ := unset $run.verifiers "extra" }}{{ end }}
{{- if not $run.verifiers }}{{ $_ := unset $run "verifiers" }}{{ end }}
run: {{ $run | toJson }}
{{- end }}
placement: {{ include "grpo.placement" . | fromYaml | toJson }}
{{- end }}
config: {{ default (dict) .w.config | toJson }}
{{- end -}}
