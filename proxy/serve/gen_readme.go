//go:build ignore

// gen_readme rewrites the configuration table of the Markdown file named by
// its argument, the table under the line that starts with
// "<!-- config-table:", from serve.Config. go generate runs it in
// proxy/serve.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/kestrelops/tandem/proxy/serve"
)

const marker = "<!-- config-table:"

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gen_readme:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(b)
	at := strings.Index(doc, "\n"+marker)
	if at < 0 {
		return errors.New("no line starting with " + marker)
	}
	start := at + 1 + strings.IndexByte(doc[at+1:], '\n') + 1
	end := start
	for end < len(doc) && doc[end] == '|' {
		if n := strings.IndexByte(doc[end:], '\n'); n >= 0 {
			end += n + 1
		} else {
			end = len(doc)
		}
	}
	return os.WriteFile(path, []byte(doc[:start]+serve.ConfigTable()+doc[end:]), 0o644)
}
