package exporter

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the metrics listener: /metrics (protobuf exposition, with
// native buckets, for scrapers that ask; text otherwise), /-/healthy,
// /-/ready (200 once ready reports true) and, when status is not nil, the
// status page at /.
func Handler(g prometheus.Gatherer, ready func() bool, status http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	mux.HandleFunc("GET /-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("tandem is healthy.\n"))
	})
	mux.HandleFunc("GET /-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "tandem is not ready.", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("tandem is ready.\n"))
	})
	if status != nil {
		mux.Handle("GET /{$}", status)
	}
	return mux
}
