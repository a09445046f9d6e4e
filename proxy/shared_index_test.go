package proxy

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/internal/redistest"
	"github.com/kestrelops/tandem/proxy/record"
	"github.com/kestrelops/tandem/proxy/testupstream"
)

// trace is a day of chat traffic in miniature: conversations on a few
// shared system prompts, each growing a turn at a time, interleaved, with
// one-off prompts among them.
func trace(n int) []string {
	r := rand.New(rand.NewPCG(7, 11))
	words := strings.Fields("the a model cache token prefix engine batch queue replica answer question stream latency")
	text := func(min, spread int) string {
		var b strings.Builder
		for b.Len() < min+r.IntN(spread) {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
			fmt.Fprint(&b, r.IntN(1000))
			b.WriteByte(' ')
		}
		return b.String()
	}
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	systems := []string{text(800, 400), text(800, 400), text(300, 100)}
	convs := make([][]message, 40)
	bodies := make([]string, 0, n)
	for range n {
		var msgs []message
		if r.IntN(10) == 0 {
			msgs = []message{{"user", text(200, 600)}}
		} else {
			c := r.IntN(len(convs))
			if convs[c] == nil || r.IntN(6) == 0 {
				convs[c] = []message{{"system", systems[r.IntN(len(systems))]}}
			} else {
				convs[c] = append(convs[c], message{"assistant", text(50, 300)})
			}
			convs[c] = append(convs[c], message{"user", text(20, 200)})
			msgs = convs[c]
		}
		b, _ := json.Marshal(struct {
			Model    string    `json:"model"`
			Stream   bool      `json:"stream"`
			Messages []message `json:"messages"`
		}{"m", true, msgs})
		bodies = append(bodies, string(b))
	}
	return bodies
}

// classSink keeps the class of the last production record.
type classSink struct {
	mu   sync.Mutex
	last string
}

func (s *classSink) add(rec record.Record) {
	if rec.Config == exporter.ConfigProduction {
		s.mu.Lock()
		s.last = rec.Class
		s.mu.Unlock()
	}
}

func (s *classSink) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.last
	s.last = ""
	return c
}

type replicas struct {
	rigs  []*rig
	sinks []*classSink
	next  int
}

// newReplicas starts n tandem replicas in front of production only, sharing
// the prefix index at redisURL ("" for none).
func newReplicas(t *testing.T, n int, redisURL string) *replicas {
	t.Helper()
	rs := &replicas{}
	for range n {
		// The longest Redis timeout: a loaded 2-core machine under -race
		// can take longer than the default 50 ms to answer on loopback,
		// and a timed-out call is a fallback.
		r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{}, map[string]string{
			"TANDEM_A_URL": "", "TANDEM_B_URL": "", "TANDEM_CLASSIFIER_REDIS_URL": redisURL,
			"TANDEM_CLASSIFIER_REDIS_TIMEOUT": "1s"})
		sink := &classSink{}
		r.server.observeHook = sink.add
		rs.rigs = append(rs.rigs, r)
		rs.sinks = append(rs.sinks, sink)
	}
	return rs
}

// send posts body to the next replica, round-robin, checks that production's
// answer came through unchanged, and returns the request's class.
func (rs *replicas) send(t *testing.T, body string) string {
	t.Helper()
	i := rs.next % len(rs.rigs)
	rs.next++
	resp, got := post(t, rs.rigs[i].front.URL, body, nil)
	if resp.StatusCode != 200 || string(got) != testupstream.StreamBody(3) {
		t.Fatalf("replica %d: production answered %d %.80q", i, resp.StatusCode, got)
	}
	rs.rigs[i].idle()
	return rs.sinks[i].take()
}

func (rs *replicas) fallbacks(t *testing.T) float64 {
	var n float64
	for _, r := range rs.rigs {
		n += r.value(t, exporter.MetricClassifierFallback, nil)
	}
	return n
}

func agreement(a, b []string) float64 {
	same := 0
	for i := range a {
		if a[i] == b[i] {
			same++
		}
	}
	return float64(same) / float64(len(a))
}

// TestReplicasShareLabelsThroughRedis feeds one trace round-robin to three
// replicas: with a shared index their labels are those of a single replica.
func TestReplicasShareLabelsThroughRedis(t *testing.T) {
	srv := redistest.Start(t)
	bodies := trace(600)
	label := func(rs *replicas) []string {
		labels := make([]string, len(bodies))
		for i, b := range bodies {
			labels[i] = rs.send(t, b)
		}
		return labels
	}
	single := label(newReplicas(t, 1, ""))
	shared := newReplicas(t, 3, srv.URL())
	withRedis := label(shared)
	alone := label(newReplicas(t, 3, ""))

	repeated := 0
	for _, c := range single {
		if c == exporter.ClassRepeatedPrefix {
			repeated++
		}
	}
	t.Logf("single replica: %d of %d requests repeated_prefix; three replicas agree with it on %.1f%% with Redis, %.1f%% without",
		repeated, len(bodies), 100*agreement(single, withRedis), 100*agreement(single, alone))
	if a := agreement(single, withRedis); a < 0.99 {
		t.Errorf("three replicas sharing Redis agree with one replica on %.1f%% of requests, want at least 99%%", 100*a)
	}
	if repeated < len(bodies)/2 {
		t.Errorf("the trace has %d repeated prefixes of %d requests: too few to test sharing", repeated, len(bodies))
	}
	if n := shared.fallbacks(t); n != 0 {
		t.Errorf("%v fallbacks with Redis up", n)
	}
}

// TestReplicasSurviveRedisDying kills Redis mid-trace: production is
// unaffected, the fallback is counted and logged once per replica, and the
// labels are shared again once Redis is back.
func TestReplicasSurviveRedisDying(t *testing.T) {
	defer func(d time.Duration) { redisRetryAfter = d }(redisRetryAfter)
	redisRetryAfter = 200 * time.Millisecond
	srv := redistest.Start(t)
	rs := newReplicas(t, 3, srv.URL())
	bodies := trace(300)
	for _, b := range bodies[:100] {
		rs.send(t, b)
	}
	srv.Stop()
	start := time.Now()
	for _, b := range bodies[100:200] {
		rs.send(t, b) // fails the test unless production answered
	}
	took := time.Since(start)
	if n := rs.fallbacks(t); n < 90 {
		t.Errorf("%v fallbacks counted for 100 requests with Redis dead", n)
	}
	for i, r := range rs.rigs {
		if n := strings.Count(r.logs.String(), "classifier Redis failed"); n != 1 {
			t.Errorf("replica %d logged the outage %d times, want once", i, n)
		}
	}
	t.Logf("100 requests with Redis dead took %s", took)

	srv.Restart()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		turn1 := fmt.Sprintf(`{"model":"m","stream":true,"messages":[{"role":"system","content":%q},{"role":"user","content":"hi"}]}`,
			strings.Repeat(fmt.Sprintf("back %d ", i), 100))
		turn2 := strings.Replace(turn1, `"content":"hi"}]`, `"content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"more"}]`, 1)
		before := rs.fallbacks(t)
		rs.next = 0
		rs.send(t, turn1)
		if rs.send(t, turn2) == exporter.ClassRepeatedPrefix && rs.fallbacks(t) == before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("labels not shared 10s after Redis came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i, r := range rs.rigs[:2] {
		if !strings.Contains(r.logs.String(), "classifier Redis is back") {
			t.Errorf("replica %d did not log Redis's return", i)
		}
	}
}
