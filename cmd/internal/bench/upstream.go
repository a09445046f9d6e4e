package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// upstream is a zero-think-time streaming chat completions server: every
// request gets the same stream of frames content frames, written and
// flushed one by one as fast as the connection takes them, then the finish
// chunk, the usage chunk and [DONE].
type upstream struct {
	srv    *http.Server
	url    string
	stream [][]byte

	mu   sync.Mutex
	hold chan struct{} // when set, streams pause after their first content frame until it is closed

	active atomic.Int64 // requests being answered
	held   atomic.Int64 // requests paused on hold
}

// contentMarker occurs in content frames only (the role frame carries an
// empty content after the role).
const contentMarker = `"delta":{"content":"`

// chatStream returns the frames of a vLLM-like chat completion stream with
// n content frames.
func chatStream(n int) [][]byte {
	const head = `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1764478654,"model":"bench","choices":[`
	frames := [][]byte{[]byte(head + `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n")}
	for i := range n {
		frames = append(frames, fmt.Appendf(nil, head+`{"index":0,"delta":{"content":" tok%d"},"logprobs":null,"finish_reason":null}]}`+"\n\n", i))
	}
	return append(frames,
		[]byte(head+`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`+"\n\n"),
		fmt.Appendf(nil, head+`],"usage":{"prompt_tokens":12,"total_tokens":%d,"completion_tokens":%d}}`+"\n\n", n+12, n),
		[]byte("data: [DONE]\n\n"))
}

// startUpstream serves streams of frames content frames on a loopback port.
func startUpstream(frames int) (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &upstream{url: "http://" + ln.Addr().String(), stream: chatStream(frames)}
	u.srv = &http.Server{Handler: http.HandlerFunc(u.serve), ReadHeaderTimeout: 10 * time.Second}
	go u.srv.Serve(ln)
	return u, nil
}

func (u *upstream) close() { u.srv.Close() }

// startHold makes later streams pause after their first content frame until
// the returned release is called.
func (u *upstream) startHold() (release func()) {
	c := make(chan struct{})
	u.mu.Lock()
	u.hold = c
	u.mu.Unlock()
	return func() {
		u.mu.Lock()
		u.hold = nil
		u.mu.Unlock()
		close(c)
	}
}

// dropIdle closes the idle keep-alive connections clients hold to u, so a
// measurement starts without connections left from earlier phases.
func (u *upstream) dropIdle() {
	u.srv.SetKeepAlivesEnabled(false)
	u.srv.SetKeepAlivesEnabled(true)
}

// waitIdle waits until no request is being answered, or ctx ends.
func (u *upstream) waitIdle(ctx context.Context) {
	for u.active.Load() > 0 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.active.Add(1)
	defer u.active.Add(-1)
	io.Copy(io.Discard, r.Body)
	u.mu.Lock()
	hold := u.hold
	u.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for i, f := range u.stream {
		if _, err := w.Write(f); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		if i == 1 && hold != nil {
			u.held.Add(1)
			select {
			case <-hold:
			case <-r.Context().Done():
			}
			u.held.Add(-1)
			if r.Context().Err() != nil {
				return
			}
		}
	}
}
