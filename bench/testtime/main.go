// Command testtime reads the output of `go test -json` (one or more files, or standard input;
// lines that are not JSON, such as vet's or make's, are skipped) and prints where the time
// went: each package's wall time, and the slowest tests.
//
//	make test GOTESTFLAGS=-json > test.json; go run ./bench/testtime -top 20 test.json
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// event is the part of test2json's output this reads.
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
}

type result struct {
	name    string
	seconds float64
	outcome string
}

func main() {
	top := flag.Int("top", 10, "how many of the slowest tests to print")
	pkgSuffix := flag.String("tests-of", "", "list only tests of packages with this suffix (for example internal/e2e)")
	flag.Parse()
	packages := map[string]*result{}
	tests := map[string]*result{}
	read := func(r io.Reader) error {
		scanner := bufio.NewScanner(r)
		scanner.Buffer(make([]byte, 1<<20), 16<<20)
		for scanner.Scan() {
			line := scanner.Bytes()
			if len(line) == 0 || line[0] != '{' {
				continue
			}
			var ev event
			if json.Unmarshal(line, &ev) != nil || ev.Package == "" {
				continue
			}
			switch ev.Action {
			case "pass", "fail", "skip":
			default:
				continue
			}
			pkg := strings.TrimPrefix(ev.Package, "github.com/clusterflow/clusterflow/")
			if ev.Test == "" {
				// A package run twice (the unit step and the 10,000-member rerun) adds up.
				if p, ok := packages[pkg]; ok {
					p.seconds += ev.Elapsed
					if ev.Action == "fail" {
						p.outcome = "fail"
					}
				} else {
					packages[pkg] = &result{name: pkg, seconds: ev.Elapsed, outcome: ev.Action}
				}
				continue
			}
			if strings.Contains(ev.Test, "/") { // subtests count in their parent
				continue
			}
			if *pkgSuffix != "" && !strings.HasSuffix(pkg, *pkgSuffix) {
				continue
			}
			key := pkg + " " + ev.Test
			tests[key] = &result{name: key, seconds: ev.Elapsed, outcome: ev.Action}
		}
		return scanner.Err()
	}
	if flag.NArg() == 0 {
		if err := read(os.Stdin); err != nil {
			fail(err)
		}
	}
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fail(err)
		}
		err = read(f)
		f.Close()
		if err != nil {
			fail(err)
		}
	}
	print := func(title string, rows map[string]*result, limit int) {
		list := make([]*result, 0, len(rows))
		total := 0.0
		for _, r := range rows {
			list = append(list, r)
			total += r.seconds
		}
		slices.SortFunc(list, func(a, b *result) int {
			return cmp.Or(cmp.Compare(b.seconds, a.seconds), strings.Compare(a.name, b.name))
		})
		if limit > 0 && len(list) > limit {
			list = list[:limit]
		}
		fmt.Printf("| %s | seconds | result |\n|---|---:|---|\n", title)
		for _, r := range list {
			fmt.Printf("| %s | %.1f | %s |\n", r.name, r.seconds, r.outcome)
		}
		fmt.Printf("| (%d in all) | %.1f | |\n\n", len(rows), total)
	}
	print("package", packages, 0)
	print("test", tests, *top)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "testtime:", err)
	os.Exit(1)
}
