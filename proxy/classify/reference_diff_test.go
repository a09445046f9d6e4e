package classify

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// shapes are bodies of every shape ParsePrompt reads, and of many it
// rejects, on which it must agree with referenceParsePrompt.
var shapes = []string{
	// Chat completions.
	`{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"},{"role":"user","content":"Bye"}]}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"What is it?"},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":\"<b>&</b>\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"42"}]}`,
	"{\n  \"messages\" : [\n    { \"content\" : \"Hi\" , \"role\" : \"user\" }\n  ]\n}\n",
	`{"messages":[]}`,
	`{"messages":[null,{},{"role":null},{"role":1,"content":2},{"role":"user"}]}`,
	`{"messages":[{"role":"user","content":true},{"role":"user","content":{"b":1,"a":[1.0,2e2]}},{"role":"user","content":-0}]}`,
	`{"messages":[{"role":"user","content":[1,"two",null,false,[3],{"text":null},{"text":5},{"text":"x","text":"y"},{"text":"x","text":null},{}]}]}`,
	`{"messages":[{"role":"user","role":"assistant","content":"a","content":null}]}`,
	`{"messages":[{"role":"assistant","tool_calls":null},{"role":"assistant","tool_calls":"s"},{"role":"assistant","tool_calls":{"z":1,"a":2}},{"content":"x","tool_calls":[],"role":"user"}]}`,
	`{"messages":[{"r\u006fle":"\u0075ser","c\u006fntent":"esc"}]}`,
	`{"Messages":[{"role":"user","content":"case"}]}`,
	`{"MESSAGES":[{"role":"user","content":"upper"}]}`,
	"{\"me\u017f\u017fages\":[{\"role\":\"user\",\"content\":\"long s\"}]}",
	`{"me\u017f\u017fages":[{"role":"user","content":"escaped long s"}]}`,
	`{"Role":"x","messages":[{"Role":"user","Content":"inner keys are exact"}]}`,
	`{"messages":"hi"}`,
	`{"messages":[1]}`,
	`{"messages":[{"role":"user"},"x"]}`,
	`{"messages":[[]]}`,
	`{"messages":{"role":"user"},"prompt":true}`,
	// Responses.
	`{"model":"m","instructions":"Be brief.","input":"Hi"}`,
	`{"input":[{"role":"developer","content":"Rules"},{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi"}]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"42"}]}`,
	`{"instructions":["a",{"text":"b"},{"type":"x"}],"input":"i"}`,
	`{"instructions":{"k":"v"},"input":[]}`,
	`{"instructions":7,"input":"i"}`,
	`{"instructions":null,"input":"i"}`,
	`{"input":[null,1,"s",true,[],{},{"role":null,"type":"t"},{"role":5,"type":7},{"type":"reasoning","summary":[]}]}`,
	`{"input":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"output_text","text":"a"}]},{"role":"user","content":"q2"}]}`,
	`{"input":5}`,
	`{"input":{"role":"user"}}`,
	`{"input":null,"prompt":"p"}`,
	`{"input":"i","prompt":"p"}`,
	`{"instructions":"only instructions"}`,
	// Completions.
	`{"model":"m","prompt":"Once upon a time"}`,
	`{"prompt":["a","b"]}`,
	`{"prompt":[1, 2, 3]}`,
	`{"prompt":[[1,2],[3]]}`,
	`{"prompt":[]}`,
	`{"prompt":[[]]}`,
	`{"prompt":[ ]}`,
	`{"prompt":["a",1,{"b":2,"a":1},null,[1,"x"]]}`,
	`{"prompt":[1,"a",{"b":2,"a":1}]}`,
	`{"prompt":[-1,0,-0,1.0,1.5,1e2,1E+2,1e-2,1e-7,1e20,1e21,123456789012345678901234567890,0.1,0.30000000000000004,5e-324,1e-400,1.7976931348623157e308,-1e-7,100000000000000000000]}`,
	`{"prompt":[9007199254740993,123456789012345,1234567890123456,-123456789012345]}`,
	`{"prompt":5}`,
	`{"prompt":{"text":"hi"}}`,
	`{"prompt":true}`,
	`{"prompt":null}`,
	// Which field wins.
	`{"prompt":"p","input":"i","messages":[{"role":"user","content":"m"}]}`,
	`{"messages":[{"role":"user","content":"first"}],"messages":[{"role":"user","content":"last"}]}`,
	`{"messages":[{"role":"user","content":"m"}],"messages":null,"prompt":"p"}`,
	`{"prompt":"p","prompt":["q"]}`,
	`{"prompt":"p","PROMPT":"q"}`,
	`{"instructions":"a","instructions":null,"input":"b"}`,
	// Numbers json.Unmarshal cannot decode into an any.
	`{"prompt":[1e400]}`,
	`{"prompt":"p","messages":null,"instructions":[-1e309]}`,
	`{"prompt":[1e400],"prompt":"p"}`,
	`{"model":1e400,"prompt":"p"}`,
	`{"prompt":"p","ignored":{"deep":[1e999999]}}`,
	`{"prompt":[1` + strings.Repeat("0", 400) + `]}`,
	`{"prompt":[0.` + strings.Repeat("0", 400) + `1]}`,
	// Strings.
	`{"prompt":"tab\there\nnew\\back\/slash\"quote\u0000nul\u001f\u007f"}`,
	`{"prompt":["x",{"s":"tab\there\nnew\\back\/slash\"quote\u0000nul\u001f\u007f\b\f\r"}]}`,
	`{"prompt":["x","<>&\u003c\u2028\u2029",{"s":"<>&\u2028\u2029 ` + "\u2028\u2029" + `"}]}`,
	`{"prompt":["x",{"s":"\ud83d\ude00 \ud800 \udc00 \ud800\u0041 \ud800\ud800\udc00 \udbff\udfff \uD83D\uDE00"}]}`,
	"{\"prompt\":[\"\xff\xfe\",{\"s\":\"\xff a\xc0\x80 \xed\xa0\x80 \xef\xbf\xbd \xe2\x82 \xf4\x90\x80\x80\"}]}",
	"{\"messages\":[{\"role\":\"us\xffer\",\"content\":\"a\xffuser\xfe\xfdb\"}]}",
	`{"prompt":"\ud800\u0041 \ud83d\ude00"}`,
	`{"prompt":"` + "\u00e9\u4e16\U0001F600" + `"}`,
	// Objects written as canonical JSON: key order and duplicates.
	`{"prompt":["x",{"b":1,"a":2,"c":{"z":[{"y":1,"x":2}],"a":null}}]}`,
	`{"prompt":["x",{"a":1,"a":2,"b":{"x":1},"b":{"y":2}}]}`,
	`{"prompt":["x",{"\u0062":1,"a":2,"\u0061":3}]}`,
	"{\"prompt\":[\"x\",{\"\xff\":1,\"\xfe\":2,\"\\ufffd\":3,\"\xef\xbf\xbd\":4}]}",
	`{"prompt":["x",{"é":1,"z":2,"Z":3,"` + "\U0001F600" + `":4,"\ud83d\ude00":5,"` + "\uffff" + `":6,"":7,"a\u0000":8,"a":9}]}`,
	`{"prompt":["x",{"<k>":"&"}]}`,
	`{"prompt":["x",{},[{}],{"a":{}},{"a":[]}]}`,
	`{"prompt":["x",[{"b":1,"a":2},{"d":1,"c":2}],{"b":[{"y":1,"x":2}],"a":[{"w":1,"v":2}]}]}`,
	`{"prompt":["x",{ "b" : [ 1 , { "d" : 2 , "c" : 3 } ] , "a" : true }]}`,
	// Not prompts.
	`not json`,
	`[1, 2]`,
	`"prompt"`,
	`null`,
	`1`,
	`true`,
	``,
	` `,
	`{}`,
	`{ }`,
	`{"model":"m"}`,
	`{"model":"m","messages":null}`,
	`{`,
	`{"prompt":"p"`,
	`{"prompt":"01234567`,
	`{"prompt":"0123456789abcdef`,
	`{"prompt":"p","0123456789abcdef`,
	`{"prompt":"p"}x`,
	`{"prompt":"p"} {}`,
	`{"prompt":"p",}`,
	`{"prompt" "p"}`,
	`{prompt:"p"}`,
	"\xef\xbb\xbf{\"prompt\":\"p\"}",
	"{\"prompt\":\"a\nb\"}",
	`{"prompt":"\x"}`,
	`{"prompt":"\u12"}`,
	`{"prompt":[01]}`,
	`{"prompt":[1.]}`,
	`{"prompt":[.5]}`,
	`{"prompt":[1e]}`,
	`{"prompt":[+1]}`,
	`{"prompt":[tru]}`,
	`{"prompt":[1,]}`,
	`{"prompt":"p","x":[1,2}`,
	`{"prompt":"p","x":{"a" 1}}`,
	`{"prompt":"p","x":{"a":1,}}`,
	" \t\r\n{\"prompt\":\"p\"} \t\r\n",
}

// deepShapes nest values up to encoding/json's depth limit and one past it,
// in ignored and in kept fields.
func deepShapes() []string {
	nested := func(open, close string, n int, inner string) string {
		return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
	}
	return []string{
		`{"prompt":"p","x":` + nested("[", "]", maxDepth-1, "") + `}`,
		`{"prompt":"p","x":` + nested("[", "]", maxDepth, "") + `}`,
		`{"prompt":"p","x":` + nested(`{"a":`, "}", maxDepth-1, "1") + `}`,
		`{"prompt":"p","x":` + nested(`{"a":`, "}", maxDepth, "1") + `}`,
		`{"prompt":["x",` + nested("[", "]", maxDepth-2, "") + `]}`,
		`{"prompt":["x",` + nested("[", "]", maxDepth-1, "") + `]}`,
		`{"prompt":["x",` + nested(`{"b":0,"a":`, "}", maxDepth-2, `"s"`) + `]}`,
		`{"prompt":["x",` + nested(`[{"b":0,"a":`, "}]", maxDepth/2-1, `"s"`) + `]}`,
		`{"prompt":["x",` + nested(`{"b":0,"a":`, "}", maxDepth-1, `"s"`) + `]}`,
		`{"messages":[{"role":"user","content":[` + nested(`{"a":`, "}", maxDepth-5, "[]") + `]}]}`,
		nested("[", "]", maxDepth+1, ""),
	}
}

func checkMatchesReference(t *testing.T, body []byte) {
	t.Helper()
	want, wantErr := referenceParsePrompt(body)
	got, err := ParsePrompt(body)
	if err != nil && !errors.Is(err, ErrNoPrompt) {
		t.Fatalf("%.200q: error %v does not wrap ErrNoPrompt", body, err)
	}
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%.200q: error %v, reference error %v", body, err, wantErr)
	}
	if !bytes.Equal(got.Text, want.Text) {
		t.Fatalf("%.200q:\nText      %q\nreference %q", body, got.Text, want.Text)
	}
	if !bytes.Equal(got.ConversationKey, want.ConversationKey) {
		t.Fatalf("%.200q:\nConversationKey %q\nreference       %q", body, got.ConversationKey, want.ConversationKey)
	}
}

func TestParsePromptMatchesReference(t *testing.T) {
	for i, body := range append(shapes, deepShapes()...) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			checkMatchesReference(t, []byte(body))
		})
	}
}

func TestParsePromptMatchesReferenceOnLongPrompts(t *testing.T) {
	long := strings.Repeat("<long & escaped \u2028 text> ", 100)
	for _, body := range []string{
		`{"prompt":"` + long + `"}`,
		`{"messages":[{"role":"system","content":"` + long + `"},{"role":"user","content":"q"}]}`,
		`{"prompt":["x",{"s":"` + long + `"}]}`,
		`{"input":[{"type":"function_call_output","output":"` + long + `"}]}`,
		string(tokenBatchBody(1<<16, 7)),
		string(chatBody(t, [2]string{"system", long}, [2]string{"user", long})),
	} {
		checkMatchesReference(t, []byte(body))
	}
}

// FuzzParsePromptMatchesReference reads the input as a body, and as a value
// in each place a body keeps one, so that values the fuzzer finds are
// written as canonical JSON.
func FuzzParsePromptMatchesReference(f *testing.F) {
	for _, body := range shapes {
		f.Add([]byte(body))
	}
	f.Add([]byte(`{"b":[1.0,"<\u2028>"],"a":{"d":null,"c":1e2,"c":-0}}`))
	f.Fuzz(func(t *testing.T, input []byte) {
		if len(input) > maxFuzzInput {
			return
		}
		checkMatchesReference(t, input)
		for _, place := range []string{
			`{"prompt":["x",%s]}`,
			`{"prompt":[1,%s]}`,
			`{"messages":[{"role":"user","content":[%s],"tool_calls":%[1]s}]}`,
			`{"input":[%s],"instructions":%[1]s}`,
		} {
			checkMatchesReference(t, fmt.Appendf(nil, place, input))
		}
	})
}

// tokenBatchBody returns a completions body of at least n bytes: a batch of
// token-ID prompts of 16 to 1039 tokens each.
func tokenBatchBody(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := []byte(`{"model":"m","prompt":[`)
	for len(b) < n {
		if b[len(b)-1] == ']' {
			b = append(b, ',')
		}
		b = append(b, '[')
		for i := range 16 + r.IntN(1024) {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(r.IntN(200000)), 10)
		}
		b = append(b, ']')
	}
	return append(b, "]}"...)
}
