package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sethvargo/go-envconfig"
)

func load(env map[string]string) (Config, error) {
	return LoadConfig(context.Background(), envconfig.MapLookuper(env))
}

func TestConfigDefaults(t *testing.T) {
	c, err := load(map[string]string{"TANDEM_PRIMARY_URL": "http://vllm:8000"})
	if err != nil {
		t.Fatal(err)
	}
	if c.SampleBy != "conversation" || c.PrefixChunkBytes != 64 ||
		c.RepeatMinFraction != 0.5 || c.RepeatMinBytes != 256 || c.Mirroring() {
		t.Fatalf("unexpected defaults: %+v", c)
	}
}

func TestConfigInvalid(t *testing.T) {
	base := map[string]string{"TANDEM_PRIMARY_URL": "http://prod:8000", "TANDEM_A_URL": "http://a:8000", "TANDEM_B_URL": "http://b:8000"}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"TANDEM_PRIMARY_URL": ""}, "invalid TANDEM_PRIMARY_URL: is required: the base URL of production, e.g. http://vllm:8000"},
		{map[string]string{"TANDEM_PRIMARY_URL": "http://vllm:8000/v1"}, "invalid TANDEM_PRIMARY_URL: ends in /v1, but tandem appends the client's whole path (/v1/chat/completions): give the server's base URL, e.g. http://vllm:8000"},
		{map[string]string{"TANDEM_A_URL": "http://a:99999"}, "invalid TANDEM_A_URL: has port 99999, want 1 to 65535"},
		{map[string]string{"TANDEM_B_URL": "http://:8000"}, `invalid TANDEM_B_URL: must be a base URL: scheme, host, optional port and path, no spaces, query or fragment, got "http://:8000"`},
		{map[string]string{"TANDEM_PRIMARY_URL": "http://p:8000/ "}, `invalid TANDEM_PRIMARY_URL: must be a base URL: scheme, host, optional port and path, no spaces, query or fragment, got "http://p:8000/ "`},
		{map[string]string{"TANDEM_A_URL": "http://prod:8000/"}, "invalid TANDEM_A_URL: is production's URL: mirrored requests would add their load to production"},
		{map[string]string{"TANDEM_MODE": "shadow"}, `invalid TANDEM_MODE: must be inline or tap, got "shadow"`},
		{map[string]string{"TANDEM_MODE": "tap", "TANDEM_A_URL": "", "TANDEM_B_URL": ""}, "invalid TANDEM_MODE: tap needs TANDEM_A_URL and TANDEM_B_URL: in tap mode tandem measures only the arms"},
		{map[string]string{"TANDEM_PRIMARY_URL": "vllm:8000"}, `invalid TANDEM_PRIMARY_URL: must be an absolute http or https URL, got "vllm:8000"`},
		{map[string]string{"TANDEM_A_URL": "ftp://a"}, `invalid TANDEM_A_URL: must be an absolute http or https URL, got "ftp://a"`},
		{map[string]string{"TANDEM_B_URL": "http://user:hunter2@b:8000"}, "invalid TANDEM_B_URL: must not carry credentials; use the API key variables"},
		{map[string]string{"TANDEM_B_URL": ""}, "invalid TANDEM_B_URL: must be set when TANDEM_A_URL is set (set both arms or neither)"},
		{map[string]string{"TANDEM_A_URL": ""}, "invalid TANDEM_A_URL: must be set when TANDEM_B_URL is set (set both arms or neither)"},
		{map[string]string{"TANDEM_SAMPLE_RATE": "1.5"}, "invalid TANDEM_SAMPLE_RATE: must be between 0 and 1, got 1.5"},
		{map[string]string{"TANDEM_SAMPLE_RATE": "-0.1"}, "invalid TANDEM_SAMPLE_RATE: must be between 0 and 1, got -0.1"},
		{map[string]string{"TANDEM_SAMPLE_BY": "user"}, `invalid TANDEM_SAMPLE_BY: must be conversation or request, got "user"`},
		{map[string]string{"TANDEM_SHADOW_TIMEOUT": "0s"}, "invalid TANDEM_SHADOW_TIMEOUT: must be between 1ms and 24h0m0s, got 0s"},
		{map[string]string{"TANDEM_SHADOW_MAX_IN_FLIGHT": "0"}, "invalid TANDEM_SHADOW_MAX_IN_FLIGHT: must be between 1 and 100000, got 0"},
		{map[string]string{"TANDEM_MIRROR_MAX_BODY_BYTES": "0"}, "invalid TANDEM_MIRROR_MAX_BODY_BYTES: must be between 1 and 1073741824, got 0"},
		{map[string]string{"TANDEM_PREFIX_CHUNK_BYTES": "0"}, "invalid TANDEM_PREFIX_CHUNK_BYTES: must be between 1 and 1048576, got 0"},
		{map[string]string{"TANDEM_PREFIX_INDEX_ENTRIES": "0"}, "invalid TANDEM_PREFIX_INDEX_ENTRIES: must be between 1 and 10000000, got 0"},
		{map[string]string{"TANDEM_PREFIX_TTL": "-1m"}, "invalid TANDEM_PREFIX_TTL: must be between 1s and 168h0m0s, got -1m0s"},
		{map[string]string{"TANDEM_REPEAT_MIN_FRACTION": "0"}, "invalid TANDEM_REPEAT_MIN_FRACTION: must be greater than 0 and at most 1, got 0"},
		{map[string]string{"TANDEM_REPEAT_MIN_BYTES": "-1"}, "invalid TANDEM_REPEAT_MIN_BYTES: must be between 0 and 1073741824, got -1"},
		{map[string]string{"TANDEM_EXTRA_CLASSES": "batch"}, "invalid TANDEM_CLASS_HEADER: must be set when TANDEM_EXTRA_CLASSES is set"},
		{map[string]string{"TANDEM_EXTRA_CLASSES": "Batch Jobs", "TANDEM_CLASS_HEADER": "X-Class"}, `invalid TANDEM_EXTRA_CLASSES: class "Batch Jobs" must be 1 to 64 characters of a-z, 0-9 and _`},
		{map[string]string{"TANDEM_EXTRA_CLASSES": "fresh", "TANDEM_CLASS_HEADER": "X-Class"}, `invalid TANDEM_EXTRA_CLASSES: class "fresh" is built in`},
		{map[string]string{"TANDEM_MIRROR_MAX_BODY_BYTES": "9223372036854775807"}, "invalid TANDEM_MIRROR_MAX_BODY_BYTES: must be between 1 and 1073741824, got 9223372036854775807"},
		{map[string]string{"TANDEM_MIRROR_MAX_BODY_BYTES": "104857600"}, "invalid TANDEM_MIRROR_MAX_BODY_BYTES: must be at most a quarter of TANDEM_MAX_BUFFERED_BYTES (67108864): a mirrored body is held with its prompt, got 104857600"},
		{map[string]string{"TANDEM_PREFIX_INDEX_ENTRIES": "3000000000"}, "invalid TANDEM_PREFIX_INDEX_ENTRIES: must be between 1 and 10000000, got 3000000000"},
		{map[string]string{"TANDEM_A_API_KEY": "sk-abc\n"}, `invalid TANDEM_A_API_KEY: must not contain spaces or control characters (byte 6 is '\n'); a key read from a file often ends in a newline`},
		{map[string]string{"TANDEM_B_NAME": "b\x00"}, `invalid TANDEM_B_NAME: must be printable UTF-8, got "b\x00"`},
		{map[string]string{"TANDEM_SAMPLE_KEY_HEADER": "X Conv"}, `invalid TANDEM_SAMPLE_KEY_HEADER: must be an HTTP header name, got "X Conv"`},
		{map[string]string{"TANDEM_BODY_READ_TIMEOUT": "2h"}, "invalid TANDEM_BODY_READ_TIMEOUT: must be between 1s and 1h0m0s, got 2h0m0s"},
		{map[string]string{"TANDEM_CLASSIFIER_REDIS_URL": "http://u:hunter2@redis:6379"}, "invalid TANDEM_CLASSIFIER_REDIS_URL: must be redis://[user:password@]host:port[/db] or rediss://... (the value is not shown: it may hold a password)"},
		{map[string]string{"TANDEM_CLASSIFIER_REDIS_URL": "redis://:hunter2@"}, "invalid TANDEM_CLASSIFIER_REDIS_URL: must be redis://[user:password@]host:port[/db] or rediss://... (the value is not shown: it may hold a password)"},
		{map[string]string{"TANDEM_CLASSIFIER_REDIS_URL": "redis://:hunter2@redis:6379/x"}, "invalid TANDEM_CLASSIFIER_REDIS_URL: must be redis://[user:password@]host:port[/db] or rediss://... (the value is not shown: it may hold a password)"},
		{map[string]string{"TANDEM_CLASSIFIER_REDIS_URL": "redis://:hunter2@redis:6379\n"}, "invalid TANDEM_CLASSIFIER_REDIS_URL: must not contain spaces or control characters (byte 27)"},
		{map[string]string{"TANDEM_CLASSIFIER_REDIS_TIMEOUT": "0s"}, "invalid TANDEM_CLASSIFIER_REDIS_TIMEOUT: must be between 1ms and 1s, got 0s"},
		{map[string]string{"TANDEM_MAX_BUFFERED_BYTES": "1"}, "invalid TANDEM_MAX_BUFFERED_BYTES: must be between 1048576 and 68719476736, got 1"},
	} {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for k, v := range tc.env {
			env[k] = v
		}
		_, err := load(env)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v:\n got %v\nwant %s", tc.env, err, tc.want)
		}
	}
}

func TestConfigUnparsableValueNamesVariable(t *testing.T) {
	for _, name := range []string{"TANDEM_SAMPLE_RATE", "TANDEM_SHADOW_TIMEOUT", "TANDEM_SHADOW_MAX_IN_FLIGHT"} {
		_, err := load(map[string]string{"TANDEM_PRIMARY_URL": "http://p", name: "not-a-value"})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=not-a-value: error %v does not name the variable", name, err)
		}
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	c, err := load(map[string]string{"TANDEM_PRIMARY_URL": "http://p", "TANDEM_A_URL": "http://a", "TANDEM_B_URL": "http://b",
		"TANDEM_A_API_KEY": "sk-aaaa-secret", "TANDEM_B_API_KEY": "sk-bbbb-secret",
		"TANDEM_CLASSIFIER_REDIS_URL": "rediss://tandem:sk-cccc-secret@redis:6380/1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(format, c)
		if strings.Contains(out, "sk-aaaa-secret") || strings.Contains(out, "sk-bbbb-secret") || strings.Contains(out, "sk-cccc-secret") {
			t.Errorf("%s of Config prints a secret: %s", format, out)
		}
	}
	_, err = load(map[string]string{"TANDEM_PRIMARY_URL": "http://user:pa55word@p"})
	if err == nil || strings.Contains(err.Error(), "pa55word") {
		t.Errorf("error %v echoes a credential", err)
	}
}
