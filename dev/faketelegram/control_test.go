package faketelegram

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestControlEndpointsAddMessagesAndListSends(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Post(s.URL()+"/_fake/message", "application/json", strings.NewReader(`{"chat_id": 42, "text": "hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		UpdateID int64 `json:"update_id"`
	}
	json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if resp.StatusCode != 200 || got.UpdateID == 0 || s.Bot.Pending() != 1 {
		t.Fatalf("message: %d %+v, %d pending", resp.StatusCode, got, s.Bot.Pending())
	}
	for _, bad := range []string{`{"text": "no chat"}`, `not json`} {
		resp, _ := http.Post(s.URL()+"/_fake/message", "application/json", strings.NewReader(bad))
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Fatalf("%s: %d", bad, resp.StatusCode)
		}
	}
	resp, _ = http.Get(s.URL() + "/_fake/sent")
	var sent []map[string]any
	json.NewDecoder(resp.Body).Decode(&sent)
	resp.Body.Close()
	if resp.StatusCode != 200 || sent == nil || len(sent) != 0 {
		t.Fatalf("sent: %d %v", resp.StatusCode, sent)
	}
}
