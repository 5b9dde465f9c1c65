#!/usr/bin/env bash
# Installs (or upgrades) the three operators the market-spread chart needs, in dependency order,
# and the namespace the chart goes into. Idempotent: run it again after changing a version or a
# values file. Needs kubectl and helm (v3.8+ or v4) with a context on the target cluster.
#
#   k8s/install-operators.sh                 # then: helm upgrade --install market-spread charts/market-spread -n market-spread
#   NAMESPACE=bench k8s/install-operators.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAMESPACE=${NAMESPACE:-market-spread}
KUBE_PROMETHEUS_STACK_VERSION=${KUBE_PROMETHEUS_STACK_VERSION:-88.6.4}
STRIMZI_VERSION=${STRIMZI_VERSION:-1.2.0}
SPARK_OPERATOR_VERSION=${SPARK_OPERATOR_VERSION:-2.5.2}
HELM_TIMEOUT=${HELM_TIMEOUT:-10m}

# 1. The chart's namespace, with Pod Security "restricted" (the operators watch it, so it comes first).
sed "s/^  name: market-spread$/  name: ${NAMESPACE}/" "$here/namespace.yaml" | kubectl apply -f -

# 2. Prometheus, Grafana and the monitoring.coreos.com CRDs: the other two operators' charts
#    render PodMonitors, so this one goes first. The release name is what the chart's monitors select.
helm upgrade --install kube-prometheus-stack oci://ghcr.io/prometheus-community/charts/kube-prometheus-stack \
  --version "$KUBE_PROMETHEUS_STACK_VERSION" \
  --namespace monitoring --create-namespace \
  --values "$here/operators/kube-prometheus-stack-values.yaml" \
  --wait --timeout "$HELM_TIMEOUT"

# 3. Strimzi: Kafka, node pools, topics and users in $NAMESPACE.
helm upgrade --install strimzi oci://quay.io/strimzi-helm/strimzi-kafka-operator \
  --version "$STRIMZI_VERSION" \
  --namespace strimzi --create-namespace \
  --values "$here/operators/strimzi-values.yaml" \
  --set "watchNamespaces={${NAMESPACE}}" \
  --wait --timeout "$HELM_TIMEOUT"

# 4. The Spark operator: SparkApplications in $NAMESPACE, with its mutating webhook.
helm repo add spark-operator https://kubeflow.github.io/spark-operator --force-update
helm upgrade --install spark-operator spark-operator/spark-operator \
  --version "$SPARK_OPERATOR_VERSION" \
  --namespace spark-operator --create-namespace \
  --values "$here/operators/spark-operator-values.yaml" \
  --set "spark.jobNamespaces={${NAMESPACE}}" \
  --wait --timeout "$HELM_TIMEOUT"

echo "operators ready; next: helm upgrade --install market-spread charts/market-spread --namespace ${NAMESPACE}"
