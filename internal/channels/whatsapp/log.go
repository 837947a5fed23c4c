package whatsapp

import (
	"fmt"

	waLog "go.mau.fi/whatsmeow/util/log"
)

// logger passes whatsmeow's warnings and errors to Deps.Logf. Its info
// and debug lines (every stanza) are dropped: they are noise at gateway
// level and would carry contact details. whatsmeow never logs message
// text at warning level.
type logger struct {
	logf   func(string, ...any)
	module string
}

func (l logger) Warnf(msg string, args ...any) {
	l.logf("whatsapp %s: warning: %s", l.module, fmt.Sprintf(msg, args...))
}
func (l logger) Errorf(msg string, args ...any) {
	l.logf("whatsapp %s: error: %s", l.module, fmt.Sprintf(msg, args...))
}
func (logger) Infof(string, ...any)  {}
func (logger) Debugf(string, ...any) {}
func (l logger) Sub(module string) waLog.Logger {
	return logger{l.logf, l.module + "/" + module}
}
