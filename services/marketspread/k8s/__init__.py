"""Market Spread on a Kubernetes cluster, seen through its API server (`marketspread k8s ...`)."""
