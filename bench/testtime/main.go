// Command testtime reads the output of `go test -json` (one or more files, or standard input;
// lines that are not JSON, such as vet's or make's, are skipped) and prints where the time
// went: each package's wall time, the slowest tests, and, with -capabilities, the test time
// of each capability: the end-to-end tests grouped by the file they are in (a file a
// capability: exactlyonce, hosts, rollout …), so that a change that adds minutes says so.
//
//	make test GOTESTFLAGS=-json > test.json
//	go run ./bench/testtime -top 20 -capabilities internal/e2e test.json
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	capabilities := flag.String("capabilities", "", "also sum the time of this folder's tests by the file each is in (for example internal/e2e)")
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
	if *capabilities != "" {
		byFile, err := testFiles(*capabilities)
		if err != nil {
			fail(err)
		}
		caps := map[string]*result{}
		for key, r := range tests {
			pkg, test, _ := strings.Cut(key, " ")
			if !strings.HasSuffix(*capabilities, pkg) && !strings.HasSuffix(pkg, strings.TrimPrefix(*capabilities, "./")) {
				continue
			}
			file := byFile[test]
			if file == "" {
				file = "(unknown)"
			}
			c := caps[file]
			if c == nil {
				c = &result{name: file, outcome: "pass"}
				caps[file] = c
			}
			c.seconds += r.seconds
			if r.outcome == "fail" {
				c.outcome = "fail"
			}
		}
		print("capability (file)", caps, 0)
	}
}

// testFiles maps each test function of the folder's _test.go files to its file's name,
// without _test.go.
func testFiles(dir string) (map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	byTest := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(filepath.Base(f), "_test.go")
		for line := range strings.SplitSeq(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "func Test"); ok {
				if i := strings.IndexByte(rest, '('); i > 0 {
					byTest["Test"+rest[:i]] = name
				}
			}
		}
	}
	return byTest, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "testtime:", err)
	os.Exit(1)
}
