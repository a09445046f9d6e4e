// Package inproc serves HTTP requests by calling a handler in the same
// process, without a network, so that clients can be tested inside
// testing/synctest bubbles where sockets are not allowed.
package inproc

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// Client returns an HTTP client whose every request is served by h.
func Client(h http.Handler) *http.Client {
	return &http.Client{Transport: Transport{Handler: h}}
}

// Transport is an http.RoundTripper that runs Handler in its own goroutine
// for each request and streams what it writes back as the response body,
// unbuffered. The handler sees the client's request context. A handler that
// panics (http.ErrAbortHandler included) cuts the body with
// io.ErrUnexpectedEOF, as a server closing the connection would.
type Transport struct {
	Handler http.Handler
}

// RoundTrip implements http.RoundTripper.
func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	rw := &responseWriter{header: http.Header{}, body: pw, committed: make(chan struct{})}
	go func() {
		defer func() {
			if recover() != nil {
				rw.abort()
				pw.CloseWithError(io.ErrUnexpectedEOF)
				return
			}
			rw.WriteHeader(http.StatusOK)
			pw.CloseWithError(req.Context().Err())
		}()
		t.Handler.ServeHTTP(rw, req)
	}()
	select {
	case <-rw.committed:
	case <-req.Context().Done():
		pw.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	if rw.aborted {
		return nil, errors.New("inproc: handler aborted before writing a response")
	}
	stop := context.AfterFunc(req.Context(), func() { pw.CloseWithError(req.Context().Err()) })
	return &http.Response{
		Status:     strconv.Itoa(rw.status) + " " + http.StatusText(rw.status),
		StatusCode: rw.status,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     rw.sent,
		Body:       &body{PipeReader: pr, stop: stop},
		Request:    req,
	}, nil
}

type body struct {
	*io.PipeReader
	stop func() bool
}

func (b *body) Close() error {
	b.stop()
	return b.PipeReader.Close()
}

type responseWriter struct {
	header    http.Header
	body      *io.PipeWriter
	once      sync.Once
	committed chan struct{}
	status    int
	sent      http.Header
	aborted   bool
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(status int) {
	w.once.Do(func() {
		w.status = status
		w.sent = w.header.Clone()
		close(w.committed)
	})
}

func (w *responseWriter) abort() {
	w.once.Do(func() {
		w.aborted = true
		close(w.committed)
	})
}

func (w *responseWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// Flush is a no-op: every Write already reaches the reader.
func (w *responseWriter) Flush() {}
