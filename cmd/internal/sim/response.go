package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// response writes one generation in the shape of its API as the engine
// produces its tokens.
type response struct {
	g       generation
	id      uint64
	created int64
	words   []string
	finish  string
	seq     *sequence
	done    <-chan struct{}
}

// next waits for the engine's next token; false means the client went away
// or the server closed.
func (r *response) next(req *http.Request) bool {
	select {
	case _, ok := <-r.seq.tokens:
		return ok
	case <-req.Context().Done():
		return false
	case <-r.done:
		return false
	}
}

func (r *response) delta(i int) string {
	if i == 0 {
		return r.words[0]
	}
	return " " + r.words[i]
}

func (r *response) text() string { return strings.Join(r.words, " ") }

func (r *response) promptUsage() (prompt, cached int) {
	return r.seq.promptTokens, r.seq.cachedTokens
}

func (r *response) chatUsage() map[string]any {
	prompt, cached := r.promptUsage()
	return map[string]any{
		"prompt_tokens":         prompt,
		"completion_tokens":     len(r.words),
		"total_tokens":          prompt + len(r.words),
		"prompt_tokens_details": map[string]int{"cached_tokens": cached},
	}
}

func (r *response) responsesUsage() map[string]any {
	prompt, cached := r.promptUsage()
	return map[string]any{
		"input_tokens":          prompt,
		"input_tokens_details":  map[string]int{"cached_tokens": cached},
		"output_tokens":         len(r.words),
		"output_tokens_details": map[string]int{"reasoning_tokens": 0},
		"total_tokens":          prompt + len(r.words),
	}
}

func (r *response) idString() string {
	switch r.g.api {
	case apiChat:
		return fmt.Sprintf("chatcmpl-sim%d", r.id)
	case apiCompletions:
		return fmt.Sprintf("cmpl-sim%d", r.id)
	}
	return fmt.Sprintf("resp_sim%d", r.id)
}

func (r *response) whole(w http.ResponseWriter, req *http.Request) {
	for range r.words {
		if !r.next(req) {
			return
		}
	}
	switch r.g.api {
	case apiChat:
		writeJSON(w, map[string]any{
			"id": r.idString(), "object": "chat.completion", "created": r.created, "model": r.g.model,
			"choices": []any{map[string]any{
				"index":         0,
				"message":       map[string]any{"role": "assistant", "content": r.text()},
				"logprobs":      nil,
				"finish_reason": r.finish,
			}},
			"usage": r.chatUsage(),
		})
	case apiCompletions:
		writeJSON(w, map[string]any{
			"id": r.idString(), "object": "text_completion", "created": r.created, "model": r.g.model,
			"choices": []any{map[string]any{
				"index": 0, "text": r.text(), "logprobs": nil, "finish_reason": r.finish,
			}},
			"usage": r.chatUsage(),
		})
	case apiResponses:
		writeJSON(w, r.responseObject("completed", true))
	}
}

func (r *response) responseObject(status string, final bool) map[string]any {
	obj := map[string]any{
		"id": r.idString(), "object": "response", "created_at": r.created,
		"status": status, "model": r.g.model, "output": []any{},
	}
	if final {
		obj["output"] = []any{map[string]any{
			"type": "message", "id": fmt.Sprintf("msg_sim%d", r.id), "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": r.text(), "annotations": []any{}}},
		}}
		obj["usage"] = r.responsesUsage()
	}
	return obj
}

// sse writes server-sent events, flushing each one.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (s sse) send(event string, v any) {
	b, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(s.w, "event: %s\n", event)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	s.rc.Flush()
}

// raw writes one data frame made of a JSON prefix, a string value and a
// JSON suffix.
func (s sse) raw(prefix []byte, value string, suffix []byte) {
	b, _ := json.Marshal(value)
	buf := make([]byte, 0, len("data: \n\n")+len(prefix)+len(b)+len(suffix))
	buf = append(buf, "data: "...)
	buf = append(append(append(buf, prefix...), b...), suffix...)
	s.w.Write(append(buf, "\n\n"...))
	s.rc.Flush()
}

func (s sse) done() {
	fmt.Fprint(s.w, "data: [DONE]\n\n")
	s.rc.Flush()
}

func (r *response) stream(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	out := sse{w: w, rc: http.NewResponseController(w)}
	chunk := func(choice map[string]any) map[string]any {
		object := "chat.completion.chunk"
		if r.g.api == apiCompletions {
			object = "text_completion"
		}
		c := map[string]any{"id": r.idString(), "object": object, "created": r.created, "model": r.g.model, "choices": []any{}}
		if choice != nil {
			c["choices"] = []any{choice}
		}
		return c
	}
	seqNo := 0
	event := func(kind string, fields map[string]any) {
		fields["type"] = kind
		fields["sequence_number"] = seqNo
		seqNo++
		out.send(kind, fields)
	}
	itemID := fmt.Sprintf("msg_sim%d", r.id)
	deltaFrame := r.deltaFrame(chunk)
	switch r.g.api {
	case apiChat:
		out.send("", chunk(map[string]any{"index": 0, "delta": map[string]any{"role": "assistant"}, "logprobs": nil, "finish_reason": nil}))
	case apiResponses:
		event("response.created", map[string]any{"response": r.responseObject("in_progress", false)})
	}
	for i := range r.words {
		if !r.next(req) {
			return
		}
		if r.g.cut && i == len(r.words)/2 {
			panic(http.ErrAbortHandler)
		}
		if r.g.api == apiResponses {
			event("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "delta": r.delta(i)})
			continue
		}
		out.raw(deltaFrame.prefix, r.delta(i), deltaFrame.suffix)
	}
	switch r.g.api {
	case apiChat:
		out.send("", chunk(map[string]any{"index": 0, "delta": map[string]any{}, "logprobs": nil, "finish_reason": r.finish}))
	case apiCompletions:
		out.send("", chunk(map[string]any{"index": 0, "text": "", "logprobs": nil, "finish_reason": r.finish}))
	case apiResponses:
		event("response.output_text.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "text": r.text()})
		event("response.completed", map[string]any{"response": r.responseObject("completed", true)})
		return
	}
	if r.g.includeUsage {
		c := chunk(nil)
		c["usage"] = r.chatUsage()
		out.send("", c)
	}
	out.done()
}

// frameTemplate is a chunk's JSON split around its text value, so that
// each token's frame is not built and encoded from scratch.
type frameTemplate struct{ prefix, suffix []byte }

const placeholder = "\x00text\x00"

func (r *response) deltaFrame(chunk func(map[string]any) map[string]any) frameTemplate {
	choice := map[string]any{"index": 0, "logprobs": nil, "finish_reason": nil}
	if r.g.api == apiChat {
		choice["delta"] = map[string]any{"content": placeholder}
	} else {
		choice["text"] = placeholder
	}
	b, _ := json.Marshal(chunk(choice))
	quoted, _ := json.Marshal(placeholder)
	prefix, suffix, _ := bytes.Cut(b, quoted)
	return frameTemplate{prefix: prefix, suffix: suffix}
}
