package proxy

import (
	"net"
	"net/http"
	"net/url"
	"time"
)

// upstream is one configuration tandem sends requests to: production, A or
// B. All three are measured through the same code (meteredBody).
type upstream struct {
	config    string // exporter.ConfigProduction, ConfigA or ConfigB
	url       *url.URL
	apiKey    Secret
	model     string
	transport http.RoundTripper
	// slots bounds mirrored requests in flight; nil for production.
	slots chan struct{}
}

// NewTransport returns the transport every upstream uses, so A and B differ
// only in where they point. Each upstream gets its own connection pool.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     false,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Compression is left to the client and upstream: tandem must not
		// rewrite Accept-Encoding on the production path.
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxProductionHeaderBytes,
	}
}

// Response header limits. Production's headers go to the client, so its
// limit is generous (nginx's default is 8 KiB); an arm's are read only by
// tandem, and each of up to TANDEM_SHADOW_MAX_IN_FLIGHT shadows per arm may
// hold them, so they are kept small.
const (
	maxProductionHeaderBytes = 1 << 20
	maxArmHeaderBytes        = 64 << 10
)
