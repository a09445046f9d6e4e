package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/kestrelops/tandem/proxy/sse"
)

// referenceRewriteBody is rewriteBody as it was before it copied members in
// place (commit c549979): the body decoded into a map of raw members and
// encoded again, keys sorted.
func referenceRewriteBody(api sse.API, body []byte, model string) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, err
	}
	fields["stream"] = json.RawMessage("true")
	if api == sse.APIChatCompletions || api == sse.APICompletions {
		opts := map[string]json.RawMessage{}
		if raw, ok := fields["stream_options"]; ok {
			_ = json.Unmarshal(raw, &opts)
			if opts == nil {
				opts = map[string]json.RawMessage{}
			}
		}
		opts["include_usage"] = json.RawMessage("true")
		raw, err := json.Marshal(opts)
		if err != nil {
			return nil, err
		}
		fields["stream_options"] = raw
	}
	if model != "" {
		raw, err := json.Marshal(model)
		if err != nil {
			return nil, err
		}
		fields["model"] = raw
	}
	return json.Marshal(fields)
}

var rewriteBodies = []string{
	`{"model":"x","stream_options":{"continuous_usage_stats":true},"n":1}`,
	`{"model":"m","stream":true,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hi"}]}`,
	`{}`,
	" \t{ }\n",
	`{"a":1}`,
	`{"stream":false}`,
	`{"stream":false,"stream":null,"n":1}`,
	`{"str\u0065am":false,"Stream":false}`,
	`{"stream_options":null}`,
	`{"stream_options":"x"}`,
	`{"stream_options":[1,{"include_usage":false}]}`,
	`{"stream_options":{}}`,
	`{"stream_options":{"include_usage":false,"include_usage":false,"x":1,"x":2}}`,
	`{"stream_options":{"a":1},"stream_options":{"b":2}}`,
	`{"stream_options":{"b":2},"stream_options":3}`,
	`{"stream_\u006fptions":{"a":1},"stream_options":{"\u0069nclude_usage":false}}`,
	`{"stream_options":{"include_usage\u0000":false,"INCLUDE_USAGE":false}}`,
	`{"model":"x","model":"z"}`,
	`{"mod\u0065l":"x","MODEL":"y","model\"":"z","m\\odel":"w"}`,
	`{"n":1,"n":2}`,
	`{ "messages" : [ { "role" : "user" , "content" : "}\"]{[" } ] , "x" : { "y" : [ 1 , { "z" : "\\" } ] } , "stream" : false }`,
	`{"t":1.5e3,"u":-0,"v":true,"w":null,"z":10}`,
	`{"stream":false,"t":[]}`,
	`{"p":"<a>&\u2028","<k>":1}`,
	"{\"p\":\"\xff\",\"\xfe\":1}",
	`{"prompt":[1,2,3],"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`,
}

var rewriteModels = []string{"", "y", "q<&>\"\u2028"}

func checkRewriteMatchesReference(t *testing.T, body []byte) {
	t.Helper()
	for _, api := range []sse.API{sse.APIChatCompletions, sse.APICompletions, sse.APIResponses} {
		for _, model := range rewriteModels {
			got, err := rewriteBody(api, body, model)
			if err != nil {
				t.Fatalf("%s, %q, %q: %v", api, model, body, err)
			}
			want, err := referenceRewriteBody(api, body, model)
			if err != nil {
				t.Fatalf("%s, %q, %q: reference: %v", api, model, body, err)
			}
			var gotValue, wantValue any
			if err := json.Unmarshal(got, &gotValue); err != nil {
				t.Fatalf("%s, %q, %q: %s is not JSON: %v", api, model, body, got, err)
			}
			if err := json.Unmarshal(want, &wantValue); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gotValue, wantValue) {
				t.Fatalf("%s, %q, %q:\ngot       %s\nreference %s", api, model, body, got, want)
			}
		}
	}
}

func TestRewriteBodyMatchesReference(t *testing.T) {
	for i, body := range rewriteBodies {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			checkRewriteMatchesReference(t, []byte(body))
		})
	}
}

func TestRewriteBodyRejectsOtherValues(t *testing.T) {
	for _, body := range []string{``, ` `, `null`, `[1]`, `"x"`, `1`, `{`, `{"a":1}x`, `{"a":1,}`} {
		if got, err := rewriteBody(sse.APIChatCompletions, []byte(body), "m"); err == nil {
			t.Errorf("rewriteBody(%q) = %s, want an error", body, got)
		}
	}
}

func FuzzRewriteBody(f *testing.F) {
	for _, body := range rewriteBodies {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 1<<16 || !json.Valid(body) || bytes.TrimLeft(body, " \t\r\n")[0] != '{' {
			return
		}
		checkRewriteMatchesReference(t, body)
	})
}

func TestRewriteBodyAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	var b strings.Builder
	b.WriteString(`{"model":"m","stream":false,"messages":[`)
	for i := 0; b.Len() < 4<<20; i++ {
		fmt.Fprintf(&b, `{"role":"user","content":"message %d"},`, i)
	}
	b.WriteString(`{"role":"user","content":"last"}],"stream_options":{"continuous_usage_stats":true}}`)
	body := []byte(b.String())
	allocated := func(rewrite func(sse.API, []byte, string) ([]byte, error)) uint64 {
		least := uint64(math.MaxUint64)
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			if _, err := rewrite(sse.APIChatCompletions, body, "y"); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		return least
	}
	got := allocated(rewriteBody)
	if limit := uint64(len(body)) + 16<<10; got > limit {
		t.Errorf("%d-byte body: allocated %d bytes, want at most %d", len(body), got, limit)
	}
	if testing.Verbose() {
		reference := allocated(referenceRewriteBody)
		t.Logf("%d-byte body: allocated %d bytes (%.2f a body byte), reference %d (%.2f)",
			len(body), got, float64(got)/float64(len(body)), reference, float64(reference)/float64(len(body)))
	}
}
