package bench

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"

	"github.com/kestrelops/tandem/proxy"
)

// ReferenceEnv, set to an upstream URL in the environment of "tandem bench",
// makes the command serve the reference proxy in front of that upstream on
// TANDEM_LISTEN_ADDR instead of running a benchmark. The benchmark starts
// its own executable this way to run the reference as a process of its own,
// like tandem and nginx.
const ReferenceEnv = "TANDEM_BENCH_REFERENCE"

// newReference is the reference proxy: Go's httputil.ReverseProxy on
// tandem's upstream transport, flushing every write, in full duplex as
// tandem serves (without it, Go's server can cut a proxied request: see
// proxy.Server.ServeHTTP), and nothing else. What tandem adds beyond it is
// tandem's own work; what it adds beyond direct is Go's HTTP stack.
func newReference(upstream *url.URL) http.Handler {
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(upstream) },
		Transport:     proxy.NewTransport(),
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > 0 {
			http.NewResponseController(w).EnableFullDuplex()
		}
		rp.ServeHTTP(w, r)
	})
}

// ServeReference serves the reference proxy in front of the upstream named
// by ReferenceEnv, on TANDEM_LISTEN_ADDR, until ctx ends.
func ServeReference(ctx context.Context) error {
	srv, err := newReferenceServer(os.Getenv(ReferenceEnv))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", os.Getenv("TANDEM_LISTEN_ADDR"))
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newReferenceServer returns the server of the reference proxy in front of
// upstream.
func newReferenceServer(upstream string) (*http.Server, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, errors.New(ReferenceEnv + " must be an upstream URL such as http://127.0.0.1:8000")
	}
	return &http.Server{Handler: newReference(u), ReadHeaderTimeout: 10 * time.Second}, nil
}

// startReference starts the reference proxy in front of prod: as a process
// of its own, running binary, or in this process when binary is empty.
func startReference(ctx context.Context, binary string, prod *upstream) (base string, ext external, stop func(), err error) {
	if binary != "" {
		p, err := startProxyProcess(ctx, binary, "bench", map[string]string{ReferenceEnv: prod.url})
		if err != nil {
			return "", nil, nil, err
		}
		return p.url, p, p.stop, nil
	}
	srv, err := newReferenceServer(prod.url)
	if err != nil {
		return "", nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), nil, func() { srv.Close() }, nil
}
