package proxy

import "github.com/kestrelops/tandem/proxy/sse"

// apiForPath maps a request path to the API tandem measures on it; false for
// every other path, which goes to production unmeasured.
func apiForPath(path string) (sse.API, bool) {
	switch path {
	case "/v1/chat/completions":
		return sse.APIChatCompletions, true
	case "/v1/completions":
		return sse.APICompletions, true
	case "/v1/responses":
		return sse.APIResponses, true
	}
	return 0, false
}
