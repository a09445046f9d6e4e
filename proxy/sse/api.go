package sse

import "strconv"

// API is the OpenAI-compatible endpoint a response came from; it decides how
// the Meter reads the body.
type API int

// The APIs tandem measures.
const (
	APIChatCompletions API = iota + 1 // POST /v1/chat/completions
	APICompletions                    // POST /v1/completions
	APIResponses                      // POST /v1/responses
)

// APIForPath maps a request path to its API; false for other paths.
func APIForPath(path string) (API, bool) {
	switch path {
	case "/v1/chat/completions":
		return APIChatCompletions, true
	case "/v1/completions":
		return APICompletions, true
	case "/v1/responses":
		return APIResponses, true
	}
	return 0, false
}

// String returns "chat_completions", "completions" or "responses".
func (a API) String() string {
	switch a {
	case APIChatCompletions:
		return "chat_completions"
	case APICompletions:
		return "completions"
	case APIResponses:
		return "responses"
	}
	return "API(" + strconv.Itoa(int(a)) + ")"
}
