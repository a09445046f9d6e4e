package bench

import (
	"fmt"
	"io"
	"strings"
)

// Targets tandem is held to; printed with the results, never asserted.
const (
	targetThroughput  = 0.95     // relay throughput, as a share of nginx's
	targetP99Mirror   = 0.10     // production p99 TTFT with sampling 1 over sampling 0, at most 1+this
	targetStreamBytes = 32 << 10 // memory per in-flight stream
	targetReference   = 1.05     // tandem s=0 over the bare Go proxy: CPU, added TTFT, 1/throughput
)

// report is the results table and what is needed to read it.
type report struct {
	columns []string
	nginx   bool
	rows    []row
	notes   []string
	command string
}

// row is one metric: a cell per variant, tandem s=0 against nginx and
// against the bare Go proxy, the targets and whether each was met.
type row struct {
	metric  string
	cells   map[string]string
	vsNginx string
	vsRef   string
	target  string
	result  string
}

// check adds one more target and its result to the row.
func (r *row) check(target, result string) {
	if r.target != "" {
		r.target += "; "
		r.result += "; "
	}
	r.target += target
	r.result += result
}

// Row labels.
func ttftLabel(q string, conc int) string { return fmt.Sprintf("TTFT %s, %s", q, streamsLabel(conc)) }

func streamsLabel(n int) string {
	if n == 1 {
		return "1 stream"
	}
	return fmt.Sprintf("%d streams", n)
}

const (
	labelThroughput = "Relay throughput, 64 streams"
	labelCPU        = "CPU per request"
	labelFailed     = "Failed requests"
)

func memoryLabel(n int) string     { return fmt.Sprintf("Memory per in-flight stream, %d streams", n) }
func failedHeldLabel(n int) string { return fmt.Sprintf("Failed streams, %d in flight", n) }

func buildReport(c Config, p plan, variants []*variant, tallies map[string]*tally) report {
	r := report{command: c.command()}
	separate := map[string]bool{} // the proxy runs in processes of its own
	tap := false
	for _, v := range variants {
		r.columns = append(r.columns, v.name)
		r.nginx = r.nginx || v.name == Nginx
		tap = tap || v.name == NginxTap
		separate[v.name] = v.ext != nil
	}
	direct := tallies[Direct]
	verdict := func(ok bool) string {
		if ok {
			return "pass"
		}
		return "FAIL"
	}
	needsNginx := func(ok func() bool) string {
		if !r.nginx {
			return "n/a (no nginx)"
		}
		return verdict(ok())
	}

	for _, conc := range concurrencies {
		for _, q := range []struct {
			name string
			q    float64
		}{{"p50", 0.5}, {"p99", 0.99}} {
			value := func(name string) float64 { return percentile(tallies[name].ttft[conc], q.q) }
			base := value(Direct)
			added := func(name string) float64 { return value(name) - base }
			row := row{metric: ttftLabel(q.name, conc), cells: map[string]string{}}
			for _, name := range r.columns {
				if name == Direct {
					row.cells[name] = fmt.Sprintf("%.3f ms", base*1e3)
					continue
				}
				row.cells[name] = fmt.Sprintf("%.3f ms (%+.3f ms, %.2f×)", value(name)*1e3, added(name)*1e3, ratio(value(name), base))
			}
			if r.nginx {
				row.vsNginx = fmt.Sprintf("%.2f× added", ratio(added(Tandem0), added(Nginx)))
			}
			row.vsRef = fmt.Sprintf("%.2f× added", ratio(added(Tandem0), added(Reference)))
			if q.name == "p50" {
				row.check("tandem s=0 adds no more than nginx", needsNginx(func() bool { return added(Tandem0) <= added(Nginx) }))
				row.check(fmt.Sprintf("tandem s=0 adds ≤ %.2f× what Go ReverseProxy adds", targetReference),
					verdict(added(Tandem0) <= targetReference*added(Reference)))
			} else {
				row.check(fmt.Sprintf("s=1 within %.0f%% of s=0", targetP99Mirror*100), verdict(value(Tandem1) <= (1+targetP99Mirror)*value(Tandem0)))
			}
			if tap {
				noise := spread(tallies[Nginx].rounds[conc], q.q)
				row.check(fmt.Sprintf("nginx + tandem tap adds ≤ nginx's round-to-round range (%.3f ms)", noise*1e3),
					verdict(value(NginxTap)-value(Nginx) <= noise))
			}
			r.rows = append(r.rows, row)
		}
	}

	sat := concurrencies[len(concurrencies)-1]
	throughput := func(name string) float64 {
		t := tallies[name]
		return float64(t.frames[sat]) / t.wall[sat].Seconds()
	}
	tp := row{metric: labelThroughput, cells: map[string]string{}}
	for _, name := range r.columns {
		tp.cells[name] = fmt.Sprintf("%.0f frames/s", throughput(name))
		if name != Direct {
			tp.cells[name] += fmt.Sprintf(" (%.2f×)", ratio(throughput(name), throughput(Direct)))
		}
	}
	if r.nginx {
		tp.vsNginx = fmt.Sprintf("%.2f×", ratio(throughput(Tandem0), throughput(Nginx)))
	}
	tp.vsRef = fmt.Sprintf("%.2f×", ratio(throughput(Tandem0), throughput(Reference)))
	tp.check(fmt.Sprintf("tandem s=0 ≥ %.2f× nginx", targetThroughput),
		needsNginx(func() bool { return throughput(Tandem0) >= targetThroughput*throughput(Nginx) }))
	tp.check(fmt.Sprintf("tandem s=0 ≥ Go ReverseProxy ÷ %.2f", targetReference),
		verdict(targetReference*throughput(Tandem0) >= throughput(Reference)))
	r.rows = append(r.rows, tp)

	directCPU := perUnit(direct.cpu.Seconds(), direct.requests)
	cpu := func(name string) float64 {
		t := tallies[name]
		switch {
		case name == Direct:
			return directCPU
		case separate[name]:
			return perUnit(t.extCPU.Seconds(), t.requests)
		}
		return perUnit(t.cpu.Seconds(), t.requests) - directCPU
	}
	cr := row{metric: labelCPU, cells: map[string]string{}}
	for _, name := range r.columns {
		cr.cells[name] = fmt.Sprintf("%.1f µs", cpu(name)*1e6)
		if name == Direct {
			cr.cells[name] += " (client + upstream)"
		}
	}
	if r.nginx {
		cr.vsNginx = fmt.Sprintf("%.2f×", ratio(cpu(Tandem0), cpu(Nginx)))
	}
	cr.vsRef = fmt.Sprintf("%.2f×", ratio(cpu(Tandem0), cpu(Reference)))
	cr.check(fmt.Sprintf("tandem s=0 ≤ %.2f× Go ReverseProxy", targetReference),
		verdict(cpu(Tandem0) <= targetReference*cpu(Reference)))
	r.rows = append(r.rows, cr)

	for _, n := range p.streams {
		mem := func(name string) float64 {
			if name == Direct || separate[name] {
				return tallies[name].memory[n]
			}
			return tallies[name].memory[n] - direct.memory[n]
		}
		ran := func(name string) bool {
			return tallies[name].skipped[n] == "" && (separate[name] || tallies[Direct].skipped[n] == "")
		}
		mr := row{metric: memoryLabel(n), cells: map[string]string{},
			target: fmt.Sprintf("tandem s=0 ≤ %d KiB", targetStreamBytes>>10)}
		for _, name := range r.columns {
			switch {
			case tallies[name].skipped[n] != "":
				mr.cells[name] = tallies[name].skipped[n]
			case !ran(name):
				mr.cells[name] = "not run: no direct baseline"
			case name == Direct:
				mr.cells[name] = fmt.Sprintf("%.1f KiB (client + upstream)", mem(name)/1024)
			default:
				mr.cells[name] = fmt.Sprintf("%.1f KiB", mem(name)/1024)
			}
		}
		if r.nginx && ran(Tandem0) && ran(Nginx) {
			mr.vsNginx = fmt.Sprintf("%.2f×", ratio(mem(Tandem0), mem(Nginx)))
		}
		if ran(Tandem0) && ran(Reference) {
			mr.vsRef = fmt.Sprintf("%.2f×", ratio(mem(Tandem0), mem(Reference)))
		}
		mr.result = "n/a (not run)"
		if ran(Tandem0) {
			mr.result = verdict(mem(Tandem0) <= targetStreamBytes)
		}
		r.rows = append(r.rows, mr)
	}

	failures := func(label string, count func(*tally) (int, string)) row {
		fr := row{metric: label, cells: map[string]string{}, target: "none", result: "pass"}
		for _, name := range r.columns {
			n, skipped := count(tallies[name])
			switch {
			case skipped != "":
				fr.cells[name] = "not run"
				if fr.result == "pass" {
					fr.result = "incomplete"
				}
			case n > 0:
				fr.cells[name] = fmt.Sprint(n)
				fr.result = "FAIL"
			default:
				fr.cells[name] = "0"
			}
		}
		return fr
	}
	r.rows = append(r.rows, failures(labelFailed, func(t *tally) (int, string) { return t.failed, "" }))
	for _, n := range p.streams {
		r.rows = append(r.rows, failures(failedHeldLabel(n), func(t *tally) (int, string) { return t.errors[n], t.skipped[n] }))
	}

	samples := direct.requests / len(concurrencies)
	where := "in this process"
	cpuNote := "for tandem and the reference, this process's CPU minus direct's; for nginx, its workers' CPU from /proc. For s=1 it includes the in-process A and B upstreams serving the mirrored streams."
	memNote := "for tandem and the reference, Go heap objects and goroutine stacks after garbage collection, minus direct's (for s=1 this includes the A and B upstreams' side of the two mirrored streams); for nginx, the resident memory of its master and workers."
	tapNote := " (tandem runs in this process and is not counted)"
	if c.Tandem != "" {
		tapNote = " and the tap tandem's"
		where = "as a separate process (" + c.Tandem + " serve)"
		cpuNote = "for tandem, the reference and nginx's workers, their own CPU from /proc."
		memNote = "for tandem, the reference and nginx (master and workers), the growth of their resident memory."
	}
	r.notes = []string{
		fmt.Sprintf("%d rounds; in each, every variant ran %d requests at each concurrency (1 and %d, closed loop), in an order rotated every round; %d content frames per stream from a zero-think-time upstream in this process; %d TTFT samples per cell.",
			p.rounds, p.requests, sat, p.frames, samples),
		"TTFT is measured by the client, from sending the request to the arrival of the first content frame. Cells of proxies give the value, what it adds to direct, and the ratio to direct; the ÷ nginx column compares tandem s=0 with nginx (for TTFT, the added times).",
		"tandem runs " + where + " with A and B configured: s=0 mirrors nothing, s=1 mirrors every request to two more upstreams like production. Those upstreams run in this process and share the machine's CPUs with production, so s=1 shows mirroring to arms without capacity of their own; the p99 target assumes arms with their own.",
		"Go ReverseProxy is a reference, run like tandem: Go's httputil.ReverseProxy on tandem's upstream transport, flushing every write, and nothing else. What it adds to direct is the cost of Go's HTTP stack; what tandem s=0 adds beyond it is tandem's own work (reading each request body, classifying it, measuring every frame).",
		"nginx + tandem tap is a second nginx like the first that also mirrors every request, body included (mirror, mirror_request_body on), to tandem in tap mode with sampling 1, which answers each copy with 204 and sends it to A and B: production's path is nginx's alone. Its CPU and memory are nginx's" + tapNote + ". Its TTFT target compares it with nginx alone: what it adds must stay within the range of nginx's own quantile from round to round.",
		"Targets against Go ReverseProxy compare what each adds: TTFT minus direct's, CPU per request, relay throughput.",
		"CPU per request: for direct, this process (client and upstream); " + cpuNote,
		"Memory per in-flight stream: streams held open after their first content frame; " + memNote,
		machine(),
	}
	return r
}

// write renders the report as Markdown.
func (r report) write(w io.Writer) {
	header := append([]string{"Metric"}, r.columns...)
	if r.nginx {
		header = append(header, "tandem s=0 ÷ nginx")
	}
	header = append(header, "tandem s=0 ÷ Go ReverseProxy", "Target", "Result")
	fmt.Fprintf(w, "| %s |\n", strings.Join(header, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(header)))
	for _, row := range r.rows {
		cells := []string{row.metric}
		for _, name := range r.columns {
			cells = append(cells, row.cells[name])
		}
		if r.nginx {
			cells = append(cells, row.vsNginx)
		}
		cells = append(cells, row.vsRef, row.target, row.result)
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
	for _, n := range r.notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	fmt.Fprintf(w, "\nReproduce: `%s`\n", r.command)
}
