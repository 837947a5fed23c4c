package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// IdempotencyKey is the idempotency key of one tool call (docs/tools.md,
// "Idempotency keys"): 32 hex digits of the SHA-256 of
// "<len(scope)>:<scope>/t<turn>/<index>/<call id>" (the length makes the
// string unambiguous whatever the ids hold), where scope names the run (a
// durable run's run-log key "<workflow id>-a<attempt>", a chat exchange's
// "chat/<run id>"), turn is the LLM turn that asked for the call, index the
// call's place among that turn's calls and call id the provider's id of the
// call. Every part is fixed once the turn's answer is stored, so a retried
// or re-executed step derives the same key; nothing in it is a Temporal
// run id or an attempt counter of a step. Hashed so that no id of the run
// reaches the tool's server, and of fixed length whatever the ids are.
func IdempotencyKey(scope string, turn, index int, callID string) string {
	b := make([]byte, 0, len(scope)+len(callID)+32)
	b = strconv.AppendInt(b, int64(len(scope)), 10)
	b = append(b, ':')
	b = append(b, scope...)
	b = append(b, "/t"...)
	b = strconv.AppendInt(b, int64(turn), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, '/')
	b = append(b, callID...)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}
