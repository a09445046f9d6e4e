package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// newClient returns the benchmark's HTTP/1.1 client. It keeps up to
// idlePerHost connections per target between requests.
func newClient(idlePerHost int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: idlePerHost,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}}
}

// streamResult is one request as the client saw it.
type streamResult struct {
	ttft   time.Duration // request sent to first content frame received
	frames int           // content frames received
	err    error
}

var (
	dataPrefix = []byte("data: ")
	doneData   = []byte("data: [DONE]")
	marker     = []byte(contentMarker)
)

// stream sends one streaming chat request to base and reads the whole
// response. firstFrame, when set, is called once the first content frame
// has arrived; the read continues after it returns. It reads the stream
// itself on purpose, not with proxy/sse's meter: the benchmark's TTFT is a
// client-side measurement independent of the proxy it measures.
func stream(ctx context.Context, client *http.Client, base string, id int, wantFrames int, firstFrame func()) streamResult {
	body := fmt.Sprintf(`{"model":"bench","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"benchmark request %d"}]}`, id)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return streamResult{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return streamResult{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return streamResult{err: fmt.Errorf("status %d", resp.StatusCode)}
	}
	var res streamResult
	done := false
	br := bufio.NewReaderSize(resp.Body, 4096)
	for {
		line, err := br.ReadSlice('\n')
		if bytes.HasPrefix(line, dataPrefix) {
			switch {
			case bytes.Contains(line, marker):
				if res.frames == 0 {
					res.ttft = time.Since(start)
					if firstFrame != nil {
						firstFrame()
					}
				}
				res.frames++
			case bytes.HasPrefix(line, doneData):
				done = true
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			res.err = err
			return res
		}
	}
	if !done || res.frames != wantFrames {
		res.err = fmt.Errorf("incomplete stream: %d of %d content frames, [DONE] %v", res.frames, wantFrames, done)
	}
	return res
}

// phaseResult is one closed-loop phase against one target.
type phaseResult struct {
	ttfts  []time.Duration
	frames int
	errors int
	wall   time.Duration
}

// closedLoop sends requests requests to base from concurrency workers, each
// sending its next request as soon as its previous response has ended.
func closedLoop(ctx context.Context, client *http.Client, base string, requests, concurrency, frames int, firstID int) phaseResult {
	var next atomic.Int64
	results := make([]streamResult, requests)
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= requests || ctx.Err() != nil {
					return
				}
				results[i] = stream(ctx, client, base, firstID+i, frames, nil)
			}
		})
	}
	wg.Wait()
	p := phaseResult{wall: time.Since(start), ttfts: make([]time.Duration, 0, requests)}
	for _, r := range results {
		if r.err != nil {
			p.errors++
			continue
		}
		p.ttfts = append(p.ttfts, r.ttft)
		p.frames += r.frames
	}
	return p
}

func (p phaseResult) framesPerSecond() float64 {
	return float64(p.frames) / p.wall.Seconds()
}
