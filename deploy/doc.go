// Package deploy holds turnstile's deployment artefacts and the tests that keep them honest: the
// Helm chart in helm/turnstile (rendered with the Helm library, default and custom values) and the
// repository's docker-compose.yml (its environments checked against the configuration reference,
// docs/CONFIGURATION.md, and pkg/config's validation, and each service module built on its own as
// its image builds it).
//
// Decisions:
//   - Workers scale with KEDA on turnstile_backlog_age_seconds, read by default from intake's
//     GET /v1/backlog (metrics-api scaler, no Prometheus needed) or by a Prometheus query. The ceiling
//     never exceeds the partition count (the chart refuses to render otherwise): a worker without a
//     partition idles. A scale-down stabilisation window keeps a zero backlog with busy workers
//     from shrinking the pool.
//   - A worker's terminationGracePeriodSeconds is preStop sleep + longest turn + drain, and its
//     TURNSTILE_DRAIN_TIMEOUT is the longest turn, so a rollout lets every running turn finish; a
//     lower explicit grace period fails the render.
//   - preStop uses the kubelet's sleep action (Kubernetes 1.30+): the images are distroless and have
//     no shell.
//   - Migrations run as a pre-install/pre-upgrade hook Job; the services run with TURNSTILE_MIGRATE=off.
//   - The ingress routes the two non-overlapping path sets with regex paths (ingress-nginx): event
//     streams to the gateway, the rest of /v1 to intake.
package deploy
