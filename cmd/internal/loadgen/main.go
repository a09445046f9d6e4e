package loadgen

import (
	"context"
	"fmt"
	"io"
	"os"
)

// RunAndReport runs c, printing progress lines to progressOut, writes the
// results file when c.Results is set, and prints the summary table to out.
func RunAndReport(ctx context.Context, c Config, out, progressOut io.Writer) error {
	if err := c.Validate(); err != nil {
		return err
	}
	var results *os.File
	if c.Results != "" {
		f, err := os.Create(c.Results)
		if err != nil {
			return err
		}
		defer f.Close()
		results = f
	}
	summary, rs, err := Run(ctx, c, func(p Progress) {
		fmt.Fprintf(progressOut, "%5.1fs sent=%d completed=%d failed=%d dropped=%d in_flight=%d\n",
			p.Elapsed.Seconds(), p.Sent, p.Completed, p.Failed, p.Dropped, p.InFlight)
	})
	if err != nil {
		return err
	}
	if results != nil {
		if err := WriteResults(results, rs); err != nil {
			return err
		}
		if err := results.Close(); err != nil {
			return err
		}
	}
	return summary.WriteText(out)
}
