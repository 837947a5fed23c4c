// Package delivery is Agentry's outbound webhook side: header-line parsing,
// the SSRF check of destinations, the HTTP attempt, the webhook channel
// adapter, the service that queues messages as Delivery workflows, and the
// event hooks that feed it. The signature scheme itself lives in
// internal/signature (the CLI verifies with it without linking this
// package).
package delivery
