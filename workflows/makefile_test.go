package workflows_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/clusterflow/clusterflow/internal/testlimit"
)

// TestTheMakefileRunsEveryTestSkippedUnderRace reads this package's tests: each that starts
// with withoutRace must match the Makefile's WITHOUT_RACE, which `make unit` runs without
// the race detector, and each test that pattern names must exist, so that no test is
// skipped everywhere.
func TestTheMakefileRunsEveryTestSkippedUnderRace(t *testing.T) {
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^WITHOUT_RACE := (.+)$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("the Makefile has no WITHOUT_RACE := line")
	}
	pattern := strings.TrimSpace(string(m[1]))
	tests, skipped := map[string]bool{}, map[string]bool{}
	for _, fn := range testlimit.ReadTests(t) {
		tests[fn.Name.Name] = true
		if len(fn.Body.List) > 0 && testlimit.IsCall(fn.Body.List[0], "", "withoutRace") {
			skipped[fn.Name.Name] = true
		}
	}
	if len(skipped) == 0 {
		t.Fatal("no test starts with withoutRace; is the parser reading the right files?")
	}
	named := map[string]bool{}
	for _, name := range strings.Split(pattern, "|") {
		named[name] = true
		if !tests[name] {
			t.Errorf("WITHOUT_RACE names %s, which is no test of this package", name)
		} else if !skipped[name] {
			t.Errorf("WITHOUT_RACE names %s, which does not start with withoutRace(t) and so runs twice", name)
		}
	}
	for name := range skipped {
		if !named[name] {
			t.Errorf("%s skips under the race detector but WITHOUT_RACE does not name it, so it never runs", name)
		}
	}
}
