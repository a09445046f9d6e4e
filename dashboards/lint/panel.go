package lint

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// instantReducers pick one sample of a series; every other reducer (mean,
// sum, median, max, ...) combines samples over time.
var instantReducers = []string{"last", "lastNotNull", "first", "firstNotNull"}

// combiningTransformations merge values across series or over time.
var combiningTransformations = []string{"reduce", "calculateField", "groupBy", "groupingToMatrix"}

// panel holds the fields of a Grafana panel's JSON model the lint reads.
type panel struct {
	Title           string   `json:"title"`
	Targets         []target `json:"targets"`
	Transformations []struct {
		ID      string          `json:"id"`
		Options json.RawMessage `json:"options"`
	} `json:"transformations"`
	Options struct {
		ReduceOptions struct {
			Calcs []string `json:"calcs"`
		} `json:"reduceOptions"`
		Legend struct {
			Calcs []string `json:"calcs"`
		} `json:"legend"`
	} `json:"options"`
}

type target struct {
	Expr string `json:"expr"`
}

func (t target) readsQuantile() bool { return strings.Contains(t.Expr, "histogram_quantile") }

// CheckPanel reports the display settings of a Grafana panel (its JSON
// model) that would combine quantile series: on a panel whose queries use
// histogram_quantile, every transformation that reduces or calculates
// across series or time, and every stat or legend reducer other than
// first/last, is an error.
func CheckPanel(model []byte) error {
	var p panel
	if err := json.Unmarshal(model, &p); err != nil {
		return fmt.Errorf("panel JSON: %w", err)
	}
	if !slices.ContainsFunc(p.Targets, target.readsQuantile) {
		return nil
	}
	var errs []error
	for _, t := range p.Transformations {
		if slices.Contains(combiningTransformations, t.ID) {
			errs = append(errs, fmt.Errorf("panel %q: transformation %s combines quantile values; quantiles are never averaged", p.Title, t.ID))
		}
	}
	for _, calc := range p.Options.ReduceOptions.Calcs {
		if !slices.Contains(instantReducers, calc) {
			errs = append(errs, fmt.Errorf("panel %q: reducer %s combines quantile values over time; use lastNotNull", p.Title, calc))
		}
	}
	for _, calc := range p.Options.Legend.Calcs {
		if !slices.Contains(instantReducers, calc) {
			errs = append(errs, fmt.Errorf("panel %q: legend calculation %s combines quantile values over time", p.Title, calc))
		}
	}
	return errors.Join(errs...)
}
