package bench

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// canned answers every request with status and body, without a network.
type canned struct {
	status int
	body   string
}

func (c canned) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: c.status, Body: io.NopCloser(strings.NewReader(c.body)), Header: http.Header{}}, nil
}

func TestStream(t *testing.T) {
	whole := string(bytes.Join(chatStream(5), nil))
	long := strings.Replace(whole, `" tok3"`, `"`+strings.Repeat("x", 10000)+`"`, 1)
	for _, c := range []struct {
		name    string
		answer  canned
		frames  int
		wantErr string
	}{
		{"whole stream", canned{200, whole}, 5, ""},
		{"content frame longer than the read buffer", canned{200, long}, 5, ""},
		{"no [DONE]", canned{200, strings.TrimSuffix(whole, "data: [DONE]\n\n")}, 5, "incomplete stream: 5 of 5 content frames, [DONE] false"},
		{"frames missing", canned{200, whole}, 6, "incomplete stream: 5 of 6 content frames, [DONE] true"},
		{"error status", canned{502, `{"error":{}}`}, 5, "status 502"},
	} {
		firsts := 0
		res := stream(context.Background(), &http.Client{Transport: c.answer}, "http://upstream", 1, c.frames, func() { firsts++ })
		switch {
		case c.wantErr == "" && res.err != nil:
			t.Errorf("%s: %v", c.name, res.err)
		case c.wantErr != "" && (res.err == nil || res.err.Error() != c.wantErr):
			t.Errorf("%s: error %v, want %q", c.name, res.err, c.wantErr)
		}
		if c.answer.status == 200 && (res.frames != 5 || firsts != 1) {
			t.Errorf("%s: %d content frames, first frame seen %d times; want 5 and once", c.name, res.frames, firsts)
		}
	}
}

func TestChatStreamMarker(t *testing.T) {
	frames := chatStream(3)
	if len(frames) != 3+4 {
		t.Fatalf("%d frames, want 3 content frames and role, finish, usage, [DONE]", len(frames))
	}
	for i, f := range frames {
		content := i >= 1 && i <= 3
		if bytes.Contains(f, marker) != content {
			t.Errorf("frame %d %q: content marker present = %v, want %v", i, f, !content, content)
		}
	}
}
