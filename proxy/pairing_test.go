package proxy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/record"
	"github.com/kestrelops/tandem/proxy/testupstream"
)

// TestAAPairsFavourNeitherArm mirrors to one engine that serves one request
// at a time, so whichever arm's request arrives first answers first. Over
// many pairs neither arm may arrive first systematically: the share of pairs
// B wins must be near a half (a dispatch-order bias puts it near 0 or 1).
func TestAAPairsFavourNeitherArm(t *testing.T) {
	var mu sync.Mutex
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		time.Sleep(time.Millisecond)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, testupstream.StreamBody(1))
	}))
	defer engine.Close()
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{}, nil)
	records := newRecordSink()
	r.server.records = nil
	s := r.server
	for _, arm := range s.arms {
		arm.url = mustParse(t, engine.URL)
	}
	s.observeHook = records.add

	const pairs = 300
	for range pairs {
		post(t, r.front.URL, chatBody, nil)
		r.idle()
	}
	bWins, both := 0, 0
	for _, p := range records.pairs() {
		if len(p) != 2 {
			continue
		}
		both++
		if p[exporter.ConfigB].TTFTSeconds < p[exporter.ConfigA].TTFTSeconds {
			bWins++
		}
	}
	if both != pairs {
		t.Fatalf("%d complete pairs, want %d", both, pairs)
	}
	// Under no bias B wins Binomial(300, 1/2) pairs: outside [105, 195]
	// is more than 5 standard deviations away.
	if share := float64(bWins) / pairs; bWins < 105 || bWins > 195 {
		t.Errorf("B answered first in %.0f%% of %d A/A pairs, want about 50%%", 100*share, pairs)
	}
}

// TestEachArmIsRecordedWhenItFinishes: an arm that falls behind holds its own
// in-flight slots and gauge; the other arm's measurements are recorded as
// soon as it finishes.
func TestEachArmIsRecordedWhenItFinishes(t *testing.T) {
	release := make(chan struct{})
	r := newRig(t, testupstream.Script{}, testupstream.Script{}, testupstream.Script{Release: release}, nil)
	const n = 5
	for range n {
		post(t, r.front.URL, chatBody, nil)
	}
	r.waitValue(t, exporter.MetricRequests, map[string]string{"config": "A", "class": "fresh", "outcome": "completed"}, n)
	// An arm is recorded just before it gives back its slot: wait for its gauge too.
	r.waitValue(t, exporter.MetricShadowInFlight, map[string]string{"config": "A"}, 0)
	if b := r.value(t, exporter.MetricShadowInFlight, map[string]string{"config": "B"}); b != n {
		t.Errorf("B in flight %v, want %d", b, n)
	}
	if got := r.total(t, exporter.MetricPairs, nil); got != 0 {
		t.Errorf("%v pairs recorded before B finished", got)
	}
	close(release)
	r.idle()
	if got := r.value(t, exporter.MetricPairs, map[string]string{"class": "fresh", "result": exporter.PairBothCompleted}); got != n {
		t.Errorf("both_completed = %v, want %d", got, n)
	}
	if b := r.value(t, exporter.MetricShadowInFlight, map[string]string{"config": "B"}); b != 0 {
		t.Errorf("B in flight %v after it finished", b)
	}
}

// recordSink collects records by pair.
type recordSink struct {
	mu     sync.Mutex
	byPair map[string]map[string]record.Record
}

func newRecordSink() *recordSink { return &recordSink{byPair: map[string]map[string]record.Record{}} }

func (s *recordSink) add(rec record.Record) {
	if rec.PairID == "" || !strings.Contains("AB", rec.Config) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byPair[rec.PairID] == nil {
		s.byPair[rec.PairID] = map[string]record.Record{}
	}
	s.byPair[rec.PairID][rec.Config] = rec
}

func (s *recordSink) pairs() []map[string]record.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]record.Record
	for _, p := range s.byPair {
		out = append(out, p)
	}
	return out
}
