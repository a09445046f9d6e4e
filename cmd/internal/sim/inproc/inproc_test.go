package inproc_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kestrelops/tandem/cmd/internal/sim/inproc"
)

func get(ctx context.Context, t *testing.T, h http.HandlerFunc) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://in.proc/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	return inproc.Client(h).Do(req)
}

func TestStreamsAsWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		resp, err := get(t.Context(), t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Kind", "stream")
			w.WriteHeader(http.StatusAccepted)
			io.WriteString(w, "one")
			time.Sleep(time.Second)
			io.WriteString(w, "two")
		})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		start := time.Now()
		buf := make([]byte, 3)
		io.ReadFull(resp.Body, buf)
		first := time.Since(start)
		rest, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Kind") != "stream" ||
			string(buf) != "one" || first != 0 || string(rest) != "two" || err != nil || time.Since(start) != time.Second {
			t.Errorf("status %d, header %v, %q at %v, %q (%v) at %v", resp.StatusCode, resp.Header, buf, first, rest, err, time.Since(start))
		}
	})
}

func TestAbortCutsBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		resp, err := get(t.Context(), t, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "partial")
			panic(http.ErrAbortHandler)
		})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if string(b) != "partial" || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("body %q, err %v", b, err)
		}
	})
}

func TestCancelEndsRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		handlerDone := make(chan struct{})
		resp, err := get(ctx, t, func(w http.ResponseWriter, r *http.Request) {
			defer close(handlerDone)
			w.WriteHeader(http.StatusOK)
			<-r.Context().Done()
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		<-handlerDone
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("read error %v, want the context's", err)
		}
	})
}
