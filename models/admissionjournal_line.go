package models

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// An admission's journal line is written by the group commit's writer,
// which every request waits for; encoding it with encoding/json's
// reflection (a ledger entry has over forty fields) was about 4 % of the
// gateway's CPU at 64 connections, all of it on that one goroutine. So the
// admitting request encodes its entry before it hands the admission to
// the writer (encodeForJournal), and the writer appends that, the few
// fields it decided and the rest of the line by hand. The line reads back
// as a journalLine.

// encodeForJournal is e as a journal line holds it, encoded by the
// admitting request (nil on failure: the writer encodes it then), written
// field by field (appendLedgerEntry) in the bytes encoding/json writes
// (TestJournalEntryEncodingMatches); encoding/json reads them back at
// recovery. goccy/go-json's reflection, which did it before, was 2 % of
// the gateway's CPU at 64 connections.
func encodeForJournal(e *LedgerEntry) []byte {
	b, err := appendLedgerEntry(make([]byte, 0, 1024), e)
	if err != nil {
		return nil
	}
	return b
}

// appendLedgerEntry appends encoding/json's encoding of e: its fields in
// order, by their json tags, omitempty honoured. A field added to
// LedgerEntry must be added here (TestJournalEntryEncodingMatches fills
// every field and compares).
func appendLedgerEntry(b []byte, e *LedgerEntry) ([]byte, error) {
	var err error
	str := func(key, v string, omitEmpty bool) {
		if omitEmpty && v == "" {
			return
		}
		b = append(b, key...)
		b = appendJSONString(b, v)
	}
	num := func(key string, v int64) {
		b = append(b, key...)
		b = strconv.AppendInt(b, v, 10)
	}
	flag := func(key string, v bool) {
		b = append(b, key...)
		b = strconv.AppendBool(b, v)
	}
	at := func(key string, t time.Time) {
		if err == nil {
			b = append(b, key...)
			b, err = appendJSONTime(b, t)
		}
	}
	b = append(b, '{')
	str(`"call_id":`, e.CallID, false)
	str(`,"subject":`, e.Subject, false)
	str(`,"workspace":`, e.Workspace, true)
	str(`,"agent_id":`, e.AgentID, true)
	str(`,"session_id":`, e.SessionID, true)
	str(`,"run_id":`, e.RunID, true)
	str(`,"root_run_id":`, e.RootRunID, true)
	str(`,"source":`, e.Source, false)
	str(`,"trigger":`, e.Trigger, true)
	str(`,"provider":`, e.Provider, false)
	str(`,"model":`, e.Model, false)
	str(`,"response_model":`, e.ResponseModel, true)
	str(`,"data_classification":`, e.DataClassification, true)
	flag(`,"interactive":`, e.Interactive)
	str(`,"provider_request_id":`, e.ProviderRequestID, true)
	str(`,"provider_request_ids":`, e.ProviderRequestIDs, true)
	str(`,"outcome":`, e.Outcome, false)
	str(`,"rejection_code":`, e.RejectionCode, true)
	str(`,"error_kind":`, e.ErrorKind, true)
	str(`,"finish_reason":`, e.FinishReason, true)
	num(`,"input_tokens":`, e.InputTokens)
	num(`,"output_tokens":`, e.OutputTokens)
	num(`,"cached_input_tokens":`, e.CachedInputTokens)
	num(`,"cache_creation_tokens":`, e.CacheCreationTokens)
	num(`,"reasoning_tokens":`, e.ReasoningTokens)
	num(`,"tool_use_prompt_tokens":`, e.ToolUsePromptTokens)
	flag(`,"usage_estimated":`, e.UsageEstimated)
	num(`,"estimated_input_tokens":`, e.EstimatedInputTokens)
	num(`,"max_output_tokens":`, e.MaxOutputTokens)
	num(`,"requested_max_output_tokens":`, e.RequestedMaxOutputTokens)
	flag(`,"clamped":`, e.Clamped)
	str(`,"pricing_status":`, e.PricingStatus, false)
	str(`,"price_version":`, e.PriceVersion, true)
	str(`,"price_source":`, e.PriceSource, true)
	str(`,"price_effective_date":`, e.PriceEffectiveDate, true)
	num(`,"cost_micros":`, e.CostMicros)
	b = append(b, `,"cost_usd":`...)
	if b, err = appendJSONFloat(b, e.CostUSD); err != nil {
		return b, err
	}
	num(`,"reserved_micros":`, e.ReservedMicros)
	str(`,"enforcement_mode":`, e.Mode, false)
	num(`,"attempts":`, int64(e.Attempts))
	num(`,"executions":`, int64(e.Executions))
	at(`,"created_at":`, e.CreatedAt)
	at(`,"started_at":`, e.StartedAt)
	if e.FinishedAt != nil {
		at(`,"finished_at":`, *e.FinishedAt)
	}
	at(`,"updated_at":`, e.UpdatedAt)
	num(`,"estimated_cost_micros":`, e.EstimatedCostMicros)
	if e.ReconciledAt != nil {
		at(`,"reconciled_at":`, *e.ReconciledAt)
	}
	if e.ReconciledCostMicros != nil {
		num(`,"reconciled_cost_micros":`, *e.ReconciledCostMicros)
	}
	return append(b, '}'), err
}

// appendJSONTime appends t as encoding/json writes it (time.Time's
// MarshalJSON), without its allocation in the usual case.
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		q, err := t.MarshalJSON() // refuses it, as encoding/json does
		return append(b, q...), err
	}
	if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 || off%60 != 0 {
		q, err := t.MarshalJSON()
		return append(b, q...), err
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

// appendJSONFloat appends f as encoding/json writes a float64.
func appendJSONFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9, as encoding/json does.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// appendAdmissionLine appends d's journal line (newline included) to b.
func appendAdmissionLine(b []byte, d *deferredAdmission) ([]byte, error) {
	entry := d.encoded
	if entry == nil {
		var err error
		if entry, err = json.Marshal(&d.entry); err != nil {
			return b, err
		}
	}
	b = append(b, `{"k":"a","id":`...)
	b = appendJSONString(b, d.id)
	b = append(b, `,"e":`...)
	b = append(b, entry...)
	if len(d.keys) > 0 {
		b = append(b, `,"keys":[`...)
		for i, k := range d.keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
		}
		b = append(b, ']')
	}
	if d.amount != 0 {
		b = append(b, `,"amt":`...)
		b = strconv.AppendInt(b, d.amount, 10)
	}
	exp, err := d.expiresAt.MarshalJSON()
	if err != nil {
		return b, err
	}
	b = append(b, `,"exp":`...)
	b = append(b, exp...)
	b = append(b, `,"dec":{"rsv":`...)
	b = strconv.AppendInt(b, d.entry.ReservedMicros, 10)
	b = append(b, `,"mo":`...)
	b = strconv.AppendInt(b, d.entry.MaxOutputTokens, 10)
	b = append(b, `,"cl":`...)
	b = strconv.AppendBool(b, d.entry.Clamped)
	return append(b, "}}\n"...), nil
}

// appendJSONString appends s as a JSON string: directly when it is plain
// printable ASCII without quotes or backslashes (ids, counter keys),
// through encoding/json otherwise.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
