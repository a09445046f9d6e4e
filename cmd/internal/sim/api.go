package sim

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

type api int

const (
	apiChat api = iota
	apiCompletions
	apiResponses
)

type requestBody struct {
	Model         string          `json:"model"`
	Messages      []message       `json:"messages"`
	Prompt        json.RawMessage `json:"prompt"`
	Input         json.RawMessage `json:"input"`
	Instructions  string          `json:"instructions"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	MaxOutputTokens     *int `json:"max_output_tokens"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// generation is what a request asks the engine for, whatever its API.
type generation struct {
	api          api
	model        string
	stream       bool
	includeUsage bool
	prompt       []string
	maxTokens    int
	// cut asks for the stream to be cut half-way.
	cut bool
}

func parseRequest(a api, r *http.Request) (generation, error) {
	var body requestBody
	if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 16<<20)).Decode(&body); err != nil {
		return generation{}, fmt.Errorf("invalid JSON body: %w", err)
	}
	g := generation{api: a, model: body.Model, stream: body.Stream}
	g.includeUsage = body.StreamOptions != nil && body.StreamOptions.IncludeUsage
	var err error
	var limits []limit
	switch a {
	case apiChat:
		if len(body.Messages) == 0 {
			return g, errors.New("messages must not be empty")
		}
		g.prompt, err = messageTokens(body.Messages)
		limits = []limit{{"max_completion_tokens", body.MaxCompletionTokens}, {"max_tokens", body.MaxTokens}}
	case apiCompletions:
		var prompt string
		prompt, err = textOf(body.Prompt)
		if err == nil && prompt == "" {
			err = errors.New("prompt must not be empty")
		}
		g.prompt = strings.Fields(prompt)
		limits = []limit{{"max_tokens", body.MaxTokens}}
	case apiResponses:
		g.prompt, err = responsesTokens(body.Instructions, body.Input)
		limits = []limit{{"max_output_tokens", body.MaxOutputTokens}}
	}
	if err != nil {
		return g, err
	}
	g.maxTokens, err = firstLimit(limits)
	return g, err
}

// maxOutputTokens is the simulated model's largest output, as a real engine
// refuses limits beyond its context length.
const maxOutputTokens = 32768

// limit is a request's output token limit field.
type limit struct {
	field string
	value *int
}

// firstLimit returns the first limit that is set; 0 means none is.
func firstLimit(limits []limit) (int, error) {
	for _, l := range limits {
		if l.value == nil {
			continue
		}
		if *l.value < 1 || *l.value > maxOutputTokens {
			return 0, fmt.Errorf("%s must be between 1 and %d, got %d", l.field, maxOutputTokens, *l.value)
		}
		return *l.value, nil
	}
	return 0, nil
}

func messageTokens(msgs []message) ([]string, error) {
	var toks []string
	for i, m := range msgs {
		text, err := textOf(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		toks = append(toks, "<|"+m.Role+"|>")
		toks = append(toks, strings.Fields(text)...)
	}
	return toks, nil
}

func responsesTokens(instructions string, input json.RawMessage) ([]string, error) {
	var msgs []message
	if instructions != "" {
		raw, _ := json.Marshal(instructions)
		msgs = append(msgs, message{Role: "system", Content: raw})
	}
	var s string
	if err := json.Unmarshal(input, &s); err == nil {
		raw, _ := json.Marshal(s)
		msgs = append(msgs, message{Role: "user", Content: raw})
	} else {
		var items []message
		if err := json.Unmarshal(input, &items); err != nil {
			return nil, errors.New("input must be a string or a list of messages")
		}
		msgs = append(msgs, items...)
	}
	if len(msgs) == 0 || len(input) == 0 {
		return nil, errors.New("input must not be empty")
	}
	return messageTokens(msgs)
}

// textOf reads a string, a list of strings or a list of content parts.
func textOf(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return strings.Join(list, " "), nil
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("must be a string or a list of text parts")
	}
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = p.Text
	}
	return strings.Join(texts, " "), nil
}

// output draws the output words of g from an RNG seeded by the server seed
// and the request alone.
func (s *Server) output(g generation) (words []string, finish string) {
	h := fnv.New64a()
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(g.maxTokens)))
	for _, t := range g.prompt {
		h.Write([]byte(t))
		h.Write([]byte{0})
	}
	rng := rand.New(rand.NewPCG(uint64(s.seed), h.Sum64()))
	n, finish := g.maxTokens, "length"
	if n == 0 {
		sigma := s.p.OutputSpread
		n = int(math.Round(float64(s.p.OutputMean) * math.Exp(sigma*rng.NormFloat64()-sigma*sigma/2)))
		n, finish = max(n, 1), "stop"
	}
	words = make([]string, n)
	for i := range words {
		words[i] = vocabulary[rng.IntN(len(vocabulary))]
	}
	return words, finish
}

func (s *Server) generate(a api) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		g, err := parseRequest(a, r)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
			return
		}
		if g.model == "" {
			g.model = s.p.Model
		}
		switch s.drawFault(g.stream) {
		case faultError:
			writeError(w, http.StatusInternalServerError, "server_error", "simulated engine error")
			return
		case faultHang:
			<-r.Context().Done()
			return
		case faultCut:
			g.cut = true
		}
		words, finish := s.output(g)
		seq := newSequence(r.Context(), g.prompt, len(words), s.p.BlockSize)
		s.engine.submit(seq)
		resp := &response{
			g:       g,
			id:      s.ids.Add(1),
			created: time.Now().Unix(),
			words:   words,
			finish:  finish,
			seq:     seq,
			done:    s.engine.done,
		}
		if g.stream {
			resp.stream(w, r)
		} else {
			resp.whole(w, r)
		}
	}
}

func writeError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"message": msg, "type": kind, "param": nil, "code": nil},
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]string{"status": "ok"})
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{
		"object": "list",
		"data": []map[string]any{
			{"id": s.p.Model, "object": "model", "created": 0, "owned_by": "tandem-sim"},
		},
	})
}
