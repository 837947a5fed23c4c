package faketelegram

import (
	"encoding/json"
	"net/http"
)

// control serves the fake's HTTP controls, for trying a channel by hand
// (dev/cmd/fake-telegram; the README's tour) on the first bot:
//
//	POST /_fake/message {"chat_id": 42, "text": "hi", "chat_type": "private", "from_id": 42}
//	     -> {"update_id": n}   a person writes to the bot
//	GET  /_fake/sent           -> [{"chat_id", "message_id", "text", "reply_to"}]   what the bot sent
func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/_fake/message":
		var in struct {
			ChatID   int64  `json:"chat_id"`
			Text     string `json:"text"`
			ChatType string `json:"chat_type"`
			FromID   int64  `json:"from_id"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil || in.ChatID == 0 {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"error": `body must be {"chat_id": <non-zero>, "text": "..."}`})
			return
		}
		if in.ChatType == "" {
			in.ChatType = "private"
		}
		if in.FromID == 0 {
			in.FromID = in.ChatID
		}
		id := s.Bot.AddMessage(in.ChatID, in.ChatType, in.FromID, in.Text)
		json.NewEncoder(w).Encode(map[string]int64{"update_id": id})
	case r.Method == http.MethodGet && r.URL.Path == "/_fake/sent":
		type sent struct {
			ChatID    int64  `json:"chat_id"`
			MessageID int64  `json:"message_id"`
			Text      string `json:"text"`
			ReplyTo   int64  `json:"reply_to,omitempty"`
		}
		out := []sent{}
		for _, m := range s.Bot.Sent() {
			out = append(out, sent{ChatID: m.ChatID, MessageID: m.MessageID, Text: m.Text, ReplyTo: m.ReplyTo})
		}
		json.NewEncoder(w).Encode(out)
	default:
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]string{"error": "no such control: " + r.Method + " " + r.URL.Path})
	}
}
