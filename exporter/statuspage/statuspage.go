// Package statuspage is tandem's live status page: per workload class and
// for the mix, what production, A and B did, read from the metrics tandem
// exports. It serves HTML rendered from an embedded template (the TTFT
// charts included), or JSON.
package statuspage

import (
	"cmp"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/nativehist"
)

// Options configure a Page. Zero fields take their defaults.
type Options struct {
	// Interval is how often the sampler snapshots the counters rates are
	// computed from. Default 5s.
	Interval time.Duration
	// Window is how far back rates look. Default 1m.
	Window time.Duration
	// Refresh is how often the browser reloads the page. Default 5s.
	Refresh time.Duration
	// Now is the clock snapshots and views are stamped with; the sampler's
	// ticker runs on real (or synctest) time. Default time.Now.
	Now func() time.Time
}

// Page is the live status page: per workload class and for the mix,
// completed requests, TTFT quantiles, output rates and pair results of
// production, A and B, read from the metrics in a Gatherer. Quantiles are
// computed from the native histograms since start, as histogram_quantile
// would; the mix's from the classes' histograms merged, never from their
// quantiles. Rates are computed like rate() between the oldest and newest
// snapshot of the counters within Window. A sampler takes the snapshots,
// one when the page is created and one per Interval after, whether or not
// anyone views the page; it keeps at most Window/Interval+1 of them.
//
// It serves HTML, or JSON with ?format=json. It is safe for concurrent use.
type Page struct {
	g    prometheus.Gatherer
	opts Options

	mu        sync.Mutex
	snapshots []snapshot // oldest first, at most keep
	keep      int
}

// New returns the status page over g, takes the first snapshot and starts
// the sampler, which takes one per Interval until ctx is done.
func New(ctx context.Context, g prometheus.Gatherer, opts Options) *Page {
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.Window <= 0 {
		opts.Window = time.Minute
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := &Page{g: g, opts: opts, keep: int(opts.Window/opts.Interval) + 1}
	p.sample()
	go p.run(ctx)
	return p
}

// run samples every Interval until ctx is done.
func (p *Page) run(ctx context.Context) {
	t := time.NewTicker(p.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.sample()
		}
	}
}

// sample snapshots the counters, drops snapshots older than Window and
// keeps at most keep. A failed Gather takes no snapshot; the page reports
// the error when viewed.
func (p *Page) sample() {
	g, err := exporter.Gather(p.g)
	if err != nil {
		return
	}
	c := readMetrics(g).counters
	now := p.opts.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.snapshots = append(p.snapshots, snapshot{t: now, counters: c})
	p.snapshots = slices.DeleteFunc(p.snapshots, func(s snapshot) bool { return now.Sub(s.t) > p.opts.Window })
	if n := len(p.snapshots); n > p.keep {
		p.snapshots = slices.Delete(p.snapshots, 0, n-p.keep)
	}
}

// Status is what the page shows. Values that cannot be computed yet are
// null in JSON: quantiles without observations, rates while warming up.
type Status struct {
	Time          time.Time `json:"time"`
	WindowSeconds float64   `json:"window_seconds"`
	// WarmingUp is true until two snapshots lie within the window.
	WarmingUp bool          `json:"warming_up"`
	Configs   []ConfigInfo  `json:"configs"`
	Classes   []ClassStatus `json:"classes"`
	// Mixed covers all classes; its quantiles come from the classes'
	// histograms merged bucket by bucket.
	Mixed         ClassStatus        `json:"mixed"`
	MirrorSkipped map[string]float64 `json:"mirror_skipped"`
	Records       RecordStatus       `json:"records"`
}

// RecordStatus is the health of the record file.
type RecordStatus struct {
	WriteErrors float64 `json:"write_errors"`
	// RecentWriteErrors is the increase of WriteErrors within the window.
	RecentWriteErrors *float64 `json:"recent_write_errors"`
	// Dropped counts records lost since start, by reason.
	Dropped map[string]float64 `json:"dropped"`
}

// ConfigInfo names one config, from tandem_config_info.
type ConfigInfo struct {
	Config string `json:"config"`
	Name   string `json:"name"`
	Model  string `json:"model"`
}

// ClassStatus is one workload class, or the mix of all of them.
type ClassStatus struct {
	Class   string         `json:"class"`
	Configs []ConfigStatus `json:"configs"`
	// Pairs counts mirrored requests by result; empty without mirroring.
	Pairs                map[string]float64 `json:"pairs,omitempty"`
	OutputTokensMismatch float64            `json:"output_tokens_mismatch"`
	// TTFTDifferenceP50Seconds is the median of the paired TTFT(B) - TTFT(A).
	TTFTDifferenceP50Seconds *float64 `json:"ttft_difference_p50_seconds"`

	ttft map[string]*nativehist.Histogram
}

// ConfigStatus is one config within a class.
type ConfigStatus struct {
	Config string `json:"config"`
	// Completed and Failed count requests since start; Failed is every
	// outcome other than completed.
	Completed             float64  `json:"completed"`
	Failed                float64  `json:"failed"`
	TTFTCount             float64  `json:"ttft_count"`
	TTFTP50Seconds        *float64 `json:"ttft_p50_seconds"`
	TTFTP95Seconds        *float64 `json:"ttft_p95_seconds"`
	TTFTP99Seconds        *float64 `json:"ttft_p99_seconds"`
	RequestsPerSecond     *float64 `json:"requests_per_second"`
	OutputTokensPerSecond *float64 `json:"output_tokens_per_second"`
}

// Config returns the status of config, and false when the class has none.
func (c ClassStatus) Config(config string) (ConfigStatus, bool) {
	i := slices.IndexFunc(c.Configs, func(s ConfigStatus) bool { return s.Config == config })
	if i < 0 {
		return ConfigStatus{}, false
	}
	return c.Configs[i], true
}

type seriesKey struct{ config, class string }

// counters are the counter values rates are computed from.
type counters struct {
	completed         map[seriesKey]float64
	outputTokens      map[seriesKey]float64
	recordWriteErrors float64
}

type snapshot struct {
	t time.Time
	counters
}

// ServeHTTP serves the page as HTML, or as JSON with ?format=json.
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st, err := p.Status()
	if err != nil {
		http.Error(w, "gathering metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(st)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	page.Execute(w, pageData{Status: st, RefreshSeconds: int(math.Ceil(p.opts.Refresh.Seconds()))})
}

// Status gathers the metrics and computes what the page shows, with rates
// from the sampler's snapshots.
func (p *Page) Status() (Status, error) {
	g, err := exporter.Gather(p.g)
	if err != nil {
		return Status{}, err
	}
	now := p.opts.Now()
	m := readMetrics(g)
	from, to, ok := p.window(now)

	st := Status{
		Time:          now,
		WindowSeconds: p.opts.Window.Seconds(),
		WarmingUp:     !ok,
		Configs:       m.infos,
		MirrorSkipped: m.skipped,
		Records:       RecordStatus{WriteErrors: m.recordWriteErrors, Dropped: m.recordsDropped},
	}
	if ok {
		st.Records.RecentWriteErrors = ptr(increase(from.recordWriteErrors, to.recordWriteErrors))
	}
	for _, class := range m.classes {
		cs := m.classStatus(class, []string{class})
		if ok {
			cs.setRates([]string{class}, from, to)
		}
		st.Classes = append(st.Classes, cs)
	}
	st.Mixed = m.classStatus("mixed", m.classes)
	if ok {
		st.Mixed.setRates(m.classes, from, to)
	}
	return st, nil
}

// window returns the oldest and newest snapshot within Window of now; ok
// is false while there are fewer than two.
func (p *Page) window(now time.Time) (from, to snapshot, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.IndexFunc(p.snapshots, func(s snapshot) bool { return now.Sub(s.t) <= p.opts.Window })
	if i < 0 || len(p.snapshots)-i < 2 {
		return snapshot{}, snapshot{}, false
	}
	return p.snapshots[i], p.snapshots[len(p.snapshots)-1], true
}

// metrics is what the page reads from one Gather.
type metrics struct {
	counters
	configs  []string
	classes  []string
	infos    []ConfigInfo
	failed   map[seriesKey]float64
	ttft     map[seriesKey]*nativehist.Histogram
	pairs    map[string]map[string]float64
	mismatch map[string]float64
	ttftDiff map[string]*nativehist.Histogram
	skipped  map[string]float64

	recordsDropped map[string]float64
}

func readMetrics(g exporter.Gathered) *metrics {
	m := &metrics{
		counters: counters{completed: map[seriesKey]float64{}, outputTokens: map[seriesKey]float64{}},
		failed:   map[seriesKey]float64{},
		ttft:     map[seriesKey]*nativehist.Histogram{},
		pairs:    map[string]map[string]float64{},
		mismatch: map[string]float64{},
		ttftDiff: map[string]*nativehist.Histogram{},
		skipped:  map[string]float64{},

		recordsDropped: map[string]float64{},
	}
	configs, classes := map[string]bool{}, map[string]bool{}
	key := func(s exporter.Series) seriesKey {
		k := seriesKey{config: s.Label(exporter.LabelConfig), class: s.Label(exporter.LabelClass)}
		configs[k.config], classes[k.class] = true, true
		return k
	}
	for s := range g.Series(exporter.MetricRequests) {
		if s.Label(exporter.LabelOutcome) == exporter.OutcomeCompleted {
			m.completed[key(s)] += s.Value()
		} else {
			m.failed[key(s)] += s.Value()
		}
	}
	for s := range g.Series(exporter.MetricOutputTokens) {
		m.outputTokens[key(s)] += s.Value()
	}
	for s := range g.Series(exporter.MetricTimeToFirstToken) {
		k := key(s)
		if h, err := s.Histogram(); err == nil {
			m.ttft[k] = h
		}
	}
	for s := range g.Series(exporter.MetricPairs) {
		class := s.Label(exporter.LabelClass)
		if m.pairs[class] == nil {
			m.pairs[class] = map[string]float64{}
		}
		m.pairs[class][s.Label(exporter.LabelResult)] += s.Value()
	}
	for s := range g.Series(exporter.MetricPairOutputTokensMismatch) {
		m.mismatch[s.Label(exporter.LabelClass)] += s.Value()
	}
	for s := range g.Series(exporter.MetricTTFTDifference) {
		if h, err := s.Histogram(); err == nil {
			m.ttftDiff[s.Label(exporter.LabelClass)] = h
		}
	}
	for s := range g.Series(exporter.MetricMirrorSkipped) {
		m.skipped[s.Label(exporter.LabelReason)] += s.Value()
	}
	for s := range g.Series(exporter.MetricRecordWriteErrors) {
		m.recordWriteErrors += s.Value()
	}
	for s := range g.Series(exporter.MetricRecordsDropped) {
		m.recordsDropped[s.Label(exporter.LabelReason)] += s.Value()
	}
	for s := range g.Series(exporter.MetricConfigInfo) {
		m.infos = append(m.infos, ConfigInfo{Config: s.Label(exporter.LabelConfig), Name: s.Label("name"), Model: s.Label("model")})
	}
	m.configs = ordered(configs, exporter.Configs)
	m.classes = ordered(classes, exporter.BuiltinClasses)
	slices.SortFunc(m.infos, func(a, b ConfigInfo) int {
		return cmp.Compare(rank(a.Config, exporter.Configs), rank(b.Config, exporter.Configs))
	})
	return m
}

// ordered lists the keys of set: those in known first, in its order, then
// the others sorted.
func ordered(set map[string]bool, known []string) []string {
	var out []string
	for v := range set {
		if v != "" {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(rank(a, known), rank(b, known)), cmp.Compare(a, b))
	})
	return out
}

func rank(v string, known []string) int {
	if i := slices.Index(known, v); i >= 0 {
		return i
	}
	return len(known)
}

// classStatus sums the series of classes under the name class; TTFT
// histograms are merged before quantiles are read.
func (m *metrics) classStatus(class string, classes []string) ClassStatus {
	cs := ClassStatus{Class: class, ttft: map[string]*nativehist.Histogram{}}
	for _, config := range m.configs {
		s := ConfigStatus{Config: config}
		var hs []*nativehist.Histogram
		for _, c := range classes {
			k := seriesKey{config, c}
			s.Completed += m.completed[k]
			s.Failed += m.failed[k]
			hs = append(hs, m.ttft[k])
		}
		if h := nativehist.Sum(hs...); h != nil {
			cs.ttft[config] = h
			s.TTFTCount = h.Count()
			s.TTFTP50Seconds = known(h.Quantile(0.5))
			s.TTFTP95Seconds = known(h.Quantile(0.95))
			s.TTFTP99Seconds = known(h.Quantile(0.99))
		}
		cs.Configs = append(cs.Configs, s)
	}
	var diffs []*nativehist.Histogram
	for _, c := range classes {
		for result, v := range m.pairs[c] {
			if cs.Pairs == nil {
				cs.Pairs = map[string]float64{}
			}
			cs.Pairs[result] += v
		}
		cs.OutputTokensMismatch += m.mismatch[c]
		diffs = append(diffs, m.ttftDiff[c])
	}
	if h := nativehist.Sum(diffs...); h != nil {
		cs.TTFTDifferenceP50Seconds = known(h.Quantile(0.5))
	}
	return cs
}

// setRates sets per-second rates of the classes' counters between two
// snapshots.
func (cs *ClassStatus) setRates(classes []string, from, to snapshot) {
	secs := to.t.Sub(from.t).Seconds()
	for i := range cs.Configs {
		s := &cs.Configs[i]
		var completed, tokens float64
		for _, c := range classes {
			k := seriesKey{s.Config, c}
			completed += increase(from.completed[k], to.completed[k])
			tokens += increase(from.outputTokens[k], to.outputTokens[k])
		}
		s.RequestsPerSecond = known(completed / secs)
		s.OutputTokensPerSecond = known(tokens / secs)
	}
}

// increase is a counter's increase, taking a drop as a reset to zero.
func increase(from, to float64) float64 {
	if to < from {
		return to
	}
	return to - from
}

func known(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
