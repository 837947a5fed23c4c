package agentry

import "github.com/agentryhq/agentry/internal/channels/qr"

// renderQR draws text as a QR code for a terminal: the one renderer the
// console's PNG comes from too (internal/channels/qr, a pure rendering
// package the client may link).
func renderQR(text string) (string, error) { return qr.Terminal(text) }
