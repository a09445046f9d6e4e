package proxy

import (
	"context"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/sethvargo/go-envconfig"
	"golang.org/x/net/http/httpguts"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/classify"
)

// EnvPrefix is the prefix of every environment variable tandem serve reads.
const EnvPrefix = "TANDEM_"

// Config is the proxy's configuration: upstreams, sampling, limits and
// classification, read from TANDEM_* variables. Each field's doc tag is the
// text of the README's configuration table.
type Config struct {
	Mode       string `env:"MODE, default=inline" doc:"inline: tandem is on the production path and measures production too. tap: tandem is the target of a gateway's mirror; it answers each copy at once (204) and sends it to A and B; production is not measured."`
	PrimaryURL string `env:"PRIMARY_URL" doc:"Production upstream base URL (required inline, unused in tap mode). Every request goes there unchanged."`
	AURL       string `env:"A_URL" doc:"Configuration A base URL. Set both A and B, or neither (then only production is measured)."`
	BURL       string `env:"B_URL" doc:"Configuration B base URL."`
	AAPIKey    Secret `env:"A_API_KEY" doc:"Sent as Bearer token to A only. Never logged."`
	BAPIKey    Secret `env:"B_API_KEY" doc:"Sent as Bearer token to B only. Never logged."`
	AModel     string `env:"A_MODEL" doc:"Replaces model in bodies mirrored to A, when set."`
	BModel     string `env:"B_MODEL" doc:"Replaces model in bodies mirrored to B, when set."`
	AName      string `env:"A_NAME, default=A" doc:"Human name of A, exported only in tandem_config_info."`
	BName      string `env:"B_NAME, default=B" doc:"Human name of B, exported only in tandem_config_info."`

	SampleRate      float64 `env:"SAMPLE_RATE, default=0.1" doc:"Share of requests mirrored to A and B, 0 to 1."`
	SampleBy        string  `env:"SAMPLE_BY, default=conversation" doc:"conversation (whole conversations, decided on a hash of the conversation key) or request."`
	SampleKeyHeader string  `env:"SAMPLE_KEY_HEADER" doc:"Request header holding the conversation key; without it the key comes from the messages up to the first user message."`

	ShadowTimeout          time.Duration `env:"SHADOW_TIMEOUT, default=120s" doc:"Deadline of one mirrored request on an arm."`
	ShadowMaxInFlight      int           `env:"SHADOW_MAX_IN_FLIGHT, default=1024" doc:"Mirrored requests in flight per arm; when either arm is full neither gets the request (skipped as overloaded). Size it for sampled requests per second times stream duration: 1024 holds 8 per second of 2-minute streams. Each costs a goroutine, a connection and small buffers per arm (bodies count against TANDEM_MAX_BUFFERED_BYTES)."`
	ShadowMaxResponseBytes int64         `env:"SHADOW_MAX_RESPONSE_BYTES, default=33554432" doc:"Most tandem reads of one arm's response; a longer one is cut and counted as truncated."`
	ShadowReadRate         int64         `env:"SHADOW_READ_RATE, default=67108864" doc:"Bytes per second tandem reads from both arms together (bursts of one second allowed); a shadow read beyond it is cut and counted as truncated, which bounds the CPU the arms take from production."`
	MirrorMaxBodyBytes     int64         `env:"MIRROR_MAX_BODY_BYTES, default=4194304" doc:"Largest request body mirrored; larger bodies go to production untouched and are not mirrored."`
	MaxBufferedBytes       int64         `env:"MAX_BUFFERED_BYTES, default=67108864" doc:"Every byte tandem holds for measurement (request bodies, their prompts, mirrored bodies, partial stream frames) counts against this budget; when it is spent, requests still go to production untouched, unmeasured (skipped as over_budget)."`

	PrefixChunkBytes       int           `env:"PREFIX_CHUNK_BYTES, default=64" doc:"Chunk size of the prefix index."`
	PrefixIndexEntries     int           `env:"PREFIX_INDEX_ENTRIES, default=100000" doc:"Chunks held by each prefix index (mirror and production)."`
	PrefixTTL              time.Duration `env:"PREFIX_TTL, default=10m" doc:"How long a prefix stays known without being seen again; approximates an engine's prefix cache."`
	RepeatMinFraction      float64       `env:"REPEAT_MIN_FRACTION, default=0.5" doc:"Reused share of the prompt at which a request is repeated_prefix."`
	RepeatMinBytes         int           `env:"REPEAT_MIN_BYTES, default=256" doc:"Reused bytes at which a request is repeated_prefix."`
	ClassifierRedisURL     Secret        `env:"CLASSIFIER_REDIS_URL" doc:"redis:// or rediss:// URL (credentials allowed; never logged) of a Redis that every replica shares as one prefix index, production's and the mirror's; without it each replica classifies against its own. See Several replicas."`
	ClassifierRedisTimeout time.Duration `env:"CLASSIFIER_REDIS_TIMEOUT, default=50ms" doc:"Longest wait for the shared prefix index per classification; past it, or while Redis is down (retried every 2s), the replica's own index answers (tandem_classifier_fallback_total). Production never waits for it."`
	ClassHeader            string        `env:"CLASS_HEADER" doc:"Request header whose value becomes the class when it is in TANDEM_EXTRA_CLASSES."`
	ExtraClasses           []string      `env:"EXTRA_CLASSES" doc:"Comma-separated classes allowed through TANDEM_CLASS_HEADER."`

	BodyReadTimeout time.Duration `env:"BODY_READ_TIMEOUT, default=60s" doc:"Longest wait for the next bytes of a client's request body (nginx's client_body_timeout); the client then gets 408."`
}

// Secret is a credential: it prints as [redacted].
type Secret string

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString keeps %#v from printing the secret.
func (s Secret) GoString() string { return s.String() }

// LoadConfig reads the proxy's configuration from l (os environment in
// production) and validates it. Errors name the offending variable.
func LoadConfig(ctx context.Context, l envconfig.Lookuper) (Config, error) {
	var c Config
	if err := ReadVariables(ctx, l, &c); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// ReadVariables reads TANDEM_* variables from l into target, a pointer to a
// struct whose fields carry env tags (embedded structs are read in place).
// An error names the variable whose value does not parse.
func ReadVariables(ctx context.Context, l envconfig.Lookuper, target any) error {
	err := envconfig.ProcessWith(ctx, &envconfig.Config{
		Target:   target,
		Lookuper: envconfig.PrefixLookuper(EnvPrefix, l),
	})
	if err == nil {
		return nil
	}
	if name, cause, ok := variableOf(err.Error(), reflect.TypeOf(target).Elem()); ok {
		return Invalid(name, "%s", cause)
	}
	return err
}

// variableOf finds the variable of go-envconfig's "FieldName: cause" error
// message, "Embedded: FieldName: cause" for a field of an embedded struct.
func variableOf(msg string, t reflect.Type) (name, cause string, ok bool) {
	for f := range t.Fields() {
		rest, found := strings.CutPrefix(msg, f.Name+": ")
		if !found {
			continue
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			return variableOf(rest, f.Type)
		}
		name, _, _ = strings.Cut(f.Tag.Get("env"), ",")
		return name, rest, true
	}
	return "", "", false
}

// Validate checks every setting and names the first invalid variable. Every
// number has an upper bound the code can honour.
func (c Config) Validate() error {
	if c.Mode != ModeInline && c.Mode != ModeTap {
		return Invalid("MODE", "must be inline or tap, got %q", c.Mode)
	}
	if err := checkRedisURL("CLASSIFIER_REDIS_URL", string(c.ClassifierRedisURL)); err != nil {
		return err
	}
	if c.Mode == ModeInline && c.PrimaryURL == "" {
		return Invalid("PRIMARY_URL", "is required: the base URL of production, e.g. http://vllm:8000")
	}
	if c.Mode == ModeTap && (c.AURL == "" || c.BURL == "") {
		return Invalid("MODE", "tap needs TANDEM_A_URL and TANDEM_B_URL: in tap mode tandem measures only the arms")
	}
	for _, u := range []struct{ name, value string }{{"PRIMARY_URL", c.PrimaryURL}, {"A_URL", c.AURL}, {"B_URL", c.BURL}} {
		if err := checkURL(u.name, u.value); err != nil {
			return err
		}
	}
	if c.Mode == ModeInline {
		for _, u := range []struct{ name, value string }{{"A_URL", c.AURL}, {"B_URL", c.BURL}} {
			if u.value != "" && strings.TrimSuffix(u.value, "/") == strings.TrimSuffix(c.PrimaryURL, "/") {
				return Invalid(u.name, "is production's URL: mirrored requests would add their load to production")
			}
		}
	}
	if (c.AURL == "") != (c.BURL == "") {
		if c.AURL == "" {
			return Invalid("A_URL", "must be set when TANDEM_B_URL is set (set both arms or neither)")
		}
		return Invalid("B_URL", "must be set when TANDEM_A_URL is set (set both arms or neither)")
	}
	for _, k := range []struct {
		name  string
		value Secret
	}{{"A_API_KEY", c.AAPIKey}, {"B_API_KEY", c.BAPIKey}} {
		if err := checkKey(k.name, string(k.value)); err != nil {
			return err
		}
	}
	for _, v := range []struct{ name, value string }{
		{"A_MODEL", c.AModel}, {"B_MODEL", c.BModel}, {"A_NAME", c.AName}, {"B_NAME", c.BName},
	} {
		if err := checkPrintable(v.name, v.value); err != nil {
			return err
		}
	}
	for _, h := range []struct{ name, value string }{{"SAMPLE_KEY_HEADER", c.SampleKeyHeader}, {"CLASS_HEADER", c.ClassHeader}} {
		if h.value != "" && !validHeaderName(h.value) {
			return Invalid(h.name, "must be an HTTP header name, got %q", h.value)
		}
	}
	if !(c.SampleRate >= 0 && c.SampleRate <= 1) { // NaN fails too
		return Invalid("SAMPLE_RATE", "must be between 0 and 1, got %g", c.SampleRate)
	}
	if c.SampleBy != "conversation" && c.SampleBy != "request" {
		return Invalid("SAMPLE_BY", "must be conversation or request, got %q", c.SampleBy)
	}
	if !(c.RepeatMinFraction > 0 && c.RepeatMinFraction <= 1) { // NaN fails too
		return Invalid("REPEAT_MIN_FRACTION", "must be greater than 0 and at most 1, got %g", c.RepeatMinFraction)
	}
	for _, err := range []error{
		CheckRange("SHADOW_MAX_IN_FLIGHT", c.ShadowMaxInFlight, 1, 100_000),
		CheckRange("SHADOW_MAX_RESPONSE_BYTES", c.ShadowMaxResponseBytes, 1<<10, 1<<30),
		CheckRange("SHADOW_READ_RATE", c.ShadowReadRate, 1<<20, 1<<34),
		CheckRange("MIRROR_MAX_BODY_BYTES", c.MirrorMaxBodyBytes, 1, 1<<30),
		CheckRange("MAX_BUFFERED_BYTES", c.MaxBufferedBytes, 1<<20, 1<<36),
		CheckRange("PREFIX_CHUNK_BYTES", c.PrefixChunkBytes, 1, 1<<20),
		CheckRange("PREFIX_INDEX_ENTRIES", c.PrefixIndexEntries, 1, 10_000_000),
		CheckRange("REPEAT_MIN_BYTES", c.RepeatMinBytes, 0, 1<<30),
	} {
		if err != nil {
			return err
		}
	}
	if heldPerBodyByte*c.MirrorMaxBodyBytes > c.MaxBufferedBytes {
		return Invalid("MIRROR_MAX_BODY_BYTES", "must be at most a quarter of TANDEM_MAX_BUFFERED_BYTES (%d): a mirrored body is held with its prompt, got %d",
			c.MaxBufferedBytes, c.MirrorMaxBodyBytes)
	}
	for _, err := range []error{
		CheckRange("SHADOW_TIMEOUT", c.ShadowTimeout, time.Millisecond, 24*time.Hour),
		CheckRange("PREFIX_TTL", c.PrefixTTL, time.Second, 7*24*time.Hour),
		CheckRange("BODY_READ_TIMEOUT", c.BodyReadTimeout, time.Second, time.Hour),
		CheckRange("CLASSIFIER_REDIS_TIMEOUT", c.ClassifierRedisTimeout, time.Millisecond, time.Second),
	} {
		if err != nil {
			return err
		}
	}
	if len(c.ExtraClasses) > MaxExtraClasses {
		return Invalid("EXTRA_CLASSES", "allows at most %d classes, got %d", MaxExtraClasses, len(c.ExtraClasses))
	}
	for _, class := range c.ExtraClasses {
		if !validClassName(class) {
			return Invalid("EXTRA_CLASSES", "class %q must be 1 to 64 characters of a-z, 0-9 and _", class)
		}
		if class == exporter.ClassFresh || class == exporter.ClassRepeatedPrefix {
			return Invalid("EXTRA_CLASSES", "class %q is built in", class)
		}
	}
	if len(c.ExtraClasses) > 0 && c.ClassHeader == "" {
		return Invalid("CLASS_HEADER", "must be set when TANDEM_EXTRA_CLASSES is set")
	}
	return nil
}

// MaxExtraClasses bounds the class label's cardinality.
const MaxExtraClasses = 16

// Modes of tandem serve.
const (
	ModeInline = "inline" // on the production path
	ModeTap    = "tap"    // the target of a gateway's mirror, off the production path
)

// Mirroring reports whether A and B are configured.
func (c Config) Mirroring() bool { return c.AURL != "" && c.BURL != "" }

// Classes lists the class label values in use: built-in, then allowlisted.
func (c Config) Classes() []string {
	return append(append([]string{}, exporter.BuiltinClasses...), c.ExtraClasses...)
}

// ClassifierOptions are the prefix index settings.
func (c Config) ClassifierOptions() classify.Options {
	return classify.Options{
		ChunkBytes:  c.PrefixChunkBytes,
		MaxEntries:  c.PrefixIndexEntries,
		TTL:         c.PrefixTTL,
		MinFraction: c.RepeatMinFraction,
		MinBytes:    c.RepeatMinBytes,
	}
}

// Invalid is the error of variable TANDEM_<name>: "invalid TANDEM_<name>: "
// and the message.
func Invalid(name, format string, args ...any) error {
	return fmt.Errorf("invalid %s%s: %s", EnvPrefix, name, fmt.Sprintf(format, args...))
}

// CheckRange is the error of variable TANDEM_<name> when value lies outside
// lo to hi, or nil.
func CheckRange[T ~int | ~int64](name string, value, lo, hi T) error {
	if value < lo || value > hi {
		return Invalid(name, "must be between %v and %v, got %v", lo, hi, value)
	}
	return nil
}

func checkURL(name, raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Invalid(name, "must be an absolute http or https URL, got %q", redactURL(raw))
	}
	if u.User != nil {
		return Invalid(name, "must not carry credentials; use the API key variables")
	}
	if strings.ContainsAny(raw, " \t\r\n") || u.Hostname() == "" || u.Fragment != "" || u.RawQuery != "" {
		return Invalid(name, "must be a base URL: scheme, host, optional port and path, no spaces, query or fragment, got %q", raw)
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return Invalid(name, "has port %s, want 1 to 65535", port)
		}
	}
	if strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/v1") {
		return Invalid(name, "ends in /v1, but tandem appends the client's whole path (/v1/chat/completions): give the server's base URL, e.g. %s",
			strings.TrimSuffix(strings.TrimSuffix(raw, "/"), "/v1"))
	}
	return nil
}

// checkRedisURL accepts redis:// and rediss:// URLs; its errors never quote
// the URL, which may carry a password.
func checkRedisURL(name, raw string) error {
	if raw == "" {
		return nil
	}
	if len(raw) > 4096 {
		return Invalid(name, "must be at most 4096 bytes, got %d", len(raw))
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c < 0x20 || c == 0x7f || c == ' ' {
			return Invalid(name, "must not contain spaces or control characters (byte %d)", i)
		}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Hostname() == "" {
		return Invalid(name, "must be redis://[user:password@]host:port[/db] or rediss://... (the value is not shown: it may hold a password)")
	}
	if _, err := redis.ParseURL(raw); err != nil {
		return Invalid(name, "must be redis://[user:password@]host:port[/db] or rediss://... (the value is not shown: it may hold a password)")
	}
	return nil
}

// redactURL hides userinfo so a credential in a bad URL is never echoed.
func redactURL(raw string) string {
	if at := strings.LastIndex(raw, "@"); at >= 0 {
		if scheme := strings.Index(raw, "://"); scheme >= 0 && scheme < at {
			return raw[:scheme+3] + "[redacted]@" + raw[at+1:]
		}
	}
	return raw
}

// checkKey rejects what an HTTP header value cannot carry, such as the
// trailing newline of a key read from a file.
func checkKey(name, key string) error {
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c == 0x7f || c == ' ' {
			return Invalid(name, "must not contain spaces or control characters (byte %d is %q); a key read from a file often ends in a newline", i, c)
		}
	}
	if len(key) > 4096 {
		return Invalid(name, "must be at most 4096 bytes, got %d", len(key))
	}
	return nil
}

// checkPrintable bounds a value that becomes a label or a JSON string.
func checkPrintable(name, v string) error {
	if len(v) > 256 {
		return Invalid(name, "must be at most 256 bytes, got %d", len(v))
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return Invalid(name, "must be printable UTF-8, got %q", v)
		}
	}
	return nil
}

func validHeaderName(s string) bool {
	if len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !httpguts.IsTokenRune(rune(s[i])) {
			return false
		}
	}
	return len(s) > 0
}

func validClassName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

// Variable documents one environment variable.
type Variable struct {
	Name, Default, Doc string
}

// Variables lists the variables of t, a struct whose fields carry env and
// doc tags, in declaration order; an embedded struct's variables stand in its
// place. A field tagged before:"NAME" is listed just ahead of TANDEM_NAME
// instead, so that a struct embedding another can set its own variables
// beside related ones.
func Variables(t reflect.Type) []Variable {
	type placement struct {
		v      Variable
		before string // the variable v is listed ahead of
	}
	var vars []Variable
	var placed []placement
	for f := range t.Fields() {
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			vars = append(vars, Variables(f.Type)...)
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("env"), ",")
		v := Variable{Name: EnvPrefix + name, Doc: f.Tag.Get("doc")}
		for opt := range strings.SplitSeq(opts, ",") {
			if d, ok := strings.CutPrefix(strings.TrimSpace(opt), "default="); ok {
				v.Default = d
			}
		}
		if before, ok := f.Tag.Lookup("before"); ok {
			placed = append(placed, placement{v, EnvPrefix + before})
			continue
		}
		vars = append(vars, v)
	}
	for _, p := range placed {
		at := slices.IndexFunc(vars, func(o Variable) bool { return o.Name == p.before })
		if at < 0 {
			panic(fmt.Sprintf("%s: %s is tagged before:%q, which is not a variable of it", t, p.v.Name, p.before))
		}
		vars = slices.Insert(vars, at, p.v)
	}
	return vars
}
