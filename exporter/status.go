package exporter

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kestrelops/tandem/exporter/nativehist"
)

// StatusOptions configure a StatusPage. Zero fields take their defaults.
type StatusOptions struct {
	// Interval is the least time between two snapshots of the counters
	// rates are computed from. Default 5s.
	Interval time.Duration
	// Window is how far back rates look. Default 1m.
	Window time.Duration
	// Refresh is how often the browser reloads the page. Default 5s.
	Refresh time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// StatusPage is the live status page: per workload class and for the mix,
// completed requests, TTFT quantiles, output rates and pair results of
// production, A and B, read from the metrics in a Gatherer. Quantiles are
// computed from the native histograms since start, as histogram_quantile
// would; the mix's from the classes' histograms merged, never from their
// quantiles. Rates are computed like rate() over snapshots of the counters
// taken when the page is served (at most one per Interval, kept for Window)
// and when the page is created.
//
// It serves HTML, or JSON with ?format=json. It is safe for concurrent use.
type StatusPage struct {
	g    prometheus.Gatherer
	opts StatusOptions

	mu        sync.Mutex
	snapshots []snapshot
}

// NewStatusPage returns the status page over g and takes the first snapshot.
func NewStatusPage(g prometheus.Gatherer, opts StatusOptions) *StatusPage {
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
	p := &StatusPage{g: g, opts: opts}
	p.Status()
	return p
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
func (p *StatusPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	statusTemplate.Execute(w, pageData{Status: st, RefreshSeconds: int(math.Ceil(p.opts.Refresh.Seconds()))})
}

// Status gathers the metrics, takes a snapshot when Interval has passed
// since the last one, and computes what the page shows.
func (p *StatusPage) Status() (Status, error) {
	g, err := Gather(p.g)
	if err != nil {
		return Status{}, err
	}
	now := p.opts.Now()
	m := readMetrics(g)
	from, to, ok := p.snapshot(now, m.counters)

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

// snapshot records c when Interval has passed since the last snapshot,
// drops snapshots older than Window and returns the oldest and newest kept;
// ok is false while fewer than two are kept.
func (p *StatusPage) snapshot(now time.Time, c counters) (from, to snapshot, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.snapshots); n == 0 || now.Sub(p.snapshots[n-1].t) >= p.opts.Interval {
		p.snapshots = append(p.snapshots, snapshot{t: now, counters: c})
	}
	p.snapshots = slices.DeleteFunc(p.snapshots, func(s snapshot) bool { return now.Sub(s.t) > p.opts.Window })
	if len(p.snapshots) < 2 {
		return snapshot{}, snapshot{}, false
	}
	return p.snapshots[0], p.snapshots[len(p.snapshots)-1], true
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

func readMetrics(g Gathered) *metrics {
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
	key := func(s Series) seriesKey {
		k := seriesKey{config: s.Label(LabelConfig), class: s.Label(LabelClass)}
		configs[k.config], classes[k.class] = true, true
		return k
	}
	for s := range g.Series(MetricRequests) {
		if s.Label(LabelOutcome) == OutcomeCompleted {
			m.completed[key(s)] += s.Value()
		} else {
			m.failed[key(s)] += s.Value()
		}
	}
	for s := range g.Series(MetricOutputTokens) {
		m.outputTokens[key(s)] += s.Value()
	}
	for s := range g.Series(MetricTimeToFirstToken) {
		k := key(s)
		if h, err := s.Histogram(); err == nil {
			m.ttft[k] = h
		}
	}
	for s := range g.Series(MetricPairs) {
		class := s.Label(LabelClass)
		if m.pairs[class] == nil {
			m.pairs[class] = map[string]float64{}
		}
		m.pairs[class][s.Label(LabelResult)] += s.Value()
	}
	for s := range g.Series(MetricPairOutputTokensMismatch) {
		m.mismatch[s.Label(LabelClass)] += s.Value()
	}
	for s := range g.Series(MetricTTFTDifference) {
		if h, err := s.Histogram(); err == nil {
			m.ttftDiff[s.Label(LabelClass)] = h
		}
	}
	for s := range g.Series(MetricMirrorSkipped) {
		m.skipped[s.Label(LabelReason)] += s.Value()
	}
	for s := range g.Series(MetricRecordWriteErrors) {
		m.recordWriteErrors += s.Value()
	}
	for s := range g.Series(MetricRecordsDropped) {
		m.recordsDropped[s.Label(LabelReason)] += s.Value()
	}
	for s := range g.Series(MetricConfigInfo) {
		m.infos = append(m.infos, ConfigInfo{Config: s.Label(LabelConfig), Name: s.Label("name"), Model: s.Label("model")})
	}
	m.configs = ordered(configs, Configs)
	m.classes = ordered(classes, BuiltinClasses)
	slices.SortFunc(m.infos, func(a, b ConfigInfo) int { return cmp.Compare(rank(a.Config, Configs), rank(b.Config, Configs)) })
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

type pageData struct {
	Status
	RefreshSeconds int
}

// Compare reports whether both arms are present, for the B−A column.
func (d pageData) Compare() bool {
	return len(d.Classes) > 0 && hasConfig(d.Classes[0], ConfigA) && hasConfig(d.Classes[0], ConfigB)
}

func hasConfig(c ClassStatus, config string) bool {
	_, ok := c.Config(config)
	return ok
}

// row is one line of a class table: a metric across configs.
type row struct {
	Metric string
	Label  string
	Cells  []cell
	Diff   string
}

type cell struct {
	Config string
	Text   string
}

type rowSpec struct {
	metric, label string
	value         func(ConfigStatus) *float64
	format        func(float64) string
	diff          func(a, b float64) string
}

func ptr(f float64) *float64 { return &f }

var rowSpecs = []rowSpec{
	{"completed", "completed requests", func(s ConfigStatus) *float64 { return ptr(s.Completed) }, formatCount, diffCount},
	{"failed", "failed requests", func(s ConfigStatus) *float64 { return ptr(s.Failed) }, formatCount, diffCount},
	{"requests_per_second", "completed requests/s", func(s ConfigStatus) *float64 { return s.RequestsPerSecond }, formatRate, diffRate},
	{"ttft_p50", "TTFT p50", func(s ConfigStatus) *float64 { return s.TTFTP50Seconds }, formatSeconds, diffSeconds},
	{"ttft_p95", "TTFT p95", func(s ConfigStatus) *float64 { return s.TTFTP95Seconds }, formatSeconds, diffSeconds},
	{"ttft_p99", "TTFT p99", func(s ConfigStatus) *float64 { return s.TTFTP99Seconds }, formatSeconds, diffSeconds},
	{"output_tokens_per_second", "output tokens/s", func(s ConfigStatus) *float64 { return s.OutputTokensPerSecond }, formatRate, diffRate},
}

func (d pageData) Rows(c ClassStatus) []row {
	var rows []row
	for _, spec := range rowSpecs {
		r := row{Metric: spec.metric, Label: spec.label}
		for _, s := range c.Configs {
			r.Cells = append(r.Cells, cell{Config: s.Config, Text: d.text(spec, spec.value(s))})
		}
		a, aok := c.Config(ConfigA)
		b, bok := c.Config(ConfigB)
		if aok && bok {
			va, vb := spec.value(a), spec.value(b)
			switch {
			case va != nil && vb != nil:
				r.Diff = spec.diff(*va, *vb)
			default:
				r.Diff = d.text(spec, nil)
			}
		}
		rows = append(rows, r)
	}
	return rows
}

func (d pageData) text(spec rowSpec, v *float64) string {
	switch {
	case v != nil:
		return spec.format(*v)
	case d.WarmingUp && (spec.metric == "requests_per_second" || spec.metric == "output_tokens_per_second"):
		return "warming up"
	default:
		return "–"
	}
}

func formatCount(v float64) string { return fmt.Sprintf("%.0f", v) }
func formatRate(v float64) string  { return fmt.Sprintf("%.2f", v) }

func formatSeconds(v float64) string {
	if math.Abs(v) >= 1 {
		return fmt.Sprintf("%.3f s", v)
	}
	return fmt.Sprintf("%.1f ms", v*1000)
}

func diffCount(a, b float64) string { return fmt.Sprintf("%+.0f", b-a) }
func diffRate(a, b float64) string  { return fmt.Sprintf("%+.2f", b-a) + relative(a, b) }

func diffSeconds(a, b float64) string {
	s := formatSeconds(b - a)
	if b >= a {
		s = "+" + s
	}
	return s + relative(a, b)
}

func relative(a, b float64) string {
	if a == 0 {
		return ""
	}
	return fmt.Sprintf(" (%+.1f%%)", 100*(b-a)/a)
}

// Pairs lists pair results in schema order.
func (d pageData) Pairs(c ClassStatus) []labelled {
	var out []labelled
	for _, r := range PairResults {
		if v, ok := c.Pairs[r]; ok {
			out = append(out, labelled{r, formatCount(v)})
		}
	}
	return out
}

// Skipped lists skip reasons in schema order, then any others.
func (d pageData) Skipped() []labelled {
	set := map[string]bool{}
	for r := range d.MirrorSkipped {
		set[r] = true
	}
	var out []labelled
	for _, r := range ordered(set, SkipReasons) {
		out = append(out, labelled{r, formatCount(d.MirrorSkipped[r])})
	}
	return out
}

type labelled struct{ Name, Value string }

// RecordsAlert is the line shown when the record file lost records or could
// not be written; empty otherwise.
func (d pageData) RecordsAlert() string {
	var lost float64
	var reasons []string
	set := map[string]bool{}
	for r := range d.Records.Dropped {
		set[r] = true
	}
	for _, r := range ordered(set, RecordDropReasons) {
		if v := d.Records.Dropped[r]; v > 0 {
			lost += v
			reasons = append(reasons, r+" "+formatCount(v))
		}
	}
	if d.Records.WriteErrors == 0 && lost == 0 {
		return ""
	}
	s := "records: " + formatCount(d.Records.WriteErrors) + " write errors"
	if recent := d.Records.RecentWriteErrors; recent != nil {
		s += fmt.Sprintf(", %s in the last %v s", formatCount(*recent), d.WindowSeconds)
	} else {
		s += " since start"
	}
	if lost > 0 {
		s += fmt.Sprintf("; %s records lost (%s)", formatCount(lost), strings.Join(reasons, ", "))
	}
	return s
}

func (d pageData) Median(v *float64) string {
	if v == nil {
		return "–"
	}
	s := formatSeconds(*v)
	if *v >= 0 {
		s = "+" + s
	}
	return s
}

func (d pageData) Chart(c ClassStatus) template.HTML {
	return ttftChart(c)
}

type classArgs struct {
	D pageData
	C ClassStatus
}

var statusTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"args": func(d pageData, c ClassStatus) classArgs { return classArgs{d, c} },
}).Parse(statusHTML))

const statusHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="{{.RefreshSeconds}}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tandem status</title>
<style>
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em auto;max-width:62em;padding:0 1em;color:#1d1d1f;background:#fff}
h1{font-size:1.5em;margin:0 0 .2em}h2{font-size:1.15em;margin:1.6em 0 .4em;border-bottom:1px solid #ddd;padding-bottom:.2em}
.meta,.note{color:#666;font-size:.9em}.meta span{margin-right:1.2em}
table{border-collapse:collapse;margin:.3em 0;font-variant-numeric:tabular-nums}
th,td{padding:.25em .8em;text-align:right;border-bottom:1px solid #eee}th{font-weight:600;background:#f6f6f8}
td:first-child,th:first-child{text-align:left}
.diff{color:#444;background:#fafafa}.cfg-A{color:#1f6fb4}.cfg-B{color:#d2660a}
.pairs span{display:inline-block;margin-right:1.2em}.pairs b{font-weight:600}
.alert{color:#9b1c1c;background:#fdf2f2;border:1px solid #f3c4c4;padding:.4em .8em}
svg{display:block;margin:.5em 0}
</style>
</head>
<body>
<h1>tandem status</h1>
<p class="meta"><span>{{.Time.UTC.Format "2006-01-02 15:04:05 UTC"}}</span>
{{range .Configs}}<span class="cfg-{{.Config}}"><b>{{.Config}}</b>{{if .Name}}: {{.Name}}{{end}}{{if .Model}} ({{.Model}}){{end}}</span>{{end}}
<span>rates over the last {{.WindowSeconds}} s{{if .WarmingUp}}: warming up{{end}}</span>
<span>counts and quantiles since start</span></p>
{{with .RecordsAlert}}<p class="alert" id="records">{{.}}</p>{{end}}
{{range .Classes}}{{template "class" (args $ .)}}{{end}}
{{if .Classes}}{{template "class" (args $ .Mixed)}}
<p class="note">The mixed row is computed from the classes' TTFT histograms merged bucket by bucket, as histogram_quantile(q, sum(…)) would; it is never an average of the class quantiles.</p>{{end}}
{{with .Skipped}}<h2>Mirrors skipped</h2>
<table id="skipped"><tr><th>reason</th><th>requests</th></tr>
{{range .}}<tr data-reason="{{.Name}}"><td>{{.Name}}</td><td>{{.Value}}</td></tr>{{end}}
</table>{{end}}
</body>
</html>
{{define "class"}}{{$d := .D}}{{$c := .C}}
<section data-class="{{$c.Class}}">
<h2>{{if eq $c.Class "mixed"}}mixed (merged distribution){{else}}class {{$c.Class}}{{end}}</h2>
<table>
<tr><th>metric</th>{{range $c.Configs}}<th class="cfg-{{.Config}}">{{.Config}}</th>{{end}}{{if $d.Compare}}<th class="diff">B−A</th>{{end}}</tr>
{{range $d.Rows $c}}<tr data-metric="{{.Metric}}"><td>{{.Label}}</td>{{range .Cells}}<td data-config="{{.Config}}">{{.Text}}</td>{{end}}{{if $d.Compare}}<td class="diff" data-config="B-A">{{.Diff}}</td>{{end}}</tr>
{{end}}</table>
{{with $d.Pairs $c}}<p class="pairs" data-pairs="{{$c.Class}}">pairs: {{range .}}<span data-result="{{.Name}}">{{.Name}} <b>{{.Value}}</b></span>{{end}}<span>token count mismatches <b>{{printf "%.0f" $c.OutputTokensMismatch}}</b></span><span>paired TTFT B−A p50 <b>{{$d.Median $c.TTFTDifferenceP50Seconds}}</b></span></p>{{end}}
{{$d.Chart $c}}
</section>{{end}}`

// Chart geometry, in SVG user units.
const (
	chartWidth  = 640
	chartHeight = 200
	chartLeft   = 44
	chartRight  = 28
	chartTop    = 26
	chartBottom = 30
	// chartSchema is the resolution the chart shows: 4 buckets per doubling.
	chartSchema = 2
)

var chartColors = map[string]string{ConfigProduction: "#8a8a8a", ConfigA: "#1f6fb4", ConfigB: "#d2660a"}

type chartSeries struct {
	config string
	bars   []bar
	p95    float64
}

// bar is one bucket of a chart series, in milliseconds, with its share of
// all requests of the config.
type bar struct {
	lower, upper, share float64
}

// ttftChart draws the TTFT distributions of A and B (production when there
// are no arms) as an inline SVG: share of requests per bucket over a
// logarithmic time axis in milliseconds, with each config's p95 marked.
func ttftChart(c ClassStatus) template.HTML {
	configs := []string{ConfigA, ConfigB}
	if !hasConfig(c, ConfigA) && !hasConfig(c, ConfigB) {
		configs = []string{ConfigProduction}
	}
	var series []chartSeries
	lo, hi, top := math.Inf(1), 0.0, 0.0
	for _, config := range configs {
		h := c.ttft[config]
		if h.Count() == 0 {
			continue
		}
		s := chartSeries{config: config, p95: h.Quantile(0.95) * 1000}
		for b := range h.Reduce(chartSchema).Buckets() {
			if b.Lower <= 0 {
				continue
			}
			r := bar{lower: b.Lower * 1000, upper: b.Upper * 1000, share: b.Count / h.Count()}
			s.bars = append(s.bars, r)
			lo, hi, top = min(lo, r.lower), max(hi, r.upper), max(top, r.share)
		}
		if len(s.bars) > 0 {
			series = append(series, s)
		}
	}
	if len(series) == 0 {
		return `<p class="note">TTFT distribution: no completed requests yet.</p>`
	}
	xlo, xhi := niceBelow(lo), niceAbove(hi)
	top *= 1.1
	plotW, plotH := float64(chartWidth-chartLeft-chartRight), float64(chartHeight-chartTop-chartBottom)
	base := float64(chartTop) + plotH
	x := func(ms float64) float64 {
		return chartLeft + plotW*(math.Log10(ms)-math.Log10(xlo))/(math.Log10(xhi)-math.Log10(xlo))
	}
	y := func(share float64) float64 { return base - plotH*share/top }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="ttft-chart" data-chart="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="TTFT distribution, %s" xmlns="http://www.w3.org/2000/svg" font-size="11" font-family="system-ui,sans-serif">`,
		template.HTMLEscapeString(c.Class), chartWidth, chartHeight, chartWidth, chartHeight, template.HTMLEscapeString(c.Class))
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="#fcfcfd" stroke="#ddd"/>`, chartLeft, chartTop, plotW, plotH)
	for decade := math.Pow(10, math.Floor(math.Log10(xlo))); decade < xhi*1.001; decade *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := decade * m
			if v < xlo*0.999 || v > xhi*1.001 {
				continue
			}
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="%s"/>`, x(v), x(v), chartTop, base, map[bool]string{true: "#ccc", false: "#eee"}[m == 1])
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`, x(v), base+14, formatMillis(v))
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="14" text-anchor="end" fill="#555">TTFT, log scale</text>`, chartWidth-chartRight)
	fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%.0f%%</text>`, chartLeft-4, y(top/1.1)+4, 100*top/1.1)
	fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">0</text>`, chartLeft-4, base+4)
	fmt.Fprintf(&b, `<text transform="translate(12 %.1f) rotate(-90)" text-anchor="middle" fill="#555">share of requests</text>`, float64(chartTop)+plotH/2)
	for i, s := range series {
		color := chartColors[s.config]
		var path strings.Builder
		prevUpper := math.NaN()
		for _, r := range s.bars {
			if r.lower != prevUpper {
				if path.Len() > 0 {
					fmt.Fprintf(&path, "L%.1f %.1fZ", x(prevUpper), base)
				}
				fmt.Fprintf(&path, "M%.1f %.1f", x(r.lower), base)
			}
			fmt.Fprintf(&path, "L%.1f %.1fL%.1f %.1f", x(r.lower), y(r.share), x(r.upper), y(r.share))
			prevUpper = r.upper
		}
		fmt.Fprintf(&path, "L%.1f %.1fZ", x(prevUpper), base)
		fmt.Fprintf(&b, `<path data-config="%s" d="%s" fill="%s" fill-opacity="0.22" stroke="%s" stroke-width="1.5"/>`, s.config, path.String(), color, color)
		if s.p95 > 0 {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="4 3"/>`, x(s.p95), x(s.p95), chartTop, base, color)
		}
		lx, ly := float64(chartLeft+150*i), 14.0
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s"/><text x="%.1f" y="%.1f" fill="#333">%s  p95 %s</text>`,
			lx, ly-9, color, lx+14, ly, s.config, formatMillis(s.p95))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

var niceSteps = []float64{1, 2, 5, 10}

// niceBelow is the largest 1, 2 or 5 times a power of ten at most v.
func niceBelow(v float64) float64 {
	decade := math.Pow(10, math.Floor(math.Log10(v)))
	for i := len(niceSteps) - 1; i > 0; i-- {
		if decade*niceSteps[i] <= v {
			return decade * niceSteps[i]
		}
	}
	return decade
}

// niceAbove is the smallest 1, 2 or 5 times a power of ten at least v.
func niceAbove(v float64) float64 {
	decade := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range niceSteps {
		if decade*m >= v {
			return decade * m
		}
	}
	return decade * 10
}

func formatMillis(ms float64) string {
	if ms >= 1000 {
		return strconv.FormatFloat(ms/1000, 'g', 3, 64) + " s"
	}
	return strconv.FormatFloat(ms, 'g', 3, 64) + " ms"
}
