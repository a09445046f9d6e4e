// Package dashboards builds tandem's Grafana dashboards as code with the
// grafana-foundation-sdk: the A/B comparison and the production view. The
// generated JSON is committed under dashboards/json and kept in step by a
// test; go generate ./... regenerates it.
package dashboards

//go:generate go run ../cmd/tandem dashboards --out json

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// Fixed dashboard UIDs; links and provisioning depend on them.
const (
	UIDComparison = "tandem-ab"
	UIDProduction = "tandem-production"
)

// Config parameterises the dashboards.
type Config struct {
	// Windows are the choices of the rate window variable ($window).
	Windows []string
	// DefaultWindow is the window selected when a dashboard opens; one of
	// Windows.
	DefaultWindow string
	// Refresh is the auto-refresh interval, e.g. "30s".
	Refresh string
	// TimeFrom is the start of the default time range, e.g. "now-1h".
	TimeFrom string
}

// DefaultConfig is the configuration of the committed dashboards.
func DefaultConfig() Config {
	return Config{
		Windows:       []string{"1m", "5m", "15m", "1h"},
		DefaultWindow: "5m",
		Refresh:       "30s",
		TimeFrom:      "now-1h",
	}
}

// Dashboard is one built dashboard.
type Dashboard struct {
	Model dashboard.Dashboard
	// Mixed lists the titles of the panels that merge the selected
	// workload classes into one distribution on purpose.
	Mixed []string
}

// UID returns the dashboard's fixed UID.
func (d Dashboard) UID() string { return *d.Model.Uid }

// JSON returns the dashboard's Grafana JSON model, indented, with a final
// newline. The output is deterministic.
func (d Dashboard) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(d.Model, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", d.UID(), err)
	}
	return append(b, '\n'), nil
}

// Build builds every dashboard from cfg.
func Build(cfg Config) ([]Dashboard, error) {
	if !slices.Contains(cfg.Windows, cfg.DefaultWindow) {
		return nil, fmt.Errorf("default window %q is not one of the windows %v", cfg.DefaultWindow, cfg.Windows)
	}
	var out []Dashboard
	for _, build := range []func(Config) (Dashboard, error){comparison, production} {
		d, err := build(cfg)
		if err != nil {
			return nil, err
		}
		numberPanels(&d.Model)
		out = append(out, d)
	}
	return out, nil
}

// numberPanels gives every panel and row a stable ID in layout order, so
// links to a panel (viewPanel=ID) survive regeneration.
func numberPanels(model *dashboard.Dashboard) {
	id := uint32(0)
	for _, p := range model.Panels {
		id++
		switch {
		case p.Panel != nil:
			p.Panel.Id = cog.ToPtr(id)
		case p.RowPanel != nil:
			p.RowPanel.Id = id
			for i := range p.RowPanel.Panels {
				id++
				p.RowPanel.Panels[i].Id = cog.ToPtr(id)
			}
		}
	}
}

// All builds every dashboard with DefaultConfig.
func All() ([]Dashboard, error) { return Build(DefaultConfig()) }

// Write writes every dashboard of All into dir, which it creates if needed,
// as UID + ".json".
func Write(dir string) error {
	ds, err := All()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range ds {
		b, err := d.JSON()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, d.UID()+".json"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Query is one PromQL query of a dashboard panel, with Grafana variables
// unexpanded (see ExpandVariables).
type Query struct {
	Dashboard string // dashboard UID
	Panel     string // panel title
	RefID     string
	Expr      string
	// Mixed is true when the panel merges workload classes on purpose.
	Mixed bool
}

// Queries lists every panel query of every dashboard of All, in dashboard
// and panel order.
func Queries() ([]Query, error) {
	ds, err := All()
	if err != nil {
		return nil, err
	}
	var out []Query
	for _, d := range ds {
		panels, err := d.Panels()
		if err != nil {
			return nil, err
		}
		for _, p := range panels {
			for _, t := range p.Targets {
				out = append(out, Query{
					Dashboard: d.UID(),
					Panel:     p.Title,
					RefID:     t.RefID,
					Expr:      t.Expr,
					Mixed:     slices.Contains(d.Mixed, p.Title),
				})
			}
		}
	}
	return out, nil
}

// Panel is a panel as it appears in a dashboard's JSON model: the fields
// tests and tools read, and the whole model in Raw.
type Panel struct {
	Type        string   `json:"type"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Repeat      string   `json:"repeat"`
	Targets     []Target `json:"targets"`
	// Panels holds a collapsed row's panels.
	Panels []json.RawMessage `json:"panels"`
	Raw    json.RawMessage   `json:"-"`
}

// Target is one query of a panel's JSON model.
type Target struct {
	RefID        string `json:"refId"`
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
}

// Panels returns the dashboard's panels, rows excluded, read back from its
// JSON model; the panels of collapsed rows are included.
func (d Dashboard) Panels() ([]Panel, error) {
	b, err := d.JSON()
	if err != nil {
		return nil, err
	}
	var model struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(b, &model); err != nil {
		return nil, err
	}
	return decodePanels(model.Panels)
}

func decodePanels(raws []json.RawMessage) ([]Panel, error) {
	var out []Panel
	for _, raw := range raws {
		var p Panel
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
		p.Raw = raw
		if p.Type != "row" {
			out = append(out, p)
			continue
		}
		inner, err := decodePanels(p.Panels)
		if err != nil {
			return nil, err
		}
		out = append(out, inner...)
	}
	return out, nil
}
