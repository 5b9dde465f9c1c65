{{/* Names, labels, images and the settings -> environment mapping shared by every template. */}}

{{- define "marketspread.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "marketspread.fullname" -}}
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

{{/* Labels every object carries. */}}
{{- define "marketspread.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "marketspread.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: market-spread
{{- end -}}

{{/* Selector labels of one component: dict "root" $ "component" name. */}}
{{- define "marketspread.selectorLabels" -}}
app.kubernetes.io/name: {{ include "marketspread.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "marketspread.componentLabels" -}}
{{ include "marketspread.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* image reference: dict "root" $ "image" {repository, tag}. */}}
{{- define "marketspread.image" -}}
{{- $tag := .image.tag | default .root.Values.default.imageTag | default .root.Chart.AppVersion -}}
{{- printf "%s:%s" .image.repository (toString $tag) -}}
{{- end -}}

{{- define "marketspread.kafkaCluster" -}}
{{- .Values.kafka.clusterName | default (include "marketspread.fullname" .) -}}
{{- end -}}

{{/* Where the clients reach Kafka: the chart's own cluster (TLS listener when secured), else the given servers. */}}
{{- define "marketspread.bootstrapServers" -}}
{{- if .Values.kafka.enabled -}}
{{- printf "%s-kafka-bootstrap.%s.svc:%d" (include "marketspread.kafkaCluster" .) .Release.Namespace (ternary 9093 9092 .Values.kafka.security.enabled | int) -}}
{{- else -}}
{{- .Values.default.settings.bootstrap_servers -}}
{{- end -}}
{{- end -}}

{{/*
A settings value as the string pydantic parses from the environment: booleans lower case, whole
numbers without Helm's float exponent (1048576, never 1.048576e+06).
*/}}
{{- define "marketspread.envValue" -}}
{{- if kindIs "bool" . -}}
{{- ternary "true" "false" . -}}
{{- else if kindIs "float64" . -}}
{{- if eq (float64 (int64 .)) . -}}{{ int64 . }}{{- else -}}{{ . }}{{- end -}}
{{- else -}}
{{- . -}}
{{- end -}}
{{- end -}}

{{/* env entries for a settings dict, MARKETSPREAD_<KEY> each, in key order. */}}
{{- define "marketspread.settingsEnv" -}}
{{- range $key := keys . | sortAlpha }}
- name: {{ printf "MARKETSPREAD_%s" (upper $key) }}
  value: {{ include "marketspread.envValue" (get $ $key) | quote }}
{{- end }}
{{- end -}}

{{/* Effective settings of a component or the job (JSON): the shared block, the component's own, then what the chart owns. */}}
{{- define "marketspread.effectiveSettings" -}}
{{- $root := .root -}}
{{- $settings := merge (deepCopy (.settings | default dict)) (deepCopy $root.Values.default.settings) -}}
{{- if $root.Values.kafka.enabled -}}
{{- $_ := set $settings "bootstrap_servers" (include "marketspread.bootstrapServers" $root) -}}
{{- end -}}
{{- toJson $settings -}}
{{- end -}}

{{/* The four topics, as a JSON list in a fixed order. */}}
{{- define "marketspread.topics" -}}
{{- $s := .Values.default.settings -}}
{{- list $s.nbbo_topic $s.orders_topic $s.rejections_topic $s.dead_letter_topic | toJson -}}
{{- end -}}

{{/* Number of brokers across the node pools. */}}
{{- define "marketspread.brokerCount" -}}
{{- $n := 0 -}}
{{- range $name, $pool := .Values.kafka.nodePools -}}
{{- if has "broker" $pool.roles }}{{ $n = add $n $pool.replicas }}{{ end -}}
{{- end -}}
{{- $n -}}
{{- end -}}

{{/* nodeSelector and tolerations of a pinned pod (YAML, indented by the caller). */}}
{{- define "marketspread.pinnedScheduling" -}}
nodeSelector:
  {{- toYaml .Values.pinnedPool.nodeSelector | nindent 2 }}
tolerations:
  {{- toYaml .Values.pinnedPool.tolerations | nindent 2 }}
{{- end -}}

{{/* Strimzi has no nodeSelector: the same constraint as a required node affinity. */}}
{{- define "marketspread.pinnedAffinity" -}}
nodeAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    nodeSelectorTerms:
      - matchExpressions:
          {{- range $key, $value := .Values.pinnedPool.nodeSelector }}
          - key: {{ $key }}
            operator: In
            values: [{{ $value | quote }}]
          {{- end }}
{{- end -}}

{{/*
Fail unless `resources` give Guaranteed QoS with exclusive cores: requests equal to limits and a
whole number of CPUs, a multiple of pinnedPool.cpuMultiple. dict "root" $ "where" "..." "resources" {...}
*/}}
{{- define "marketspread.requireGuaranteed" -}}
{{- $r := .resources | default dict -}}
{{- $req := $r.requests | default dict -}}
{{- $lim := $r.limits | default dict -}}
{{- $multiple := .root.Values.pinnedPool.cpuMultiple | int -}}
{{- if not (and $lim.cpu $lim.memory $req.cpu $req.memory) -}}
{{- fail (printf "%s runs on the pinned pool, so it needs Guaranteed QoS: set resources.requests and resources.limits, both with cpu and memory" .where) -}}
{{- end -}}
{{- if or (ne (toString $req.cpu) (toString $lim.cpu)) (ne (toString $req.memory) (toString $lim.memory)) -}}
{{- fail (printf "%s runs on the pinned pool, so it needs Guaranteed QoS: resources.requests (cpu %v, memory %v) must equal resources.limits (cpu %v, memory %v)" .where $req.cpu $req.memory $lim.cpu $lim.memory) -}}
{{- end -}}
{{- if not (regexMatch "^[1-9][0-9]*$" (toString $lim.cpu)) -}}
{{- fail (printf "%s runs on the pinned pool: cpu %v is not a whole number of CPUs, and the static CPU manager gives exclusive cores only to whole CPUs (write e.g. \"2\", not \"2000m\")" .where $lim.cpu) -}}
{{- end -}}
{{- if mod (int (toString $lim.cpu)) $multiple -}}
{{- fail (printf "%s runs on the pinned pool: cpu %v is not a multiple of pinnedPool.cpuMultiple (%d); full-pcpus-only admits only whole physical cores" .where $lim.cpu $multiple) -}}
{{- end -}}
{{- end -}}

{{/*
Kafka TLS (kafka.security.enabled): the KafkaUser's client certificate and the cluster CA, mounted
at /etc/marketspread/kafka, and the environment that points the clients at them.
*/}}
{{- define "marketspread.kafkaUser" -}}
{{- printf "%s-%s" (include "marketspread.fullname" .root) .user -}}
{{- end -}}

{{- define "marketspread.tlsEnv" -}}
- name: MARKETSPREAD_SECURITY_PROTOCOL
  value: SSL
- name: MARKETSPREAD_SSL_CAFILE
  value: /etc/marketspread/kafka/ca.crt
- name: MARKETSPREAD_SSL_CERTFILE
  value: /etc/marketspread/kafka/user.crt
- name: MARKETSPREAD_SSL_KEYFILE
  value: /etc/marketspread/kafka/user.key
{{- end -}}

{{- define "marketspread.tlsVolume" -}}
- name: kafka-tls
  projected:
    sources:
      - secret:
          name: {{ include "marketspread.kafkaUser" . }}
          items:
            - {key: user.crt, path: user.crt}
            - {key: user.key, path: user.key}
      - secret:
          name: {{ include "marketspread.kafkaCluster" .root }}-cluster-ca-cert
          items:
            - {key: ca.crt, path: ca.crt}
{{- end -}}

{{/*
Broker configuration (YAML): internal topics as durable as the cluster allows (3 replicas, writes
acknowledged by 2), under whatever kafka.config sets.
*/}}
{{- define "marketspread.brokerConfig" -}}
{{- $rf := min 3 (include "marketspread.brokerCount" . | int) -}}
{{- $isr := max 1 (sub $rf 1) -}}
{{- $derived := dict "offsets.topic.replication.factor" $rf "transaction.state.log.replication.factor" $rf "transaction.state.log.min.isr" $isr "default.replication.factor" $rf "min.insync.replicas" $isr -}}
{{- toYaml (merge (deepCopy .Values.kafka.config) $derived) -}}
{{- end -}}

{{/* min.insync.replicas the topics get: theirs, else the brokers'. */}}
{{- define "marketspread.topicMinIsr" -}}
{{- $brokerConfig := include "marketspread.brokerConfig" . | fromYaml -}}
{{- index .Values.kafka.topics.config "min.insync.replicas" | default (index $brokerConfig "min.insync.replicas") | int -}}
{{- end -}}
