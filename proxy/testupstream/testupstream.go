// Package testupstream is a scriptable fake OpenAI-compatible upstream for
// tests: it answers chat completions with a fixed stream whose shape, timing
// and faults are set by its Script, and records what it received.
package testupstream

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"
)

// Script says how the upstream answers.
type Script struct {
	Status int           // non-2xx answers with a JSON error body; 0 means 200
	Tokens int           // content frames in a stream; 0 means 3
	Delay  time.Duration // before the response headers
	Every  time.Duration // between frames
	// Hang holds the response after its headers until the request is canceled.
	Hang bool
	// CutAfter aborts the connection after this many content frames (> 0).
	CutAfter int
	// Release, when set, holds the response before its headers until it is
	// closed (or the request is canceled).
	Release <-chan struct{}
	// Frames, when set, replaces the generated stream body.
	Frames []string
	// Pace, when set, holds every frame after the first until a value is
	// received from it (or the request is canceled), so a test can step the
	// stream frame by frame.
	Pace <-chan struct{}
}

// Received is one request as the upstream saw it.
type Received struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
}

// Server is a running fake upstream.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	script   Script
	received []Received
	arrived  chan struct{}
	canceled chan struct{}
	written  atomic.Int64
}

// New starts a fake upstream; Close it when done.
func New(s Script) *Server {
	u := &Server{script: s, arrived: make(chan struct{}, 1024), canceled: make(chan struct{}, 1024)}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	return u
}

// SetScript changes how later requests are answered.
func (u *Server) SetScript(s Script) {
	u.mu.Lock()
	u.script = s
	u.mu.Unlock()
}

// Received returns the requests seen so far.
func (u *Server) Received() []Received {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Received(nil), u.received...)
}

// Forget drops the requests recorded so far, so a long run keeps the fake's
// memory bounded and Received counts from here.
func (u *Server) Forget() {
	u.mu.Lock()
	u.received = nil
	u.mu.Unlock()
}

// Arrived delivers one value per request received, once its body is read.
func (u *Server) Arrived() <-chan struct{} { return u.arrived }

// Canceled delivers one value per request the upstream saw canceled while it
// was holding or pacing the response (Hang, Release, Delay, Every, Pace).
func (u *Server) Canceled() <-chan struct{} { return u.canceled }

// Written is the number of response body bytes written so far, over all
// requests.
func (u *Server) Written() int64 { return u.written.Load() }

// StreamBody is the exact stream the upstream sends for n tokens.
func StreamBody(n int) string {
	var b []byte
	b = fmt.Appendf(b, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n")
	for i := range n {
		b = fmt.Appendf(b, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok%d \"}}]}\n\n", i)
	}
	b = fmt.Appendf(b, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
	b = fmt.Appendf(b, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n", n, n+7)
	b = append(b, "data: [DONE]\n\n"...)
	return string(b)
}

func (u *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.received = append(u.received, Received{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	s := u.script
	u.mu.Unlock()
	select {
	case u.arrived <- struct{}{}:
	default:
	}

	if s.Release != nil && !waitFor(u, r, s.Release) {
		return
	}
	if s.Delay > 0 && !u.sleep(r, s.Delay) {
		return
	}
	if s.Status != 0 && s.Status/100 != 2 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(s.Status)
		fmt.Fprintf(w, `{"error":{"message":"scripted status %d"}}`, s.Status)
		return
	}
	tokens := s.Tokens
	if tokens == 0 {
		tokens = 3
	}
	var req struct {
		Stream bool `json:"stream"`
	}
	json.Unmarshal(body, &req)
	if !req.Stream && s.Frames == nil {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":%d,"total_tokens":%d}}`, tokens, tokens+7)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush(w)
	if s.Hang {
		waitFor[struct{}](u, r, nil)
		return
	}
	frames := s.Frames
	if frames == nil {
		frames = splitFrames(StreamBody(tokens))
	}
	for i, f := range frames {
		if s.CutAfter > 0 && i == s.CutAfter+1 {
			panic(http.ErrAbortHandler)
		}
		if i > 0 && s.Every > 0 && !u.sleep(r, s.Every) {
			return
		}
		if i > 0 && s.Pace != nil && !waitFor(u, r, s.Pace) {
			return
		}
		n, _ := io.WriteString(w, f)
		u.written.Add(int64(n))
		flush(w)
	}
}

func splitFrames(stream string) []string {
	var out []string
	for len(stream) > 0 {
		i := 0
		for i+1 < len(stream) && !(stream[i] == '\n' && stream[i+1] == '\n') {
			i++
		}
		out = append(out, stream[:i+2])
		stream = stream[i+2:]
	}
	return out
}

func (u *Server) sleep(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	return waitFor(u, r, t.C)
}

// waitFor blocks until c delivers (true) or the request is canceled (false,
// reported on Canceled). A nil c waits for the cancellation only.
func waitFor[T any](u *Server, r *http.Request, c <-chan T) bool {
	select {
	case <-c:
		return true
	case <-r.Context().Done():
		select {
		case u.canceled <- struct{}{}:
		default:
		}
		return false
	}
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
