package proxy

import (
	"testing"

	"github.com/kestrelops/tandem/proxy/sse"
)

func TestAPIForPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		api  sse.API
		ok   bool
		name string
	}{
		{"/v1/chat/completions", sse.APIChatCompletions, true, "chat_completions"},
		{"/v1/completions", sse.APICompletions, true, "completions"},
		{"/v1/responses", sse.APIResponses, true, "responses"},
		{"/v1/embeddings", 0, false, "API(0)"},
		{"/v1/chat/completions/", 0, false, "API(0)"},
		{"", 0, false, "API(0)"},
	} {
		api, ok := apiForPath(tc.path)
		if api != tc.api || ok != tc.ok || api.String() != tc.name {
			t.Errorf("apiForPath(%q) = %v (%s), %v; want %v (%s), %v", tc.path, int(api), api, ok, int(tc.api), tc.name, tc.ok)
		}
	}
}
