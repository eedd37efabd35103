// Command agent is a minimal turnstile http agent, written from docs/http-agent-protocol.md alone,
// with the standard library only. It asks for a city, looks the weather up with a (pretend) tool,
// and answers.
//
//	go run . -addr 127.0.0.1:9000     # prints "listening on http://127.0.0.1:9000"
//	TURNSTILE_AGENT=http TURNSTILE_HTTP_AGENT_URL=http://127.0.0.1:9000 make dev
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"time"
)

const question = "Which city?"

// turn is the part of the request body this agent reads.
type turn struct {
	Text    string `json:"text"`
	History []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"history"`
	Prior []struct {
		Type string `json:"type"`
		Data struct {
			CallID string          `json:"call_id"`
			Result json.RawMessage `json:"result"`
		} `json:"data"`
	} `json:"prior"`
}

type event map[string]any

func answer(t turn, send func(event)) {
	if n := len(t.History); n == 0 || t.History[n-1].Role != "assistant" || t.History[n-1].Content != question {
		// Not an answer to our question: ask it. The turn ends waiting for the user.
		send(event{"type": "usage", "input_tokens": len(t.Text), "output_tokens": 2, "model": "example"})
		send(event{"type": "delta", "text": question})
		send(event{"type": "input_required"})
		return
	}
	city := strings.TrimSpace(t.Text)
	const callID = "weather-1"
	send(event{"type": "tool_call", "call_id": callID, "name": "weather", "arguments": map[string]string{"city": city}})
	// A retried attempt lists what earlier attempts published: reuse a result instead of calling again.
	result := json.RawMessage(fmt.Sprintf(`{"city":%q,"forecast":"sunny"}`, city))
	for _, p := range t.Prior {
		if p.Type == "turn.tool_result" && p.Data.CallID == callID {
			result = p.Data.Result
		}
	}
	send(event{"type": "tool_result", "call_id": callID, "result": result})
	var r struct{ Forecast string }
	_ = json.Unmarshal(result, &r)
	send(event{"type": "delta", "text": "It is " + r.Forecast + " "})
	send(event{"type": "delta", "text": "in " + city + "."})
	send(event{"type": "usage", "input_tokens": len(t.Text), "output_tokens": 6, "model": "example"})
	send(event{"type": "done"})
}

func handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var t turn
	if err := json.NewDecoder(r.Body).Decode(&t); err != nil {
		http.Error(w, "bad JSON", http.StatusBadRequest) // a 4xx fails the turn at once
		return
	}
	// NDJSON: one event per line, flushed so that each delta reaches the user at once.
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	answer(t, func(ev event) {
		_ = enc.Encode(ev)
		_ = http.NewResponseController(w).Flush() // a gone client ends the request anyway
	})
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: http.HandlerFunc(handle), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}
