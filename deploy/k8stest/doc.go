// Package k8stest checks the Kubernetes manifests in deploy/kubernetes without a cluster:
// every document is strict-decoded into its k8s.io/api type (an unknown or misspelt field is
// an error, as kubectl apply --validate=strict would say), and what a cluster would only show
// at run time is checked here: labels and selectors, Services' target ports, probes' paths and
// ports, the Secrets, keys and ConfigMaps containers name, the mcp-sandbox configs in the
// ConfigMaps (parsed and validated by package configs, with the tenants of their Secret), the
// credentials those configs reference (each an env var of the container, from a Secret), the
// remote URL (the workers' Service), the workers' token (its hash in their config), the
// NetworkPolicy (no egress from workers, ingress from the servers only), the API server's own
// rules a decoder does not know (allowPrivilegeEscalation with CAP_SYS_ADMIN), the restricted
// Pod Security profile for the servers, and every container's arguments, parsed by the built
// mcp-sandbox (so a misspelt flag fails here, not as a pod that never starts).
//
// It is a module of its own so that k8s.io/api stays out of the main module; it imports the
// main module (by a replace directive) only for package configs. Tests only.
package k8stest
