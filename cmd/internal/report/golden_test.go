package report

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestGolden(t *testing.T) {
	reports := map[string]*Report{
		"seed-records":  fromRecords(t, seedRecords()),
		"mixed-replay":  fromRecords(t, interleaved(3000, 3000)),
		"small-records": fromRecords(t, append(func() trace { s := seedFresh; s.n = 50; return s }().records(nil), seedRepeated.records(nil)...)),
	}
	for name, r := range reports {
		for format, ext := range map[string]string{"text": ".txt", "markdown": ".md"} {
			path := filepath.Join("testdata", name+ext)
			got := render(t, r, format)
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from the golden file; run go test -update and review the diff:\n%s", path, got)
			}
		}
	}
}
