package e2e

import (
	"go/ast"
	"testing"

	"github.com/clusterflow/clusterflow/internal/testlimit"
)

// TestEveryTestIsGuarded reads this package's tests: each must call guard (or guardFor)
// first, after t.Parallel if it has one, so that no test can hang the suite; and a guard
// past the suite's budget (testlimit.TestLimit a test) fails its test as it starts, so
// that no test grows the suite past what CI can run.
func TestEveryTestIsGuarded(t *testing.T) {
	guard(t)
	tests := testlimit.ReadTests(t)
	for _, fn := range tests {
		body := fn.Body.List
		if len(body) > 0 && testlimit.IsCall(body[0], "t", "Parallel") {
			body = body[1:]
		}
		if len(body) == 0 || !testlimit.IsCall(body[0], "", "guard") && !testlimit.IsCall(body[0], "", "guardFor") {
			t.Errorf("%s: %s does not start with guard(t)", fn.File, fn.Name.Name)
		}
		for _, stmt := range body {
			if testlimit.IsCall(stmt, "t", "Parallel") {
				// The wait for the serial tests would count against its limit.
				t.Errorf("%s: %s calls t.Parallel after guard(t)", fn.File, fn.Name.Name)
			}
			// Nor may its subtests: they would wait for the package's parallel slots while
			// its guard counts (a matrix of five lives never started in CI, and failed at
			// its limit). Subtests side by side run from goroutines instead.
			ast.Inspect(stmt, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Parallel" && len(call.Args) == 0 {
						t.Errorf("%s: a subtest of %s calls Parallel", fn.File, fn.Name.Name)
					}
				}
				return true
			})
		}
	}
	if len(tests) < 40 {
		t.Errorf("found only %d tests; is the parser reading the right files?", len(tests))
	}
}
