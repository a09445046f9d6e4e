package proxy

import (
	"net/http"

	"github.com/kestrelops/tandem/exporter"
)

// serveTap handles a copy of a production request sent by a gateway's mirror
// (TANDEM_MODE=tap). The gateway has already sent the original to production
// and discards this answer: tandem reads the body, answers 204 at once (a
// slow answer would hold some gateways' client connections, nginx's among
// them), then classifies the copy and, when sampled, sends it to A and B as
// inline mode does. Production is not measured.
func (s *Server) serveTap(w http.ResponseWriter, r *http.Request) {
	api, llm := apiForPath(r.URL.Path)
	if !llm || r.Method != http.MethodPost || hasContentEncoding(r.Header) {
		s.skip(exporter.SkipUnsupported)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	body, hold, skip := s.readBody(r)
	if err := bodyFailure(r); err != nil {
		s.clientError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
	if hold == nil {
		// Too large or over budget: a copy is only a copy.
		s.skip(skip)
		return
	}
	hold.done() // the production request's share: there is none
	s.classifyBeside(r, api, body, hold)
}
