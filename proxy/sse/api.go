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
