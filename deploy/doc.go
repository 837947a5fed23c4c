// Package deploy holds the deployment files (Dockerfile, compose.yaml, k8s/)
// and, in deploy_test.go, their offline validation. Nothing imports it; its
// test-only dependencies (Kubernetes API types) stay out of the binaries.
package deploy
